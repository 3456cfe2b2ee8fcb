"""spaces.json: the game's observation and action spaces, saved by the actor beside its replay.

The learner builds the agent from this file, so it never has to start the game (a live game may run on
another machine). Written into the replay folder so that it travels with a copied replay.
"""

from __future__ import annotations

import json
import os
import pathlib

import gymnasium
import numpy as np

from dreamer_live.atomic import write_atomic
from dreamer_live.errors import UserError

FILE = "spaces.json"


def _box(space: gymnasium.spaces.Box) -> dict:
    return {"shape": list(space.shape), "dtype": np.dtype(space.dtype).name,
            "low": np.asarray(space.low).tolist(), "high": np.asarray(space.high).tolist()}


def _unbox(data: dict) -> gymnasium.spaces.Box:
    dtype = np.dtype(data["dtype"])
    shape = tuple(data["shape"])
    low = np.asarray(data["low"], np.float64 if dtype.kind == "f" else dtype)
    high = np.asarray(data["high"], np.float64 if dtype.kind == "f" else dtype)
    return gymnasium.spaces.Box(low.astype(dtype), high.astype(dtype), shape, dtype)


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
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, text.encode())
    return path


def load(directory: str | os.PathLike):
    """(obs_space, act_space) from DIRECTORY/spaces.json, or None when there is no such file."""
    path = pathlib.Path(directory) / FILE
    if not path.exists():
        return None
    try:
        data = json.loads(path.read_text())
        obs = {key: _unbox(box) for key, box in data["obs"].items()}
        act = data["act"]
        if act["kind"] == "discrete":
            space = gymnasium.spaces.Discrete(act["n"], start=act.get("start", 0))
        else:
            space = _unbox(act)
    except (ValueError, KeyError, TypeError) as e:
        raise UserError(f"{path} is unreadable ({e})") from None
    return obs, space


def of_run(config, directory: str | os.PathLike):
    """The spaces the run's agent is built for: the actor's spaces.json in the replay `directory`, else
    those of the configured game, built in lockstep (a live game's window may be on another machine,
    so there the file is required)."""
    found = load(directory)
    if found is not None:
        return found
    if config.env.name == "live":
        raise UserError(f"{pathlib.Path(directory) / FILE} is missing; copy it from the actor's replay "
                        "folder")
    from dreamer_live.envs import lockstep_twin, make_env

    env = make_env(lockstep_twin(config))
    try:
        return env.obs_space, env.act_space
    finally:
        env.close()
