"""python -m dreamer_live.learner: train from a replay folder and publish the policy's parameters."""

from __future__ import annotations

import pathlib

from dreamer_live import cli
from dreamer_live.errors import UserError
from dreamer_live.learner.loop import run_learner


@cli.main
def main(argv: list[str] | None = None) -> int:
    """Command line: python -m dreamer_live.learner --logdir DIR [--replay OTHER/replay --offline]."""
    p = cli.parser("dreamer_live.learner",
                   "Train the agent from replay and publish its policy parameters to DIR/params.")
    p.add_argument("--replay", type=pathlib.Path, default=None,
                   help="replay folder to train from (default DIR/replay); another run's folder is "
                        "opened read-only")
    p.add_argument("--offline", action="store_true",
                   help="no actor: train from the existing replay until --run.steps updates")
    args, config = cli.parse(p, argv)
    replay_dir = args.replay or args.logdir / "replay"
    if args.offline and not replay_dir.is_dir():
        raise UserError(f"replay folder {replay_dir} does not exist")
    return run_learner(config, args.logdir, replay_dir, args.offline,
                       share_with="" if args.offline else "the actor")


if __name__ == "__main__":
    raise SystemExit(main())
