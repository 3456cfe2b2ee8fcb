"""The synchronous baseline: one process that collects N steps from the real-time game, then trains M steps.

    .venv/bin/python bench/sync_trainer.py --logdir DIR --configs catcher --seconds 120 [--collect 256]
    .venv/bin/python bench/sync_trainer.py --smoke      # 5 s, debug preset, a scratch logdir

This is the loop of RLlib's PPO / DreamerV3 and most libraries that users come from, run against the same
real-time built-in game, the same Agent and policy, and the project's replay (Writer into DIR/replay, Reader
from it). While it trains nobody calls env.act: the game keeps running, releases the keys after its
release_after, and the world moves on without the agent. The game is not paused; that is the point.

Writes what the actor writes, so the benchmarks analyse both the same way: DIR/replay/ chunk files with
per-step tick_time / tick_late_ms, and DIR/metrics.jsonl lines (source "actor" for episodes, "sync" for
each collect/train cycle). M defaults to run.train_ratio * N / (batch_size * batch_length), the learner's
train ratio. The train step is compiled before the game starts (not counted against the sync loop).
"""

from __future__ import annotations

import pathlib
import sys
import time

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from smoke import add_smoke, smoke_dir  # noqa: E402

from dreamer_live import cli  # noqa: E402
from dreamer_live.errors import UserError  # noqa: E402


def default_train_steps(config, collect: int) -> int:
    """Updates per cycle that match the learner's train ratio (replayed steps per env step), at least 1."""
    ratio = config.run.train_ratio or 32.0
    return max(1, int(round(ratio * collect / (config.batch_size * config.batch_length))))


