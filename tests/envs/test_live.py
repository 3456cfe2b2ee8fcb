"""The live-game env against real programs on a private Xvfb display.

The built-in Catcher runs as a separate process in a real window (`--window --export`): the env finds the
window, captures it, holds keys with XTest, reads score and position from the game's memory through
/proc/PID/mem and computes rewards; an actor run on it writes replay whose rewards match the game's own
score log. Keys are checked on the X server itself (query_keymap on a separate connection).
"""

from __future__ import annotations

import dataclasses
import json
import os
import pathlib
import platform
import re
import shutil
import signal
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest
from live_fixtures import (
    ROOT,
    KeyWatch,
    eventually,
    fake_key,
    key_down,
    running_game,
    stop_process,
    wait_for_line,
    write_profile,
)
from procfs import stopped

from dreamer_live import config as configlib
from dreamer_live.config import dump_yaml, read_yaml
from dreamer_live.envs.live.profile import Condition, ResetStep
from dreamer_live.errors import UserError

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="X11 tests: Linux only")

RIGHT, LEFT, IDLE = np.eye(3, dtype=np.float32)[[2, 1, 0]]


def live_config(display, profile: pathlib.Path, **overrides):
    """The catcher_live preset on this display with this profile."""
    return configlib.resolve(["catcher_live"], {"env.profile": str(profile), "env.live.display": display.name,
                                                "env.live.wait_s": 60.0, **overrides})


def make(display, profile, **overrides):
    from dreamer_live.envs import make_env
    return make_env(live_config(display, profile, **overrides))


def hold(env, action, seconds: float, hz: float = 20.0) -> list[dict]:
    """Act and observe at `hz` for `seconds`; the observations."""
    out = []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        env.act(action)
        time.sleep(1 / hz)
        out.append(env.observe())
    return out


def test_plays_catcher_in_a_window(xvfb, tmp_path, capsys):
    """Finds the window, frames change, held keys move the paddle, values and rewards match the game; a
    reset whose condition fails runs again from its first step, `retries` times, then goes on."""
    conn = xvfb.xlib()
    with running_game(xvfb, tmp_path, "catcher", "--option", "init_lives=1000") as game:
        env = make(xvfb, write_profile(tmp_path, game.export))
        try:
            assert env.obs_space["image"].shape == (64, 64, 3)
            first = env.reset()
            assert first["is_first"] and first["image"].shape == (64, 64, 3)
            assert first["image"].dtype == np.uint8
            start_time, start_score = time.time(), float(first["log/score"])

            right = hold(env, RIGHT, 1.0)
            assert key_down(conn, "Right") and not key_down(conn, "Left")
            assert game.read("x") > 50  # pushed to the right wall
            left = hold(env, LEFT, 1.0)
            assert key_down(conn, "Left") and not key_down(conn, "Right")
            assert game.read("x") < 14
            steps = right + left + hold(env, IDLE, 4.0)
            end_time = time.time()
            assert not key_down(conn, "Left") and not key_down(conn, "Right")

            # What the env read is what the game holds.
            assert float(steps[-1]["log/x"]) == pytest.approx(game.read("x"), abs=1e-3)
            # Frames change (the fruit falls, the paddle moves).
            distinct = {obs["image"].tobytes() for obs in steps}
            assert len(distinct) > len(steps) // 4
            # Rewards are the score's changes, and the game's own log agrees.
            rewards = [float(obs["reward"]) for obs in steps]
            assert sum(rewards) == pytest.approx(float(steps[-1]["log/score"]) - start_score)
            logged = [e["reward"] for e in game.events() if start_time <= e["time"] <= end_time]
            assert logged, "no fruit landed in 6 s"
            assert abs(sum(rewards) - sum(logged)) <= 1  # at most one event on a boundary
            assert sum(r != 0 for r in rewards) >= len(logged) - 1
            assert not any(obs["is_last"] for obs in steps)
            metrics = env.metrics()
            assert 0 < metrics["live/capture_ms"] < 200
            assert metrics["live/input_ms_max"] > 0

            env.profile = dataclasses.replace(env.profile, reset=(
                ResetStep(keys=("left",), hold_s=0.1),
                ResetStep(until=Condition("x", "above", 1000.0), timeout_s=0.2, retries=2)))
            watch = KeyWatch(xvfb, ("Left",))
            capsys.readouterr()
            assert env.reset()["is_first"]
            watch.close()
            out = capsys.readouterr().out
            assert "again from the first step (retry 1 of 2)" in out and "(retry 2 of 2)" in out
            assert out.count("did not reach the condition") == 3 and out.endswith("going on\n")
            assert watch.presses("Left") == 3
        finally:
            env.close()
        assert not key_down(conn, "Left") and not key_down(conn, "Right")
    conn.close()


CHILD = textwrap.dedent("""
    import signal, sys, time
    import numpy as np
    from dreamer_live import config as configlib
    if sys.argv[4:] == ["ctrl-c"]:  # Ctrl-C as at a terminal, whatever pytest was started with
        signal.signal(signal.SIGINT, signal.default_int_handler)
    from dreamer_live.envs import make_env
    env = make_env(configlib.resolve(["catcher_live"], dict(
        {"env.profile": sys.argv[1], "env.live.display": sys.argv[2], "env.live.wait_s": 20.0})))
    env.reset()
    env.act(np.eye(3, dtype=np.float32)[2])
    print("holding", flush=True)
    if sys.argv[3] == "crash":
        time.sleep(0.5)
        raise RuntimeError("simulated crash")
    while True:
        env.act(np.eye(3, dtype=np.float32)[2])
        time.sleep(0.05)
        env.observe()
""")


def start_child(xvfb, profile, ignore_sigint: bool = False) -> subprocess.Popen:
    """The CHILD loop; `ignore_sigint`: started with Ctrl-C ignored, as `cmd &` in a script or nohup
    starts it (and everything it starts: pytest run that way passes it on); otherwise with Ctrl-C as
    at a terminal, whatever pytest was started with."""
    ignore = ["sh", "-c", 'trap "" INT; exec "$0" "$@"'] if ignore_sigint else []
    return subprocess.Popen([*ignore, sys.executable, "-c", CHILD, str(profile), xvfb.name, "loop",
                             *([] if ignore_sigint else ["ctrl-c"])],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=xvfb.env())


@pytest.mark.parametrize("how", ["crash", "SIGTERM", "SIGINT"])
def test_keys_released_on_crash_and_signals(xvfb, tmp_path, how):
    """A held key goes up when the process holding it crashes or is told to stop."""
    conn = xvfb.xlib()
    with running_game(xvfb, tmp_path) as game:
        profile = write_profile(tmp_path, game.export)
        proc = subprocess.Popen([sys.executable, "-c", CHILD, str(profile), xvfb.name,
                                 "crash" if how == "crash" else "loop", "ctrl-c"],
                                cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env=xvfb.env())
        try:
            wait_for_line(proc, "holding")
            assert key_down(conn, "Right") or proc.poll() is not None
            if how == "crash":
                assert proc.wait(20) != 0
                assert "simulated crash" in proc.stderr.read()
            else:  # it stops on the signal itself, not on stop_process's SIGKILL
                assert stop_process(proc, getattr(signal, how)) != -signal.SIGKILL
            assert not key_down(conn, "Right")
        finally:
            stop_process(proc, signal.SIGKILL)
    conn.close()


