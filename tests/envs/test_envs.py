"""make_env, the gymnasium adapter and the gymnasium registration of the built-in games."""

import os
import pathlib
import subprocess
import sys
import time

import gymnasium
import numpy as np
import pytest
from conftest import poll

from dreamer_live import config as configlib
from dreamer_live.envs import is_realtime, lockstep_twin, make_env, tick_hz
from dreamer_live.envs.gym_adapter import GymEnv
from dreamer_live.envs.realtime import RealtimeRunner
from dreamer_live.envs.wrappers import ActionRepeat
from dreamer_live.errors import UserError

REPO = pathlib.Path(__file__).resolve().parents[2]


def onehot(index, n):
    return np.eye(n, dtype=np.float32)[index]


def check_obs(obs, env):
    """Every obs_space key present with its shape and dtype."""
    for key, space in env.obs_space.items():
        assert obs[key].shape == space.shape and obs[key].dtype == space.dtype, key


def random_steps(env, steps, seed=0, pause=0.0):
    """Step with random actions (pause s apart), resetting after each episode end; return episode ends."""
    rng = np.random.default_rng(seed)
    obs = env.reset()
    check_obs(obs, env)
    assert obs["is_first"] and not obs["is_last"] and float(obs["reward"]) == 0
    ended = 0
    for _ in range(steps):
        if isinstance(env.act_space, gymnasium.spaces.Discrete):
            action = onehot(rng.integers(env.act_space.n), env.act_space.n)
        else:
            action = rng.uniform(-1, 1, env.act_space.shape).astype(np.float32)
        env.act(action)
        time.sleep(pause)
        obs = env.observe()
        check_obs(obs, env)
        assert not obs["is_first"]
        assert obs["is_last"] or not obs["is_terminal"]
        if obs["is_last"]:
            ended += 1
            obs = env.reset()
            assert obs["is_first"]
    return ended


# --- the gymnasium adapter ------------------------------------------------------------------------------
def test_cartpole_through_make_env_terminates_with_flags():
    env = make_env(configlib.resolve(["cartpole"]))
    try:
        assert isinstance(env, GymEnv) and env.act_space == gymnasium.spaces.Discrete(2)
        assert env.obs_space["vector"].shape == (4,)
        obs = env.reset()
        steps = 0
        while not obs["is_last"]:  # always push right: the pole falls within a few dozen steps
            obs = env.step(onehot(1, 2))
            steps += 1
            assert float(obs["reward"]) == 1.0
        assert obs["is_terminal"] and 5 < steps < 200
        assert random_steps(env, 300) >= 1
    finally:
        env.close()


def test_cartpole_time_limit_is_a_truncation_and_action_repeat_repeats():
    cfg = configlib.resolve(["cartpole"], {"env.kwargs.max_episode_steps": 6, "env.action_repeat": 2})
    env = make_env(cfg)
    try:
        assert isinstance(env, ActionRepeat)
        episode = [env.reset()]
        while not episode[-1]["is_last"]:
            episode.append(env.step(onehot(len(episode) % 2, 2)))  # alternate: balanced for 6 steps
        assert len(episode) == 4 and [float(o["reward"]) for o in episode] == [0, 2, 2, 2]
        assert not episode[-1]["is_terminal"]
    finally:
        env.close()


def test_pendulum_maps_unit_actions_to_its_bounds():
    env = make_env(configlib.resolve([], {"env.name": "Pendulum-v1"}))
    try:
        assert env.act_space.low[0] == -2.0 and env.act_space.high[0] == 2.0
        env.reset()
        pendulum = env.env.unwrapped
        for action, torque in [(-1.0, -2.0), (1.0, 2.0), (0.0, 0.0), (0.5, 1.0), (3.0, 2.0)]:
            env.step(np.array([action], np.float32))
            assert pendulum.last_u == pytest.approx(torque)
        assert random_steps(env, 210) == 1  # Pendulum truncates at 200 steps, never terminates
    finally:
        env.close()


def test_pendulum_pixels_from_render_resized():
    cfg = configlib.resolve([], {"env.name": "Pendulum-v1", "env.obs": "both", "env.size": [32, 32],
                                 "env.grayscale": True})
    env = make_env(cfg)
    try:
        assert env.obs_space["image"].shape == (32, 32, 1) and env.obs_space["vector"].shape == (3,)
        obs = env.reset()
        assert obs["image"].std() > 0  # the rendered pendulum, not a blank frame
        random_steps(env, 5)
    finally:
        env.close()


