"""dreamer_live.ple: PLE's API on the built-in games, and a game written in PLE's style (ple_example_game)
under PLE, as a gymnasium env, and under the real actor process in both clocks."""

import importlib
import os
import pathlib
import subprocess
import sys
import time

import gymnasium
import numpy as np
import pytest

os.environ.setdefault("SDL_VIDEODRIVER", "dummy")

import ple_example_game  # noqa: E402 (tests/ is on sys.path: the user's own game file)
from pygame.constants import K_a, K_d  # noqa: E402

import dreamer_live.envs  # noqa: E402,F401 (registers dreamer_live/PLE-v0)
from dreamer_live.ple import PLE  # noqa: E402
from dreamer_live.ple.games.flappybird import FlappyBird  # noqa: E402

REPO = pathlib.Path(__file__).resolve().parents[2]
TESTS = pathlib.Path(__file__).resolve().parents[1]

# PLE's module and class names, with constructor arguments PLE's games take (non-default where ours vary).
PLE_GAMES = [
    ("catcher", "Catcher", {"width": 80, "height": 72, "init_lives": 2}),
    ("flappybird", "FlappyBird", {"pipe_gap": 120}),
    ("monsterkong", "MonsterKong", {}),
    ("pixelcopter", "Pixelcopter", {"width": 64, "height": 64}),
    ("pong", "Pong", {"width": 80, "height": 60, "MAX_SCORE": 3, "cpu_speed_ratio": 0.5}),
    ("puckworld", "PuckWorld", {"width": 80, "height": 80}),
    ("raycastmaze", "RaycastMaze", {"map_size": 8, "width": 40, "height": 40}),
    ("snake", "Snake", {"width": 80, "height": 80, "init_length": 4}),
    ("waterworld", "WaterWorld", {"width": 64, "height": 64, "num_creeps": 5}),
]


def test_quickstart_loop_runs_thousands_of_frames_and_resets():
    """PLE's documented quick start: FlappyBird, random actions, getScreenRGB, act, game_over, reset_game."""
    game = FlappyBird()
    p = PLE(game, fps=30, display_screen=False)
    actions = p.getActionSet()
    assert actions == [32, None]  # the space bar, then the no-op
    p.init()
    rng = np.random.default_rng(0)
    reward, resets, screens = 0.0, 0, set()
    for _ in range(3000):
        if p.game_over():
            p.reset_game()
            resets += 1
        observation = p.getScreenRGB()
        assert observation.shape == (288, 512, 3) and observation.dtype == np.uint8
        screens.add(observation[::16, ::16].tobytes())
        reward = p.act(actions[rng.integers(len(actions))])
        assert reward in (-1.0, 0.0, 1.0)
    assert resets >= 5 and p.getFrameNumber() == 3000
    assert len(screens) > 100  # the picture moves
    assert p.score() == pytest.approx(game.getScore())


@pytest.mark.parametrize("module, name, kwargs", PLE_GAMES, ids=[g[1] for g in PLE_GAMES])
def test_the_nine_games_by_ples_names_and_arguments(module, name, kwargs):
    cls = getattr(importlib.import_module(f"dreamer_live.ple.games.{module}"), name)
    assert getattr(importlib.import_module("dreamer_live.ple.games"), name) is cls
    game = cls(**kwargs)
    p = PLE(game, fps=30, rng=np.random.RandomState(3),
            state_preprocessor=lambda s: np.array(list(s.values()), np.float32))
    width, height = kwargs.get("width", game.width), kwargs.get("height", game.height)
    assert p.getScreenDims() == (width, height)
    actions = p.getActionSet()
    assert actions[-1] is None and len(actions) == len(game.actions) + 1
    assert p.getGameStateDims() == (len(game.game.state_names),)
    if "init_lives" in kwargs:
        assert p.lives() == kwargs["init_lives"]
    start = p.getGameState()
    live_acts = 0
    for action in actions:
        for _ in range(5):
            live_acts += not p.game_over()
            p.act(action)
    assert p.getFrameNumber() == live_acts >= 5  # a game over stops the frames, as in PLE
    assert p.getScreenRGB().shape == (width, height, 3)
    assert p.getScreenGrayscale().shape == (width, height)
    assert not np.array_equal(p.getGameState(), start)  # something moved


