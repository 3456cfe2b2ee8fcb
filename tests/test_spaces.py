"""spaces.json: the actor's spaces survive the round trip; a damaged file is one clear error; a run's
spaces come from the file before the game."""

import json

import gymnasium
import numpy as np
import pytest

from dreamer_live import config, spaces
from dreamer_live.envs import spaces_of_run
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
    obs, act = spaces_of_run(cfg, tmp_path)  # no file: built from the configured game
    assert act.n == 3 and obs["vector"].shape == (4,)
    spaces.save(tmp_path, OBS, gymnasium.spaces.Discrete(5))
    obs, act = spaces_of_run(cfg, tmp_path)
    assert act.n == 5 and "image" in obs
    with pytest.raises(UserError, match="copy it from the actor"):
        spaces_of_run(cfg.update({"env.name": "live"}), tmp_path / "elsewhere")


def test_an_observation_is_checked_against_its_spaces():
    """check_obs: finite values of the declared shapes and dtypes pass; NaN or infinity is a bad
    step (why, returned); a missing key or another shape or dtype is a broken env (raised)."""
    spec = spaces.obs_spec(OBS)
    good = {"image": np.zeros((8, 8, 3), np.uint8), "vector": np.ones(4, np.float32),
            "reward": np.array(1.0, np.float32), "is_first": np.array(False),
            "is_last": np.array(False), "is_terminal": np.array(False), "log/x": np.array(np.nan)}
    assert spaces.check_obs(good, spec) == ""  # log/* is not stored, so not checked
    for key, value, why in [
            ("vector", np.array([0, np.inf, -np.inf, 1], np.float32), "'vector' holds 2 non-finite"),
            ("reward", np.array(np.nan, np.float32), "'reward' holds 1 non-finite")]:
        assert spaces.check_obs({**good, key: value}, spec).startswith(why)
    for key, value, why in [
            ("vector", np.ones(5, np.float32), r"'vector' is \(5,\) float32, expected \(4,\) float32"),
            ("vector", np.ones(4, np.float64), r"'vector' is \(4,\) float64, expected \(4,\) float32"),
            ("image", np.zeros((8, 8, 3), np.float32), r"'image' is \(8, 8, 3\) float32, expected"),
            ("is_last", None, "'is_last' is missing")]:
        obs = {k: v for k, v in {**good, key: value}.items() if v is not None}
        with pytest.raises(spaces.ObservationError, match=why):
            spaces.check_obs(obs, spec)
