"""Game base (lockstep / real-time GameEnv, stand-alone mode); Catcher, Pong, FlappyBird, Pixelcopter."""

import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from conftest import poll
from dreamer_live.envs.games import GAMES
from dreamer_live.envs.games.base import Game, GameEnv
from dreamer_live.envs.games.catcher import Catcher
from dreamer_live.envs.games.flappybird import FlappyBird
from dreamer_live.envs.games.pixelcopter import Pixelcopter
from dreamer_live.envs.games.pong import Pong
from dreamer_live.errors import UserError

MINE = (Catcher, Pong, FlappyBird, Pixelcopter)


def one_hot(i, n):
    return np.eye(n, dtype=np.float32)[i]


def run_noop_until_reward(env, limit=400):
    """Step the no-op until a non-zero reward; return that observation and the steps taken."""
    for steps in range(1, limit + 1):
        obs = env.step(0)
        if obs["reward"] != 0:
            return obs, steps
    raise AssertionError("no reward within the limit")


class RecordingGame(Game):
    """A minimal game that records the keys it was ticked with (to see what the clock thread sends)."""

    width, height = 16, 16
    actions = ((), ("left",))
    state_names = ("frame",)

    def __init__(self, seed=None):
        super().__init__(seed)
        self.seen = []

    def _start(self):
        pass

    def _advance(self, keys):
        self.seen.append((time.monotonic(), keys))
        return 0.0

    def _export(self):
        self.exported = {"score": self.score, "x": 0.0, "y": 0.0}

    def draw(self, surface):
        surface.fill((self.frame % 256, 0, 0))

    def game_state(self):
        return np.array([self.frame], np.float32)


def test_registry_lists_my_games():
    for cls in MINE:
        assert GAMES[cls.__name__] is cls


@pytest.mark.parametrize("cls", MINE, ids=lambda c: c.__name__)
def test_thousand_random_lockstep_steps(cls):
    env = GameEnv(cls(seed=1), clock="lockstep", obs="both")
    h, w = cls.height, cls.width
    assert env.obs_space["image"].shape == (h, w, 3)
    assert env.obs_space["vector"].shape == (len(cls.state_names),)
    rng = np.random.default_rng(0)
    obs = env.reset()
    assert obs["is_first"] and not obs["is_last"] and obs["reward"] == 0
    episodes = 0
    for _ in range(1000):
        obs = env.step(one_hot(rng.integers(env.act_space.n), env.act_space.n))
        assert obs["image"].shape == (h, w, 3) and obs["image"].dtype == np.uint8
        assert obs["vector"].dtype == np.float32 and np.isfinite(obs["vector"]).all()
        assert obs["reward"].dtype == np.float32 and not obs["is_first"]
        assert obs["is_last"] == obs["is_terminal"]
        if obs["is_last"]:
            episodes += 1
            obs = env.reset()
    assert env.metrics()["game/frame"] == 1000
    assert obs["image"].std() > 0  # something is drawn
    env.close()
    if cls is not Pong:  # a random Pong match lasts longer than 1,000 frames
        assert episodes >= 1


@pytest.mark.parametrize("cls", MINE, ids=lambda c: c.__name__)
def test_short_real_time_run_with_random_actions(cls):
    env = GameEnv(cls(seed=2), clock="realtime", obs="both")
    rng = np.random.default_rng(0)
    env.reset()
    start = time.monotonic()
    while time.monotonic() - start < 1.2:
        env.act(one_hot(rng.integers(env.act_space.n), env.act_space.n))
        time.sleep(1 / 15)
        obs = env.observe()
        assert obs["image"].shape == (cls.height, cls.width, 3)
        if obs["is_last"]:
            assert obs["is_terminal"]
            env.reset()
    frames = env.metrics()["game/frame"]
    env.close()
    assert 0.3 * 1.2 * cls.fps <= frames <= 2 * 1.2 * cls.fps


@pytest.mark.parametrize("cls", MINE, ids=lambda c: c.__name__)
def test_same_seed_same_game(cls):
    def trajectory(seed):
        env = GameEnv(cls(seed=seed), obs="vector")
        rng = np.random.default_rng(0)
        out = [env.reset()["vector"]]
        for _ in range(150):
            obs = env.step(int(rng.integers(env.act_space.n)))
            out.append(obs["vector"])
            if obs["is_last"]:
                out.append(env.reset()["vector"])
        return np.stack(out)

    assert np.array_equal(trajectory(5), trajectory(5))
    assert not np.array_equal(trajectory(5), trajectory(6))


def test_unknown_game_option_is_a_user_error():
    with pytest.raises(UserError, match="speed"):
        Catcher(speed=3)
    with pytest.raises(UserError):
        GameEnv(Catcher(), clock="sometimes")


