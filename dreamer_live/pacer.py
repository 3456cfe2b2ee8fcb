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

This module also owns what *late* means, everywhere (the actor's count, the status lines, the cadence
benchmark): a tick that begins more than LATE_SHARE of its period after its deadline. A stretch of ticks
of which more than LOADED_SHARE, and at least LOADED_MIN_LATE, were late says the machine is too loaded
to hold the rate. A tick later than GAP_PERIODS periods (GAP_MIN_S at least) is no load but a gap: the
process was stopped or the machine slept (SIGSTOP, a laptop lid); it counts in `gaps`, neither late nor
missed, and the grid starts again from it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

CATCH_UP_S = 0.25  # a game clock this far behind skips frames instead of running them back to back
LATE_SHARE = 0.1  # a tick beginning more than this share of its period after its deadline is late
LOADED_SHARE = 0.05  # more late ticks than this share of a stretch: too loaded to hold the rate
LOADED_MIN_LATE = 3  # ... and at least this many: one late tick in a short stretch is no sustained load
GAP_PERIODS, GAP_MIN_S = 20, 2.0  # a tick later than both: the process was stopped, not loaded


def late_limit_ms(hz: float) -> float:
    """The lateness in milliseconds beyond which a tick at `hz` counts as late."""
    return LATE_SHARE * 1000.0 / hz


def gap_ms(hz: float) -> float:
    """The lateness in milliseconds beyond which a tick at `hz` ends a gap (a stopped process)."""
    return max(GAP_MIN_S, GAP_PERIODS / hz) * 1000.0


def load_note(hz: float, late_frac: float, late: int = LOADED_MIN_LATE) -> str:
    """'' while the share of late ticks is within LOADED_SHARE or fewer than LOADED_MIN_LATE were late;
    else a status-line note saying so."""
    if not late_frac > LOADED_SHARE or late < LOADED_MIN_LATE:
        return ""
    return f"too loaded to hold {hz:g} Hz: {late_frac:.0%} of ticks late"


class Pacer:
    """Sleeps to absolute tick deadlines and measures each tick's lateness."""

    def __init__(self, hz: float, spin_s: float = 0.002, catch_up_s: float = 0.0,
                 clock: Callable[[], float] = time.perf_counter,
                 sleep: Callable[[float], None] = time.sleep):
        if not hz > 0:
            raise ValueError(f"tick rate must be positive, got {hz}")
        self.hz, self.period = hz, 1.0 / hz
        self.late_ms = late_limit_ms(hz)  # a tick starting later than this counts as late
        self.gap_ms = gap_ms(hz)  # ... later than this, it ends a gap: counted in gaps instead
        self.spin_s, self.catch_up_s = spin_s, catch_up_s
        self._clock, self._sleep = clock, sleep
        self._next: float | None = None
        self.ticks = 0
        self.late = 0  # ticks that began more than late_ms after their deadline
        self.missed = 0  # tick slots skipped after falling behind
        self.gaps = 0  # ticks that began more than gap_ms late: the process was stopped
        self.restarts = 0
        self._noted = (0, 0)  # (ticks, late) when load() was last asked

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
        if lateness * 1000.0 > self.gap_ms:
            self.gaps += 1
            self.ticks += 1
            self._next = self._clock() + self.period
            return lateness * 1000.0
        skipped = int(lateness // self.period) if lateness > self.catch_up_s else 0
        self.missed += skipped
        self._next = deadline + (skipped + 1) * self.period
        self.ticks += 1
        late_ms = lateness * 1000.0
        if late_ms > self.late_ms:
            self.late += 1
        return late_ms

    def load(self) -> tuple[float, int, str]:
        """(share of late ticks, late ticks, load_note) over the ticks since the last call."""
        ticks, late = self.ticks - self._noted[0], self.late - self._noted[1]
        self._noted = (self.ticks, self.late)
        late_frac = late / ticks if ticks else 0.0
        return late_frac, late, load_note(self.hz, late_frac, late)
