"""spaces.json: the actor's spaces survive the round trip; a damaged file is one clear error; a run's
spaces come from the file before the game."""

import json

import gymnasium
import numpy as np
import pytest

from dreamer_live import config, spaces
from dreamer_live.envs.base import step_spaces
from dreamer_live.errors import UserError

OBS = {"image": gymnasium.spaces.Box(0, 255, (8, 8, 3), np.uint8),
       "vector": gymnasium.spaces.Box(-np.inf, np.inf, (4,), np.float32), **step_spaces()}


@pytest.mark.parametrize("act", [gymnasium.spaces.Discrete(5, start=1),
                                 gymnasium.spaces.Box(-2.0, 2.0, (3,), np.float32)])
def test_round_trip(tmp_path, act):
    path = spaces.save(tmp_path, OBS, act)
    mtime = path.stat().st_mtime_ns
    assert spaces.save(tmp_path, OBS, act).stat().st_mtime_ns == mtime  # unchanged: not rewritten
    obs, loaded = spaces.load(tmp_path)
    assert loaded == act and obs.keys() == OBS.keys()
    for key, space in OBS.items():
        assert obs[key] == space, key


def test_missing_is_none_and_damaged_is_one_error(tmp_path):
    assert spaces.load(tmp_path) is None
    (tmp_path / spaces.FILE).write_text(json.dumps({"obs": {}}))
    with pytest.raises(UserError, match="spaces.json is unreadable"):
        spaces.load(tmp_path)


def test_a_run_takes_the_file_first_and_the_game_without_it(tmp_path):
    cfg = config.resolve(["debug"])  # Catcher's state vector, 3 actions
    obs, act = spaces.of_run(cfg, tmp_path)  # no file: built from the configured game
    assert act.n == 3 and obs["vector"].shape == (4,)
    spaces.save(tmp_path, OBS, gymnasium.spaces.Discrete(5))
    obs, act = spaces.of_run(cfg, tmp_path)
    assert act.n == 5 and "image" in obs
    with pytest.raises(UserError, match="copy it from the actor"):
        spaces.of_run(cfg.update({"env.name": "live"}), tmp_path / "elsewhere")