def test_discrete_observations_flatten_one_hot():
    env = GymEnv("FrozenLake-v1", obs="vector", seed=0, make_kwargs={"is_slippery": False})
    assert env.obs_space["vector"].shape == (16,)
    assert env.reset()["vector"].tolist() == onehot(0, 16).tolist()
    obs = env.step(onehot(2, 4))  # right
    assert obs["vector"].tolist() == onehot(1, 16).tolist()
    env.close()


def test_env_kwargs_may_hold_the_envs_own_obs_option():
    """env.kwargs go to the gymnasium env whole: its own `obs` option gives the frame as its observation
    (64x64, resized to env.size) instead of a render."""
    env = make_env(configlib.resolve(["catcher_pixels"], {
        "env.name": "dreamer_live.envs:dreamer_live/Catcher-v0", "env.clock": "lockstep",
        "env.kwargs": {"obs": "image"}}))
    try:
        assert env.obs_space["image"].shape == (16, 16, 1)
        gym_env = env.unwrapped
        assert isinstance(gym_env, GymEnv)
        assert gym_env.env.observation_space.shape == (64, 64, 3)  # the game's frame, not its state
        random_steps(env, 3)
    finally:
        env.close()


def test_paced_gym_env_runs_in_real_time():
    cfg = configlib.resolve(["cartpole"], {"env.pace_hz": 40.0, "env.action_repeat": 2,
                                           "actor.hz": 20.0})
    assert is_realtime(cfg) and tick_hz(cfg) == 10.0
    env = make_env(cfg)
    try:
        assert isinstance(env, RealtimeRunner)
        env.reset()
        poll("three steps", lambda: env.metrics()["realtime/steps"] >= 3, timeout=5.0)
        obs = env.observe()  # steps happened without act: reward 1 per step (or the pole fell)
        assert obs["is_last"] or float(obs["reward"]) >= 3
    finally:
        env.close()


@pytest.mark.parametrize("overrides, message", [
    ({"env.name": "NoSuchEnv-v9"}, "cannot make gymnasium env 'NoSuchEnv-v9'"),
    ({"env.name": "dreamer_live/NoSuchGame-v0"}, "unknown built-in game.*Catcher"),
    ({"env.name": "live"}, "live|profile"),  # no live env yet, or no env.profile given
    ({"env.pace_hz": 10.0}, "already runs in real time"),
    ({"env.clock": "sometimes"}, "env.clock"),
    ({"env.name": "CartPole-v1", "env.kwargs.gravity": 1.0}, "bad env.kwargs for 'CartPole-v1'"),
    ({"env.name": "Meta-World/reach-v3"}, "come with the metaworld package; install it"),
])
def test_bad_env_config_is_one_clear_error(overrides, message):
    with pytest.raises(UserError, match=message):
        make_env(configlib.resolve([], overrides)).close()


def test_ale_id_as_users_write_it_through_the_actor(tmp_path):
    pytest.importorskip("ale_py", reason="ale-py is not installed (it comes with the test extra)")
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    result = subprocess.run(
        [sys.executable, "-m", "dreamer_live.actor", "--logdir", str(tmp_path), "--configs", "debug",
         "--run.quiet", "true", "--env.name", "ALE/Pong-v5", "--env.obs", "image", "--actor.hz", "100",
         "--actor.steps", "200"], cwd=REPO, env=env, capture_output=True, text=True, timeout=240)
    assert result.returncode == 0, result.stdout + result.stderr
    chunks = sorted((tmp_path / "replay").glob("*.npz"))
    images = np.concatenate([np.load(c)["image"] for c in chunks])
    actions = np.concatenate([np.load(c)["action"] for c in chunks])
    assert images.shape == (200, 64, 64, 3) and images.std(axis=0).max() > 0  # frames change
    assert actions.shape == (200, 6)  # Pong's six actions


