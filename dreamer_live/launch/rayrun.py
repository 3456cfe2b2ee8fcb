"""The Ray launcher: `python -m dreamer_live.run --ray.address local|auto|HOST:PORT --ray.actors N`,
and an actor joining a running learner by hand (`python -m dreamer_live.actor --ray.address HOST:PORT`).

`local` starts a private Ray cluster on this machine, listening on the loopback address only, and tears
it down on exit; `auto` or HOST:PORT joins a running cluster (one run per cluster), whose own processes
stay. In it run the Hub (dreamer_live/transport/raylink.py: chunks into DIR/replay, the newest
parameters), the learner and N actors, each a Ray actor running the ordinary loop (learner.Learner,
actor.run_actor) with its transport ends routed through Ray; actor k plays its own env as writer id
actor.id + k. Ray restarts a process that dies (ray.max_restarts) and runs the loop again: an actor
continues with a new replay stream, the learner from its checkpoint. Ctrl-C, SIGTERM or SIGHUP (the
terminal closed) is said in one line and asks every loop to stop as a signal would (replay flushed,
checkpoint written); another while they stop is said in one line and changes nothing; a loop that ends
by itself stops the others, as in the two-process launcher. A cluster's head that stops answering
(raycluster.HeadWatch) stops them the same way, before Ray's own processes give up on it and exit
unsaved, and a last line says what was kept and how to resume.

This module imports neither Ray nor JAX at the top: the learner lowers its priority before JAX starts.
"""

from __future__ import annotations

import math
import os
import pathlib
import signal
import sys
import time

from dreamer_live import transport
from dreamer_live.actor.loop import run_actor
from dreamer_live.config import Config
from dreamer_live.envs import tick_hz
from dreamer_live.errors import RunFailure, UserError
from dreamer_live.launch.status import STOP_GRACE_S, STOP_SIGNALS, Status
from dreamer_live.learner.loop import run_learner
from dreamer_live.metrics import NO_STATUS_ENV, MetricsTail
from dreamer_live.process import StopFlag, descendants, kill_leftovers, say, start_times
from dreamer_live.replay.chunk import folder_steps
from dreamer_live.transport import raycluster, silent_after_s

RESTOP_S = 1.0  # while stopping, loops still running are asked again this often


class LastWords:
    """While open, this process's stdout and stderr as before until `stopping` is set; from then on
    what is printed is kept (in order, with its stream) instead: a loop's last words (its summary:
    replay flushed, checkpoint written), which the launcher prints itself. Ray forwards a worker's
    output to the launcher by tailing its log file, and what the tail has not reached when the
    launcher tears the cluster down is lost (an actor restarted during the run lost its summary line
    so). On an exception what was kept goes to the streams after all."""

    def __init__(self, stopping):
        self.stopping, self.kept, self.saved = stopping, [], None

    def __enter__(self) -> LastWords:
        self.saved = sys.stdout, sys.stderr
        sys.stdout, sys.stderr = (_Diverted(self, name, stream) for name, stream in
                                  zip(("stdout", "stderr"), self.saved))
        return self

    def __exit__(self, kind, value, traceback) -> None:
        sys.stdout, sys.stderr = self.saved
        if kind is not None:
            say_last_words(self.take())

    def take(self) -> list[tuple[str, str]]:
        """What was kept, (stream name, text) in order; kept no longer."""
        kept, self.kept = self.kept, []
        return kept


class _Diverted:
    """A stream that writes through until its LastWords is stopping, then keeps what it is given."""

    def __init__(self, words: LastWords, name: str, stream):
        self.words, self.name, self.stream = words, name, stream

    def write(self, text: str) -> int:
        if self.words.stopping.is_set():
            self.words.kept.append((self.name, text))
            return len(text)
        return self.stream.write(text)

    def flush(self) -> None:
        self.stream.flush()

    def __getattr__(self, name):
        return getattr(self.stream, name)


def say_last_words(words) -> None:
    """Print a loop's last words (LastWords.take()), each piece on its own stream."""
    for name, text in words or ():
        say(text, error=name == "stderr", end="")


class Worker:
    """A Ray actor running the learner's or an actor's ordinary loop; stop() sets its stop flag."""

    def __init__(self, role: str, config: dict, logdir: str):
        self.role, self.config, self.logdir = role, Config(config), pathlib.Path(logdir)
        self.flag = StopFlag(role)  # not installed: Ray's worker owns the signals

    def run(self) -> tuple[int, list[tuple[str, str]]]:
        """Run the loop until it ends or stop() is called; return its exit status and its last words
        (what it printed once stopping, LastWords), for the launcher to print."""
        with LastWords(self.flag.event) as words:
            code = self._loop()
        return code, words.take()

    def _loop(self) -> int:
        from dreamer_live.transport import raylink  # imports Ray

        transport.use_ray(raylink.Link(self.logdir))
        if self.role == "learner":

            # The CPU is yielded here, not in __init__: priority and cores are per thread on Linux,
            # and XLA's threads, started by the loop, inherit them from this one.
            return run_learner(self.config, self.logdir, self.logdir / "replay", False,
                               stop=self.flag, share_with="the actors")

        return run_actor(self.config, self.logdir, stop=self.flag)

    def stop(self, reason: str) -> None:
        """Ask the loop to stop cleanly."""
        self.flag.set(reason)


