"""The environment protocol every game goes through: act, then (a tick later) observe.

A real-time game cannot be stepped: the actor sends an action (keys held from now on), sleeps to the
next tick, then observes what happened meanwhile. Lockstep games advance inside `act`. Observations are
dicts of numpy arrays in the agent's format:

    image        uint8  [H, W, C]     (when the observation kind includes pixels)
    vector       float32 [D]          (game state / low-dimensional observation)
    reward       float32 []           reward since the previous observation
    is_first     bool   []            first observation of an episode (from reset)
    is_last      bool   []            the episode ended here (terminal or truncated)
    is_terminal  bool   []            ended by the game (death / goal), not by a time cap

Actions are in the agent's format: a one-hot float32 [n] for Discrete spaces (argmax is taken), a
float32 [d] in [-1, 1] for Box spaces (rescaled to the bounds by the env).
"""

from __future__ import annotations

import abc

import gymnasium
import numpy as np


class Env(abc.ABC):
    """A game as the actor sees it: reset, act, observe, close."""

    obs_space: dict[str, gymnasium.spaces.Box]  # observation keys plus steps.FLAG_KEYS
    act_space: gymnasium.spaces.Space  # Discrete(n) or Box(low, high, (d,))

    @abc.abstractmethod
    def reset(self) -> dict[str, np.ndarray]:
        """Start an episode; return its first observation (is_first=True, reward=0)."""

    @abc.abstractmethod
    def act(self, action: np.ndarray) -> None:
        """Apply an action: held until the next act (real time) or advanced now (lockstep)."""

    @abc.abstractmethod
    def observe(self) -> dict[str, np.ndarray]:
        """The observation now, with the reward gathered since the previous observation."""

    def step(self, action: np.ndarray) -> dict[str, np.ndarray]:
        """act then observe, for lockstep use (tests, evaluation, data generation)."""
        self.act(action)
        return self.observe()

    def metrics(self) -> dict[str, float]:
        """Per-env figures for the actor's log (capture time, frame counter, ...)."""
        return {}

    def close(self) -> None:
        """Release keys and resources."""


def step_spaces() -> dict[str, gymnasium.spaces.Box]:
    """Spaces of the reward and episode flags that every observation carries."""
    flag = gymnasium.spaces.Box(0, 1, (), bool)
    return {"reward": gymnasium.spaces.Box(-np.inf, np.inf, (), np.float32),
            "is_first": flag, "is_last": flag, "is_terminal": flag}


def action_to_env(action: np.ndarray, space: gymnasium.spaces.Space):
    """Agent action (one-hot or [-1, 1]) to the env's native action (int or bounded floats)."""
    if isinstance(space, gymnasium.spaces.Discrete):
        return int(np.argmax(action)) + int(space.start)
    low, high = space.low, space.high
    return (low + (np.clip(action, -1, 1) + 1) / 2 * (high - low)).astype(space.dtype)
