"""Env wrapper figures: the real-time runner's achieved rate, and the cost per step of the wrapper stack.

    .venv/bin/python bench/env_wrappers.py [--seconds 2]
    .venv/bin/python bench/env_wrappers.py --smoke      # 0.5 s per rate, 2000 steps

Prints steps/s the RealtimeRunner achieves against its target (ratio), and microseconds per CartPole step bare
vs. with every progress/time wrapper on (ratio).
"""

from __future__ import annotations

import argparse
import time

import gymnasium
import numpy as np
from smoke import add_smoke

from dreamer_live import config as configlib
from dreamer_live.envs import apply_wrappers, base_env
from dreamer_live.envs.base import Env, step_spaces
from dreamer_live.envs.realtime import RealtimeRunner


class LogX(Env):
    """CartPole with its cart position exported as log/x, so the progress wrappers have a value."""

    def __init__(self, env: Env):
        self.env, self.obs_space, self.act_space = env, env.obs_space, env.act_space

    def reset(self):
        """Reset, adding log/x."""
        return self._x(self.env.reset())

    def act(self, action):
        """Pass on."""
        self.env.act(action)

    def observe(self):
        """Observe, adding log/x."""
        return self._x(self.env.observe())

    def close(self):
        """Close."""
        self.env.close()

    @staticmethod
    def _x(obs):
        return {**obs, "log/x": obs["vector"][0] * 100}


class Endless(Env):
    """A lockstep env whose episode never ends (CartPole falls within seconds and stops the world)."""

    def __init__(self):
        self.obs_space = {"vector": gymnasium.spaces.Box(-np.inf, np.inf, (1,), np.float32),
                          **step_spaces()}
        self.act_space = gymnasium.spaces.Discrete(2)
        self.count = 0

    def reset(self):
        """Start counting."""
        self.count = 0
        return self.observe(first=True)

    def act(self, action):
        """Count a step."""
        self.count += 1

    def observe(self, first=False):
        """The count."""
        return {"vector": np.array([self.count], np.float32), "reward": np.array(1.0, np.float32),
                "is_first": np.array(first), "is_last": np.array(False), "is_terminal": np.array(False)}


def realtime_rate(hz: float, seconds: float) -> tuple[float, float]:
    """Steps per second a RealtimeRunner achieves over `seconds`, and the steps it skipped."""
    env = RealtimeRunner(Endless(), hz)
    env.reset()
    time.sleep(0.5)
    env.metrics()  # the rate is measured from here: no start-up fencepost in the figure
    time.sleep(seconds)
    figures = env.metrics()
    rate = figures["realtime/steps_per_s"]
    env.close()
    return rate, figures["realtime/skipped_steps"]


def step_us(cfg, steps: int, wrapped: bool) -> float:
    """Microseconds per act+observe on CartPole, bare or through the configured wrappers."""
    env = LogX(base_env(cfg))
    env = apply_wrappers(env, cfg) if wrapped else env
    action = np.array([1.0, 0.0], np.float32)
    env.reset()
    start = time.perf_counter()
    for i in range(steps):
        obs = env.step(action if i % 2 else action[::-1])
        if obs["is_last"]:
            env.reset()
    return (time.perf_counter() - start) / steps * 1e6


def main() -> None:
    """Print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=2.0, help="seconds per real-time rate")
    parser.add_argument("--steps", type=int, default=20000, help="steps per overhead measurement")
    add_smoke(parser)
    args = parser.parse_args()
    if args.smoke:
        args.seconds, args.steps = 0.5, 2000
    print("realtime: target hz, achieved steps/s, ratio, skipped steps")
    for hz in (15.0, 60.0, 240.0):
        rate, skipped = realtime_rate(hz, args.seconds)
        print(f"  {hz:6.1f}  {rate:8.2f}  {rate / hz:.4f}  {skipped:.0f}")
    cfg = configlib.resolve(["cartpole"], {
        "env.progress_key": "x", "env.stagnation.seconds": 5.0, "env.teleport.absolute": 50.0,
        "env.milestone.every": 10.0, "env.deathzone.radius": 5.0, "env.time_cap_steps": 400,
        "env.frame_stack": 4})
    bare = step_us(cfg, args.steps, wrapped=False)
    wrapped = step_us(cfg, args.steps, wrapped=True)
    print(f"CartPole step: bare {bare:.1f} us, 6 wrappers {wrapped:.1f} us, "
          f"ratio {wrapped / bare:.2f}, wrapper cost {wrapped - bare:.1f} us/step")


if __name__ == "__main__":
    main()
