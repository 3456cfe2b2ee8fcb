"""The one real-time clock: absolute deadlines, lateness measured and never absorbed.

Every loop that runs on the wall clock uses it: the actor's ticks, a built-in game's frames
(`GameEnv`), a paced lockstep env (`RealtimeRunner`), a real-time gymnasium env's steps and the
stand-alone keyboard mode. Tick i is due at start + i / hz. `wait()` sleeps to the next deadline (a
coarse sleep, then an optional short spin for sub-millisecond precision) and returns how late the tick
begins. A late tick does not shift the schedule to hide it. A loop that fell behind by more than
`catch_up_s` skips the missed slots (counted in `missed`) and keeps the grid instead of running a burst
of ticks against a game that did not wait; within `catch_up_s` it runs them back to back (a game's
frames catch up with wall time, as a game does after a hiccup). Time that is not play (an episode's
reset, waiting for the game) is not lateness: `restart()` begins a new grid at the tick starting now.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

CATCH_UP_S = 0.25  # a game clock this far behind skips frames instead of running them back to back


class Pacer:
    """Sleeps to absolute tick deadlines and measures each tick's lateness."""

    def __init__(self, hz: float, late_ms: float = 5.0, spin_s: float = 0.002, catch_up_s: float = 0.0,
                 clock: Callable[[], float] = time.perf_counter,
                 sleep: Callable[[float], None] = time.sleep):
        if not hz > 0:
            raise ValueError(f"tick rate must be positive, got {hz}")
        self.period = 1.0 / hz
        self.late_ms = late_ms  # a tick starting later than this counts as late
        self.spin_s, self.catch_up_s = spin_s, catch_up_s
        self._clock, self._sleep = clock, sleep
        self._next: float | None = None
        self.ticks = 0
        self.late = 0  # ticks that began more than late_ms after their deadline
        self.missed = 0  # tick slots skipped after falling behind
        self.restarts = 0

    def start(self, delay: float = 0.0) -> None:
        """Restart the grid: the next tick is due `delay` seconds from now."""
        self._next = self._clock() + delay

    def restart(self) -> None:
        """The tick beginning now starts a new grid (after a reset): the next is due one period later."""
        self._next = self._clock() + self.period
        self.restarts += 1

    def wait(self, stop: threading.Event | None = None) -> float:
        """Sleep until the next tick is due, or until `stop` is set (then return 0 at once); return
        the tick's lateness in milliseconds (>= 0)."""
        if self._next is None:
            self.start()
        deadline = self._next
        remaining = deadline - self._clock()
        if remaining > self.spin_s:
            if stop is None:
                self._sleep(remaining - self.spin_s)
            elif stop.wait(remaining - self.spin_s):
                return 0.0
        while self._clock() < deadline:
            pass
        lateness = max(0.0, self._clock() - deadline)
        skipped = int(lateness // self.period) if lateness > self.catch_up_s else 0
        self.missed += skipped
        self._next = deadline + (skipped + 1) * self.period
        self.ticks += 1
        late_ms = lateness * 1000.0
        if late_ms > self.late_ms:
            self.late += 1
        return late_ms
