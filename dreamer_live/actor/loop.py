"""The actor process: plays the game at its own speed into DIR/replay with the latest published policy.

Each tick: observe, run the jitted policy with its recurrent carry, send the action, hand the step to the
replay writer, sleep to the next deadline. Nothing slow runs on the tick: parameters are loaded and moved
to the device on a background thread, chunks are written by the replay writer's thread, metric lines by
the logger's thread. The actor never waits for the learner.

JAX and the agent are imported inside functions, after cli.setup_jax has chosen JAX's platform and
set XLA's flags.
"""

from __future__ import annotations

import collections
import contextlib
import math
import os
import pathlib
import time
import traceback

import numpy as np

from dreamer_live import cli, spaces as spaceslib, transport
from dreamer_live.actor.core import ActorCore, random_action
from dreamer_live.atomic import write_atomic
from dreamer_live.compiles import CompileWatch
from dreamer_live.envs import make_env, tick_hz
from dreamer_live.errors import RunFailure, UserError
from dreamer_live.metrics import Logger, Samples
from dreamer_live.pacer import Pacer
from dreamer_live.process import RoleLock, StopFlag
from dreamer_live.steps import LOG_PREFIX, replay_keys

SWAP_WINDOW = 5  # ticks after a parameter swap whose lateness is reported with it


def run_actor(config, logdir: pathlib.Path, stop: StopFlag | None = None) -> int:
    """Play until actor.steps / actor.duration / a stop signal (or `stop`, set by whoever started this
    loop on a thread of its own); always release keys and flush replay."""
    # One actor per id on a logdir: two would write streams that metrics and TensorBoard mix up.
    lock = RoleLock(logdir / f"actor-{config.actor.id}.lock", f"actor {config.actor.id}",
                    hint="give this one another --actor.id").acquire()
    try:
        return _run_actor(config, logdir, lock, stop)
    except EnvFailure as failure:  # the env's traceback to a file, one line (exit status 1)
        raise failure.report(logdir / f"actor-{config.actor.id}-error.log", logdir / "replay") from None
    finally:
        lock.release()


def _run_actor(config, logdir: pathlib.Path, lock: RoleLock, stop: StopFlag | None) -> int:
    stop = stop if stop is not None else StopFlag("actor").install()
    cli.setup_jax(config)
    import jax

    from dreamer_live.agent import Agent
    cfg = config.actor
    watch = CompileWatch()
    logger = Logger(logdir, "actor", name=f"actor{cfg.id}", quiet=config.run.quiet,
                    fields={"actor/id": cfg.id, "actor/pid": os.getpid()})
    if lock.took_over:
        logger.message(f"actor {cfg.id}: took over {lock.path.name} from {lock.took_over}, which "
                       "stopped without releasing it")
    opened = []  # closed in this order on any exit: the env first (keys released), then the rest
    with closing(stop, logger, opened) as summary:
        env = make_env(config)
        opened.append(env)
        agent = Agent(config, env.obs_space, env.act_space)
        spaceslib.save(logdir / "replay", {k: env.obs_space[k] for k in replay_keys(env.obs_space)},
                       env.act_space)
        key = jax.random.PRNGKey(config.seed + 7919 * cfg.id)
        key, init_key = jax.random.split(key)
        # Plain device arrays (no weak types), so published params hit the same compiled policy.
        initial = jax.device_put(jax.device_get(agent.init_policy(init_key)))
        core = ActorCore(agent, cfg.mode, initial, key)
        began = time.perf_counter()
        core.warm(initial)
        warmup_s = time.perf_counter() - began
        logger.message(f"actor {cfg.id}: policy ready in {warmup_s:.2f}s ({watch.compiles} compiled, "
                       f"{watch.cache_hits} from the compile cache); writing {logdir / 'replay'}, "
                       f"metrics {logdir / 'metrics.jsonl'}")
        sink = transport.replay_sink(config, logdir, cfg.id)
        opened.append(sink)  # its close() writes the partial chunk
        # Each new version is warmed on the source's thread: any compile happens off the tick.
        source = transport.variable_source(config, logdir, initial, on_update=core.warm)
        opened.append(source)
        logger.write(0, {"actor/warmup_s": warmup_s, "actor/compiles": watch.compiles,
                         "actor/compile_cache_hits": watch.cache_hits})
        loop = TickLoop(config, env, core, source, sink, logger, watch)
        loop.run_until_stopped(stop)
        limit = "step limit" if cfg.steps and loop.steps >= cfg.steps else "time limit"
        played = (f"\nactor {cfg.id}: stopped ({stop.reason or limit}) after {loop.steps} steps, "
                  f"{loop.episodes} episodes, {loop.pacer.late} late ticks{loop.bad_obs_note()}")
        summary.append(lambda closed: played + (f"; replay flushed to {logdir / 'replay'}" if closed
                                                else ""))
    return 0


