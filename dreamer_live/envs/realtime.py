"""RealtimeRunner: runs a lockstep env on its own clock, like a live game that never waits.

A background thread steps the wrapped env every 1/hz s of wall time with the action last sent (held, as
keys are held); `observe` returns the latest observation with the reward of every step since the previous
observe. When an episode ends the world stops on its last observation until `reset`. The agent's tick
rate (actor.hz) is independent of env.pace_hz: a slow agent misses steps, exactly as in a live game.
The thread keeps time with dreamer_live.pacer.Pacer, the clock of every real-time loop.
"""

from __future__ import annotations

import threading
import time

import gymnasium
import numpy as np

from dreamer_live.envs.base import Env
from dreamer_live.envs.wrappers import Wrapper
from dreamer_live.pacer import CATCH_UP_S, Pacer


def neutral_action(space: gymnasium.spaces.Space) -> np.ndarray:
    """The action held before the agent sends one: index 0 (discrete) or the middle of the bounds."""
    if isinstance(space, gymnasium.spaces.Discrete):
        action = np.zeros(space.n, np.float32)
        action[0] = 1.0
        return action
    return np.zeros(space.shape, np.float32)


class RealtimeRunner(Wrapper):
    """Steps a lockstep env at `hz` on the wall clock in a background thread, acted on or not."""

    def __init__(self, env: Env, hz: float):
        super().__init__(env)
        if hz <= 0:
            raise ValueError("RealtimeRunner needs hz > 0")
        self._pacer = Pacer(hz, spin_s=0.0, catch_up_s=CATCH_UP_S)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None
        self._action = neutral_action(self.act_space)
        self._latest: dict[str, np.ndarray] | None = None
        self._reward = 0.0
        self._done = False
        self._steps = 0
        self._rate_mark = (time.monotonic(), 0)

    def reset(self) -> dict[str, np.ndarray]:
        """Reset the wrapped env and let the world run from now (the neutral action held)."""
        self._raise()
        with self._lock:
            obs = self.env.reset()
            self._latest, self._reward, self._done = obs, 0.0, bool(obs["is_last"])
            self._action = neutral_action(self.act_space)
            self._pacer.start(delay=self._pacer.period)
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="realtime-runner", daemon=True)
            self._thread.start()
        return obs

    def act(self, action: np.ndarray) -> None:
        """Hold `action` from the next step on."""
        self._raise()
        with self._lock:
            self._action = np.array(action, np.float32)

    def observe(self) -> dict[str, np.ndarray]:
        """The latest observation with the reward of all steps since the previous observe."""
        self._raise()
        with self._lock:
            if self._latest is None:
                raise RuntimeError("call reset() before observe()")
            obs = {**self._latest, "reward": np.array(self._reward, np.float32),
                   "is_first": np.array(False)}
            self._reward = 0.0
        return obs

    def metrics(self) -> dict[str, float]:
        """realtime/steps_per_s (since the previous call), realtime/skipped_steps, realtime/steps, and
        the wrapped env's."""
        now = time.monotonic()
        with self._lock:
            inner, steps, skipped = self.env.metrics(), self._steps, self._pacer.missed
        then, then_steps = self._rate_mark
        self._rate_mark = (now, steps)
        rate = (steps - then_steps) / (now - then) if now > then else 0.0
        return {**inner, "realtime/steps_per_s": rate, "realtime/skipped_steps": float(skipped),
                "realtime/steps": float(steps)}

    def close(self) -> None:
        """Stop the clock thread, then close the wrapped env."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5.0)
        self.env.close()

    def _raise(self) -> None:
        """The wrapped env's own error from the clock thread, raised again here (its traceback
        shows the clock thread's frames), so a failure names the env's error, not this wrapper."""
        if self._error is not None:
            raise self._error

    def _run(self) -> None:
        try:
            while True:
                self._pacer.wait(self._stop)
                if self._stop.is_set():
                    return
                with self._lock:
                    if not self._done:
                        obs = self.env.step(self._action)
                        self._latest = obs
                        self._reward += float(obs["reward"])
                        self._done = bool(obs["is_last"])
                        self._steps += 1
        except BaseException as e:  # surfaced on the agent's next call
            self._error = e
