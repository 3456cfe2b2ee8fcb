"""Every built-in game as a registered gymnasium env: `gymnasium.make("dreamer_live/Catcher-v0")`.

Registered when `dreamer_live.envs` is imported (or `gymnasium.make("dreamer_live.envs:dreamer_live/
Catcher-v0")` without importing it first). Options: clock ("lockstep" | "realtime"), obs ("vector" |
"image" | "both": a Box, or a Dict of both), frame_skip, render_mode ("rgb_array" | "human"), seed and
any game option. Actions are Discrete indices into the game's action table.

A PLE game of your own (dreamer_live.ple) runs as `gymnasium.make("dreamer_live/PLE-v0", game=MyGame)`
(a PyGameWrapper class, or "my_module:MyGame"), its options beside; `fps` is PLE's fps (default 30).
"""

from __future__ import annotations

import re

import gymnasium
import numpy as np

from dreamer_live.envs import games  # GAMES imports the game modules on first use
from dreamer_live.envs.ple_game import load_game
from dreamer_live.pacer import Pacer

NAMESPACE = "dreamer_live"
PLE_ID = f"{NAMESPACE}/PLE-v0"
_ID = re.compile(rf"^{NAMESPACE}/(\w+)-v0$")


def game_id(name: str) -> str:
    """The gymnasium id of a built-in game: "Catcher" -> "dreamer_live/Catcher-v0"."""
    return f"{NAMESPACE}/{name}-v0"


def game_name(env_id: str) -> str | None:
    """The built-in game an id names ("dreamer_live/Catcher-v0" -> "Catcher"), or None."""
    match = _ID.match(env_id)
    return match.group(1) if match else None


class GameGymEnv(gymnasium.Env):
    """A built-in Game as a gymnasium.Env (lockstep or real time).

    In real time the game runs on its own clock; `step` holds the action and returns once frame_skip
    frames of wall time have passed since the previous step (at once if the caller is already later).
    """

    metadata = {"render_modes": ["rgb_array", "human"], "render_fps": 30}

    def __init__(self, game: str, clock: str = "lockstep", obs: str = "vector", frame_skip: int = 1,
                 render_mode: str | None = None, release_after: float = 0.5, seed: int | None = None,
                 **game_kwargs):
        if isinstance(game, str) and game in games.GAMES:
            self._game = games.GAMES[game](seed=seed, **game_kwargs)
        else:  # a PLE game: a PyGameWrapper class or "module:Class"
            self._game = load_game(game, seed=seed, window=render_mode == "human", **game_kwargs)
        self.render_mode, self.obs_kind = render_mode, obs
        inner_obs = "both" if render_mode == "rgb_array" and obs == "vector" else obs
        self._env = games.GameEnv(self._game, clock=clock, obs=inner_obs, frame_skip=frame_skip,
                            window=render_mode == "human", release_after=release_after)
        keys = [k for k in ("image", "vector") if obs in (k, "both")]
        spaces = {k: self._env.obs_space[k] for k in keys}
        self.observation_space = spaces[keys[0]] if len(keys) == 1 else gymnasium.spaces.Dict(spaces)
        self.action_space = gymnasium.spaces.Discrete(self._env.act_space.n)
        self.metadata = {**self.metadata, "render_fps": self._game.fps}
        # real time: one step per frame_skip game frames of wall time
        self._pacer = Pacer(self._game.fps / frame_skip, spin_s=0.0) if clock == "realtime" else None
        self._frame: np.ndarray | None = None

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        """Start an episode (a seed reseeds the game's random stream)."""
        super().reset(seed=seed)
        if seed is not None:
            self._game.rng = np.random.default_rng(seed)
        obs = self._env.reset()
        if self._pacer is not None:
            self._pacer.start(delay=self._pacer.period)
        return self._split(obs), {}

    def step(self, action):
        """Hold the action for one step; return (obs, reward, terminated, truncated, info)."""
        self._env.act(int(action))
        if self._pacer is not None:
            self._pacer.wait()
        obs = self._env.observe()
        terminated = bool(obs["is_terminal"])
        truncated = bool(obs["is_last"]) and not terminated
        return self._split(obs), float(obs["reward"]), terminated, truncated, {}

    def render(self):
        """The latest frame (rgb_array); the window updates itself in "human" mode."""
        return self._frame if self.render_mode == "rgb_array" else None

    def close(self):
        """Stop the game."""
        self._env.close()

    def _split(self, obs: dict) -> np.ndarray | dict:
        if "image" in obs:
            self._frame = obs["image"]
        if isinstance(self.observation_space, gymnasium.spaces.Dict):
            return {k: obs[k] for k in self.observation_space.spaces}
        return obs["image" if self.obs_kind == "image" else "vector"]


def register_games() -> list[str]:
    """Register every built-in game (once), without importing the game modules, and PLE_ID; return the
    built-in games' ids."""
    ids = []
    for name in games.GAME_MODULES:
        env_id = game_id(name)
        if env_id not in gymnasium.registry:
            gymnasium.register(env_id, entry_point=f"{__name__}:GameGymEnv", kwargs={"game": name},
                               disable_env_checker=False)
        ids.append(env_id)
    if PLE_ID not in gymnasium.registry:  # a PLE game of your own: game=MyGame
        gymnasium.register(PLE_ID, entry_point=f"{__name__}:GameGymEnv", disable_env_checker=False)
    return ids
