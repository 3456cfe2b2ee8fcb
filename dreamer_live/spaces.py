"""spaces.json: the game's observation and action spaces, saved by the actor beside its replay.

The learner builds the agent from this file, so it never has to start the game (a live game may run on
another machine). Written into the replay folder so that it travels with a copied replay.
"""

from __future__ import annotations

import json
import math
import os
import pathlib

import gymnasium
import numpy as np

from dreamer_live import steps
from dreamer_live.atomic import write_atomic
from dreamer_live.errors import UserError

FILE = "spaces.json"
# Sizes a spaces.json may declare: the agent is built from them, and a huge one would take the learner
# minutes (or all memory) to build, beyond Ctrl-C. Generous for games: 18 Atari actions, 1024x1024x4.
MAX_ACTIONS = 4096
MAX_OBS_ELEMENTS = 1 << 22
MAX_OBS_DIMS = 3


def _box(space: gymnasium.spaces.Box) -> dict:
    return {"shape": list(space.shape), "dtype": np.dtype(space.dtype).name,
            "low": np.asarray(space.low).tolist(), "high": np.asarray(space.high).tolist()}


def _unbox(data: dict) -> gymnasium.spaces.Box:
    dtype = np.dtype(data["dtype"])
    shape = tuple(int(n) for n in data["shape"])
    if len(shape) > MAX_OBS_DIMS or math.prod(shape) > MAX_OBS_ELEMENTS:
        raise ValueError(f"shape {shape} is beyond {MAX_OBS_DIMS} dimensions of "
                         f"{MAX_OBS_ELEMENTS} values")
    low = np.asarray(data["low"], np.float64 if dtype.kind == "f" else dtype)
    high = np.asarray(data["high"], np.float64 if dtype.kind == "f" else dtype)
    return gymnasium.spaces.Box(low.astype(dtype), high.astype(dtype), shape, dtype)


def action_dim(act_space: gymnasium.spaces.Space) -> int:
    """Length of the agent's action vector: one-hot over Discrete(n), or a Box flattened."""
    if isinstance(act_space, gymnasium.spaces.Discrete):
        return int(act_space.n)
    if isinstance(act_space, gymnasium.spaces.Box):
        return max(1, math.prod(act_space.shape))
    raise ValueError(f"unsupported action space {act_space}")


def obs_spec(obs_space: dict) -> dict:
    """What each observation key holds per step: key -> (shape, dtype), from its space."""
    return {key: (tuple(space.shape), np.dtype(space.dtype)) for key, space in obs_space.items()}


def replay_spec(obs_space: dict, act_space: gymnasium.spaces.Space) -> dict:
    """What every step in the actor's replay holds: key -> (per-step shape, dtype)."""
    spec = obs_spec(obs_space)
    spec[steps.ACTION] = ((action_dim(act_space),), np.dtype(np.float32))
    return {**spec, **{key: ((), dtype) for key, dtype in steps.TICK_DTYPES.items()}}


# The rules a step's values must keep, one definition each: the actor checks every observation with
# them (check_obs) before it reaches the policy or replay, and the learner every chunk it loads.
def misfit(key: str, shape: tuple, dtype, want: tuple) -> str:
    """'' when a per-step `shape` and `dtype` are `want` (a spec's (shape, dtype)), else why."""
    shape, dtype = tuple(shape), np.dtype(dtype)
    if (shape, dtype) == (tuple(want[0]), np.dtype(want[1])):
        return ""
    return f"'{key}' is {shape} {dtype}, expected {tuple(want[0])} {np.dtype(want[1])}"


def non_finite(key: str, array: np.ndarray) -> str:
    """'' unless `array` holds floats that are NaN or infinite; else how many."""
    if array.dtype.kind != "f" or np.isfinite(array).all():
        return ""
    count = int(np.count_nonzero(~np.isfinite(array)))
    return f"'{key}' holds {count} non-finite values (NaN or infinity)"


class ObservationError(ValueError):
    """An observation whose keys, shapes or dtypes are not its declared space's: the env is broken."""


def check_obs(obs: dict, spec: dict) -> str:
    """'' when the observation's `spec` keys (obs_spec) hold finite values, else why not; a key
    missing, or of another shape or dtype, raises ObservationError."""
    for key, want in spec.items():
        if key not in obs:
            raise ObservationError(f"'{key}' is missing")
        value = np.asarray(obs[key])
        wrong = misfit(key, value.shape, value.dtype, want)
        if wrong:
            raise ObservationError(wrong)
    for key in spec:
        bad = non_finite(key, np.asarray(obs[key]))
        if bad:
            return bad
    return ""


def _check_sizes(obs: dict, act: gymnasium.spaces.Space) -> None:
    if action_dim(act) > MAX_ACTIONS or (hasattr(act, "n") and int(act.n) < 1):
        raise ValueError(f"action space {act} is not 1 to {MAX_ACTIONS} actions")
    for key, box in obs.items():
        if len(box.shape) > MAX_OBS_DIMS or math.prod(box.shape) > MAX_OBS_ELEMENTS \
                or 0 in box.shape:
            raise ValueError(f"observation '{key}' has shape {box.shape}; at most {MAX_OBS_DIMS} "
                             f"dimensions of {MAX_OBS_ELEMENTS} values in all, none empty")
        if np.dtype(box.dtype).kind not in "biuf":
            raise ValueError(f"observation '{key}' has dtype {box.dtype}")


def to_json(obs_space: dict, act_space: gymnasium.spaces.Space) -> str:
    """The spaces as JSON text."""
    if isinstance(act_space, gymnasium.spaces.Discrete):
        act = {"kind": "discrete", "n": int(act_space.n), "start": int(act_space.start)}
    else:
        act = {"kind": "box", **_box(act_space)}
    obs = {key: _box(space) for key, space in obs_space.items()}
    return json.dumps({"obs": obs, "act": act}, indent=1) + "\n"


def save(directory: str | os.PathLike, obs_space: dict, act_space) -> pathlib.Path:
    """Write DIRECTORY/spaces.json (atomically; unchanged content is not rewritten)."""
    path = pathlib.Path(directory) / FILE
    text = to_json(obs_space, act_space)
    if not path.exists() or path.read_text() != text:
        write_atomic(path, text.encode())
    return path


def load(directory: str | os.PathLike):
    """(obs_space, act_space) from DIRECTORY/spaces.json, or None when there is no such file."""
    path = pathlib.Path(directory) / FILE
    if not path.exists():
        return None
    try:
        return parse(path.read_text())
    except ValueError as e:
        raise UserError(f"{path} is unreadable ({e})") from None


def parse(text: str):
    """(obs_space, act_space) from spaces.json's text; ValueError when it is not valid within the
    sizes allowed (to_json's output always is)."""
    try:
        data = json.loads(text)
        obs = {key: _unbox(box) for key, box in data["obs"].items()}
        act = data["act"]
        if act["kind"] == "discrete":
            if not isinstance(act["n"], int) or not 1 <= act["n"] <= MAX_ACTIONS:
                raise ValueError(f"act.n {act['n']!r} is not 1 to {MAX_ACTIONS} actions")
            space = gymnasium.spaces.Discrete(act["n"], start=act.get("start", 0))
        else:
            space = _unbox(act)
        _check_sizes(obs, space)
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        raise ValueError(str(e)) from None
    return obs, space
