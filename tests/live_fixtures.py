"""Shared helpers for the live-game tests: a private Xvfb display, games started on it, key state.

The test process never sets DISPLAY for itself: children get it in their environment, and the code
under test is told the display through env.live.display.
"""

from __future__ import annotations

import contextlib
import json
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import threading
import time

import pytest

from dreamer_live.config import CONFIG_DIR, dump_yaml, read_yaml

ROOT = pathlib.Path(__file__).resolve().parent.parent
CATCHER_PROFILE = CONFIG_DIR / "games/catcher_window.yaml"


class Display:
    """A running Xvfb server."""

    def __init__(self, name: str, proc: subprocess.Popen):
        self.name, self.proc = name, proc

    def env(self, **extra) -> dict[str, str]:
        """Environment for a child process drawing on this display."""
        # Not SDL_VIDEODRIVER: tests earlier in this process may have set it to "dummy" (headless
        # games), and a child drawing on this display must open a real X window.
        env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "SDL_VIDEODRIVER")}
        env.update(DISPLAY=self.name, SDL_AUDIODRIVER="dummy", PYGAME_HIDE_SUPPORT_PROMPT="1", **extra)
        return env

    def xlib(self):
        """A fresh python-xlib connection to this display."""
        from Xlib import display
        return display.Display(self.name)