ROUND_TRIPS = textwrap.dedent("""
    import sys
    from Xlib import display
    from dreamer_live.envs.live import keys
    conn = display.Display(sys.argv[1])
    holder = keys.KeyHolder(keys.XTestKeys(conn))  # held: released holders leave keys.py's registry
    holder.set({"right"})
    print("holding", flush=True)
    while True:
        conn.query_keymap()  # round trips on the key holder's own connection, one after another
""")
# The system calls python-xlib waits for a reply in: poll, select, pselect6, ppoll (x86-64); pselect6,
# ppoll (arm64, which has no poll or select).
WAITING_SYSCALLS = {"x86_64": {"7", "23", "270", "271"}, "aarch64": {"72", "73"}}.get(platform.machine())


def test_a_signal_inside_a_round_trip_still_releases_the_keys(xvfb):
    """SIGTERM while the key holder's X connection waits for a reply (the server grabbed by another
    client, so the reply cannot come): once the server answers again, the keys go up and the process
    stops. python-xlib has no locks, so a release sent on the interrupted connection would spin forever
    behind the read the signal interrupted; the handler uses a connection of its own."""
    if not pathlib.Path("/proc/self/syscall").exists() or WAITING_SYSCALLS is None:
        pytest.skip("no /proc/PID/syscall, or unknown system call numbers, to see the child wait")
    conn = xvfb.xlib()
    proc = subprocess.Popen([sys.executable, "-c", ROUND_TRIPS, xvfb.name], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=xvfb.env())
    syscall = pathlib.Path(f"/proc/{proc.pid}/syscall")
    try:
        wait_for_line(proc, "holding")
        assert key_down(conn, "Right")
        conn.grab_server()
        conn.sync()
        assert eventually(lambda: syscall.read_text().split()[0] in WAITING_SYSCALLS), "never blocked"
        proc.send_signal(signal.SIGTERM)
        conn.ungrab_server()
        conn.sync()
        assert proc.wait(10) == -signal.SIGTERM
        assert not key_down(conn, "Right")
    finally:
        stop_process(proc, signal.SIGKILL)
        conn.close()


def test_a_terminal_condition_ends_the_episode_after_steps(xvfb, tmp_path):
    """`after_steps: 3` on game_over: the episode goes on for 3 observations after the game ends (a
    death animation a world model can see), then ends as a death."""
    with running_game(xvfb, tmp_path, "catcher", "--option", "init_lives=1") as game:
        env = make(xvfb, write_profile(tmp_path, game.export, terminal=[
            {"value": "game_over", "above": 0.5, "after_steps": 3}]))
        live = env.unwrapped if hasattr(env, "unwrapped") else env
        try:
            env.reset()
            over, steps = [], []
            while not (steps and steps[-1]["is_last"]) and len(steps) < 600:  # a miss in ~2-4 s
                env.act(LEFT)  # the paddle at the wall misses every fruit
                time.sleep(0.05)
                steps.append(env.observe())
                over.append(live._prev["game_over"] > 0.5)
        finally:
            env.close()
    assert steps[-1]["is_last"] and steps[-1]["is_terminal"], "no game over in 30 s"
    ended = over.index(True)
    assert len(steps) - 1 == ended + 3 and not any(s["is_last"] for s in steps[:-1])


def test_rewards_pay_score_increases_and_nothing_for_a_new_game(xvfb, tmp_path):
    """The score with `increases_only` and `restart: 0`, the lives with `restart: 2`: a miss costs the
    life's -0.5 and nothing of the score's fall; when the game starts a new one by itself (score back to
    0, lives back to 2), that step pays nothing, where plain weights paid the jump back as a reward. The
    paddle's x with `record`: only rises past the episode's best pay (right, back left, partly right
    again, then to the wall: the second rise pays nothing)."""
    x_weight = 1e-3
    with running_game(xvfb, tmp_path, "catcher", "--option", "init_lives=2", "--auto-restart", "0.3") as game:
        env = make(xvfb, write_profile(tmp_path, game.export, terminal=[], reward={
            "score": {"weight": 1.0, "increases_only": True, "restart": 0},
            "lives": {"weight": 0.5, "restart": 2}, "x": {"weight": x_weight, "record": True}}))
        try:
            steps = [env.reset()]
            for action, seconds in ((RIGHT, 0.6), (LEFT, 0.4), (RIGHT, 0.15)):
                steps += hold(env, action, seconds)
            while float(steps[-1]["log/episode"]) < 1 and len(steps) < 900:  # a new game in ~5-10 s
                env.act(LEFT)  # the paddle at the wall misses every fruit
                time.sleep(0.05)
                steps.append(env.observe())
        finally:
            env.close()
    value = {n: [float(s[f"log/{n}"]) for s in steps] for n in ("score", "lives", "episode", "x")}
    x, best = value["x"], np.maximum.accumulate(value["x"])
    record = [0.0] + [x_weight * max(0.0, x[i] - best[i - 1]) for i in range(1, len(steps))]
    assert sum(record) == pytest.approx(x_weight * (best[-1] - x[0]), rel=1e-5) and best[-1] > x[0]
    assert any(x[i] > x[i - 1] and x[i] <= best[i - 1] for i in range(1, len(x))), x  # a rise that pays nothing
    rewards = [float(s["reward"]) - r for s, r in zip(steps, record)]  # the score's and the lives' part
    # the step that read the new game's lives (score and lives may change in reads a tick apart)
    rises = [i for i in range(1, len(steps)) if value["lives"][i] > value["lives"][i - 1]]
    assert rises and value["lives"][rises[0]] == 2, "no new game in 45 s"
    new_game = rises[0]
    lost = [i for i in range(1, new_game) if value["lives"][i] < value["lives"][i - 1]]
    # x pays nothing at a new game (the paddle comes back below its best) nor at a miss (it is at the
    # wall): those steps' rewards are the score's and the lives' alone, exactly as without x
    assert all(record[i] == 0 for i in [new_game, *lost])
    assert rewards[new_game] == 0  # plain weights: +1 for the lives, and the score's jump back to 0
    assert len(lost) == 2 and all(rewards[i] == -0.5 for i in lost)
    # every other step pays a catch's +1 (a fruit can land at the wall) and nothing else; the score's
    # jump back to 0 (its restart, maybe read a tick before the lives') pays nothing. Steps where x
    # paid too are compared to float32 precision (the env sums the terms in float64, stores float32).
    score = value["score"]

    def paid(i, r):
        want = 0.0 if score[i] == 0 else max(0.0, score[i] - score[i - 1])
        return (r == want and r >= 0) if record[i] == 0 else r == pytest.approx(want, abs=1e-6)

    assert all(paid(i, r) for i, r in enumerate(rewards) if i not in lost and i != new_game and i > 0), rewards
    assert not any(s["is_last"] for s in steps)


