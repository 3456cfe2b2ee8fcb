"""The actor process: plays the game at its own speed into DIR/replay with the latest published policy.

Each tick: observe, run the jitted policy with its recurrent carry, send the action, hand the step to the
replay writer, sleep to the next deadline. Nothing slow runs on the tick: parameters are loaded and moved
to the device on a background thread, chunks are written by the replay writer's thread, metric lines by
the logger's thread. The actor never waits for the learner.
"""

from __future__ import annotations

import collections
import pathlib
import threading
import time

import numpy as np

from dreamer_live import cli, spaces as spaceslib
from dreamer_live.metrics import Logger, Window
from dreamer_live.pacer import Pacer
from dreamer_live.process import StopFlag

FLAG_KEYS = ("reward", "is_first", "is_last", "is_terminal")
SWAP_WINDOW = 5  # ticks after a parameter swap whose lateness is reported with it
SILENT_AFTER_S = 30.0  # the status line warns when the learner has not been heard from this long


def policy_keys(obs_space) -> list[str]:
    """Observation keys the policy reads: every obs key plus is_first (no log/* or episode flags)."""
    keys = [k for k in obs_space if not k.startswith("log/") and k not in FLAG_KEYS]
    return keys + ["is_first"]


def replay_keys(obs_space) -> list[str]:
    """Observation keys stored in replay: everything but the env's log/* diagnostics."""
    return [k for k in obs_space if not k.startswith("log/")]


class CompileWatch:
    """Counts XLA compilations in this process (fresh ones vs. persistent-cache hits)."""

    def __init__(self):
        import jax

        self.compiles = 0
        self.cache_hits = 0
        self.compile_s = 0.0
        self._hit = False
        jax.monitoring.register_event_listener(self._on_event)
        jax.monitoring.register_event_duration_secs_listener(self._on_duration)

    def _on_event(self, event: str, **kwargs) -> None:
        if event == "/jax/compilation_cache/cache_hits":
            self._hit = True

    def _on_duration(self, event: str, duration: float, **kwargs) -> None:
        if event != "/jax/core/compile/backend_compile_duration":
            return
        if self._hit:
            self.cache_hits += 1
        else:
            self.compiles += 1
            self.compile_s += duration
        self._hit = False


class PolicyParams:
    """The parameters the tick uses: swapped in O(1) after a background thread has readied them."""

    def __init__(self, client, initial, warm, stop: StopFlag):
        self.client = client
        self.current = (0, initial)  # (version, device params); read once per tick
        self._warm = warm  # runs the policy once on new params, so any compile happens here
        self._stop = stop
        self._thread = threading.Thread(target=self._watch, name="param-swap", daemon=True)

    def start(self) -> PolicyParams:
        """Start watching the sync client for new versions."""
        self._thread.start()
        return self

    def _watch(self) -> None:
        import jax

        while not self._stop.wait(0.1):
            loaded = self.client.current  # params and version together
            version, params = loaded.version, loaded.params
            if version <= self.current[0]:
                continue
            try:
                params = jax.block_until_ready(jax.device_put(params))
                self._warm(params)
            except Exception as e:  # a bad version leaves the old parameters in use
                print(f"actor: ignoring parameter version {version}: {e}", flush=True)
                self.current = (version, self.current[1])
                continue
            self.current = (version, params)


def make_policy(agent, mode: str):
    """Jitted tick policy: (params, carry, obs, key) -> (carry, action, next key), one dispatch."""
    import jax

    def step(params, carry, obs, key):
        key, sub = jax.random.split(key)
        carry, action, _ = agent.policy(params, carry, obs, sub, mode)
        return carry, action, key

    return jax.jit(step)


def random_action(act_space, rng: np.random.Generator) -> np.ndarray:
    """A uniformly random action in the agent's format (one-hot or [-1, 1])."""
    if hasattr(act_space, "n"):
        action = np.zeros(int(act_space.n), np.float32)
        action[rng.integers(int(act_space.n))] = 1.0
        return action
    return rng.uniform(-1, 1, act_space.shape).astype(np.float32)


