"""The learner's disk writes while it trains (parameters, checkpoints, heartbeat), off its thread."""

from __future__ import annotations

import collections
import threading
import time
from collections.abc import Callable

SLOW_S = 1.0  # a write that takes this long is said in one line (a slow share, a USB disk; a local one: ms)


class Writes:
    """Each write on a thread of its own, at most one of a kind at a time: training never waits on
    the disk. A write that comes due while the previous one of its kind is still going is skipped and
    counted; the first that takes SLOW_S or more is said in one line, and `slow()` names the slowest
    of each kind for the status line."""

    def __init__(self, say: Callable[[str], None]):
        self.say = say
        self.skipped: collections.Counter = collections.Counter()  # kind -> writes skipped, one going
        self.slowest: dict[str, float] = {}  # kind -> seconds of its slowest write, SLOW_S or more
        self._going: dict[str, threading.Thread] = {}

    def submit(self, kind: str, where: str, write: Callable[[], object],
               done: Callable[[object], None] | None = None) -> bool:
        """Start write() (then done(its result)) unless one of `kind` is still going; whether it started."""
        going = self._going.get(kind)
        if going is not None and going.is_alive():
            self.skipped[kind] += 1
            return False

        def run():
            began = time.monotonic()
            result = write()
            took = time.monotonic() - began
            if done is not None:
                done(result)
            if took >= SLOW_S:
                if not self.slowest:
                    self.say(f"learner: writing {kind} to {where} took {took:.1f} s (a slow disk?); "
                             "training goes on, and a write due while the last is going is skipped")
                self.slowest[kind] = max(took, self.slowest.get(kind, 0.0))

        thread = threading.Thread(target=run, name=f"write-{kind}", daemon=True)
        self._going[kind] = thread
        thread.start()
        return True

    def wait(self, timeout: float) -> None:
        """Until every write started has ended, at most `timeout` s (said in one line if not)."""
        deadline = time.monotonic() + timeout
        for kind, thread in list(self._going.items()):
            thread.join(max(0.0, deadline - time.monotonic()))
            if thread.is_alive():
                self.say(f"learner: writing {kind} still going after {timeout:.0f} s; going on without it")

    def slowest_s(self) -> float:
        """Seconds of the slowest write of SLOW_S or more so far; 0 if none."""
        return max(dict(self.slowest).values(), default=0.0)  # a copy: the writers add to it

    def slow(self) -> str:
        """'slow disk: checkpoint 12 s, publish 6 s (3 skipped)' once a write took SLOW_S; else ''."""
        slowest = dict(self.slowest)  # a copy: the writers add to it
        if not slowest:
            return ""
        parts = [f"{kind} {s:.0f} s" for kind, s in sorted(slowest.items(), key=lambda x: -x[1])]
        skipped = sum(self.skipped.values())
        return "slow disk: " + ", ".join(parts) + (f" ({skipped} skipped)" if skipped else "")
