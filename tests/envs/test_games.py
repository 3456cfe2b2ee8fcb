"""The built-in games: the checks every one of the nine passes (registered, random play in lockstep and
in real time, seeded repeats, bad options), the game base's clocks (GameEnv) and the stand-alone
keyboard mode. Each game's own scripted rules are in test_game_rules.py."""

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

from dreamer_live.envs.games import GAME_MODULES, GAMES
from dreamer_live.envs.games.base import Game, GameEnv
from dreamer_live.envs.games.catcher import Catcher
from dreamer_live.envs.games.flappybird import FlappyBird
from dreamer_live.envs.games.pixelcopter import Pixelcopter
from dreamer_live.envs.games.pong import Pong
from dreamer_live.envs.games.puckworld import PuckWorld
from dreamer_live.errors import UserError

ALL = [GAMES[name] for name in GAME_MODULES]  # the nine, in the registry's order
ENDS_WITHIN_1000_RANDOM_FRAMES = (Catcher, FlappyBird, Pixelcopter)
by_name = {"ids": lambda c: c.__name__}


def one_hot(i, n):
    return np.eye(n, dtype=np.float32)[i]


def check_obs(env: GameEnv, obs: dict) -> None:
    """Every observation key matches its space, and the numbers are finite."""
    assert {k for k in obs if not k.startswith("log/")} == set(env.obs_space)
    assert len(obs["vector"]) == len(env.game.state_names)
    for key, space in env.obs_space.items():
        value = np.asarray(obs[key])
        assert value.shape == space.shape and value.dtype == space.dtype, key
    assert np.isfinite(obs["vector"]).all() and np.isfinite(obs["reward"])


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


# --- every game -----------------------------------------------------------------------------------


@pytest.mark.parametrize("cls", ALL, **by_name)
def test_registered_with_the_package(cls):
    assert GAMES[cls.__name__] is cls
    game = cls(seed=0)
    assert game.actions[0] == ()  # the no-op first
    if len(game.actions) >= 5:
        assert game.actions[1:5] == (("left",), ("right",), ("up",), ("down",))
    assert len(game.state_names) == len(game.game_state())
    assert {"score", "x", "y"} <= set(game.exported)  # progress values for the wrappers


@pytest.mark.parametrize("cls", ALL, **by_name)
def test_thousand_random_lockstep_steps(cls):
    env = GameEnv(cls(seed=1), clock="lockstep", obs="both")
    n = env.act_space.n
    assert env.obs_space["image"].shape == (env.game.height, env.game.width, 3)
    assert env.obs_space["vector"].shape == (len(env.game.state_names),)
    rng = np.random.default_rng(0)
    obs = env.reset()
    check_obs(env, obs)
    assert obs["is_first"] and not obs["is_last"] and obs["reward"] == 0
    episodes, frames_seen = 0, set()
    for step in range(1000):
        obs = env.step(one_hot(rng.integers(n), n))
        check_obs(env, obs)
        assert not obs["is_first"]
        assert obs["is_terminal"] == obs["is_last"] == env.game.game_over
        if step % 10 == 0:
            frames_seen.add(obs["image"].tobytes())
        if obs["is_last"]:
            episodes += 1
            obs = env.reset()
    assert env.metrics()["game/frame"] == 1000
    env.close()
    assert len(frames_seen) > 10  # the picture moves
    if cls in ENDS_WITHIN_1000_RANDOM_FRAMES:
        assert episodes >= 1
    if cls is PuckWorld:
        assert episodes == 0  # a continuous game: no terminal state


@pytest.mark.parametrize("cls", ALL, **by_name)
def test_real_time_play_runs_at_its_fps_and_on_its_own(cls):
    env = GameEnv(cls(seed=2), clock="realtime", obs="both")
    try:
        rng = np.random.default_rng(0)
        n = env.act_space.n
        env.reset()
        env.metrics()
        start = time.monotonic()
        while time.monotonic() - start < 0.8:  # an agent ticking at 15 Hz
            env.act(one_hot(rng.integers(n), n))
            time.sleep(1 / 15)
            obs = env.observe()
            check_obs(env, obs)
            if obs["is_last"]:
                assert obs["is_terminal"]
                env.reset()
        frames = env.metrics()["game/frame"]
        elapsed = time.monotonic() - start
        assert 0.3 * elapsed * env.game.fps <= frames <= 2 * elapsed * env.game.fps + 2
        env.reset()  # (a game that just ended waits for a reset)
        frames = env.metrics()["game/frame"]
        poll("frames without an action", lambda: env.metrics()["game/frame"] - frames >= 3, timeout=5.0)
    finally:
        env.close()


@pytest.mark.parametrize("cls", ALL, **by_name)
def test_seeded_games_repeat(cls):
    def trajectory(seed):
        game = cls(seed=seed)
        rng = np.random.default_rng(5)
        states = []
        for _ in range(200):
            game.tick(frozenset(game.actions[rng.integers(len(game.actions))]))
            states.append(game.game_state())
            if game.game_over:
                game.reset()
        return np.stack(states)

    np.testing.assert_array_equal(trajectory(3), trajectory(3))
    assert not np.array_equal(trajectory(3), trajectory(4))


@pytest.mark.parametrize("cls", ALL, **by_name)
def test_bad_options_are_user_errors(cls):
    with pytest.raises(UserError, match="no_such_option"):
        cls(seed=0, no_such_option=1)
    with pytest.raises(UserError):
        cls(seed=0, width=3)
    with pytest.raises(UserError):
        GameEnv(cls(seed=0), clock="sometimes")


# --- the game base's real-time clock --------------------------------------------------------------


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