def run_actor(config, logdir: pathlib.Path) -> int:
    """Play until actor.steps / actor.duration / a stop signal; always release keys and flush replay."""
    stop = StopFlag("actor").install()
    cli.setup_jax(config)
    import jax

    from dreamer_live import sync
    from dreamer_live.agent import Agent
    from dreamer_live.envs import make_env, tick_hz
    from dreamer_live.replay import Writer

    cfg = config.actor
    watch = CompileWatch()
    logger = Logger(logdir, "actor", name=f"actor{cfg.id}", quiet=config.run.quiet)
    summary = ""
    opened = []  # closed in this order on any exit: the env first (keys released), then the rest
    try:
        env = make_env(config)
        opened.append(env)
        agent = Agent(config, env.obs_space, env.act_space)
        pkeys, rkeys = policy_keys(env.obs_space), replay_keys(env.obs_space)
        spaceslib.save(logdir / "replay", {k: env.obs_space[k] for k in rkeys}, env.act_space)
        key = jax.random.PRNGKey(config.seed + 7919 * cfg.id)
        key, init_key = jax.random.split(key)
        # Plain device arrays (no weak types), so published params hit the same compiled policy.
        initial = jax.device_put(jax.device_get(agent.policy_params(agent.init(init_key))))
        policy = make_policy(agent, cfg.mode)
        zero_obs = {k: np.zeros((1, *env.obs_space[k].shape), env.obs_space[k].dtype) for k in pkeys}

        def warm(params):
            jax.block_until_ready(policy(params, agent.initial_carry(1), zero_obs, key))

        began = time.perf_counter()
        warm(initial)
        warmup_s = time.perf_counter() - began
        logger.message(f"actor {cfg.id}: policy ready in {warmup_s:.2f}s ({watch.compiles} compiled, "
                       f"{watch.cache_hits} from the compile cache); writing {logdir / 'replay'}, "
                       f"metrics {logdir / 'metrics.jsonl'}")
        compiles_at_start = watch.compiles
        writer = Writer.from_config(config, logdir / "replay", writer_id=cfg.id)
        opened.append(writer)  # its close() writes the partial chunk
        client = sync.Client(logdir / "params", initial, sync.model_hash(config),
                             interval=cfg.param_interval).start()
        opened.append(client)
        params = PolicyParams(client, initial, warm, stop).start()
        logger.write(0, {"actor/warmup_s": warmup_s, "actor/compiles": watch.compiles,
                         "actor/compile_cache_hits": watch.cache_hits})

        loop = TickLoop(cfg, tick_hz(config), env, policy, params, agent.initial_carry(1), key,
                        pkeys, rkeys, writer, logger, watch, compiles_at_start, config.run.log_every)
        try:
            loop.run(stop)
        except KeyboardInterrupt:
            stop.set("interrupted")
        limit = "step limit" if cfg.steps and loop.steps >= cfg.steps else "time limit"
        summary = (f"\nactor {cfg.id}: stopped ({stop.reason or limit}) after {loop.steps} steps, "
                   f"{loop.episodes} episodes, {loop.pacer.late} late ticks; replay flushed to "
                   f"{logdir / 'replay'}")
    finally:
        stop.event.set()  # ends the parameter-swap thread
        try:
            close_all(opened)
        finally:
            if summary:
                logger.message(summary)
            logger.close()
    return 0


def close_all(resources) -> None:
    """Close each resource in order even if one fails; then raise the first failure."""
    errors = []
    for resource in resources:
        try:
            resource.close()
        except Exception as e:
            errors.append(e)
    if errors:
        raise errors[0]


