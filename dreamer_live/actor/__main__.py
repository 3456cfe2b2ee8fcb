"""python -m dreamer_live.actor: the actor alone, or joining a running learner's Ray cluster."""

from __future__ import annotations

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
    try:
        return run_actor(config, args.logdir)
    finally:
        import ray

        ray.shutdown()


if __name__ == "__main__":
    raise SystemExit(main())
