"""python -m dreamer_live.learner: train from a replay folder and publish the policy's parameters."""

from __future__ import annotations

import pathlib
import traceback

from dreamer_live import cli
from dreamer_live.atomic import write_atomic
from dreamer_live.errors import RunFailure, UserError

# JAX's CPU runtime maps its libraries and its threads' stacks into the address space: the debug
# preset's learner reaches 2.5 GB of it, and under a lower cap (ulimit -v, prlimit --as) JAX fails to
# import or XLA aborts natively while starting threads (no Python error to report).
MIN_ADDRESS_SPACE = 4 << 30


def address_space_cap() -> int | None:
    """The process's address-space cap in bytes (ulimit -v, prlimit --as); None when there is none."""
    try:
        import resource
    except ImportError:  # Windows
        return None
    soft = resource.getrlimit(resource.RLIMIT_AS)[0]
    return None if soft == resource.RLIM_INFINITY else soft


def out_of_memory(error: BaseException) -> bool:
    """Whether `error` says memory ran out: a MemoryError, a library that could not be mapped, XLA's
    RESOURCE_EXHAUSTED."""
    text = str(error)
    return isinstance(error, MemoryError) or "failed to map segment" in text or \
        "RESOURCE_EXHAUSTED" in text or "Out of memory" in text


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
    cap = address_space_cap()
    capped = f" under the address-space cap of {cap / 2 ** 30:.2f} GiB (ulimit -v, prlimit --as)" if cap else ""
    if cap is not None and cap < MIN_ADDRESS_SPACE:
        raise RunFailure(f"not enough memory{capped}: the learner needs {MIN_ADDRESS_SPACE >> 30} GiB "
                         "of address space at least (JAX maps its libraries and threads there); raise "
                         "the cap (ulimit -v unlimited)")
    # imported after parsing: bad input is answered without loading the learner's modules
    from dreamer_live.learner.loop import run_learner

    try:
        return run_learner(config, args.logdir, replay_dir, args.offline,
                           share_with="" if args.offline else "the actor")
    except Exception as e:
        if not out_of_memory(e):
            raise
        log = args.logdir / "learner-error.log"
        try:
            write_atomic(log, "".join(traceback.format_exception(e)).encode())
            where = f"traceback in {log}"
        except OSError as write_error:
            where = f"could not write its traceback to {log}: {write_error.strerror or write_error}"
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise RunFailure(f"out of memory{capped}: {type(e).__name__}: {first}; {where}") from None


if __name__ == "__main__":
    raise SystemExit(main())