@contextlib.contextmanager
def closing(stop: StopFlag, logger, opened: list):
    """On any exit: stop, close `opened` in order (the env first: keys released), the logger's queued
    lines written before the rest (a Ray actor's replay shipper sends them as it closes), then print
    the summary lines appended to the list this yields (each a function of whether everything closed,
    the replay sink's last chunks written: only then may it say so), and close the logger."""
    summary: list = []
    closed = False
    try:
        yield summary
    finally:
        stop.event.set()
        try:
            close_all([r.close for r in opened[:1]] + [logger.flush] + [r.close for r in opened[1:]])
            closed = True
        finally:
            for line in summary:
                logger.message(line(closed))
            logger.close()


def close_all(closers) -> None:
    """Call each closer in order even if one fails; then raise the first failure."""
    errors = []
    for close in closers:
        try:
            close()
        except Exception as e:
            errors.append(e)
    if errors:
        raise errors[0]


class EnvFailure(Exception):
    """The env raised, or gave an observation unlike its declared space, at a step of an episode."""

    def __init__(self, env_name: str, at: int, episode: int, error: Exception):
        if isinstance(error, spaceslib.ObservationError):
            what = f"its observation does not match its declared space: {error}"
        else:
            lines = str(error).strip().splitlines()
            what = type(error).__name__ + (f": {lines[0][:300]}" if lines else "")
        super().__init__(f"env {env_name} failed at step {at} of episode {episode}: {what}")

    def report(self, error_log: pathlib.Path, replay: pathlib.Path) -> RunFailure:
        """Write the env's traceback to `error_log`; return the one line naming it, for after the
        replay was flushed to `replay`."""
        text = f"{self}\n\n" + "".join(traceback.format_exception(self.__cause__ or self))
        try:
            write_atomic(error_log, text.encode())
            where = f"traceback in {error_log}"
        except OSError as e:
            where = f"could not write its traceback to {error_log}: {e.strerror or e}"
        return RunFailure(f"{self}; replay flushed to {replay}; {where}")


