"""Any gymnasium env as an Env: observation dict (`image` and/or `vector`), episode flags, agent actions.

Observations: a Box uint8 image space ([H, W, 3] or [H, W] / [H, W, 1]) becomes `image`; every other part
(Box, Discrete as one-hot, MultiBinary, Dict/Tuple members) is flattened into a float32 `vector`. When an
`image` is asked for and the env has no image space, it comes from `render()` (render_mode "rgb_array").
`terminated` maps to is_last + is_terminal, `truncated` (e.g. TimeLimit) to is_last alone. Actions arrive in
the agent's format (one-hot for Discrete, [-1, 1] for Box) and go through `action_to_env`. Gymnasium envs
are lockstep: `act` steps the env at once; run them in real time with the RealtimeRunner wrapper (env.pace_hz).
"""

from __future__ import annotations

import os

import gymnasium
import numpy as np

from dreamer_live.envs.base import Env, action_to_env, step_spaces
from dreamer_live.envs.namespaces import import_namespace
from dreamer_live.errors import UserError

OBS_KINDS = ("vector", "image", "both")


def is_image_space(space: gymnasium.spaces.Space) -> bool:
    """A uint8 Box shaped [H, W] or [H, W, 1|3]."""
    if not isinstance(space, gymnasium.spaces.Box) or space.dtype != np.uint8:
        return False
    return len(space.shape) == 2 or (len(space.shape) == 3 and space.shape[-1] in (1, 3))


def _as_image(array: np.ndarray) -> np.ndarray:
    array = np.asarray(array, np.uint8)
    return array[..., None] if array.ndim == 2 else array


def make_gym(name: str, render: bool = False, kwargs: dict | None = None) -> gymnasium.Env:
    """gymnasium.make(name, **kwargs) with an unknown id or bad option reported as a UserError."""
    kwargs = dict(kwargs or {})
    if render:
        os.environ.setdefault("SDL_VIDEODRIVER", "dummy")  # classic-control rendering needs no screen
        kwargs.setdefault("render_mode", "rgb_array")
    import_namespace(name)
    try:
        return gymnasium.make(name, **kwargs)
    except gymnasium.error.Error as e:
        raise UserError(f"cannot make gymnasium env '{name}': {str(e).splitlines()[0]}") from None
    except TypeError as e:
        raise UserError(f"bad env.kwargs for '{name}': {e}") from None