def test_a_key_moves_the_built_in_game_as_its_key_events_say():
    from dreamer_live.ple.games.catcher import Catcher
    p = PLE(Catcher(), fps=30)
    left, right, noop = p.getActionSet()
    x0 = p.getGameState()["player_x"]
    for _ in range(5):
        p.act(right)
    x1 = p.getGameState()["player_x"]
    for _ in range(10):
        p.act(left)
    x2 = p.getGameState()["player_x"]
    p.act(12345)  # not in the action set: the no-op
    assert x1 > x0 and x2 < x1


def test_reward_values_override_a_plus_minus_one_game():
    from dreamer_live.ple.games.catcher import Catcher
    p = PLE(Catcher(init_lives=2), reward_values={"positive": 2.0, "negative": -3.0, "tick": -0.01})
    rewards = []
    while not p.game_over():
        rewards.append(p.act(None))
        assert len(rewards) < 10_000
    events = np.round(np.array(rewards) + 0.01, 6)
    assert set(events) <= {0.0, 2.0, -3.0}
    assert list(events).count(-3.0) == 2  # both lives lost, each at the overridden price
    assert p.score() == pytest.approx(sum(rewards))


def test_reward_values_override_a_game_with_a_rewards_table():
    from dreamer_live.ple.games.snake import Snake
    p = PLE(Snake(), reward_values={"loss": -7.0, "win": 99.0})  # win: Snake pays none, ignored
    rewards = []
    while not p.game_over():  # the snake runs straight into a wall
        rewards.append(p.act(None))
        assert len(rewards) < 10_000
    assert rewards[-1] == -7.0 and p.game.game.rewards["loss"] == -7.0


def test_force_fps_false_runs_on_the_wall_clock():
    fps = 20
    p = PLE(ple_example_game.FruitCatch(), fps=fps, force_fps=False)
    start = time.monotonic()
    for _ in range(10):
        p.act(None)
    assert time.monotonic() - start >= 9 / fps  # PLE waits for each frame's time
    y = p.getGameState()["fruit_y"]
    time.sleep(0.3)  # an agent that thinks for 0.3 s: the next step covers that wall time
    p.act(None)
    fallen = p.getGameState()["fruit_y"] - y
    assert fallen >= ple_example_game.FRUIT_SPEED * 290  # not the 50 ms of one frame
    fixed = PLE(ple_example_game.FruitCatch(), fps=fps)  # force_fps=True: 1000/fps ms per step
    fixed.act(None)
    assert fixed.getGameState()["fruit_y"] == pytest.approx(ple_example_game.FRUIT_SPEED * 1000 / fps)


def test_display_screen_shows_the_game_in_a_window():
    import pygame

    from dreamer_live.ple.games.pixelcopter import Pixelcopter
    p = PLE(Pixelcopter(), display_screen=True)
    p.act(None)
    window = pygame.display.get_surface()
    assert window.get_size() == (48 * 5, 48 * 5)
    shown = pygame.surfarray.array3d(window)[::5, ::5]
    assert np.array_equal(shown, p.getScreenRGB())


def test_own_game_under_ple_moves_loses_its_lives_and_resets():
    game = ple_example_game.FruitCatch()
    p = PLE(game, fps=30, state_preprocessor=lambda s: np.array([s["player_x"], s["fruit_y"]]))
    left, right, noop = p.getActionSet()
    assert (left, right, noop) == (K_a, K_d, None)
    assert p.getGameStateDims() == (2,) and p.lives() == 3
    x0 = p.getGameState()[0]
    for _ in range(5):
        p.act(right)
    x1 = p.getGameState()[0]
    assert x1 == pytest.approx(min(x0 + 5 * ple_example_game.PADDLE_SPEED * 1000 / 30, 36))
    for _ in range(3):
        p.act(left)
    assert p.getGameState()[0] < x1
    frames = 0
    while not p.game_over():
        p.act(noop)
        frames += 1
        assert frames < 5000
    assert p.lives() == 0 and p.score() <= -5.0  # PLE's default loss price was paid
    assert p.act(right) == 0.0  # over: nothing moves
    screen = p.getScreenRGB()
    assert screen.shape == (48, 48, 3) and screen.max() == 255  # it drew its paddle
    p.reset_game()
    assert (p.lives(), p.score(), p.game_over()) == (3, 0.0, False)
    assert p.getGameState()[0] == x0


