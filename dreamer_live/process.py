"""Process manners for the actor and learner: graceful stop on signals, parent watch, CPU sharing."""

from __future__ import annotations

import os
import signal
import threading

# Set by dreamer_live.run for its children: the launcher's pid; a child stops when it is gone.
PARENT_ENV = "DREAMER_LIVE_PARENT"


class StopFlag:
    """Set by SIGINT/SIGTERM (first one: finish cleanly; a second one: stop now) or by a dead parent."""

    def __init__(self, name: str):
        self.name = name
        self.event = threading.Event()
        self.reason = ""
        self._parent = int(os.environ.get(PARENT_ENV, "0") or 0)
        self._signals = 0

    def install(self) -> StopFlag:
        """Install the signal handlers (main thread only)."""
        signal.signal(signal.SIGINT, self._handle)
        signal.signal(signal.SIGTERM, self._handle)
        return self

    def _handle(self, signum, frame) -> None:
        self._signals += 1
        if self._signals > 1:  # asked twice: the person wants it gone now
            raise KeyboardInterrupt
        self.set(signal.Signals(signum).name)

    def set(self, reason: str) -> None:
        """Ask the loop to stop, giving the reason shown on exit."""
        if not self.event.is_set():
            self.reason = reason
            self.event.set()

    def __bool__(self) -> bool:
        if not self.event.is_set() and self._parent and os.getppid() != self._parent:
            self.set("launcher exited")
        return self.event.is_set()

    def wait(self, seconds: float) -> bool:
        """Sleep up to `seconds`, waking early when stopped; return whether stopped."""
        return self.event.wait(seconds) or bool(self)


# Fastest actor tick rate beside which the learner takes every core by default. With the learner on
# core 0 too, the actor's ticks began up to 4 ms late on a 2-core VM (one 250 Hz kernel tick:
# bench/cadence.py, 60 Hz), which is under 10% of the period only at 25 Hz and below.
ALL_CORES_MAX_HZ = 25.0


def learner_threads(threads: int, actor_hz: float) -> int:
    """The learner.threads to apply: 0 (auto) becomes every core at actor ticks of ALL_CORES_MAX_HZ
    or slower, every core but core 0 above."""
    if threads == 0 and actor_hz > ALL_CORES_MAX_HZ:
        return -1
    return threads


def share_cpu(threads: int, nice: int, idle: bool) -> str:
    """Lower this process's priority below the actor's and optionally confine it to fewer cores.

    Must run before JAX is imported: XLA sizes its CPU thread pool from the cores this process may
    use, and its threads inherit the priority. idle: Linux's SCHED_IDLE, under which the learner runs
    only on CPU time no normal process wants, so a waking actor always takes the core at once.
    threads: 0 = every core, -1 = every core but core 0, N = at most N cores (core 0 last); see
    learner_threads for the default.
    Returns a short description for the log.
    """
    notes = []
    if nice > 0 and hasattr(os, "nice"):
        try:
            os.nice(nice)
            notes.append(f"nice +{nice}")
        except OSError:
            pass
    if idle and hasattr(os, "SCHED_IDLE"):
        try:
            os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
            notes.append("idle priority")
        except OSError:
            pass
    cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    if threads and len(cores) > 1:
        keep = len(cores) - 1 if threads < 0 else min(threads, len(cores))
        chosen = (cores[1:] + cores[:1])[:keep]  # core 0 goes last: the actor keeps it
        os.sched_setaffinity(0, chosen)
        notes.append(f"cores {','.join(map(str, sorted(chosen)))} of {len(cores)}")
    elif cores:
        notes.append(f"all {len(cores)} cores")
    return ", ".join(notes) or "no CPU limits"
