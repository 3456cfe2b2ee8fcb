"""The learner process: trains the agent from replay and publishes the actor's parameters.

Waits for run.prefill steps, then loops: sample a batch, one train step, metrics. The train ratio
(replayed steps per env step written) caps how far training runs ahead of the data; the learner never
slows the actor. Publishes every run.publish_every s, checkpoints every run.checkpoint_every min and on
exit, and resumes from DIR/checkpoint with its counters. `--offline` trains from a read-only replay
folder (another run's) until run.steps updates.

JAX and the agent are imported inside functions: the learner lowers its priority (yield_cpu) and
cli.setup_jax sets XLA's flags before JAX starts its threads.
"""

from __future__ import annotations

import functools
import os
import pathlib
import threading
import time

import numpy as np

from dreamer_live import cli, render, spaces as spaceslib, transport
from dreamer_live.compiles import CompileWatch
from dreamer_live.envs import spaces_of_run, tick_hz
from dreamer_live.errors import UserError
from dreamer_live.learner.checkpoint import Checkpointer
from dreamer_live.learner.writes import Writes
from dreamer_live.metrics import Logger
from dreamer_live.process import RoleLock, StopFlag, learner_threads, share_cpu

LOCK = "learner.lock"  # in the logdir: the running learner (pid and host; empty once it stopped cleanly)
WRITES_WAIT_S = 120.0  # the exit waits this long for the writes going before its own