class SyncTrainer:
    """Collect-then-train on a real-time env, with the actor's policy and the learner's train step."""

    def __init__(self, config, logdir: pathlib.Path, collect: int, train: int):
        self.config, self.logdir, self.collect, self.train = config, logdir, collect, train

    def run(self, seconds: float) -> dict:
        """Play and train for `seconds` of game time; return a summary dict."""
        config = self.config
        cli.setup_jax(config)
        import jax

        from dreamer_live.actor.core import ActorCore
        from dreamer_live.agent import Agent
        from dreamer_live.envs import make_env, tick_hz
        from dreamer_live.metrics import Logger
        from dreamer_live.pacer import Pacer
        from dreamer_live.replay import Reader, Writer

        logger = Logger(self.logdir, "actor", name="sync", quiet=True)
        env = make_env(config)
        writer = reader = None
        try:
            agent = Agent(config, env.obs_space, env.act_space)
            key = jax.random.PRNGKey(config.seed)
            key, init_key, train_key = jax.random.split(key, 3)
            state = agent.init(init_key)
            params = jax.device_put(jax.device_get(agent.policy_params(state)))
            core = ActorCore(agent, config.actor.mode, params, key)
            began = time.perf_counter()
            core.warm(params)
            b, t = config.batch_size, config.batch_length
            batch = {k: np.zeros((b, t, *space.shape), space.dtype)
                     for k, space in agent.obs_space.items() if k in agent.batch_keys}
            batch["action"] = np.zeros((b, t, agent.act_dim), np.float32)
            jax.block_until_ready(agent.train(state, batch, train_key))
            print(f"sync: policy and train step compiled in {time.perf_counter() - began:.1f}s; "
                  f"collect {self.collect} steps, train {self.train} updates, repeat for {seconds:.0f}s; "
                  f"writing {self.logdir / 'replay'}, {self.logdir / 'metrics.jsonl'}", flush=True)
            writer = Writer.from_config(config, self.logdir / "replay", writer_id="sync")
            reader = Reader(self.logdir / "replay", config.replay.capacity, config.seed,
                            config.replay.recency, prefetch=0, batch=b, length=t,
                            recency_window=config.replay.recency_window)
            pacer = Pacer(tick_hz(config))
            steps = updates = episodes = cycles = 0
            ep_return, ep_length, need_reset = 0.0, 0, True
            train_s_total = 0.0
            start = time.monotonic()
            pacer.start()
            while time.monotonic() - start < seconds:
                for _ in range(self.collect):  # --- collect: the game gets an action every tick
                    if time.monotonic() - start >= seconds:
                        break
                    late_ms = pacer.wait()
                    tick_time = time.time()
                    obs = env.reset() if need_reset else env.observe()
                    action = core.select_action(obs)
                    is_last = bool(obs["is_last"])
                    if not is_last:
                        env.act(action)
                    writer.add(core.replay_step(obs, action, tick_time, late_ms))
                    steps += 1
                    if not obs["is_first"]:
                        ep_return += float(obs["reward"])
                        ep_length += 1
                    if is_last:
                        episodes += 1
                        logger.write(steps, {"episode/return": ep_return, "episode/length": ep_length})
                        ep_return, ep_length = 0.0, 0
                    need_reset = is_last
                # --- train: nobody acts; the game runs on and releases the keys
                train_began = time.monotonic()
                writer.flush(wait=True)
                reader.refresh()
                done = 0
                if reader.ready():
                    for _ in range(self.train):
                        if time.monotonic() - start >= seconds:
                            break
                        sample = reader.sample()
                        train_key, sub = jax.random.split(train_key)
                        state, _ = agent.train(state, sample, sub)
                        jax.block_until_ready(state)  # (async dispatch would overrun the budget)
                        done += 1
                    core.update(jax.device_put(jax.device_get(agent.policy_params(state))))
                updates += done
                cycles += 1
                train_s = time.monotonic() - train_began
                train_s_total += train_s
                logger.write(steps, {"sync/updates": updates, "sync/train_s": train_s,
                                     "sync/cycle": cycles, "actor/episodes": episodes})
                print(f"sync: {time.monotonic() - start:6.1f}s | steps {steps} | updates {updates} | "
                      f"episodes {episodes} | last pause {train_s:.1f}s", flush=True)
            elapsed = time.monotonic() - start
        finally:
            env.close()
            if writer is not None:
                writer.close()
            if reader is not None:
                reader.close()
            logger.close()
        summary = {"steps": steps, "updates": updates, "episodes": episodes, "cycles": cycles,
                   "seconds": elapsed, "train_s": train_s_total}
        print(f"sync: done: {steps} steps, {updates} updates, {episodes} episodes in {elapsed:.0f}s, "
              f"{train_s_total:.0f}s of it training without input", flush=True)
        return summary


@cli.main
def main(argv: list[str] | None = None) -> int:
    """Command line: bench/sync_trainer.py --logdir DIR --configs PRESET... --seconds S."""
    p = cli.parser("bench/sync_trainer.py",
                   "Synchronous baseline: collect N steps from the real-time game, train M, repeat.",
                   logdir_required=False)  # (--smoke makes one)
    p.add_argument("--seconds", type=float, default=120.0, help="game time to run (default 120)")
    p.add_argument("--collect", type=int, default=256, help="env steps per collect phase (default 256)")
    p.add_argument("--train", type=int, default=0,
                   help="updates per train phase (default: run.train_ratio * collect / batch steps)")
    add_smoke(p)
    argv = sys.argv[1:] if argv is None else list(argv)
    first, _ = p.parse_known_args(argv)
    if first.smoke:  # the presets and config keys resolve from argv: the smoke settings go there
        argv += ["--logdir", str(smoke_dir("sync_trainer")), "--configs", *(first.configs or ["catcher"]),
                 "debug", "--seconds", "5", "--collect", "64"]
    args, config = cli.parse(p, argv)
    if args.logdir is None:
        p.error("the following arguments are required: --logdir")
    if args.collect < 1 or args.train < 0 or args.seconds <= 0:
        raise UserError("--collect must be >= 1, --train >= 0 and --seconds > 0")
    train = args.train or default_train_steps(config, args.collect)
    SyncTrainer(config, args.logdir, args.collect, train).run(args.seconds)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
