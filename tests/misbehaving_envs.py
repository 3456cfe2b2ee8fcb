"""A gymnasium env that misbehaves from a given step of each episode, as a user's env might: the
actor is given it as env.name `misbehaving_envs:Misbehaving-v0` (tests/ on PYTHONPATH) with
env.kwargs `fault` and `at`. Importing this module registers the id."""

import gymnasium
import numpy as np

FAULTS = ("nan", "inf", "raise", "reshape")


class Misbehaving(gymnasium.Env):
    """A 4-value random walk with 2 actions and reward 1 per step, whose step `at` (and every later
    step of the episode) misbehaves: `nan` / `inf` put NaN / infinity in the observation, `raise`
    raises RuntimeError, `reshape` returns 5 values where the space declares 4."""

    def __init__(self, fault: str = "nan", at: int = 50, episode: int = 10_000):
        assert fault in FAULTS, fault
        self.fault, self.at, self.episode = fault, at, episode
        self.observation_space = gymnasium.spaces.Box(-np.inf, np.inf, (4,), np.float32)
        self.action_space = gymnasium.spaces.Discrete(2)
        self.t = 0
        self.state = np.zeros(4, np.float32)

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        self.state = self.np_random.normal(size=4).astype(np.float32)
        return self.state.copy(), {}

    def step(self, action):
        self.t += 1
        self.state = (self.state + self.np_random.normal(size=4) * 0.1).astype(np.float32)
        obs = self.state.copy()
        if self.t >= self.at:
            if self.fault == "raise":
                raise RuntimeError(f"the game crashed at step {self.t}")
            if self.fault == "reshape":
                obs = np.append(obs, np.float32(0))
            else:
                obs[:] = np.nan if self.fault == "nan" else np.inf
        return obs, 1.0, False, self.t >= self.episode, {}


gymnasium.register("Misbehaving-v0", entry_point=Misbehaving)