class Learner:
    """Owns the agent state, the replay reader, the publisher, checkpoints and metrics."""

    def __init__(self, config, logdir: pathlib.Path, replay_dir: pathlib.Path, offline: bool,
                 stop: StopFlag | None = None):
        self.config, self.logdir, self.replay_dir, self.offline = config, logdir, replay_dir, offline
        # given: set by whoever runs this loop on a thread of its own
        self.stop = stop if stop is not None else StopFlag("learner").install()
        self.logger = Logger(logdir, "learner", quiet=config.run.quiet,
                             fields={"learner/pid": os.getpid()})
        self.updates = 0
        self.started = 0  # updates at the start of this run's training (a resumed learner's count)
        self.training_since = 0.0  # monotonic time training began
        self.skipped, self.in_a_row = 0, 0  # updates skipped for non-finite values: all, in a row
        self.meta: dict = {}
        self._video_thread: threading.Thread | None = None
        self._refused: set[str] = set()  # what the disk refuses now (publish, heartbeat): said once
        self._writes = Writes(self.logger.message)  # publishes, checkpoints, heartbeats while training
        self._publishing = threading.Lock()  # a publish and a heartbeat never at once (one transport)
        self.version = 0  # the newest parameter version published

    def run(self) -> int:
        """Train until run.steps, a stop signal or a dead launcher; checkpoint and publish on exit."""
        config, run = self.config, self.config.run
        cli.setup_jax(config)
        import jax

        from dreamer_live.agent import Agent, devices

        self.watch = CompileWatch()  # from here: the train step's compiles and cache loads

        mesh = devices.learner_mesh(config)
        readonly = self.offline or self.replay_dir.resolve() != (self.logdir / "replay").resolve()
        reader = transport.replay_source(config, self.replay_dir, readonly=readonly)
        try:
            if self.offline and not reader.num_steps:
                raise UserError(f"replay folder {self.replay_dir} holds no steps")
            if self.offline and not reader.ready():
                raise UserError(f"replay folder {self.replay_dir} holds no episode piece of "
                                f"batch_length + agent.replay_context = "
                                f"{config.batch_length + config.agent.replay_context} steps "
                                f"({reader.num_steps} steps in all)")
            found = self._spaces()
            if found is None:
                return 0
            agent = Agent(config, *found, mesh=mesh)
            checkpointer = Checkpointer(self.logdir / "checkpoint",
                                        keep=config.learner.keep_checkpoints)
            if checkpointer.exists():
                state, self.meta = checkpointer.load(agent.state_shapes(), warn=self.logger.message)
                self.updates = int(self.meta.get("updates", 0))
                self.logger.message(f"learner: resumed from {checkpointer.path} at "
                                    f"{self.updates} updates")
            else:
                state = agent.init(jax.random.PRNGKey(config.seed))
            publisher = transport.variable_publisher(config, self.logdir)
            self.logger.message(
                f"learner: training on {devices.describe(mesh)} from {self.replay_dir}"
                f"{' (read-only)' if readonly else ''}; "
                f"writing {self.logdir / 'params'}, {checkpointer.directory}, "
                f"{self.logdir / 'metrics.jsonl'}, {self.logdir / 'videos'}")
            if run.steps and self.updates >= run.steps:
                self.logger.message(f"learner: already at {self.updates} >= run.steps updates")
                return 0
            self.version = self._publish(publisher, agent, state, 0)
            self._compile(agent, state, found[0])
            if not self._prefill(reader, publisher):
                return 0
            self._train(agent, state, reader, publisher, checkpointer)
        finally:
            reader.close()
            self.stop.event.set()
            self.logger.close()
        return 0

    def _spaces(self):
        """The game's (obs_space, act_space): the actor's spaces.json in the replay folder.

        Online, wait for the actor to write it; offline, `envs.spaces_of_run`."""
        while True:
            if self.offline:
                return spaces_of_run(self.config, self.replay_dir)
            found = spaceslib.load(self.replay_dir)
            if found is not None:
                return found
            self.logger.status(f"learner | waiting for an actor to start writing {self.replay_dir}")
            if self.stop.wait(1.0):
                return None

    def _compile(self, agent, state, obs_space) -> None:
        """Compile the train step on a zero batch while the actor fills replay (result discarded)."""
        import jax

        if self.offline:
            return  # nothing to overlap with
        b, t = self.config.batch_size, self.config.batch_length + self.config.agent.replay_context
        batch = {k: np.zeros((b, t, *space.shape), space.dtype) for k, space in obs_space.items()}
        batch["action"] = np.zeros((b, t, agent.act_dim), np.float32)
        began = time.monotonic()
        self.logger.status("learner | compiling the train step")
        jax.block_until_ready(agent.train(state, batch, jax.random.PRNGKey(0)))
        self.logger.message(f"learner: train step ready in {time.monotonic() - began:.1f}s")

    def _prefill(self, reader, publisher) -> bool:
        """Wait until replay holds run.prefill steps (offline: whatever is there); False if stopped."""
        need = 1 if self.offline else self.config.run.prefill
        while not self.stop:
            # waiting, not gone: the actor must not report silence
            self._on_disk("heartbeat", "the heartbeat", publisher.heartbeat, self.updates)
            reader.refresh()
            if reader.num_steps >= need and reader.ready():
                return True
            self.logger.status(f"learner | waiting for replay: {reader.num_steps}/{need} steps in "
                               f"{self.replay_dir}")
            self.stop.wait(1.0)
        return False

    def _train(self, agent, state, reader, publisher, checkpointer):
        import jax


        config, run = self.config, self.config.run
        latents = transport.latent_store(config)  # replay context: starts empty, also on resume
        key = jax.random.PRNGKey(config.seed + 1 + self.updates)
        batch_steps = config.batch_size * config.batch_length
        publish, heartbeat = self._one_at_a_time(publisher.publish), self._one_at_a_time(publisher.heartbeat)
        now = time.monotonic()
        last = {"publish": now, "checkpoint": now, "video": now, "log": now, "refresh": now}
        window = {"updates": 0, "start": now, "metrics": [], "waited": 0.0, "skipped": 0}
        started = self.started = self.updates
        self.training_since = now
        env_steps = reader.steps_written()
        try:
            while not self.stop:
                if run.steps and self.updates >= run.steps:
                    break
                now = time.monotonic()
                if now - last["refresh"] >= 1.0:
                    reader.refresh()
                    env_steps = reader.steps_written()
                    last["refresh"] = now
                allowed = (run.train_ratio * env_steps / batch_steps
                           if run.train_ratio > 0 and not self.offline else float("inf"))
                if self.updates + 1 > allowed:
                    waited = time.monotonic()
                    self.stop.wait(0.05)  # ahead of the data: wait for the actor, never slow it
                    window["waited"] += time.monotonic() - waited
                else:
                    batch = reader.sample()
                    key, sub = jax.random.split(key)
                    if latents is None:
                        state, metrics = agent.train(state, batch, sub)
                    else:
                        state, metrics = latents.train(agent, state, batch, sub)
                    # Fetching the metrics waits for the update: counts finished updates, not queued
                    # ones, and keeps JAX's async dispatch from piling up work (batches are prefetched).
                    metrics = jax.device_get(metrics)
                    if metrics.pop("skipped"):
                        self._skipped(window)
                        continue
                    self.in_a_row = 0
                    self.updates += 1
                    window["updates"] += 1
                    window["metrics"].append(metrics)
                now = time.monotonic()
                # Written on threads of their own (learner/writes.py): a slow disk never holds training.
                # (partial binds this moment's state and counts: the loop moves on at once)
                if now - last["publish"] >= run.publish_every:
                    self._writes.submit("parameters", self.logdir / "params", functools.partial(
                        self._on_disk, "publish", "parameters", publish, agent.policy_params(state),
                        self.updates), self._published)
                    last["publish"] = now
                if now - last["checkpoint"] >= run.checkpoint_every * 60:
                    self._writes.submit("checkpoint", checkpointer.directory, functools.partial(
                        self._checkpoint, checkpointer, state, env_steps, self.version, self.updates))
                    last["checkpoint"] = now
                if run.video_every and now - last["video"] >= run.video_every * 60:
                    self._video(agent, state, reader)
                    last["video"] = now
                if now - last["log"] >= run.log_every:
                    self._log(window, reader, env_steps, batch_steps)
                    self._writes.submit("heartbeat", self.logdir / "params", functools.partial(
                        self._on_disk, "heartbeat", "the heartbeat", heartbeat, self.updates))
                    last["log"] = now
        except KeyboardInterrupt:
            self.stop.set("interrupted")
        if self._video_thread is not None:
            self._video_thread.join(timeout=60)
        self._writes.wait(WRITES_WAIT_S)
        reason = self.stop.reason or "run.steps reached"
        if window["updates"]:
            self._log(window, reader, env_steps, batch_steps)
        last = self.version
        version = self.version = self._publish(publisher, agent, state, last)
        saved = self._checkpoint(checkpointer, state, env_steps, version)
        # only a version and a checkpoint this exit wrote: an older one may be gone with its folder
        published = f"published v{version}" if version != last else "parameters not published"
        kept = (f"checkpoint {checkpointer.path}" if saved
                else f"checkpoint not saved, the newest kept {checkpointer.path or 'none'}")
        self.logger.message(f"\nlearner: stopped ({reason}) at {self.updates} updates "
                            f"({self.updates - started} this run); {published}; {kept}")
        return state

    def _skipped(self, window) -> None:
        """Count an update skipped for a non-finite loss or gradients; stop after too many in a row."""
        self.skipped += 1
        self.in_a_row += 1
        window["skipped"] += 1
        limit = self.config.learner.max_skipped
        if self.in_a_row >= limit:
            raise UserError(
                f"stopped after {limit} updates in a row with a non-finite loss or gradients (NaN "
                f"or infinity; learner.max_skipped) at {self.updates} updates; none was published "
                "or checkpointed: lower agent.opt.lr or check the replay, then resume")

    def _checkpoint(self, checkpointer, state, env_steps, version, updates: int | None = None) -> bool:
        """Save a checkpoint of `state` after `updates` (default: now's); one the disk refuses (full)
        is skipped with one line, the older kept. Whether it was saved."""
        updates = self.updates if updates is None else updates
        self.meta = {**self.meta, "updates": updates, "env_steps": int(env_steps), "version": int(version)}
        try:
            checkpointer.save(state, self.meta)
            return True
        except OSError as e:
            self.logger.message(
                f"learner: checkpoint at {updates} updates skipped, cannot write "
                f"{checkpointer.directory} ({e.strerror or e}); keeping {checkpointer.describe()}; "
                "going on")
            return False

    def _one_at_a_time(self, call):
        """`call` under the publisher's lock (its transport's state is shared by both kinds)."""
        def locked(*args):
            with self._publishing:
                return call(*args)
        return locked

    def _published(self, version: int | None) -> None:
        if version is not None:
            self.version = version

    def _publish(self, publisher, agent, state, version: int) -> int:
        """Publish the policy; the new version, or `version` when the disk refuses it."""
        published = self._on_disk("publish", "parameters", publisher.publish,
                                  agent.policy_params(state), self.updates)
        return version if published is None else published

    def _on_disk(self, key: str, what: str, write, *args):
        """write(*args); on an OSError (disk full) None, said in one line until a write succeeds."""
        try:
            result = write(*args)
        except OSError as e:
            if key not in self._refused:
                self._refused.add(key)
                self.logger.message(f"learner: cannot write {what} ({e.strerror or e}); "
                                    "going on, trying again at the next one")
            return None
        if key in self._refused:
            self._refused.discard(key)
            self.logger.message(f"learner: {what} written again")
        return result

    def _video(self, agent, state, reader) -> None:
        """Open-loop predictions on a fresh batch, rendered on a background thread."""
        import jax

        if self._video_thread is not None and self._video_thread.is_alive():
            return  # the previous one is still rendering (matplotlib: one at a time)
        length = self.config.batch_length
        observe = max(1, min(self.config.run.video_observe, length - 1))
        batch = reader.sample()
        out = jax.device_get(agent.report(state, batch, observe=observe))
        path = self.logdir / "videos" / f"openloop_{self.updates:08d}"

        def draw():
            try:
                for suffix in (".gif", ".png") if render.split_keys(out)[0] else (".png",):
                    render.write_open_loop(out, observe, path.with_suffix(suffix),
                                           probe=self.config.agent.objective == "barlow")
            except Exception as e:  # a rendering problem must not stop training
                print(f"learner: video failed: {e}", flush=True)

        self._video_thread = threading.Thread(target=draw, name="video", daemon=True)
        self._video_thread.start()

    def _log(self, window, reader, env_steps, batch_steps) -> None:
        import jax

        from dreamer_live.agent import Agent

        now = time.monotonic()
        rate = window["updates"] / max(1e-9, now - window["start"])
        metrics = {}
        if window["metrics"]:
            stacked = jax.device_get(window["metrics"])
            for name in stacked[0]:
                values = np.asarray([np.mean(m[name]) for m in stacked], np.float64)
                metrics[f"train/{name}"] = float(values.mean())
        metrics.update({
            "learner/updates_per_s": rate,
            # since this process began training: the rate a run's closing line gives
            "learner/updates_per_s_run": (self.updates - self.started) / max(1e-9, now - self.training_since),
            "learner/ratio_wait_frac": window["waited"] / max(1e-9, now - window["start"]),
            "learner/train_ratio": self.updates * batch_steps / max(1, env_steps),
            "learner/policy_version": self.version, "learner/skipped_updates": self.skipped,
            "learner/writes_skipped": float(sum(self._writes.skipped.values())),
            "learner/slowest_write_s": self._writes.slowest_s(),
            # 1 in a healthy process: more is a recompile of the step (a GPU learner's minute)
            "learner/train_compiles": self.watch.count(Agent._train_impl),
            "replay/steps": env_steps,
            "replay/held": reader.num_steps})
        self.logger.write(self.updates, metrics)
        if "train/loss/total" in metrics:
            loss = f"loss {metrics['train/loss/total']:.3f}"
        else:  # no update in this window: no loss to show
            loss = "no update yet" if self.updates == self.started else \
                f"no update in {now - window['start']:.0f} s"
        target = f"/{self.config.run.steps}" if self.config.run.steps else ""
        self.logger.status(
            f"learner | {self.updates}{target} updates | {rate:.2f} upd/s | ratio "
            f"{metrics['learner/train_ratio']:.1f} | replay {env_steps} | v{self.version} | {loss}"
            + (f" | {window['skipped']} skipped (non-finite)" if window["skipped"] else "")
            + (f" | {slow}" if (slow := self._writes.slow()) else ""))
        window.update(updates=0, start=now, metrics=[], waited=0.0, skipped=0)


def run_learner(config, logdir: pathlib.Path, replay_dir: pathlib.Path, offline: bool,
                stop: StopFlag | None = None, share_with: str = "") -> int:
    """Run a Learner holding DIR/learner.lock (a second learner on the logdir is refused), first
    yielding the CPU to `share_with` (the actors on this machine) when named."""
    # Two learners would publish the same version numbers and write one checkpoint/ and metrics.jsonl.
    lock = RoleLock(logdir / LOCK, "a learner").acquire()
    try:
        if share_with:  # in this thread: XLA's threads, started by the loop, inherit its manners
            print(f"learner: sharing the CPU with {share_with}: {yield_cpu(config)}", flush=True)
        learner = Learner(config, logdir, replay_dir, offline, stop)
        if lock.took_over:
            learner.logger.message(f"learner: took over {LOCK} from {lock.took_over}, which stopped "
                                   "without releasing it")
        return learner.run()
    finally:
        lock.release()


def yield_cpu(config) -> str:
    """Lower this process below the actor (learner.threads, nice, idle), before JAX is imported."""

    threads = learner_threads(config.learner.threads, tick_hz(config))
    return share_cpu(threads, config.learner.nice, config.learner.idle)