# --- the built-in games ---------------------------------------------------------------------------------
def test_default_config_plays_catcher_in_real_time():
    cfg = configlib.defaults()
    assert cfg.env.name == "dreamer_live/Catcher-v0" and is_realtime(cfg)
    env = make_env(cfg)
    try:
        random_steps(env, 200, pause=0.005)  # about a second: the game's clock runs ~30 frames
        assert env.metrics()["game/frame"] >= 10
    finally:
        env.close()


def test_catcher_pixels_preset_and_lockstep_action_repeat_as_frame_skip():
    env = make_env(configlib.resolve(["catcher_pixels"], {"env.clock": "lockstep",
                                                          "env.action_repeat": 3}))
    try:
        assert env.obs_space["image"].shape == (16, 16, 1) and "vector" not in env.obs_space
        random_steps(env, 20)
        assert env.metrics()["game/frame"] == 60  # 20 acts x 3 frames, no episode ends that fast
    finally:
        env.close()


def test_lockstep_twin_spans_a_tick_per_step_and_keeps_the_time_cap():
    """Catcher at 30 fps ticked at 15 Hz: the twin runs 2 frames per step; a 1 s cap is 15 steps."""
    twin = lockstep_twin(configlib.resolve(["catcher"], {"env.time_cap_s": 1.0}))
    assert (twin.env.clock, twin.env.action_repeat, twin.actor.hz) == ("lockstep", 2, 15.0)
    env = make_env(twin)
    try:
        obs, steps = env.reset(), 0
        while not obs["is_last"]:  # idle: no life is lost in the first second
            env.act(np.eye(3, dtype=np.float32)[0])
            obs, steps = env.observe(), steps + 1
        assert steps == 15 and not obs["is_terminal"] and env.metrics()["game/frame"] == 30
    finally:
        env.close()
    cartpole = configlib.resolve(["cartpole"])
    assert lockstep_twin(cartpole) == cartpole  # already lockstep
    paced = lockstep_twin(cartpole.update({"env.pace_hz": 50.0, "actor.hz": 25.0}))
    assert (paced.env.pace_hz, paced.env.action_repeat, paced.actor.hz) == (0.0, 2, 25.0)


def test_gymnasium_make_catcher_runs_random_steps():
    env = gymnasium.make("dreamer_live/Catcher-v0")
    try:
        obs, _ = env.reset(seed=1)
        assert env.observation_space.contains(obs)
        for _ in range(200):
            obs, reward, terminated, truncated, _ = env.step(env.action_space.sample())
            assert env.observation_space.contains(obs) and isinstance(reward, float)
            if terminated or truncated:
                obs, _ = env.reset()
    finally:
        env.close()


def test_gymnasium_make_catcher_in_real_time_steps_at_game_speed():
    env = gymnasium.make("dreamer_live/Catcher-v0", clock="realtime", obs="both", frame_skip=2)
    try:
        assert set(env.observation_space.spaces) == {"image", "vector"}
        env.reset(seed=1)
        start = time.monotonic()
        for _ in range(15):  # each step holds its action for 2 frames of 1/30 s
            obs, *_ = env.step(env.action_space.sample())
            assert env.observation_space.contains(obs)
        assert 15 * 2 / 30 * 0.9 <= time.monotonic() - start < 5.0
    finally:
        env.close()


def test_registered_catcher_passes_gymnasium_checker():
    from gymnasium.utils.env_checker import check_env
    env = gymnasium.make("dreamer_live/Catcher-v0", obs="image", render_mode="rgb_array")
    try:
        check_env(env.unwrapped, skip_render_check=False)
        env.reset(seed=0)
        assert env.render().shape == (64, 64, 3)
    finally:
        env.close()


def test_every_builtin_game_is_registered():
    from dreamer_live.envs.games import GAMES
    assert "Catcher" in GAMES
    for name in GAMES:
        assert f"dreamer_live/{name}-v0" in gymnasium.registry


def test_every_builtin_game_through_make_env_resized():
    from dreamer_live.envs.games import GAMES
    for name in GAMES:
        cfg = configlib.resolve([], {"env.name": f"dreamer_live/{name}-v0", "env.clock": "lockstep",
                                     "env.obs": "both", "env.size": [32, 32]})
        env = make_env(cfg)
        try:
            assert env.obs_space["image"].shape == (32, 32, 3), name
            random_steps(env, 5)
        finally:
            env.close()
