"""python -m dreamer_live.actor: the actor alone, or joining a running learner's Ray cluster."""

from __future__ import annotations

import sys

from dreamer_live import cli


@cli.main
def main(argv: list[str] | None = None) -> int:
    """Command line: python -m dreamer_live.actor --logdir DIR --configs PRESET..."""
    p = cli.parser("dreamer_live.actor",
                   "Play a game in real time into DIR/replay with the learner's latest policy "
                   "(--ray.address HOST:PORT: join a running learner's Ray cluster instead).")
    args, config = cli.parse(p, argv)
    # imported after parsing: bad input is answered without loading the actor's modules
    from dreamer_live.actor.loop import run_actor
    from dreamer_live.transport import raycluster

    if not config.ray.address:
        return run_actor(config, args.logdir)
    where = raycluster.attach(config, args.logdir)  # a hand-started actor joining a running learner
    print(f"actor {config.actor.id}: joined the Ray cluster at {where}; Ctrl-C ships what it has "
          "and leaves", flush=True)
    from dreamer_live.process import StopFlag

    stop = StopFlag("actor").install()
    try:
        with raycluster.stop_when_head_lost(config, stop):
            code = run_actor(config, args.logdir, stop=stop)
        if stop.reason != raycluster.HEAD_GONE:
            return code
        from dreamer_live.transport import raylink

        waiting = raylink.steps_waiting(config, args.logdir, config.actor.id)
        print(f"actor {config.actor.id}: the Ray cluster's head is gone: {waiting} steps wait in "
              f"{raylink.outbox_dir(config, args.logdir, config.actor.id)}; start this actor again (the same --actor.id) once the run is back, and "
              "it ships them", file=sys.stderr, flush=True)
        return 1
    finally:
        import ray

        ray.shutdown()


if __name__ == "__main__":
    raise SystemExit(main())
