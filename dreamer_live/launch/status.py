"""What the two launchers share: the combined status line (`Status`), the signals that stop a run and
how long a child asked to stop gets."""

from __future__ import annotations

import collections
import signal

from dreamer_live.pacer import load_note
from dreamer_live.transport import silent_note

STOP_GRACE_S = 120.0  # a child asked to stop gets this long (the learner saves a checkpoint)
# Signals that stop a run cleanly; SIGHUP: the terminal that started it closed.
STOP_SIGNALS = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP")
                     if hasattr(signal, name))


class Status:
    """The launcher's combined status line, built from the children's metric lines (per actor)."""

    def __init__(self, hz: float, silent_after_s: float):
        self.hz = hz  # the actors' tick rate
        self.silent_after_s = silent_after_s  # transport.silent_after_s: the actors' rule
        self.actors: dict[int, dict] = {}  # actor/id -> its newest ticks line
        self.learner: dict = {}
        self.returns: collections.deque = collections.deque(maxlen=20)
        self.first_returns: list[float] = []

    def update(self, records: list[dict]) -> None:
        """Fold new metric records in."""
        for r in records:
            if r.get("source") == "actor":
                if r.get("episode/return") is not None:
                    self.returns.append(r["episode/return"])
                    if len(self.first_returns) < 20:
                        self.first_returns.append(r["episode/return"])
                elif "actor/ticks_per_s" in r:
                    self.actors[r.get("actor/id", 0)] = r
            elif r.get("source") == "learner" and "learner/updates_per_s" in r:
                self.learner = r

    def line(self, final: bool = False) -> str:
        """One line: each actor's speed, lateness and policy version (and lag), returns, learner
        progress, and `learner silent N s` when the actors have not heard from it (their rule). The
        `final` line (a run's last) gives the learner's average rate over the run, not its last window's."""
        lr = self.learner
        parts = []
        for key, a in sorted(self.actors.items()):
            name = "actor" if len(self.actors) == 1 else f"actor {key}:"
            lag = f" lag {a['actor/policy_lag_steps']:.0f}" if a.get("actor/policy_lag_steps") else ""
            shipped = f" shipped {a['ray/steps_shipped']}" if "ray/steps_shipped" in a else ""
            parts.append(f"{name} {a.get('step', 0)} steps {a.get('actor/ticks_per_s') or 0:.1f}/s "
                         f"late {a.get('actor/late_ticks', 0)} "
                         f"policy v{a.get('actor/policy_version', 0)}{lag}{shipped}")
            loaded = load_note(self.hz, a.get("actor/late_frac") or 0.0, a.get("actor/late_window", 0))
            if loaded:
                parts.append(loaded)
        if self.returns:
            mean = sum(self.returns) / len(self.returns)
            first = sum(self.first_returns) / len(self.first_returns)
            parts.append(f"return {mean:.2f} (first episodes {first:.2f})")
        if lr:
            run_rate = lr.get("learner/updates_per_s_run")
            rate = (f"{run_rate:.2f}/s on average" if final and run_rate is not None
                    else f"{lr.get('learner/updates_per_s') or 0:.2f}/s")
            parts.append(f"learner {lr.get('step', 0)} upd {rate} ratio {lr.get('learner/train_ratio') or 0:.1f}")
        silent = self._silent()
        if silent:
            parts.append(silent)
        return " | ".join(parts) or "starting..."

    def warnings(self) -> frozenset[str]:
        """The warnings the line holds now (silent, loaded): a new one is shown at once."""
        loaded = any(load_note(self.hz, a.get("actor/late_frac") or 0.0, a.get("actor/late_window", 0))
                     for a in self.actors.values())
        return frozenset(name for name, on in (("silent", self._silent()), ("loaded", loaded)) if on)

    def _silent(self) -> str:
        """The silent note of the actor that heard from the learner last ('' while it is not silent)."""
        heard = [a["actor/learner_silent_s"] for a in self.actors.values()
                 if a.get("actor/learner_silent_s") is not None]
        return silent_note(min(heard), self.silent_after_s) if heard else ""