def test_outside_play_nothing_is_observed_and_the_reset_steps_run_until_it_plays(xvfb, tmp_path, capsys,
                                                                                  monkeypatch):
    """`playing: game_over below 0.5` and no terminal condition: a game over cuts the episode as a
    truncation at the last step in play, said in one line; reset() then observes nothing while the
    game-over screen shows, runs the reset steps again (every PLAY_RETRY_S), says once that play has not
    come back for env.live.out_of_play_s, and returns when the game plays again (it restarts itself
    after 2.5 s). The second cut is counted, not said again."""
    from dreamer_live.envs.live import env as envmod
    monkeypatch.setattr(envmod, "PLAY_RETRY_S", 0.5)
    with running_game(xvfb, tmp_path, "catcher", "--option", "init_lives=1", "--auto-restart", "2.5") as game:
        env = make(xvfb, write_profile(tmp_path, game.export, terminal=[],
                                       playing=[{"value": "game_over", "below": 0.5}],
                                       reset=[{"keys": ["up"], "hold_s": 0.05}]),
                   **{"env.live.out_of_play_s": 1.0})
        watch = KeyWatch(xvfb, ("Up",))
        try:
            for game_over in range(2):
                began = time.monotonic()
                steps = [env.reset()]
                waited = time.monotonic() - began
                while not steps[-1]["is_last"] and len(steps) < 600:  # a miss in ~2-4 s
                    env.act(LEFT)  # the paddle at the wall misses every fruit
                    time.sleep(0.05)
                    steps.append(env.observe())
                assert steps[-1]["is_last"] and not steps[-1]["is_terminal"], "no game over in 30 s"
                assert all(float(s["log/game_over"]) == 0 for s in steps)  # every step in play
                out = capsys.readouterr().out
                if game_over == 0:
                    assert waited < 1.0 and watch.presses("Up") == 1
                    assert out.count("live: the game left play (game_over below 0.5 is false: "
                                     "game_over = 1)") == 1
                else:
                    assert waited >= 2.0 and watch.presses("Up") >= 4  # the first run, then again
                    assert out.count("live: the game has not been in play for 1 s") == 1
                    assert "left play" not in out
            assert env.metrics()["live/out_of_play"] == 2
        finally:
            watch.close()
            env.close()