class TickLoop:
    """The real-time loop and its statistics."""

    def __init__(self, cfg, hz, env, policy, params, carry, key, pkeys, rkeys, writer, logger, watch,
                 compiles_at_start, log_every):
        self.cfg, self.env, self.policy, self.params = cfg, env, policy, params
        self.carry, self.key, self.pkeys, self.rkeys = carry, key, pkeys, rkeys
        self.writer, self.logger, self.watch = writer, logger, watch
        self.compiles_at_start = compiles_at_start
        self.log_every = log_every
        self.pacer = Pacer(hz, late_ms=cfg.late_ms)
        self.rng = np.random.default_rng(cfg.id)
        self.lateness, self.work = Window(), Window()
        self.recent_late = collections.deque(maxlen=SWAP_WINDOW)
        self.swap: dict | None = None
        self.version = 0
        self.steps = 0
        self.episodes = 0
        self.ep_return, self.ep_length = 0.0, 0
        self.last_return = float("nan")

    def run(self, stop: StopFlag) -> int:
        """Tick until a limit or `stop`; return the number of steps written."""
        cfg, env = self.cfg, self.env
        need_reset = True
        began = time.monotonic()
        window_start, window_ticks = began, 0
        self.pacer.start()
        while not stop:
            if cfg.steps and self.steps >= cfg.steps:
                break
            if cfg.duration and time.monotonic() - began >= cfg.duration:
                break
            late_ms = self.pacer.wait()
            tick_time = time.time()
            work_start = time.perf_counter()
            obs = env.reset() if need_reset else env.observe()
            version, params = self.params.current
            swapped = version != self.version
            batch = {k: np.asarray(obs[k])[None] for k in self.pkeys}
            self.carry, action, self.key = self.policy(params, self.carry, batch, self.key)
            action = np.asarray(action, np.float32)[0]  # (indexing the jax array would compile)
            if version == 0 and cfg.random_until_params:
                action = random_action(env.act_space, self.rng)
            is_last = bool(obs["is_last"])
            if not is_last:
                env.act(action)
            step = {k: obs[k] for k in self.rkeys}
            step["action"] = action
            step["tick_time"] = np.float64(tick_time)
            step["tick_late_ms"] = np.float32(late_ms)
            self.writer.add(step)
            self.steps += 1
            need_reset = is_last
            work_ms = (time.perf_counter() - work_start) * 1000
            self._account(self.steps, obs, late_ms, work_ms, version, swapped)
            window_ticks += 1
            now = time.monotonic()
            if now - window_start >= self.log_every:
                self._log(self.steps, window_ticks / (now - window_start))
                window_start, window_ticks = now, 0
        if window_ticks:  # the last partial window, so the final step count is on record
            self._log(self.steps, window_ticks / max(1e-9, time.monotonic() - window_start))
        return self.steps

    def _account(self, steps, obs, late_ms, work_ms, version, swapped) -> None:
        self.lateness.add(late_ms)
        self.work.add(work_ms)
        if self.swap is not None:
            self.swap["after"].append(late_ms)
            if len(self.swap["after"]) >= SWAP_WINDOW:
                s = self.swap
                self.logger.write(steps, {
                    "actor/swap_version": s["version"], "actor/swap_work_ms": s["work"],
                    "actor/swap_late_ms_before": max(s["before"], default=0.0),
                    "actor/swap_late_ms_after": max(s["after"]),
                    "actor/compiles_after_warmup": self.watch.compiles - self.compiles_at_start})
                self.swap = None
        if swapped:
            self.swap = {"version": version, "work": work_ms, "before": list(self.recent_late),
                         "after": []}
            self.version = version
        self.recent_late.append(late_ms)
        self.ep_return += float(obs["reward"]) if not obs["is_first"] else 0.0
        self.ep_length += 0 if obs["is_first"] else 1
        if obs["is_last"]:
            self.episodes += 1
            self.last_return = self.ep_return
            self.logger.write(steps, {"episode/return": self.ep_return,
                                      "episode/length": self.ep_length})
            self.ep_return, self.ep_length = 0.0, 0

    def _log(self, steps: int, ticks_per_s: float) -> None:
        lag_steps, lag_s = self.params.client.lag()
        silence = self.params.client.learner_silence()
        metrics = {
            "actor/ticks_per_s": ticks_per_s, "actor/late_ticks": self.pacer.late,
            "actor/missed_ticks": self.pacer.missed,
            "actor/late_ms_p50": self.lateness.percentile(50),
            "actor/late_ms_p99": self.lateness.percentile(99),
            "actor/late_ms_max": self.lateness.max(),
            "actor/work_ms_p50": self.work.percentile(50), "actor/work_ms_max": self.work.max(),
            "actor/policy_version": self.version, "actor/policy_lag_steps": lag_steps,
            "actor/policy_lag_s": lag_s, "actor/episodes": self.episodes,
            "actor/learner_silent_s": float("nan") if silence is None else silence,
            "actor/compiles_after_warmup": self.watch.compiles - self.compiles_at_start,
        }
        metrics.update({f"env/{k}": v for k, v in self.env.metrics().items()})
        self.logger.write(steps, metrics)
        quiet = silence is not None and silence > SILENT_AFTER_S
        self.logger.status(
            f"actor {self.cfg.id} | step {steps} | {ticks_per_s:.1f} ticks/s | late {self.pacer.late}"
            f" (p99 {metrics['actor/late_ms_p99']:.1f} ms) | policy v{self.version} lag "
            f"{_fmt(lag_steps)} upd | episodes {self.episodes} last return {self.last_return:.1f}"
            + (f" | learner silent {silence:.0f} s" if quiet else ""))
        self.lateness.reset()
        self.work.reset()


def _fmt(value) -> str:
    return "-" if value is None or (isinstance(value, float) and not np.isfinite(value)) \
        else f"{value:.0f}"


@cli.main
def main(argv: list[str] | None = None) -> int:
    """Command line: python -m dreamer_live.actor --logdir DIR --configs PRESET..."""
    p = cli.parser("python -m dreamer_live.actor",
                   "Play a game in real time into DIR/replay with the learner's latest policy.")
    args, config = cli.parse(p, argv)
    return run_actor(config, args.logdir)


if __name__ == "__main__":
    raise SystemExit(main())