def test_frame_skip_num_steps_and_the_no_op_as_ple_has_them():
    """frame_skip repeats the action (its key event posted each time), num_steps game steps per
    repeat; add_noop_action=False leaves the no-op out; an action outside the set is the no-op."""
    p = PLE(ple_example_game.FruitCatch(), fps=30, frame_skip=2, num_steps=3, add_noop_action=False)
    assert p.getActionSet() == [K_a, K_d]
    x0 = p.getGameState()["player_x"]
    p.act(K_d)
    assert p.getFrameNumber() == 6
    moved = p.getGameState()["player_x"]
    assert moved == pytest.approx(x0 + 2 * ple_example_game.PADDLE_SPEED * 1000 / 30)
    p.act(12345)  # not in the action set: the no-op
    assert p.getFrameNumber() == 12 and p.getGameState()["player_x"] == moved
    q = PLE(ple_example_game.FruitCatch(), fps=30, NOOP=0)
    assert q.getActionSet() == [K_a, K_d, 0]
    x0 = q.getGameState()["player_x"]
    q.act(0)
    assert q.getGameState()["player_x"] == x0 and q.getFrameNumber() == 1


def test_own_game_as_a_gymnasium_env():
    for game in (ple_example_game.FruitCatch, "ple_example_game:FruitCatch"):
        env = gymnasium.make("dreamer_live/PLE-v0", game=game, obs="both", init_lives=1)
        obs, _ = env.reset(seed=0)
        assert obs["image"].shape == (48, 48, 3) and obs["vector"].shape == (3,)
        assert env.action_space.n == 3  # the no-op, left, right
        x0 = obs["vector"][0]
        obs, *_ = env.step(2)
        assert obs["vector"][0] > x0
        terminated, steps, total = False, 0, 0.0
        while not terminated:
            obs, reward, terminated, truncated, _ = env.step(0)
            total += reward
            steps += 1
            assert steps < 5000 and not truncated
        assert total <= -1.0
        env.close()


def _actor(logdir, clock, *args):
    env = dict(os.environ, JAX_PLATFORMS="cpu", SDL_VIDEODRIVER="dummy",
               PYTHONPATH=os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")]))
    return subprocess.run(
        [sys.executable, "-m", "dreamer_live.actor", "--logdir", str(logdir), "--configs", "debug",
         "--run.quiet", "true", "--env.name", "ple_example_game:FruitCatch", "--env.clock", clock,
         *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=240)


def _replay(logdir) -> dict[str, np.ndarray]:
    chunks = sorted((logdir / "replay").glob("*.npz"))
    assert chunks, "no replay chunk written"
    parts = [dict(np.load(c, allow_pickle=False)) for c in chunks]
    return {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}


def test_own_game_under_the_actor_in_lockstep(tmp_path):
    result = _actor(tmp_path / "run", "lockstep", "--env.obs", "both", "--env.size", "[48, 48]",
                    "--env.kwargs.init_lives", "1", "--actor.steps", "300",
                    "--actor.hz", "100")  # a lockstep game moves a frame per tick at any rate
    assert result.returncode == 0, result.stdout + result.stderr
    replay = _replay(tmp_path / "run")
    assert len(replay["reward"]) == 300
    assert replay["image"].shape == (300, 48, 48, 3) and replay["image"].max() == 255
    assert replay["vector"].shape == (300, 3)
    # 300 frames of 33 ms; a fruit falls in 1100 ms: it fell, and lives ran out at least once
    assert replay["is_terminal"].sum() >= 1 and replay["is_first"].sum() >= 2
    assert replay["reward"].min() <= -5.0
    assert len(np.unique(replay["vector"][:, 0])) > 1  # the paddle moved


def test_own_game_under_the_actor_in_real_time(tmp_path):
    result = _actor(tmp_path / "run", "realtime", "--env.kwargs.fps", "60", "--actor.hz", "20",
                    "--actor.steps", "60")
    assert result.returncode == 0, result.stdout + result.stderr
    replay = _replay(tmp_path / "run")
    assert len(replay["reward"]) == 60 and replay["vector"].shape == (60, 3)
    # The game ran on its own 60 fps clock: 3 wall seconds of ticks cover about 180 frames, so the
    # fruit (1100 ms per fall) was replaced a few times; in lockstep 60 ticks would be 60 frames.
    fruit_y = replay["vector"][:, 2]
    assert (np.diff(fruit_y) < 0).sum() >= 2
    assert np.diff(fruit_y).max() >= ple_example_game.FRUIT_SPEED * 1000 / 60 * 2  # frames per tick