# --- Catcher --------------------------------------------------------------------------------------


def test_catcher_paddle_under_fruit_scores():
    env = GameEnv(Catcher(seed=0))
    env.reset()
    env.game.paddle_x = env.game.fruit_x
    obs, _ = run_noop_until_reward(env)
    assert obs["reward"] == 1 and env.game.lives == 3 and not obs["is_last"]


def test_catcher_miss_loses_a_life_and_three_misses_end_the_game():
    env = GameEnv(Catcher(seed=0))
    env.reset()
    for life in (2, 1, 0):
        game = env.game
        game.paddle_x = game.paddle_width / 2 if game.fruit_x > game.width / 2 else game.width - 1
        obs, _ = run_noop_until_reward(env)
        assert obs["reward"] == -1 and game.lives == life
        assert bool(obs["is_last"]) == (life == 0) == bool(obs["is_terminal"])
    assert env.game.game_over and env.game.score == -3
    assert env.step(0)["reward"] == 0  # a finished game waits for reset
    assert env.reset()["is_first"] and env.game.lives == 3


def test_catcher_left_right_move_the_paddle():
    env = GameEnv(Catcher(seed=0))
    env.reset()
    x0 = env.game.paddle_x
    env.step(1)
    assert env.game.paddle_x < x0
    for _ in range(5):
        env.step(2)
    assert env.game.paddle_x > x0


# --- Pong -----------------------------------------------------------------------------------------


def ball_towards_agent(game, y):
    game.ball_x, game.ball_y, game.ball_vx, game.ball_vy = game.width * 0.3, y, -game.ball_speed, 0.0


def test_pong_ball_past_the_agent_is_minus_one_and_a_cpu_point():
    env = GameEnv(Pong(seed=0))
    env.reset()
    game = env.game
    game.player_y = game.height - game.paddle_height / 2  # paddle at the bottom, ball at the top
    ball_towards_agent(game, game.height * 0.2)
    obs, _ = run_noop_until_reward(env)
    assert obs["reward"] == -1 and game.points == {"agent": 0, "cpu": 1}


def test_pong_paddle_in_front_returns_the_ball():
    env = GameEnv(Pong(seed=0))
    env.reset()
    game = env.game
    ball_towards_agent(game, game.height / 2)
    game.player_y = game.height / 2
    for _ in range(60):
        assert env.step(0)["reward"] == 0
        if game.ball_vx > 0:
            break
    assert game.ball_vx > 0 and game.ball_x > game.player_x


def test_pong_ends_at_max_score():
    env = GameEnv(Pong(seed=0, max_score=2))
    env.reset()
    for points in (1, 2):
        game = env.game
        game.player_y = game.height - game.paddle_height / 2
        ball_towards_agent(game, game.height * 0.2)
        obs, _ = run_noop_until_reward(env)
        assert game.points["cpu"] == points and bool(obs["is_terminal"]) == (points == 2)
    assert obs["is_last"] and env.game.score == -2


# --- FlappyBird -----------------------------------------------------------------------------------


def test_flappy_doing_nothing_falls_and_dies():
    env = GameEnv(FlappyBird(seed=0))
    y0 = env.reset()["vector"][0]
    obs, steps = run_noop_until_reward(env)
    assert obs["reward"] == -1 and obs["is_last"] and obs["is_terminal"]
    assert obs["vector"][0] > y0 and steps < 40  # fell to the ground in about a second


def test_flappy_holding_jump_flies_into_the_top():
    env = GameEnv(FlappyBird(seed=0))
    y0 = env.reset()["vector"][0]
    assert env.step(1)["vector"][0] < y0
    for _ in range(100):
        obs = env.step(1)
        if obs["is_last"]:
            break
    assert obs["is_terminal"] and obs["reward"] == -1 and env.game.bird_y < y0 * env.game.height


def test_flappy_passing_a_pipe_scores():
    env = GameEnv(FlappyBird(seed=0))
    env.reset()
    game = env.game
    game.bird_vel = 0.0
    game.flapped = False
    game.pipes[0] = [game.bird_x + 10, game.bird_y - 50]  # the gap around the bird, centre just ahead
    obs, steps = run_noop_until_reward(env)
    assert obs["reward"] == 1 and steps == 3 and not obs["is_last"]


def test_flappy_pipe_hit_ends_the_game():
    env = GameEnv(FlappyBird(seed=0))
    env.reset()
    game = env.game
    game.pipes[0] = [game.bird_x + 30, game.bird_y + 20]  # gap top below the bird: it hits the pipe
    obs = env.step(0)
    assert obs["is_terminal"] and obs["reward"] == -1