def _libc():
    """This process's libc with mmap and munmap typed for pages of the tests' own memory."""
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype, libc.mmap.argtypes = ctypes.c_void_p, [
        ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    return libc


def map_page(at: int | None = None) -> int:
    """A fresh read-write page of this process (at `at` exactly when given): memory a test can unmap."""
    import ctypes
    import mmap
    flags, prot = mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS, mmap.PROT_READ | mmap.PROT_WRITE
    address = _libc().mmap(at, 4096, prot, flags | (0x10 if at else 0), -1, 0)  # 0x10: MAP_FIXED
    assert address not in (None, ctypes.c_void_p(-1).value)
    return address


def unmap_page(address: int) -> None:
    """Unmap a page of map_page's: reads of it then fail."""
    assert _libc().munmap(address, 4096) == 0


def test_garbage_and_unreadable_memory_values_are_never_stored(xvfb, tmp_path, capsys, record_property):
    """Memory values read from this test's own process: `x` turns to 1e9 (a pointer chain now pointing
    at garbage), `score` leaves its profile range, the page holding `y` is unmapped (a failed read),
    `x` turns to NaN. Each time the episode is cut at the step before (no reward, no observation of
    it), one line per value names it and what was read (the second bad `x` only counted), and reset()
    waits until the values read sane again."""
    import ctypes

    page = map_page()
    score, x = ctypes.c_double(1.0), ctypes.c_double(5.0)
    y = ctypes.c_double.from_address(page)
    y.value = 7.0
    export = tmp_path / "export.json"
    export.write_text(json.dumps({"pid": os.getpid(),  # the profile's own values stand over these
                                  "values": {"score": {"address": ctypes.addressof(score)}}}))
    profile = tmp_path / "own.yaml"
    profile.write_text(dump_yaml({
        "window": {"screen_region": [0, 0, 64, 64]}, "actions": {"idle": [], "right": ["right"]},
        "memory": {"addresses_from": str(export), "values": {
            "score": {"address": ctypes.addressof(score), "type": "f64", "range": [0, 100]},
            "x": {"address": ctypes.addressof(x), "type": "f64"},
            "y": {"address": page, "type": "f64"}}},
        "obs": {"vector": ["score", "x", "y"]}, "reward": {"score": 1.0}}))
    env = make(xvfb, profile, **{"env.obs": "vector"})

    def set_later(seconds, action):
        timer = threading.Timer(seconds, action)
        timer.start()
        return timer

    try:
        env.reset()
        score.value = 2.0
        assert float(env.observe()["reward"]) == 1.0
        faults = [(lambda: setattr(x, "value", 1e9), lambda: setattr(x, "value", 6.0),
                   "memory value 'x' read 1e+09, far beyond any reading before (up to 6)"),
                  (lambda: setattr(score, "value", 500.0), lambda: setattr(score, "value", 3.0),
                   "memory value 'score' read 500, outside its range [0, 100]"),
                  (lambda: unmap_page(page), lambda: map_page(page),
                   "memory value 'y' could not be read"),
                  (lambda: setattr(x, "value", float("nan")), lambda: setattr(x, "value", 6.0), None)]
        for i, (fault, repair, line) in enumerate(faults):
            if i == 0:
                x.value = 6.0
                env.observe()  # the largest x seen: 6
            capsys.readouterr()
            fault()
            cut = env.observe()
            assert cut["is_last"] and not cut["is_terminal"] and float(cut["reward"]) == 0
            assert np.isfinite(cut["vector"]).all() and cut["vector"].max() < 100
            out = capsys.readouterr().out
            assert out.count("live: memory value") == (line is not None), out
            if line:
                assert line in out and "episode cut at the step before" in out
                record_property("lines", out.strip())  # bench/faults.py's table
            began = time.monotonic()
            repairing = set_later(0.5, repair)
            first = env.reset()
            repairing.join()
            assert time.monotonic() - began >= 0.45 and first["is_first"]
            assert np.isfinite(first["vector"]).all() and first["vector"].max() < 100
        metrics = env.metrics()
        assert metrics["live/bad_values"] == 4 and metrics["live/memory_errors"] >= 1
    finally:
        env.close()


def test_a_value_that_comes_and_goes_reads_absent_and_the_state_vector_is_scaled(xvfb, tmp_path, capsys):
    """`ball` lives on a page of this test's own process that is unmapped (LBreakout2's ball between two
    balls: its chain cannot be read): with `absent` it reads that value, the episode goes on, nothing
    is said or counted as a memory error; mapped again it reads the ball. The state vector holds each
    reading times its `scale`; rewards pay the reading itself."""
    import ctypes

    page = map_page()
    ctypes.c_double.from_address(page).value = 320.0
    score = ctypes.c_double(0.0)
    export = tmp_path / "export.json"  # tells the env this process; the profile's values stand over it
    export.write_text(json.dumps({"pid": os.getpid(), "values": {"score": {"address": ctypes.addressof(score)}}}))
    profile = tmp_path / "own.yaml"
    profile.write_text(dump_yaml({
        "window": {"screen_region": [0, 0, 64, 64]}, "actions": {"idle": [], "right": ["right"]},
        "memory": {"addresses_from": str(export), "values": {
            "score": {"address": ctypes.addressof(score), "type": "f64", "scale": 0.5},
            "ball": {"address": page, "type": "f64", "range": [-100, 740], "absent": -100,
                     "scale": 1 / 640}}},
        "obs": {"vector": ["score", "ball"]}, "reward": {"score": 1.0}}))
    env = make(xvfb, profile, **{"env.obs": "vector"})
    try:
        np.testing.assert_allclose(env.reset()["vector"], [0.0, 0.5])
        unmap_page(page)
        score.value = 3.0
        gone = env.observe()
        assert not gone["is_last"] and float(gone["reward"]) == 3.0
        np.testing.assert_allclose(gone["vector"], [1.5, -100 / 640])
        assert float(gone["log/ball"]) == -100
        assert map_page(page) == page
        ctypes.c_double.from_address(page).value = 64.0
        back = env.observe()
        assert not back["is_last"] and float(back["reward"]) == 0
        np.testing.assert_allclose(back["vector"], [1.5, 0.1])
        assert "live: memory value" not in capsys.readouterr().out
        metrics = env.metrics()
        assert metrics["live/bad_values"] == 0 and metrics["live/memory_errors"] == 0
    finally:
        env.close()


def test_check_prints_rewards_and_episode_ends_and_writes_nothing(xvfb, tmp_path):
    """`python -m dreamer_live.check` on the Catcher window: random keys for 12 s; each miss prints its
    reward with the values that changed, the game over prints a death and the reset, the last line
    sums it up; no file is written. (A fruit falls every ~1.3 s: in 6 s the random keys once caught
    all four and missed none.)"""
    with running_game(xvfb, tmp_path, "catcher", "--option", "init_lives=1") as game:
        profile = write_profile(tmp_path, game.export)
        # The one life is lost unplayed within seconds; wait for it, so that check's first reset meets a
        # game-over screen (Enter restarts it) rather than a game that ends between the key and the wait.
        assert eventually(lambda: game.read("game_over") > 0.5, timeout=30)
        before = sorted(tmp_path.rglob("*"))
        result = subprocess.run(
            [sys.executable, "-m", "dreamer_live.check", "--configs", "catcher_live", "--seconds", "12",
             "--env.profile", str(profile), "--env.live.display", xvfb.name],
            cwd=tmp_path, env=xvfb.env(), capture_output=True, text=True, timeout=120)
        assert sorted(tmp_path.rglob("*")) == before
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    miss = [line for line in lines if "reward -1.000" in line and "lives 1 -> 0" in line]
    assert miss and "score" in miss[0], result.stdout
    ends = [i for i, line in enumerate(lines) if "episode ended: death (is_terminal)" in line]
    assert ends and "reset (" in lines[ends[0] + 1]
    assert lines[-1].startswith("check: ") and f"episode ends: {len(ends)} deaths, 0 cut" in lines[-1]
    assert "lives 0..1" in lines[-1]


def test_a_second_player_on_a_played_window_is_refused_in_one_line(xvfb, tmp_path, record_property):
    """One game window, one player: while an env plays the Catcher window, `check` on the same window
    (as a second actor, `record` or `check` would) stops with one line naming the window and the
    process that plays it, exit status 2, and sends no key; once the first has closed, it plays."""
    with running_game(xvfb, tmp_path, "catcher", "--option", "init_lives=1000") as game:
        profile = write_profile(tmp_path, game.export)
        env = make(xvfb, profile)
        second = [sys.executable, "-m", "dreamer_live.check", "--configs", "catcher_live", "--seconds", "1",
                  "--env.profile", str(profile), "--env.live.display", xvfb.name]
        try:
            env.reset()
            result = subprocess.run(second, cwd=tmp_path, env=xvfb.env(), capture_output=True, text=True,
                                    timeout=120)
            line = result.stderr.strip().splitlines()[-1]
            record_property("lines", line)  # bench/faults.py's table
            assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
            assert re.fullmatch(
                r"check: error: game window 'dreamer_live Catcher[^']*' \(X window 0x[0-9a-f]+ on display "
                rf"{re.escape(xvfb.name)}\) is already played by another dreamer_live process \(pid "
                rf"{os.getpid()} on host .*, lock .*\.lock\); stop it first or give each actor a game "
                r"of its own", line), line
            assert " step " not in result.stdout  # it never played
        finally:
            env.close()
        result = subprocess.run(second, cwd=tmp_path, env=xvfb.env(), capture_output=True, text=True,
                                timeout=120)
        assert result.returncode == 0, result.stderr


def test_check_stopped_by_sigterm_stops_the_game_it_launched(xvfb, tmp_path):
    """`check --configs catcher_live` starts the Catcher window itself (the project's own profile); a
    SIGTERM mid-play ends it as Ctrl-C does: one line, exit status 0, the game it launched stopped and
    that game's output log removed (before, the game ran on and its log stayed)."""
    import re

    from procfs import alive
    temp = tmp_path / "tmp"  # the launched game's output log goes here (TMPDIR), apart from other workers'
    temp.mkdir()
    proc = subprocess.Popen(
        [sys.executable, "-m", "dreamer_live.check", "--configs", "catcher_live", "--seconds", "60",
         "--env.live.display", xvfb.name], cwd=tmp_path, env=xvfb.env(TMPDIR=str(temp)),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines = wait_for_line(proc, " step ")  # playing
    game = int(re.search(r"live: playing .* \(pid (\d+)\)", "".join(lines)).group(1))
    assert alive(game) and list(temp.glob("dreamer_live-catcher-*.log"))
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(30) == 0, proc.stderr.read()[-2000:]
    assert eventually(lambda: "check: stopped (SIGTERM)\n" in lines), lines
    assert not alive(game)
    assert not list(temp.glob("dreamer_live-catcher-*.log"))


def test_a_window_not_wholly_on_the_screen_is_cut_like_a_gone_one_in_one_line(xvfb, tmp_path, capsys,
                                                                              record_property):
    """`xdotool windowmove` takes the game window wholly, then partly, off the 1024x768 screen: each
    time the episode is cut with keys released and one line (no padded picture stored as play, no flood
    of lines while it stays off), and reset() waits quietly until the window is back."""
    if shutil.which("xdotool") is None:
        pytest.skip("xdotool is not installed (apt-get install xdotool)")
    conn = xvfb.xlib()
    with running_game(xvfb, tmp_path, "catcher", "--option", "init_lives=1000") as game:
        env = make(xvfb, write_profile(tmp_path, game.export))
        live = env.unwrapped if hasattr(env, "unwrapped") else env
        try:
            env.reset()
            handle = str(live._window.handle)
            home = live.windows.geometry(live._window.handle)[:2]

            def move(x, y):
                subprocess.run(["xdotool", "windowmove", handle, str(x), str(y)], env=xvfb.env(),
                               check=True, timeout=10)

            for where in ((2000, 100), (900, 600)):  # wholly off; the right and bottom edges off
                capsys.readouterr()
                move(*where)
                steps = []
                while not (steps and steps[-1]["is_last"]) and len(steps) < 100:
                    steps += hold(env, RIGHT, 0.05)
                assert steps[-1]["is_last"] and not steps[-1]["is_terminal"]
                assert not key_down(conn, "Right")
                moving_back = threading.Timer(1.5, move, home)
                moving_back.start()
                began = time.monotonic()
                first = env.reset()
                moving_back.join()
                assert first["is_first"] and time.monotonic() - began >= 1.4
                out = capsys.readouterr().out
                assert out.count("is not wholly on the screen") == 1, out
                assert out.count("live: playing") == 1
                for line in out.splitlines():
                    record_property("lines", line)  # bench/faults.py's table
        finally:
            env.close()
    conn.close()


def focus(conn, window_id: int) -> None:
    from Xlib import X
    conn.create_resource_object("window", window_id).set_input_focus(X.RevertToParent, X.CurrentTime)
    conn.sync()


def test_focus_loss_pause_and_stop_release_keys(xvfb, tmp_path):
    """Focus loss and the pause key end the episode with keys up; reset waits; the stop key stops."""
    conn = xvfb.xlib()
    other = conn.screen().root.create_window(0, 0, 50, 50, 0, conn.screen().root_depth)
    other.map()
    conn.sync()
    # A game that does not end here (with 3 lives it ended mid-test: a reset then waited out its 5 s)
    with running_game(xvfb, tmp_path, "catcher", "--option", "init_lives=1000") as game:
        profile = write_profile(tmp_path, game.export)
        env = make(xvfb, profile)
        live = env.unwrapped if hasattr(env, "unwrapped") else env
        try:
            env.reset()
            game_window = live._window.handle
            hold(env, RIGHT, 0.3)
            assert key_down(conn, "Right")
            # Focus moves to another window: keys up, the episode ends as a truncation.
            focus(conn, other.id)
            env.act(RIGHT)
            assert not key_down(conn, "Right")
            obs = env.observe()
            assert obs["is_last"] and not obs["is_terminal"]
            # reset waits for the focus to come back.
            threading.Timer(0.8, focus, (xvfb.xlib(), game_window)).start()
            began = time.monotonic()
            assert env.reset()["is_first"]
            assert time.monotonic() - began >= 0.7

            # The pause key: keys up, episode over, reset waits until it is pressed again.
            hold(env, RIGHT, 0.3)
            assert key_down(conn, "Right")
            fake_key(conn, "F9", True)
            env.act(RIGHT)
            fake_key(conn, "F9", False)
            assert not key_down(conn, "Right")
            assert env.observe()["is_last"]

            def resume():
                c = xvfb.xlib()
                fake_key(c, "F9", True)
                time.sleep(0.2)
                fake_key(c, "F9", False)
                c.close()

            threading.Timer(0.8, resume).start()
            began = time.monotonic()
            assert env.reset()["is_first"]
            assert time.monotonic() - began >= 0.7
            hold(env, RIGHT, 0.3)
            assert key_down(conn, "Right")
            assert env.metrics()["live/pauses"] == 1 and env.metrics()["live/focus_losses"] == 1
        finally:
            env.close()
        assert not key_down(conn, "Right")

        # The stop key (in a child: it signals its own process) releases keys and stops it, also in
        # a process started with SIGINT ignored (where the signal to itself is dropped).
        for ignore_sigint in (False, True):
            proc = start_child(xvfb, profile, ignore_sigint)
            try:
                lines = wait_for_line(proc, "holding")
                assert eventually(lambda: key_down(conn, "Right"))
                # Held until the child stops: the env polls its hotkeys each act/observe, and a
                # loaded machine can stall the child longer than a short tap.
                fake_key(conn, "F10", True)
                try:
                    proc.wait(10)
                finally:
                    fake_key(conn, "F10", False)
                assert any("f10 pressed" in line for line in lines)
                assert not key_down(conn, "Right")
            finally:
                stop_process(proc)
    conn.close()


def test_game_exit_ends_episode_and_relaunches(xvfb, tmp_path, capsys):
    """The game dies: the episode ends (not terminal), keys go up; reset launches it again, first saying
    how the game exited and where its output is (kept); close() stops the new one and removes its log."""
    import re

    export = tmp_path / "launched.json"
    profile = write_profile(tmp_path, export, launch={"command": [
        "{python}", "-m", "dreamer_live.envs.games.catcher", "--window", "--export", str(export)]})
    conn = xvfb.xlib()
    env = make(xvfb, profile, **{"env.live.launch": True})  # a profile outside CONFIG_DIR/games/
    live = env.unwrapped if hasattr(env, "unwrapped") else env
    pids = []
    try:
        assert env.reset()["is_first"]
        pids.append(json.loads(export.read_text())["pid"])
        hold(env, RIGHT, 0.3)
        assert key_down(conn, "Right")
        os.kill(pids[0], 9)
        obs = None
        for _ in range(40):
            env.act(RIGHT)
            time.sleep(0.05)
            obs = env.observe()
            if obs["is_last"]:
                break
        assert obs["is_last"] and not obs["is_terminal"]
        assert not key_down(conn, "Right")
        first_log = live.launcher.log
        assert env.reset()["is_first"]  # relaunched and reconnected
        pids.append(json.loads(export.read_text())["pid"])
        assert pids[1] != pids[0] and live._reader.pid == pids[1]
        assert env.metrics()["live/reconnects"] >= 1
        said = re.findall(r"live: the game \(pid (\d+)\) exited on its own with (.*); its output is in (.*)",
                          capsys.readouterr().out)
        assert said == [(str(pids[0]), "killed by SIGKILL", str(first_log))] and first_log.exists()
    finally:
        env.close()
    assert not os.path.exists(f"/proc/{pids[-1]}")  # close() stopped the game it launched
    assert not live.launcher.log.exists()
    first_log.unlink()
    conn.close()


def test_missing_window_and_bad_chain_fail_in_one_line(xvfb, tmp_path, monkeypatch, capsys):
    """A wrong profile fails with one clear line: no such window, a pointer chain that breaks. With
    `playing:` conditions a chain that does not read at the start is no error (a game's menu may hold
    its pointer null): reset() waits for play and, after env.live.out_of_play_s, says why in one line."""
    import re

    from dreamer_live.envs.live import env as live_env, keys as keyslib
    profile = write_profile(tmp_path, tmp_path / "none.json", window={"title": "No Such Game"})
    env = make(xvfb, profile, **{"env.live.wait_s": 0.5})
    with pytest.raises(UserError, match=r"no window with title containing 'No Such Game' after") as e:
        env.reset()
    assert "\n" not in str(e.value)
    env.close()

    monkeypatch.setattr(live_env, "CHAIN_RETRY_S", 0.3)
    with running_game(xvfb, tmp_path) as game:
        exe = pathlib.Path(os.readlink(f"/proc/{game.pid}/exe")).name
        data = read_yaml(write_profile(tmp_path, game.export))
        data["memory"]["values"] = {"bad": {"module": exe, "offset": 0, "offsets": [0, 8], "type": "f32"}}
        path = tmp_path / "bad_chain.yaml"
        path.write_text(dump_yaml(data))
        env = make(xvfb, path)
        with pytest.raises(UserError, match=rf'bad memory value: bad: "{exe}"\+0 -> \[\+0\] -> \[\+8\]: '
                                            r"cannot read the pointer at 0x[0-9A-F]+ \(step 2\)") as e:
            env.reset()
        assert "\n" not in str(e.value)
        env.close()

        data["playing"] = [{"value": "bad", "above": -1}]
        path.write_text(dump_yaml(data))
        env = make(xvfb, path, **{"env.live.out_of_play_s": 0.3})
        capsys.readouterr()
        def wait_for_play():
            try:
                env.reset()
            except KeyboardInterrupt:  # the stop key's way out of a reset that never played
                pass
        waiting = threading.Thread(target=wait_for_play)
        waiting.start()
        printed = []
        try:
            assert eventually(lambda: printed.append(capsys.readouterr().out) or re.search(
                r"live: the game has not been in play for 0.3 s \(memory value 'bad' could not be read "
                rf'\(bad: "{exe}"\+0 -> \[\+0\] -> \[\+8\]: cannot read the pointer at 0x[0-9A-F]+ \(step 2\)\)\); '
                r"the reset steps keep running \(env.live.out_of_play_s\)", "".join(printed)), 20), printed
        finally:
            keyslib.STOP_EVENT.set()  # as the stop key does
            waiting.join(30)
            keyslib.STOP_EVENT.clear()
            env.close()


def test_ctrl_c_while_the_actor_waits_for_the_game_is_a_clean_stop(xvfb, tmp_path):
    """Ctrl-C before the game's first observation (the window not found yet, a slow start) stops the
    actor as at any other time: exit 0 and its stop line, no error."""
    profile = write_profile(tmp_path, tmp_path / "none.json", window={"title": "No Such Game"})
    proc = subprocess.Popen(
        [sys.executable, "-m", "dreamer_live.actor", "--logdir", str(tmp_path / "run"), "--configs",
         "catcher_live", "debug", "--env.profile", str(profile), "--env.live.display", xvfb.name],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=xvfb.env())
    lines = wait_for_line(proc, "waiting up to")
    proc.send_signal(signal.SIGINT)
    assert proc.wait(60) == 0, proc.stderr.read()[-2000:]
    assert eventually(lambda: any("stopped (SIGINT) after 0 steps" in line for line in lines)), lines


def test_memory_permission_error_names_the_fix(tmp_path):
    """Reading a process we may not trace gives one line with the ptrace fix."""
    if os.geteuid() != 0 or not shutil.which("setpriv"):
        pytest.skip("needs root and setpriv to drop CAP_SYS_PTRACE")
    target = subprocess.Popen([sys.executable, "-c", textwrap.dedent("""
        import ctypes, time
        ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE 0: only CAP_SYS_PTRACE may read us
        print("ready", flush=True)
        time.sleep(30)
    """)], stdout=subprocess.PIPE, text=True)
    try:
        assert target.stdout.readline().strip() == "ready"
        out = subprocess.run(
            ["setpriv", "--bounding-set", "-sys_ptrace", sys.executable, "-c",
             "import sys; from dreamer_live import cli\n"
             "from dreamer_live.envs.live.memory import LinuxMemory\n"
             f"sys.exit(cli.main(lambda argv: LinuxMemory({target.pid}))([]))"],
            cwd=ROOT, capture_output=True, text=True, timeout=60)
        if "Operation not permitted" in out.stderr and "setpriv" in out.stderr:
            pytest.skip("setpriv cannot drop capabilities here")
        assert out.returncode == 2, out.stderr
        lines = out.stderr.strip().splitlines()
        assert len(lines) == 1 and f"memory of process {target.pid}" in lines[0]
        assert "kernel.yama.ptrace_scope=0" in lines[0] and "CAP_SYS_PTRACE" in lines[0]
    finally:
        target.kill()
        target.wait()


def test_pointer_chain_in_a_real_process():
    """module base + offset and a pointer chain resolve in a live process (this one) on Linux."""
    import ctypes

    from dreamer_live.envs.live.memory import LinuxMemory, read_value, resolve
    from dreamer_live.envs.live.profile import ValueSpec

    class Player(ctypes.Structure):
        _fields_ = [("pad", ctypes.c_char * 24), ("x", ctypes.c_float), ("coins", ctypes.c_int32)]

    class World(ctypes.Structure):
        _fields_ = [("pad", ctypes.c_char * 16), ("player", ctypes.POINTER(Player))]

    player = Player(x=123.5, coins=7)
    world = World(player=ctypes.pointer(player))
    root = ctypes.pointer(world)  # a "static" pointer to the world
    root_address = ctypes.addressof(root)
    reader = LinuxMemory(os.getpid())
    try:
        x = ValueSpec("x", "f32", address=root_address, offsets=(16, 24))
        coins = ValueSpec("coins", "i32", address=root_address, offsets=(16, 28))
        assert resolve(x, reader) == ctypes.addressof(player) + 24
        assert read_value(x, reader) == 123.5 and read_value(coins, reader) == 7
        player.x = -4.25
        assert read_value(x, reader) == -4.25
        libc = next(p for _, _, _, _, p in reader.maps() if "/libc.so" in p or "/libc-" in p)
        magic = ValueSpec("magic", "u32", module=pathlib.Path(libc).name, offset=0)
        assert read_value(magic, reader) == 0x464C457F  # "\x7fELF" at the module's base
    finally:
        reader.close()


def run_actor(xvfb, logdir: pathlib.Path, *args: str, env: dict | None = None) -> None:
    """`python -m dreamer_live.actor` on the display with the debug agent; fails on a non-zero exit."""
    out = subprocess.run(
        [sys.executable, "-m", "dreamer_live.actor", "--logdir", str(logdir), "--configs", "debug", *args,
         "--env.live.display", xvfb.name, "--run.quiet", "true"],
        cwd=ROOT, capture_output=True, text=True, timeout=240, env=xvfb.env(**(env or {})))
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-3000:]


def read_replay(folder: pathlib.Path, *keys: str) -> dict[str, np.ndarray]:
    """The values of `keys` in a replay folder written by one writer stream."""
    from dreamer_live.replay import Reader
    with Reader(folder, prefetch=0, readonly=True) as reader:
        (stream,) = reader.streams
        return {k: reader.read_stream(k)[stream] for k in keys}


def read_metrics(logdir: pathlib.Path, key: str) -> list[float]:
    """Every value of `key` in DIR/metrics.jsonl, in order."""
    lines = [json.loads(line) for line in (logdir / "metrics.jsonl").read_text().splitlines()]
    return [m[key] for m in lines if key in m]


def assert_resets_are_not_lateness(logdir: pathlib.Path, ticks: dict, reset_at_least_s: float,
                                   preset: str) -> None:
    """Every reset after the first is timed as actor/reset_s; no tick (the one after a reset included)
    starts late by the reset's time, and ticks/s counts play only (near `preset`'s tick rate)."""
    from dreamer_live.envs import tick_hz
    resets = read_metrics(logdir, "actor/reset_s")
    episodes_begun = int(ticks["is_first"].sum())
    assert len(resets) >= episodes_begun >= 2 and min(resets[1:]) >= reset_at_least_s, resets
    late = ticks["tick_late_ms"]
    after_reset = late[np.flatnonzero(ticks["is_first"][:-1]) + 1]
    assert late.max() < 0.3 * reset_at_least_s * 1000, (late.max(), after_reset)
    rates = read_metrics(logdir, "actor/ticks_per_s")
    hz = tick_hz(configlib.resolve([preset], {}))
    assert min(rates[:-1] or rates) > 0.8 * hz, (hz, rates)  # a reset in some windows


@pytest.mark.slow
def test_actor_on_catcher_window_matches_score_log(xvfb, tmp_path):
    """~18 s of the actor on the Catcher window: replay rewards are the game's logged reward events;
    each game over's reset (here 1 s longer, a stand-in for a title card) is not counted as lateness."""
    with running_game(xvfb, tmp_path, "catcher", "--option", "init_lives=1") as game:
        # The game stays over during the wait (as a title card holds a game), then Enter restarts it.
        profile = write_profile(tmp_path, game.export, reset=[
            {"wait_s": 1.0}, {"keys": ["enter"], "hold_s": 0.1},
            {"until": {"value": "game_over", "below": 0.5}, "timeout_s": 5}])
        logdir = tmp_path / "run"
        run_actor(xvfb, logdir, "catcher_live", "--env.profile", str(profile), "--actor.duration", "18")
        events = game.events()
    ticks = read_replay(logdir / "replay", "reward", "tick_time", "tick_late_ms", "is_first", "is_last",
                        "image")
    rewards, times, lasts, images = (ticks[k] for k in ("reward", "tick_time", "is_last", "image"))
    assert len(rewards) > 100  # 18 s at 15 Hz less the resets (~155 ticks, 7-8 fruit)
    assert images.shape[1:] == (64, 64, 3) and len({im.tobytes() for im in images[:100]}) > 10
    inside = [e for e in events if times[0] <= e["time"] <= times[-1]]
    assert len(inside) >= 5, "too few fruit landed during the run"
    # Each reward event shows up once in replay (at most one lost at the run's edges).
    assert abs(float(rewards.sum()) - sum(e["reward"] for e in inside)) <= 1
    assert abs(int((rewards != 0).sum()) - len(inside)) <= 1
    # One miss ends a game: a terminal step, then Enter (the reset procedure) restarts it.
    assert lasts.any() and ticks["is_first"][1:].any()
    assert_resets_are_not_lateness(logdir, ticks, reset_at_least_s=1.0, preset="catcher_live")
    metrics = [json.loads(line) for line in (logdir / "metrics.jsonl").read_text().splitlines()]
    assert any("env/live/capture_ms" in m for m in metrics)


FROZEN_S, FROZEN_FOR = 1.5, 4.0  # env.live.frozen_s of the test; how long the game stays stopped


def test_a_frozen_game_is_cut_like_a_gone_one_and_play_resumes_when_it_moves(xvfb, tmp_path, record_property):
    """The game's process stopped (SIGSTOP) under the actor: once its picture and memory values have
    not changed for env.live.frozen_s, the episode ends (a truncation), keys go up, one line says so
    and no step is stored until the game runs again (SIGCONT), when a new episode begins."""
    import re

    from conftest import poll

    from dreamer_live.replay.chunk import list_chunks

    conn = xvfb.xlib()
    logdir, out = tmp_path / "run", tmp_path / "actor.out"
    with running_game(xvfb, tmp_path, "catcher", "--option", "init_lives=1000") as game:
        profile = write_profile(tmp_path, game.export)
        with out.open("w") as f:
            actor = subprocess.Popen(
                [sys.executable, "-m", "dreamer_live.actor", "--logdir", str(logdir), "--configs", "debug",
                 "catcher_live", "--env.profile", str(profile), "--env.live.display", xvfb.name,
                 "--env.live.frozen_s", str(FROZEN_S), "--run.quiet", "true", "--actor.duration", "120",
                 "--replay.chunk_seconds", "0.5"],
                cwd=ROOT, stdout=f, stderr=subprocess.STDOUT, env=xvfb.env())
        frozen = re.compile(r"live: 'dreamer_live Catcher' froze: its picture and memory values have not "
                            rf"changed for {FROZEN_S:g} s \(env.live.frozen_s\); keys released, waiting "
                            r"for the game")

        def stored(key: str) -> np.ndarray:
            return read_replay(logdir / "replay", key)[key] if list_chunks(logdir / "replay") else \
                np.zeros(0)

        try:
            poll("the actor playing", lambda: len(stored("tick_time")) >= 15, timeout=120)
            with stopped(game.pid):
                stopped_at = time.time()
                poll("the line saying it froze", lambda: frozen.search(out.read_text()), timeout=15)
                assert not key_down(conn, "Left") and not key_down(conn, "Right")
                time.sleep(max(0.0, stopped_at + FROZEN_FOR - time.time()))  # the fault lasts FROZEN_FOR s
            moved = time.time()
            def new_episode() -> bool:  # one read of both keys: a chunk may land between two
                if not list_chunks(logdir / "replay"):
                    return False
                ticks = read_replay(logdir / "replay", "tick_time", "is_first")
                return bool((ticks["tick_time"][ticks["is_first"]] > moved).any())

            poll("a new episode once it moves", new_episode, timeout=30)
            actor.send_signal(signal.SIGINT)
            assert actor.wait(60) == 0, out.read_text()[-3000:]
        finally:
            if actor.poll() is None:
                actor.kill()
                actor.wait()
    conn.close()
    text = out.read_text()
    assert len(frozen.findall(text)) == 1, text[-3000:]
    said = re.search(".*" + frozen.pattern + r"\nlive: playing 'dreamer_live Catcher'.*", text)
    assert said, text[-3000:]
    ticks = read_replay(logdir / "replay", "tick_time", "is_first", "is_last", "is_terminal")
    times = ticks["tick_time"]
    played = re.findall(r"^actor 0: stopped \(SIGINT\) after (\d+) steps", text, re.M)
    for name, value in (*(("steps_played", int(n)) for n in played), ("steps_kept", len(times)),
                        *(("lines", line) for line in said.group(0).splitlines())):
        record_property(name, value)  # bench/faults.py's table
    cut = np.flatnonzero(times <= stopped_at + FROZEN_S + 1.0)[-1]  # its step found the game frozen
    assert ticks["is_last"][cut] and not ticks["is_terminal"][cut]
    # nothing stored from then until the game moved; then a new episode
    assert times[cut + 1] > moved and ticks["is_first"][cut + 1], (times[cut - 2:cut + 3] - stopped_at)


def _supertux() -> str:
    debian = "/usr/games/supertux2"  # /usr/games is not on every PATH
    return shutil.which("supertux2") or (debian if os.path.exists(debian) else "")


@pytest.mark.skipif(not _supertux(), reason="SuperTux is not installed (apt-get install supertux)")
def test_supertux_plays_with_its_profile(xvfb, tmp_path, monkeypatch):
    """CONFIG_DIR/games/supertux.yaml: launches SuperTux, frames change, holding right moves Tux and the view, and
    a reset restarts the level."""
    from dreamer_live.envs import make_env
    monkeypatch.setenv("SUPERTUX2_USER_DIR", str(tmp_path / "supertux"))  # keep the user's saves apart
    conn = xvfb.xlib()
    env = make_env(configlib.resolve(["supertux"], {"env.live.display": xvfb.name, "env.live.wait_s": 60.0}))
    live = env.unwrapped
    actions = live.profile.action_names
    idle_action, right = (np.eye(len(actions), dtype=np.float32)[actions.index(n)] for n in ("idle", "right"))
    try:
        first = env.reset()  # starts the game, skips its title card, reads x through the pointer chain
        assert first["image"].shape == (32, 32, 1) and first["image"].dtype == np.uint8
        pid = live._reader.pid
        idle = hold(env, idle_action, 1.0, hz=15)
        x0, moving = float(idle[-1]["log/x"]), []
        # Right held until Tux is well past the view's middle, from where it scrolls (a loaded machine
        # slows the game: 1.5 s once took him 150+ px and scrolled the view too little to tell).
        deadline = time.monotonic() + 6.0
        while not moving or (float(moving[-1]["log/x"]) < x0 + 400 and time.monotonic() < deadline):
            moving += hold(env, right, 0.5, hz=15)
        assert key_down(conn, "Right")
        x1 = float(moving[-1]["log/x"])
        assert x1 > x0 + 150, (x0, x1)

        def change(observations):
            images = np.stack([o["image"].astype(np.float32) for o in observations])
            return float(np.abs(np.diff(images, axis=0)).mean())

        assert change(moving) > 5 * change(idle) + 1.0, (x0, x1)  # the view scrolls with Tux
        rewards = sum(float(o["reward"]) for o in moving)
        assert rewards == pytest.approx(0.01 * (x1 - x0), abs=0.02)
        assert not any(o["is_last"] for o in idle + moving)
        # A reset restarts the level (the pause menu's Restart Level): Tux is back at the start, not at x1.
        again = env.reset()
        assert float(again["log/x"]) == float(first["log/x"]) < x1 - 150, (first["log/x"], again["log/x"], x1)
    finally:
        env.close()
    assert not key_down(conn, "Right")  # keys released at exit
    time.sleep(0.2)
    assert not os.path.exists(f"/proc/{pid}")  # the game the env launched is stopped
    conn.close()


def test_black_window_is_reported_with_the_fix(xvfb, tmp_path):
    """A window that captures all black (as exclusive-fullscreen games do) stops with the hint."""
    from Xlib import X

    from dreamer_live.envs.live.capture import Capture, OffScreen
    conn = xvfb.xlib()
    screen = conn.screen()
    window = screen.root.create_window(300, 200, 120, 90, 0, screen.root_depth,
                                       background_pixel=screen.black_pixel, event_mask=X.ExposureMask)
    window.set_wm_name("Black Game")
    window.map()
    conn.sync()
    time.sleep(0.3)
    profile = tmp_path / "black.yaml"
    profile.write_text(dump_yaml({"window": {"title": "Black Game"},
                                  "actions": {"idle": [], "go": ["right"]}}))
    env = make(xvfb, profile, **{"env.live.black_timeout_s": 0.5})
    try:
        with pytest.raises(UserError, match="all black: an exclusive-fullscreen .* windowed or borderless"):
            env.reset()
    finally:
        env.close()
    # Only a box wholly on the screen is captured; one partly or wholly off is OffScreen, never a
    # picture padded with black.
    white = screen.root.create_window(0, 600, 60, 50, 0, screen.root_depth,
                                      background_pixel=screen.white_pixel)
    white.map()
    conn.sync()
    time.sleep(0.3)
    capture = Capture(xvfb.name)
    image = np.asarray(capture.grab((0, 600, 60, 50)))
    assert image.shape == (50, 60, 3) and (image == 255).all()
    assert capture.on_screen((0, 600, 60, 50)) and capture.on_screen((0, 0, 1024, 768))
    for box in ((-20, 600, 100, 50), (5000, 0, 10, 10), (1000, 760, 30, 30)):
        assert not capture.on_screen(box)
        with pytest.raises(OffScreen, match="is not wholly on the screen"):
            capture.grab(box)
    capture.close()
    conn.close()


@pytest.mark.slow
@pytest.mark.skipif(not _supertux(), reason="SuperTux is not installed (apt-get install supertux)")
def test_supertux_death_and_reset_under_the_actor(xvfb, tmp_path):
    """The actor on SuperTux, Tux spawned over a pit: the episode ends the profile's `after_steps` after
    the tick he dies (its `dying` flag), not at the respawn at the level's start ~3 s later, whose drop in
    x (a teleport death) would otherwise end it. The resets (title card, 1.5 s) are reported as
    actor/reset_s, not as late ticks; episodes report death and furthest x."""
    data = read_yaml(configlib.CONFIG_DIR / "games/supertux.yaml")
    after = data["terminal"][0].get("after_steps", 0)
    level = "/usr/share/games/supertux2/levels/world1/journey_begins.stl"  # a pit at x 3840-4000
    data["launch"]["command"] = [_supertux(), *data["launch"]["command"][1:-1], "--spawn-pos", "3904,200",
                                 level]
    # The profile's restart (pause menu) would take Tux to the level's start, away from the pit: keep
    # only its title-card steps. So a later episode may begin while he is still dying, and only the
    # first one is checked.
    data["reset"] = [*data["reset"][:2], {"until": {"value": "x", "above": 0}, "timeout_s": 10}]
    profile = tmp_path / "supertux_pit.yaml"
    profile.write_text(dump_yaml(data))
    logdir = tmp_path / "run"
    run_actor(xvfb, logdir, "supertux", "--env.profile", str(profile), "--env.live.launch", "true",
              "--env.stagnation.seconds", "0", "--actor.duration", "8",  # falls at once
              "--env.teleport.reward", "-5",  # marks a step that a teleport death ended
              env={"SUPERTUX2_USER_DIR": str(tmp_path / "supertux")})
    ticks = read_replay(logdir / "replay", "reward", "tick_late_ms", "is_first", "is_last", "is_terminal")
    deaths = np.flatnonzero(ticks["is_terminal"])
    assert len(deaths), "Tux did not die"
    assert ticks["is_first"][0] and not ticks["is_last"][:deaths[0]].any() and ticks["is_first"][deaths[0] + 1]
    # He falls during the title card, so he is dying from the first step: it ends `after` steps later
    # (the profile's after_steps), and no step of it carries the respawn's jump back (-38 for x 3904
    # to 96) or a teleport death.
    assert deaths[0] >= after
    assert ticks["reward"][:deaths[0] + 1].min() > -1.0
    assert_resets_are_not_lateness(logdir, ticks, reset_at_least_s=1.5, preset="supertux")
    # Per episode, the actor reports whether it ended in a death and how far Tux got.
    assert read_metrics(logdir, "episode/terminal")[0] == 1.0
    assert read_metrics(logdir, "episode/furthest_x")[0] > 3800
