"""Tick scheduler for the real-time loop: absolute deadlines, lateness measured and never absorbed.

Tick i is due at start + i / hz. `wait()` sleeps to the next deadline (a coarse sleep, then a short
spin for sub-millisecond precision) and returns how late the tick begins. A tick that begins after its
deadline is late by that much; the schedule does not shift to hide it. When a tick overruns whole
periods, the missed slots are skipped (counted in `missed`) so the loop keeps the game's grid instead of
running a burst of catch-up ticks against a game that did not wait.
"""

from __future__ import annotations

import time
from collections.abc import Callable


class Pacer:
    """Sleeps to absolute tick deadlines and measures each tick's lateness."""

    def __init__(self, hz: float, late_ms: float = 5.0, spin_s: float = 0.002,
                 clock: Callable[[], float] = time.perf_counter,
                 sleep: Callable[[float], None] = time.sleep):
        if hz <= 0:
            raise ValueError(f"tick rate must be positive, got {hz}")
        self.period = 1.0 / hz
        self.late_ms = late_ms  # a tick starting later than this counts as late
        self.spin_s = spin_s
        self._clock = clock
        self._sleep = sleep
        self._next: float | None = None
        self.ticks = 0
        self.late = 0  # ticks that began more than late_ms after their deadline
        self.missed = 0  # whole tick slots skipped after an overrun

    def start(self) -> None:
        """Make the next tick due now."""
        self._next = self._clock()

    def wait(self) -> float:
        """Sleep until the next tick is due; return its lateness in milliseconds (>= 0)."""
        if self._next is None:
            self.start()
        deadline = self._next
        remaining = deadline - self._clock()
        if remaining > self.spin_s:
            self._sleep(remaining - self.spin_s)
        while self._clock() < deadline:
            pass
        lateness = max(0.0, self._clock() - deadline)
        skipped = int(lateness // self.period)
        self.missed += skipped
        self._next = deadline + (skipped + 1) * self.period
        self.ticks += 1
        late_ms = lateness * 1000.0
        if late_ms > self.late_ms:
            self.late += 1
        return late_ms

    def slack(self) -> float:
        """Seconds left before the next tick is due (negative when already late)."""
        return (self._next if self._next is not None else self._clock()) - self._clock()