# --- Pixelcopter ----------------------------------------------------------------------------------


def test_pixelcopter_doing_nothing_falls_and_dies():
    env = GameEnv(Pixelcopter(seed=0))
    y0 = env.reset()["vector"][0]
    for steps in range(1, 100):
        obs = env.step(0)
        if obs["is_last"]:
            break
    assert obs["is_terminal"] and obs["reward"] <= 0 and obs["vector"][0] > y0 and steps < 60


def test_pixelcopter_up_climbs_and_columns_passing_score():
    env = GameEnv(Pixelcopter(seed=0))
    y0 = env.reset()["vector"][0]
    assert env.step(1)["vector"][0] < y0
    env.reset()
    total = 0.0
    for _ in range(30):  # alternate to hover; the columns behind the pixel scroll off and pay +1
        obs = env.step(1 if env.game.momentum > 0.1 else 0)
        total += float(obs["reward"])
        if obs["is_last"]:
            break
    assert total > 0


def test_pixelcopter_block_hit_ends_the_game():
    env = GameEnv(Pixelcopter(seed=0))
    env.reset()
    game = env.game
    game.blocks = [[game.player_x + 1, game.player_y, 0.0]]
    obs = env.step(0)
    assert obs["is_terminal"] and obs["reward"] < 0


# --- real-time clock ------------------------------------------------------------------------------


def test_real_time_game_advances_without_actions():
    env = GameEnv(Catcher(seed=0), clock="realtime")
    env.reset()
    env.metrics()
    start = time.monotonic()
    time.sleep(1.0)
    frames = env.metrics()["game/frame"]
    elapsed = time.monotonic() - start
    obs = env.observe()
    env.close()
    assert 0.3 * 30 * elapsed <= frames <= 1.5 * 30 * elapsed + 2
    assert obs["vector"][3] > -0.4  # the fruit fell meanwhile


def test_real_time_waits_for_reset_after_game_over():
    env = GameEnv(Catcher(seed=0, init_lives=1), clock="realtime")
    env.reset()
    env.game.fruit_y = env.game.height - 1
    env.game.paddle_x = env.game.paddle_width / 2 if env.game.fruit_x > 32 else 63
    poll("the fruit to fall", lambda: env.game.game_over, timeout=5.0)
    obs = env.observe()
    assert obs["is_last"] and obs["is_terminal"] and obs["reward"] == -1
    frames = env.metrics()["game/frame"]
    time.sleep(0.3)  # nine frame periods in which nothing may happen
    assert env.metrics()["game/frame"] == frames  # stopped at game over
    assert env.observe()["reward"] == 0
    assert env.reset()["is_first"]
    poll("the game to run again", lambda: env.metrics()["game/frame"] > frames, timeout=5.0)
    env.close()


@pytest.mark.parametrize("release_after", [0.25, 0.0])
def test_real_time_keys_held_then_released_without_act(release_after):
    game = RecordingGame()
    env = GameEnv(game, clock="realtime", release_after=release_after)
    env.reset()
    env.act(1)
    sent = time.monotonic()
    time.sleep(0.7)
    env.close()
    seen = [(t - sent, keys) for t, keys in game.seen if t > sent]
    early = [keys for dt, keys in seen if dt < 0.2]
    late = [keys for dt, keys in seen if dt > 0.35]
    assert early and late and all(keys == {"left"} for keys in early)
    if release_after:
        assert all(keys == frozenset() for keys in late)
    else:  # 0 = never release
        assert all(keys == {"left"} for keys in late)


def test_image_obs_only():
    env = GameEnv(Pong(seed=0), obs="image")
    obs = env.reset()
    model_keys = {k for k in obs if not k.startswith("log/")}
    assert model_keys == {"image", "reward", "is_first", "is_last", "is_terminal"}
    assert {"log/score", "log/x", "log/y"} <= set(obs)  # progress values for the wrappers
    assert obs["image"].shape == (48, 64, 3) and obs["image"].dtype == np.uint8
    assert env.obs_space["image"].contains(obs["image"])


# --- stand-alone mode -----------------------------------------------------------------------------


def game_command(module, *args):
    return [sys.executable, "-m", f"dreamer_live.envs.games.{module}", *args]


def wait_for(path, proc, timeout=30.0):
    start = time.monotonic()
    while not path.exists():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() - start < timeout, "no export file"
        time.sleep(0.1)
    return json.loads(path.read_text())