class TickLoop:
    """The real-time loop and its statistics: observe, act through the core, hand the step to the
    replay sink, pick up a new parameter version from the variable source between ticks. Ticks/s and
    lateness count play only: each reset restarts the tick clock and is timed as actor/reset_s."""

    def __init__(self, config, env, core: ActorCore, source, sink, logger, watch: CompileWatch | None):
        self.cfg, self.env, self.core, self.source, self.sink = config.actor, env, core, source, sink
        self.env_name = config.env.name
        # What each stored observation key must hold (spaces.check_obs, before policy and replay).
        self.obs_spec = spaceslib.obs_spec({k: env.obs_space[k] for k in replay_keys(env.obs_space)})
        self.bad_obs = 0  # observations with NaN or infinity: never stored (see _bad_observation)
        self.ep_step = 0  # the episode step of the last observation (the reset's: 0)
        self.pending: dict | None = None  # the last step, stored once the next observation is checked
        self.logger, self.watch = logger, watch
        self.compiles_at_start = self._compiles()
        self.log_every = config.run.log_every
        self.silent_after = transport.silent_after_s(config)
        self.pacer = Pacer(tick_hz(config))
        self.rng = np.random.default_rng(self.cfg.id)
        self.lateness, self.work = Samples(), Samples()
        self.recent_late = collections.deque(maxlen=SWAP_WINDOW)
        self.swap: dict | None = None
        self.version = 0
        self.steps = 0
        self.episodes = 0
        self.ep_return, self.ep_length = 0.0, 0
        # The furthest the env's progress value (env.progress_key, e.g. SuperTux's x) got per episode.
        self.progress = LOG_PREFIX + config.env.progress_key if config.env.progress_key else ""
        self.ep_furthest = -math.inf
        self.last_return = float("nan")
        self.warnings: frozenset[str] = frozenset()  # the last status line's: a new one shows at once

    def run_until_stopped(self, stop: StopFlag) -> None:
        """`run`, with Ctrl-C taken as a stop like any other."""
        try:
            self.run(stop)
        except KeyboardInterrupt:
            stop.set("interrupted")

    def run(self, stop: StopFlag) -> int:
        """Tick until a limit or `stop`; return the number of steps written."""
        try:
            played = self._play(stop)
        except BaseException:
            with contextlib.suppress(Exception):  # the failure on its way out is the one to report
                self._store(None)
            raise
        self._store(None)
        return played

    def _play(self, stop: StopFlag) -> int:
        cfg, env = self.cfg, self.env
        need_reset = True
        began = time.monotonic()
        window_start, window_ticks, window_reset_s = began, 0, 0.0
        self.pacer.start()
        while not stop:
            if cfg.steps and self.steps >= cfg.steps:
                break
            if cfg.duration and time.monotonic() - began >= cfg.duration:
                break
            late_ms = self.pacer.wait()
            if late_ms > self.pacer.gap_ms:
                self._gap(late_ms)
                need_reset, late_ms = True, 0.0  # a new grid from the reset: no tick's lateness
            tick_time = time.time()
            work_start = time.perf_counter()
            at = 0 if need_reset else self.ep_step + 1
            with self._env_fault(at):
                obs = env.reset() if need_reset else env.observe()
                bad = spaceslib.check_obs(obs, self.obs_spec)  # another shape or dtype raises
            if need_reset:
                # A reset (a title card, a wait for the game) is not play: its time is reported on its
                # own, and the tick clock starts again when play does.
                reset_s = time.perf_counter() - work_start
                self.pacer.restart()
                tick_time, work_start = time.time(), time.perf_counter()
                window_reset_s += reset_s
                self.logger.write(self.steps, {"actor/reset_s": reset_s})
            self.ep_step = at
            if bad:
                self._bad_observation(bad, at)
                need_reset = True
            else:
                need_reset = self._step(obs, tick_time, late_ms, work_start)
                window_ticks += 1
            now = time.monotonic()
            if now - window_start >= self.log_every:
                self._log(self.steps, window_ticks / max(1e-9, now - window_start - window_reset_s))
                window_start, window_ticks, window_reset_s = now, 0, 0.0
        if window_ticks:  # the last partial window, so the final step count is on record
            played = time.monotonic() - window_start - window_reset_s
            self._log(self.steps, window_ticks / max(1e-9, played))
        return self.steps

    def _step(self, obs: dict, tick_time: float, late_ms: float, work_start: float) -> bool:
        """Act on a checked observation and store the step; return whether it ended the episode."""
        loaded = self.source.current
        version, swapped = loaded.version, loaded.version != self.version
        if swapped:
            self.core.update(loaded.params)
        action = self.core.select_action(obs)
        if version == 0 and self.cfg.random_until_params:
            action = random_action(self.env.act_space, self.rng)
        is_last = bool(obs["is_last"])
        try:
            if not is_last:
                with self._env_fault(self.ep_step + 1):
                    self.env.act(action)
        finally:  # the observation was good: kept even when the env fails on the action
            self._store(self.core.replay_step(obs, action, tick_time, late_ms))
            self.steps += 1
        work_ms = (time.perf_counter() - work_start) * 1000
        self._account(self.steps, obs, late_ms, work_ms, version, swapped)
        return is_last

    @contextlib.contextmanager
    def _env_fault(self, at: int):
        """An exception from the env within (a UserError aside: that one is already one line), or an
        observation of another shape or dtype, becomes an EnvFailure at episode step `at`."""
        try:
            yield
        except UserError:
            raise
        except Exception as e:
            raise EnvFailure(self.env_name, at, self.episodes + 1, e) from e

    def _store(self, step: dict | None) -> None:
        """Hand the step before `step` to the replay sink and hold `step` until the next observation
        has been checked (a bad one makes `step` its episode's last); an episode's last step, and the
        held one at the end (`step` None), go at once."""
        held, self.pending = self.pending, step
        if held is not None:
            self.sink.add(held)
        if step is not None and step["is_last"]:
            self.pending = None
            self.sink.add(step)

    def _bad_observation(self, why: str, at: int) -> None:
        """An observation with NaN or infinity (`why`) at step `at` of its episode reaches neither the
        policy nor replay: the episode ends at the step before it, which is stored marked is_last (not
        is_terminal: a truncation, as at a time limit, so training neither bootstraps across the cut
        nor learns a death), and the env is reset. The first is said in one line, the rest counted."""
        self.bad_obs += 1
        if self.bad_obs == 1:
            self.logger.message(
                f"actor {self.cfg.id}: env {self.env_name} gave a bad observation at step {at} of an "
                f"episode ({why}); the episode ends at the step before it and the env is reset; bad "
                "observations are never stored, counted in the status line (bad obs N)")
        self._cut()

    def _gap(self, late_ms: float) -> None:
        """No tick for many periods: the process was stopped or the machine slept (no load). What the
        game did meanwhile was not played: the episode ends at the step before the gap, as a
        truncation, and the env is reset. The first is said in one line, the rest counted."""
        if self.pacer.gaps == 1:
            self.logger.message(
                f"actor {self.cfg.id}: no tick for {late_ms / 1000:.1f} s: this process was stopped or "
                "the machine slept (not load); the episode ends at the step before the gap and the env "
                "is reset; counted in the status line (gaps N)")
        self._cut()

    def _cut(self) -> None:
        """End the episode at the held step, marked is_last and not is_terminal (a truncation)."""
        held, self.pending = self.pending, None
        if held is not None:
            self.sink.add({**held, "is_last": np.array(True)})
            self._episode_end(self.steps, terminal=False)

    def bad_obs_note(self) -> str:
        """', N bad observations (not stored)' for a summary line, or '' when there were none."""
        return f", {self.bad_obs} bad observations (not stored)" if self.bad_obs else ""

    def _compiles(self) -> int:
        return self.watch.compiles if self.watch is not None else 0  # no watch: no policy (a person)

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
                    "actor/compiles_after_warmup": self._compiles() - self.compiles_at_start})
                self.swap = None
        if swapped:
            self.swap = {"version": version, "work": work_ms, "before": list(self.recent_late),
                         "after": []}
            self.version = version
        self.recent_late.append(late_ms)
        self.ep_return += float(obs["reward"]) if not obs["is_first"] else 0.0
        self.ep_length += 0 if obs["is_first"] else 1
        if self.progress in obs:
            self.ep_furthest = max(self.ep_furthest, float(obs[self.progress]))
        if obs["is_last"]:
            self._episode_end(steps, bool(obs["is_terminal"]))

    def _episode_end(self, steps: int, terminal: bool) -> None:
        self.episodes += 1
        self.last_return = self.ep_return
        metrics = {"episode/return": self.ep_return, "episode/length": self.ep_length,
                   "episode/terminal": float(terminal)}
        if self.ep_furthest > -math.inf:  # the env reports env.progress_key
            metrics[f"episode/furthest_{self.progress[len(LOG_PREFIX):]}"] = self.ep_furthest
        self.logger.write(steps, metrics)
        self.ep_return, self.ep_length, self.ep_furthest = 0.0, 0, -math.inf

    def _log(self, steps: int, ticks_per_s: float) -> None:
        lag_steps, lag_s = self.source.lag()
        silence = self.source.learner_silence()
        late_frac, late_window, loaded = self.pacer.load()
        metrics = {
            "actor/ticks_per_s": ticks_per_s, "actor/late_ticks": self.pacer.late,
            "actor/late_frac": late_frac, "actor/late_window": late_window, "actor/gaps": self.pacer.gaps,
            "actor/missed_ticks": self.pacer.missed,
            "actor/late_ms_p50": self.lateness.percentile(50),
            "actor/late_ms_p99": self.lateness.percentile(99),
            "actor/late_ms_max": self.lateness.max(),
            "actor/work_ms_p50": self.work.percentile(50), "actor/work_ms_max": self.work.max(),
            "actor/policy_version": self.version, "actor/policy_lag_steps": lag_steps,
            "actor/policy_lag_s": lag_s, "actor/episodes": self.episodes,
            "actor/learner_silent_s": float("nan") if silence is None else silence,
            "actor/compiles_after_warmup": self._compiles() - self.compiles_at_start,
            "actor/bad_obs": self.bad_obs,
        }
        metrics.update({f"env/{k}": v for k, v in self.env.metrics().items()})
        metrics.update(self.sink.metrics())
        self.logger.write(steps, metrics)
        held = self.sink.held()  # the replay sink's note while the disk refuses chunks
        silent = transport.silent_note(silence, self.silent_after)
        warnings = frozenset(name for name, on in (("silent", silent), ("loaded", loaded), ("held", held))
                             if on)
        if ("held" in warnings) != ("held" in self.warnings):  # the status line goes by; these stay
            self.logger.message(f"actor {self.cfg.id}: " + (
                held or "replay: the disk takes chunks again; nothing is held in memory"))
        alert, self.warnings = bool(warnings - self.warnings), warnings
        self.logger.status(
            f"actor {self.cfg.id} | step {steps} | {ticks_per_s:.1f} ticks/s | late {self.pacer.late}"
            f" (p99 {metrics['actor/late_ms_p99']:.1f} ms) | policy v{self.version} lag "
            f"{_fmt(lag_steps)} upd | episodes {self.episodes} last return {self.last_return:.1f}"
            + (f" | {silent}" if silent else "") + (f" | {loaded}" if loaded else "")
            + (f" | bad obs {self.bad_obs}" if self.bad_obs else "")
            + (f" | gaps {self.pacer.gaps}" if self.pacer.gaps else "")
            + (f" | {held}" if held else ""), alert=alert)
        self.lateness.reset()
        self.work.reset()


def _fmt(value) -> str:
    return "-" if value is None or (isinstance(value, float) and not np.isfinite(value)) \
        else f"{value:.0f}"