class GymEnv(Env):
    """A gymnasium env (or id) in the Env protocol, lockstep; `make_kwargs` go to gymnasium.make (an
    env's own `obs` or `seed` option among them)."""

    def __init__(self, env: gymnasium.Env | str, obs: str = "vector", seed: int | None = None,
                 make_kwargs: dict | None = None):
        if obs not in OBS_KINDS:
            raise UserError(f"env.obs must be one of {', '.join(OBS_KINDS)}, not {obs!r}")
        self._name = env if isinstance(env, str) else str(env.spec.id if env.spec else env)
        self.env = make_gym(env, render=obs != "vector", kwargs=make_kwargs) if isinstance(env, str) else env
        self._seed = seed
        space = self.env.observation_space
        self._image_key, vector_spaces = self._split(space)
        self._render = obs != "vector" and self._image_key is None
        self._vector_space = self._vector_space_of(vector_spaces, space)
        self.obs_space = {}
        if obs != "vector":
            self.obs_space["image"] = self._image_space(space)
        if obs != "image":
            if self._vector_space is None:
                raise UserError(f"{self._name} has no vector observation; use --env.obs image")
            size = gymnasium.spaces.flatdim(self._vector_space)
            self.obs_space["vector"] = gymnasium.spaces.Box(-np.inf, np.inf, (size,), np.float32)
        self.obs_space.update(step_spaces())
        self.act_space = self._action_space(self.env.action_space)
        self._obs: dict[str, np.ndarray] | None = None
        self._returned = False  # the pending observation was already returned once

    # --- Env protocol -------------------------------------------------------------------------------------
    def reset(self) -> dict[str, np.ndarray]:
        """Reset the gymnasium env (seeded on the first reset); return the first observation."""
        seed, self._seed = self._seed, None
        raw, _ = self.env.reset(seed=seed)
        self._obs = self._convert(raw, 0.0, True, False, False)
        self._returned = True
        return self._obs

    def act(self, action: np.ndarray) -> None:
        """Step the env now with the agent's action (one-hot or [-1, 1])."""
        if self._obs is None:
            raise RuntimeError("call reset() before act()")
        native = action_to_env(np.asarray(action, np.float32), self.act_space)
        raw, reward, terminated, truncated, _ = self.env.step(native)
        self._obs = self._convert(raw, reward, False, terminated or truncated, terminated)
        self._returned = False

    def observe(self) -> dict[str, np.ndarray]:
        """The observation after the last act (again, with reward 0, if observed twice)."""
        if self._obs is None:
            raise RuntimeError("call reset() before observe()")
        if self._returned:
            return {**self._obs, "reward": np.array(0.0, np.float32), "is_first": np.array(False)}
        self._returned = True
        return self._obs

    def close(self) -> None:
        """Close the gymnasium env."""
        self.env.close()

    # --- spaces -------------------------------------------------------------------------------------------
    @staticmethod
    def _split(space) -> tuple[str | None, dict | None]:
        """The Dict key (or "" for the whole space) that holds the image, and the remaining spaces."""
        if is_image_space(space):
            return "", None
        if isinstance(space, gymnasium.spaces.Dict):
            images = [k for k, s in space.spaces.items() if is_image_space(s)]
            rest = {k: s for k, s in space.spaces.items() if k not in images[:1]}
            return (images[0] if images else None), rest
        return None, None

    @staticmethod
    def _vector_space_of(vector_spaces: dict | None, space):
        if vector_spaces is None:
            return None if is_image_space(space) else space
        return gymnasium.spaces.Dict(vector_spaces) if vector_spaces else None

    def _image_space(self, space) -> gymnasium.spaces.Box:
        if self._image_key == "":
            shape = space.shape
        elif self._image_key is not None:
            shape = space[self._image_key].shape
        else:  # from render(): its size is known after a reset
            self.env.reset(seed=self._seed)
            frame = self._rendered()
            shape = frame.shape
        shape = tuple(shape) + ((1,) if len(shape) == 2 else ())
        return gymnasium.spaces.Box(0, 255, shape, np.uint8)

    def _action_space(self, space) -> gymnasium.spaces.Space:
        if isinstance(space, gymnasium.spaces.Discrete):
            return space
        if isinstance(space, gymnasium.spaces.Box) and len(space.shape) == 1:
            if not (np.all(np.isfinite(space.low)) and np.all(np.isfinite(space.high))):
                raise UserError(f"{self._name} has an unbounded Box action space; [-1, 1] cannot map to it")
            return space
        raise UserError(f"{self._name}: action space {space} is not supported (Discrete or 1-D Box)")

    # --- observations -------------------------------------------------------------------------------------
    def _rendered(self) -> np.ndarray:
        frame = self.env.render()
        if frame is None:
            raise UserError(f"{self._name} renders no rgb_array frame; use --env.obs vector")
        return _as_image(frame)

    def _convert(self, raw, reward, first: bool, last: bool, terminal: bool) -> dict[str, np.ndarray]:
        out = {}
        if "image" in self.obs_space:
            if self._render:
                out["image"] = self._rendered()
            else:
                out["image"] = _as_image(raw if self._image_key == "" else raw[self._image_key])
        if "vector" in self.obs_space:
            if isinstance(self._vector_space, gymnasium.spaces.Dict) and isinstance(raw, dict):
                raw = {k: raw[k] for k in self._vector_space.spaces}
            flat = gymnasium.spaces.flatten(self._vector_space, raw)
            out["vector"] = np.asarray(flat, np.float32).reshape(-1)
        out["reward"] = np.array(reward, np.float32)
        out["is_first"] = np.array(first, bool)
        out["is_last"] = np.array(last, bool)
        out["is_terminal"] = np.array(terminal, bool)
        return out