def start_xvfb(size: str = "1024x768x24") -> Display:
    """Start Xvfb on a free display number (it picks one: -displayfd) and wait until it serves."""
    read, write = os.pipe()
    proc = subprocess.Popen(["Xvfb", "-displayfd", str(write), "-screen", "0", size, "-nolisten", "tcp",
                             "-noreset"], pass_fds=(write,), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    os.close(write)
    try:
        number = b""
        deadline = time.monotonic() + 20
        os.set_blocking(read, False)
        while not number.endswith(b"\n"):
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                raise RuntimeError("Xvfb did not start")  # also used outside pytest (bench/live_run.py)
            try:
                chunk = os.read(read, 16)
            except BlockingIOError:
                time.sleep(0.05)
                continue
            number += chunk
    finally:
        os.close(read)
    return Display(":" + number.decode().strip(), proc)


@pytest.fixture(scope="module")
def xvfb():
    """A private X display for this test module (skipped when Xvfb is not installed)."""
    if not shutil.which("Xvfb"):
        pytest.skip("Xvfb is not installed (apt-get install xvfb)")
    display = start_xvfb()
    yield display
    display.proc.terminate()
    try:
        display.proc.wait(5)
    except subprocess.TimeoutExpired:
        display.proc.kill()


class Game:
    """A built-in game running stand-alone in a window, with its export and score log."""

    def __init__(self, proc: subprocess.Popen, export: pathlib.Path, score_log: pathlib.Path):
        self.proc, self.export, self.score_log = proc, export, score_log
        self.info = json.loads(export.read_text())

    @property
    def pid(self) -> int:
        """The game's process id."""
        return self.proc.pid

    def address(self, name: str) -> int:
        """Address of an exported value."""
        return int(self.info["values"][name]["address"])

    def read(self, name: str) -> float:
        """An exported value read straight from /proc/PID/mem (the test's own oracle)."""
        import struct
        with open(f"/proc/{self.pid}/mem", "rb", buffering=0) as mem:
            mem.seek(self.address(name))
            return struct.unpack("<d", mem.read(8))[0]

    def events(self) -> list[dict]:
        """The game's reward events so far."""
        if not self.score_log.exists():
            return []
        return [json.loads(line) for line in self.score_log.read_text().splitlines() if line.strip()]

    def stop(self) -> None:
        """Terminate the game."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def start_game(display: Display, folder: pathlib.Path, game: str = "catcher", *args: str,
               timeout: float = 30.0) -> Game:
    """Start `python -m dreamer_live.envs.games.<game> --window --export ... --score-log ...`."""
    folder.mkdir(parents=True, exist_ok=True)
    export, log = folder / f"{game}_export.json", folder / f"{game}_scores.jsonl"
    export.unlink(missing_ok=True)
    proc = subprocess.Popen(
        [sys.executable, "-m", f"dreamer_live.envs.games.{game}", "--window", "--scale", "4",
         "--export", str(export), "--score-log", str(log), *args],
        env=display.env(), cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + timeout
    while not export.exists():
        if proc.poll() is not None:
            pytest.fail(f"{game} exited: {proc.stderr.read().decode()[-2000:]}")
        if time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"{game} did not write {export}")
        time.sleep(0.05)
    return Game(proc, export, log)


@contextlib.contextmanager
def running_game(display: Display, folder: pathlib.Path, game: str = "catcher", *args: str):
    """start_game as a context manager that always stops the game."""
    g = start_game(display, folder, game, *args)
    try:
        yield g
    finally:
        g.stop()


def key_down(conn, keysym: str) -> bool:
    """Whether a key (X keysym name, e.g. "Right") is down on the display now."""
    from Xlib import XK
    code = conn.keysym_to_keycode(XK.string_to_keysym(keysym))
    return bool(conn.query_keymap()[code // 8] & (1 << (code % 8)))


def fake_key(conn, keysym: str, down: bool) -> None:
    """Press or release a key on the display (XTest), as a person at the keyboard would."""
    from Xlib import XK, X
    from Xlib.ext import xtest
    code = conn.keysym_to_keycode(XK.string_to_keysym(keysym))
    xtest.fake_input(conn, X.KeyPress if down else X.KeyRelease, code)
    conn.sync()


def stop_process(proc: subprocess.Popen, sig=signal.SIGTERM, timeout: float = 10.0) -> int:
    """Signal a child and wait for it; return its exit status."""
    if proc.poll() is None:
        proc.send_signal(sig)
    try:
        return proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        return proc.wait()


def write_profile(folder: pathlib.Path, export: pathlib.Path | None = None, **changes) -> pathlib.Path:
    """catcher_window.yaml pointed at `export` (no launch unless given), with top-level changes."""
    data = read_yaml(CATCHER_PROFILE)
    data.pop("launch")
    if export is not None:
        data["memory"]["addresses_from"] = str(export)
    data.update(changes)
    path = folder / "catcher_test.yaml"
    path.write_text(dump_yaml(data))
    return path


def eventually(predicate, timeout: float = 10.0) -> bool:
    """Poll `predicate` until it holds or `timeout` s pass (a loaded machine starts children slowly)."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def wait_for_line(proc: subprocess.Popen, text: str, timeout: float = 30.0) -> list[str]:
    """Collect the child's stdout lines (the list keeps filling) until one contains `text`."""
    lines: list[str] = []
    threading.Thread(target=lambda: lines.extend(iter(proc.stdout.readline, "")), daemon=True).start()
    end = time.monotonic() + timeout
    while not any(text in line for line in lines):
        if time.monotonic() > end or proc.poll() is not None:
            proc.kill()
            pytest.fail(f"child never printed {text!r}: {proc.stderr.read()[-2000:]}")
        time.sleep(0.05)
    return lines


class KeyWatch:
    """Polls which of some keys are down on the display (every ~5 ms, its own connection) and keeps
    each reading with its time: what the game saw, whoever pressed the keys."""

    def __init__(self, xvfb, keysyms: tuple[str, ...]):
        self.keysyms, self.readings = keysyms, []
        self._conn, self._stop = xvfb.xlib(), threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self):
        while not self._stop.is_set():
            down = frozenset(k for k in self.keysyms if key_down(self._conn, k))
            self.readings.append((time.monotonic(), down))
            time.sleep(0.005)

    def presses(self, keysym: str) -> int:
        """How many times `keysym` went down."""
        down = [keysym in keys for _, keys in self.readings]
        return sum(now and not before for before, now in zip([False, *down], down))

    def seen(self, keysym: str, start: float = 0.0, end: float = float("inf")) -> bool:
        """Whether `keysym` was down at any reading between `start` and `end`."""
        return any(keysym in down for t, down in self.readings if start <= t <= end)

    def close(self):
        self._stop.set()
        self._thread.join()
        self._conn.close()