def test_standalone_headless_exports_and_logs(tmp_path):
    export, log = tmp_path / "pong.json", tmp_path / "score.jsonl"
    out = subprocess.run(game_command("pong", "--duration", "1.5", "--export", str(export),
                                      "--score-log", str(log), "--option", "max_score=1",
                                      "--auto-restart", "0"),
                         capture_output=True, text=True, timeout=60,
                         env={**os.environ, "SDL_VIDEODRIVER": "dummy"})
    assert out.returncode == 0, out.stderr
    info = json.loads(export.read_text())
    assert info["title"] == "dreamer_live Pong" and info["actions"] == [[], ["up"], ["down"]]
    assert {"score", "x", "y", "frame"} <= set(info["values"])
    assert str(export) in out.stdout
    lines = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    for line in lines:
        assert line["reward"] in (1, -1) and line["game_over"]  # max_score=1: every point ends it


def test_standalone_bad_option_is_one_line_exit_2():
    out = subprocess.run(game_command("catcher", "--option", "speed=2", "--duration", "1"),
                         capture_output=True, text=True, timeout=60,
                         env={**os.environ, "SDL_VIDEODRIVER": "dummy"})
    assert out.returncode == 2 and out.stderr.startswith("catcher: error:") and "speed" in out.stderr
    assert out.stderr.strip().count("\n") == 0  # one line


def unused_display_number() -> int:
    """An X display number no server listens on, in this network namespace (abstract sockets are shared
    with other sandboxes on the machine, and X clients try them first) nor in this /tmp."""
    try:
        with open("/proc/net/unix") as f:
            used = {int(n) for n in re.findall(r"X11-unix/X(\d+)", f.read())}
    except OSError:
        used = set()
    free = [n for n in range(200, 1000) if n not in used and not os.path.exists(f"/tmp/.X{n}-lock")]
    return random.Random(os.getpid()).choice(free)


@pytest.fixture
def xvfb_display():
    if not shutil.which("Xvfb"):
        pytest.skip("no Xvfb binary")
    read, write = os.pipe()
    number = unused_display_number()
    proc = subprocess.Popen(["Xvfb", f":{number}", "-displayfd", str(write), "-screen", "0",
                             "640x480x24", "-nolisten", "tcp"], pass_fds=(write,),
                            stderr=subprocess.DEVNULL)
    os.close(write)
    ready = b""  # the number and a newline, written once the server accepts connections; read all of
    while not ready.endswith(b"\n"):  # it before closing, or Xvfb dies on the broken pipe
        chunk = os.read(read, 64)
        if not chunk:
            break
        ready += chunk
    os.close(read)
    ready = ready.decode().strip()
    try:
        assert ready == str(number), f"Xvfb :{number} did not start"
        yield f":{number}"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_standalone_window_exports_memory_and_stops_on_sigterm(tmp_path, xvfb_display):
    export, log = tmp_path / "catcher.json", tmp_path / "score.jsonl"
    env = {**os.environ, "DISPLAY": xvfb_display}
    env.pop("SDL_VIDEODRIVER", None)
    proc = subprocess.Popen(game_command("catcher", "--window", "--export", str(export), "--score-log",
                                         str(log), "--seed", "0", "--auto-restart", "0.2"),
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        info = wait_for(export, proc)
        assert info["pid"] == proc.pid and info["title"] == "dreamer_live Catcher"
        assert all(v["type"] == "f64" and v["address"] > 0 for v in info["values"].values())
        assert info["keys"] == {"left": "Left", "right": "Right"}
        from dreamer_live.envs.games.standalone import read_exported
        first = read_exported(info)
        time.sleep(0.5)
        second = read_exported(info)
        assert second["frame"] > first["frame"] or second["episode"] > first["episode"]
        assert second["y"] == 59.5  # the paddle's centre row (64 - 3 px margin - 3 px paddle / 2)
        if shutil.which("xdotool"):  # keyboard play: hold Left, the paddle reaches the left wall
            for _ in range(50):  # the window may map a moment after the export file appears
                window = subprocess.run(["xdotool", "search", "--class", info["wm_class"]], env=env,
                                        capture_output=True, text=True).stdout.split()
                if window:
                    break
                time.sleep(0.1)
            assert window, subprocess.run(["xwininfo", "-root", "-tree"], env=env,
                                          capture_output=True, text=True)
            subprocess.run(["xdotool", "windowfocus", "--sync", window[-1]], env=env, timeout=10)
            subprocess.run(["xdotool", "keydown", "Left"], env=env, check=True)
            time.sleep(0.5)
            subprocess.run(["xdotool", "keyup", "Left"], env=env, check=True)
            assert read_exported(info)["x"] < 10
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=10)
        assert proc.returncode == 0, err
        assert "SIGTERM" in out
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    for line in log.read_text().splitlines() if log.exists() else []:
        event = json.loads(line)
        assert event["reward"] in (1, -1) and event["frame"] > 0