class RayRun:
    """Starts the cluster and the Ray actors, watches them, stops them, tears the cluster down."""

    def __init__(self, config, logdir: pathlib.Path):
        self.config, self.logdir = config, logdir.resolve()
        self.signals: list[str] = []  # in order of arrival: two in one poll are answered one by one
        self.stopping, self.reason, self.asked = False, "", 0.0
        self.workers: dict = {}
        self.head_lost = False  # the cluster's head stopped answering (raycluster.HeadWatch)

    def start(self) -> None:
        """A private local cluster, or the running one joined, with the Hub and the learner on this
        machine (the logdir's) and ray.actors actors wherever Ray places them."""
        os.environ[NO_STATUS_ENV] = "1"  # the launcher draws the one status line
        cfg = self.config.ray
        if hasattr(signal, "SIGHUP"):
            # A closed terminal hangs up the whole process group, the private cluster's processes
            # too, which would die of it unsaved: they inherit this ignore; the launcher stops them.
            signal.signal(signal.SIGHUP, signal.SIG_IGN)
        ray, context = raycluster.connect(cfg.address, max(os.cpu_count() or 1,
                                                math.ceil(cfg.actors * cfg.actor_cpus + cfg.learner_cpus)))
        self.where = raycluster.describe(context)
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        from dreamer_live.transport import raylink  # imports Ray

        if raycluster.hub_exists(ray):
            raise UserError(f"the Ray cluster at {self.where} already runs a dreamer_live learner "
                            f"(its {raylink.HUB_NAME}); one run per cluster")
        for signum in STOP_SIGNALS:
            signal.signal(signum, self._on_signal)
        here = NodeAffinitySchedulingStrategy(ray.get_runtime_context().get_node_id(), soft=False)
        self.hub = ray.remote(raylink.Hub).options(
            name=raylink.HUB_NAME, num_cpus=0, max_restarts=-1, max_task_retries=-1,
            scheduling_strategy=here).remote(str(self.logdir))
        remote = ray.remote(Worker)
        restarts = dict(max_restarts=cfg.max_restarts, max_task_retries=cfg.max_restarts,
                        max_concurrency=2)  # run() on one thread, stop() on the other
        plain = self.config.to_dict()
        self.workers["learner"] = remote.options(
            num_cpus=cfg.learner_cpus, num_gpus=cfg.learner_gpus, scheduling_strategy=here,
            **restarts).remote("learner", plain, str(self.logdir))
        for k in range(cfg.actors):
            writer_id = self.config.actor.id + k
            own = self.config.update({"actor.id": writer_id}).to_dict()
            self.workers[f"actor {writer_id}"] = remote.options(
                num_cpus=cfg.actor_cpus, **restarts).remote("actor", own, str(self.logdir))

    def _on_signal(self, signum, frame) -> None:
        self.signals.append(signal.Signals(signum).name)  # the watch loop answers (no Ray calls here)

    def watch(self) -> int:
        """Wait for the loops; on a signal or one's end stop the others; return the exit status."""
        import ray


        runs = {w.run.remote(): name for name, w in self.workers.items()}
        tail = MetricsTail(self.logdir / "metrics.jsonl")
        status = Status(tick_hz(self.config), silent_after_s(self.config))
        tty = sys.stdout.isatty()
        last_draw, failure, answered, deadline = 0.0, 0, 0, float("inf")
        said_waiting = False
        head = raycluster.HeadWatch(self.config)
        while runs and time.monotonic() < deadline:
            done, _ = ray.wait(list(runs), num_returns=1, timeout=0.2)
            if not self.head_lost and head.lost():
                # the loops' processes live on until Ray's own give up on the head: stop them now,
                # while each can still save what it holds
                self.head_lost = True
                say(f"\nrun: the Ray cluster's head (its GCS at {head.where}) has not answered for "
                    f"{head.lost_after:g} s; stopping {' and '.join(runs.values())} (each saves "
                    "before it exits)", error=True)
                self._stop_all(raycluster.HEAD_GONE)
                deadline = min(deadline, time.monotonic() + max(
                    5.0, raycluster.RAY_HEAD_WAIT_S - head.lost_after - 5.0))
            for name in self.signals[answered:]:
                # as the two-process launcher: the first is forwarded, a later one said once and
                # forwarded no further (it would cut the loops' saving short)
                answered += 1
                running = " and ".join(runs.values())
                if not self.stopping:
                    say(f"\nrun: {name}; stopping {running} (each saves before it exits)")
                    self._stop_all(name)
                    deadline = time.monotonic() + STOP_GRACE_S
                elif not said_waiting:
                    said_waiting = True
                    say(f"\nrun: {name}: already stopping; waiting up to "
                        f"{max(0.0, deadline - time.monotonic()):.0f} s for {running} to exit (each "
                        "saves first), then tearing the cluster down")
            if self.stopping and time.monotonic() - self.asked >= RESTOP_S:
                # a loop whose process died after its stop() and was restarted by Ray runs its
                # run() again in a Worker never asked to stop: ask those still running again
                self._stop_all(self.reason, [self.workers[name] for name in runs.values()])
            status.update(tail.read())
            if not self.config.run.quiet and time.monotonic() - last_draw >= (1.0 if tty else 30.0):
                last_draw = time.monotonic()
                say(("\r" if tty else "") + status.line(), end="" if tty else "\n")
            for ref in done:
                name = runs.pop(ref)
                code = self._result(ray, ref, name)
                if code and not failure:
                    failure = code
                if not self.stopping:
                    verb = "finished" if code == 0 else "failed"
                    say(f"\nrun: {name} {verb}; stopping the others", error=bool(code))
                    self._stop_all(f"{name} {verb}")
                    deadline = time.monotonic() + STOP_GRACE_S
        for name in runs.values():
            say(f"run: {name} did not stop in time; tearing the cluster down", error=True)
            failure = failure or 1
        status.update(tail.read())
        say(f"\nrun: done; {status.line(final=True)}; logdir {self.logdir}")
        if self.head_lost:
            say(self.resume_line(bool(runs)), error=True)
            failure = failure or 1
        return failure

    def resume_line(self, cut_short: bool) -> str:
        """What a lost head left: the steps kept, where the unshipped ones wait, how to go on."""
        from dreamer_live.transport import raylink  # imports Ray

        kept = folder_steps(self.logdir / "replay")
        waiting = sum(raylink.steps_waiting(self.config, self.logdir, self.config.actor.id + k)
                      for k in range(self.config.ray.actors))
        lost = ("; a loop that did not stop in time lost what it held in memory (an actor: its "
                "partial chunk)" if cut_short else "")
        back = ("run the same command again" if self.config.ray.address == "local" else
                "start the cluster's head again (ray start --head), then the same command")
        return (f"run: the Ray cluster's head is gone: {self.logdir / 'replay'} keeps {kept} steps, "
                f"{waiting} more wait in the actors' outboxes on this machine (shipped when the run "
                f"goes on){lost}. To resume (the learner from its checkpoint): {back}")

    def _result(self, ray, ref, name: str) -> int:
        try:
            code, words = ray.get(ref)
            say_last_words(words)  # the loop's summary: Ray's log relay may not get there in time
            return int(code or 0)
        except ray.exceptions.RayTaskError as e:
            cause = e.cause if isinstance(e.cause, BaseException) else e
            said = isinstance(cause, (UserError, RunFailure))  # one line of its own, as a command's
            say(f"run: {name}: {'error: ' if said else ''}{str(cause).strip().splitlines()[-1]}",
                error=True)
            return 2 if isinstance(cause, UserError) else 1
        except ray.exceptions.RayError as e:  # died more often than ray.max_restarts
            say(f"run: {name} is gone: {type(e).__name__}", error=True)
            return 1

    def _stop_all(self, reason: str, workers=None) -> None:
        self.stopping, self.reason, self.asked = True, reason, time.monotonic()
        for worker in self.workers.values() if workers is None else workers:
            worker.stop.remote(reason)  # queued by Ray for a worker being restarted

    def shutdown(self) -> None:
        """Tear a private cluster down (every process of it); leave a joined one (its actors of this
        run go with the connection)."""
        ray = sys.modules.get("ray")
        if ray is not None and ray.is_initialized():
            # a private cluster's agents outlive a head that died first: end what the run started
            started = (start_times(descendants(os.getpid()))
                       if self.config.ray.address == "local" else {})
            ray.shutdown()
            if left := kill_leftovers(started):
                say(f"run: ended {len(left)} processes the private Ray cluster left behind "
                    f"({', '.join(sorted(set(left)))})", error=True)


def launch(config, logdir: pathlib.Path) -> int:
    """Run the learner and ray.actors actors on Ray until they end or Ctrl-C; return the exit status."""
    address = raycluster.check_address(config.ray.address)
    run = RayRun(config, logdir)
    try:
        run.start()
        kind = ("a private Ray cluster (loopback only)" if address == "local"
                else "the Ray cluster joined")
        auth = raycluster.AUTH_ENV
        token = f"{auth}=token " if os.environ.get(auth, "").lower() == "token" else ""
        print(f"run: {config.ray.actors} actors and the learner on {kind} at {run.where}, in "
              f"{run.logdir}. More actors join with: {token}python -m dreamer_live.actor --logdir "
              f"{run.logdir} --ray.address {run.where.split()[0]} --actor.id K. Ctrl-C stops all.",
              flush=True)
        return run.watch()
    finally:
        run.shutdown()
