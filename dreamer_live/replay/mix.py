"""Demonstrations mixed into training batches: a replay source drawing a fixed share of each batch from
recorded human play (DIR/demos, written by `python -m dreamer_live.record`) and the rest from the
actor's replay, at replay.demo_fraction."""

from __future__ import annotations

import numpy as np

from dreamer_live.errors import UserError
from dreamer_live.steps import STEP_ID


def demo_batch(fraction: float, batch: int) -> int:
    """Sequences of a `batch` drawn from demonstrations: at least 1 when fraction > 0, at most batch - 1."""
    if fraction <= 0:
        return 0
    return min(batch - 1, max(1, round(fraction * batch)))


class DemoMix:
    """A replay source whose batches hold `demos.batch` sequences of demonstrations after the replay's;
    all from replay while the demonstrations cannot give a sequence yet."""

    def __init__(self, replay, demos):
        self.replay, self.demos = replay, demos

    @property
    def num_steps(self) -> int:
        """Steps held from the actor (the train ratio counts these)."""
        return self.replay.num_steps

    def steps_written(self) -> int:
        """Env steps the actors have written in all (the train ratio's denominator; not the demos')."""
        return self.replay.steps_written()

    def refresh(self) -> int:
        """Take in new chunks of both folders; return the number of new steps."""
        return self.replay.refresh() + self.demos.refresh()

    def ready(self, length: int | None = None) -> bool:
        """Whether the actor's replay can give a sequence of `length` steps."""
        return self.replay.ready(length)

    def sample(self) -> dict[str, np.ndarray]:
        """A batch: the replay's sequences, then the demonstrations'."""
        if not self.demos.ready():
            return self.replay.sample(self.replay.batch + self.demos.batch)
        own, demos = self.replay.sample(), self.demos.sample()
        differ = [k for k in own if k not in demos or demos[k].shape[2:] != own[k].shape[2:]]
        if differ:
            raise UserError(
                f"the demonstrations in {self.demos.directory} do not hold what the replay holds: "
                + ", ".join(f"{k} {own[k].shape[2:]} against "
                            f"{demos[k].shape[2:] if k in demos else 'none'}" for k in differ)
                + " (recorded with other env.obs or env.size settings?); record them again")
        if STEP_ID in demos:  # another reader's ids: not stored, demonstrations start from zero
            demos[STEP_ID] = np.full_like(demos[STEP_ID], -1)
        return {k: np.concatenate([own[k], demos[k]]) for k in own}

    def close(self) -> None:
        """Stop both readers."""
        try:
            self.replay.close()
        finally:
            self.demos.close()
