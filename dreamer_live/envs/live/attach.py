"""Attaching to the game: find (or launch) its window, pick its process, gather the memory value specs.

Every wait here takes a `sleep(seconds)` callable from the env, which watches the hotkeys and stop
signals while it sleeps (and raises to abandon the wait).
"""

from __future__ import annotations

import json
import os
import pathlib
import shlex
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable

from dreamer_live.config import CONFIG_DIR
from dreamer_live.envs.live.memory import find_pids
from dreamer_live.envs.live.profile import TYPES, Profile, ValueSpec
from dreamer_live.envs.live.window import Window
from dreamer_live.errors import UserError, did_you_mean
from dreamer_live.process import describe_exit

Sleep = Callable[[float], None]


class GameGone(Exception):
    """The window or the process disappeared."""


def describe(profile: Profile) -> str:
    """"window with title containing 'X' and process 'y'"."""
    parts = [f"title containing {profile.title!r}"] if profile.title else []
    parts += [f"process {profile.process!r}"] if profile.process else []
    return "window with " + " and ".join(parts)


def command_line(command: list[str]) -> str:
    """The command as one line, quoted the way this platform's shell reads it."""
    return subprocess.list2cmdline(command) if sys.platform == "win32" else shlex.join(command)


def may_launch(profile: Profile, launch: str) -> bool:
    """Whether env.live.launch (auto, true, false) lets the env run the profile's launch.command.

    A profile is code: its command runs as the person running the actor. `auto` runs it only for the
    project's own profiles (CONFIG_DIR/games/); a profile from anywhere else needs `true` given
    explicitly, and with `auto` is a UserError that shows the command."""
    if launch == "false" or not profile.launch:
        return False
    if launch == "true":
        return True
    bundled = (CONFIG_DIR / "games").resolve()
    if bundled in profile.path.resolve().parents:
        return True
    command = command_line([profile.expand(a) for a in profile.launch])
    raise UserError(f"{profile.path} is not one of the project's profiles ({bundled}/) and its "
                    f"launch.command would run as you: {command}; give --env.live.launch true to "
                    "run it (a profile is code), or false to start the game yourself")


class GameLauncher:
    """Starts the profile's launch command when the game is not running; stops what it started."""

    def __init__(self, profile: Profile, launch: str, display: str = ""):
        self.profile, self.enabled, self.display = profile, may_launch(profile, launch), display
        self.process: subprocess.Popen | None = None
        self.log: pathlib.Path | None = None  # the running game's stdout and stderr

    def start_if_needed(self) -> bool:
        """Launch unless off or already running; whether it started now. A game this launcher started
        that exited on its own is said in one line first, with its exit status and where its output is."""
        if not self.enabled or (self.process is not None and self.process.poll() is None):
            return False
        if self.process is not None:
            print(f"live: the game (pid {self.process.pid}) exited on its own with "
                  f"{describe_exit(self.process.returncode)}; its output is in {self.log}", flush=True)
        p = self.profile
        command = [p.expand(a) for a in p.launch]
        env = dict(os.environ)
        if env.get("SDL_VIDEODRIVER") == "dummy":  # set for headless games here; the game needs a window
            del env["SDL_VIDEODRIVER"]
        if self.display:
            env["DISPLAY"] = self.display
        cwd = p.expand(p.launch_cwd) or None
        print(f"live: starting the game with {p.path}'s launch.command"
              f"{f' in {cwd}' if cwd else ''}: {command_line(command)}", flush=True)
        # The game's own output, kept for when it closes by itself (a crash's message, a core dump's).
        handle, name = tempfile.mkstemp(prefix=f"dreamer_live-{p.name}-", suffix=".log")
        self.log = pathlib.Path(name)
        try:
            with os.fdopen(handle, "wb") as log:
                self.process = subprocess.Popen(command, cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                                                stdout=log, stderr=subprocess.STDOUT)
        except OSError as e:
            raise UserError(f"{p.path}: launch.command {command[0]!r} cannot start: {e.strerror}"
                            ) from None
        return True

    def stop(self) -> None:
        """Terminate the game this launcher started (if it still runs) and remove its output log; the
        log of a game that exited on its own stays (its line named it)."""
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
            if self.log is not None:
                self.log.unlink(missing_ok=True)


def find_window(windows, profile: Profile, launcher: GameLauncher, wait_s: float, deadline: float,
                sleep: Sleep) -> Window:
    """The game's window (launching the game if configured), waiting until `deadline`.

    The game is launched at most once per call: a launch command may exit at once and leave the game
    starting (a launcher script), and running it again would start a second game.
    """
    announced = launched = False
    while True:
        if profile.screen_region:
            return Window(0, "screen region", None)
        window = windows.find(profile.title, profile.process)
        if window is not None:
            return window
        if not launched and launcher.start_if_needed():  # give a game just started its start-up time
            launched = True
            deadline = max(deadline, time.monotonic() + profile.startup_s)
        if time.monotonic() >= deadline:
            titles = sorted({w.title for w in windows.list()})[:8]
            raise UserError(f"no {describe(profile)} after {wait_s:.0f} s (open windows: "
                            f"{', '.join(map(repr, titles)) or 'none'})")
        if not announced:
            print(f"live: waiting up to {wait_s:.0f} s for a {describe(profile)}", flush=True)
            announced = True
        sleep(0.25)


def exported_values(profile: Profile, window: Window | None, deadline: float,
                    sleep: Sleep) -> tuple[int, dict[str, ValueSpec]]:
    """pid and value specs from the addresses_from JSON the game writes at start-up.

    The file may be missing (the game is starting) or left over from an earlier run (its pid is dead,
    or not the window's): wait for a fresh one until `deadline`.
    """
    path = pathlib.Path(profile.expand(os.path.expanduser(os.path.expandvars(profile.addresses_from))))
    while True:
        try:
            data = json.loads(path.read_text())
            pid = int(data["pid"])
            values = data.get("values") or data.get("addresses")
            specs = {str(n): ValueSpec(str(n), str(v.get("type", "f64")), address=int(v["address"]))
                     for n, v in values.items()}
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            specs, pid = None, 0  # not written yet, or half-written
        if specs is not None:
            bad = [s.type for s in specs.values() if s.type not in TYPES]
            if bad:
                raise UserError(f"{path}: unknown value type {bad[0]!r}")
            alive = sys.platform == "win32" or os.path.exists(f"/proc/{pid}")
            if alive and (window is None or window.pid is None or window.pid == pid):
                return pid, specs
        if time.monotonic() >= deadline:
            raise UserError(f"{profile.path}: memory.addresses_from {path} is missing, unreadable or "
                            f"not from the running game")
        sleep(0.25)


def value_specs(profile: Profile, window: Window | None, deadline: float,
                sleep: Sleep) -> tuple[int | None, dict[str, ValueSpec]]:
    """(pid, {name: spec}) of the values to read: the profile's, plus addresses_from's."""
    specs = {v.name: v for v in profile.values}
    pid = None
    if profile.addresses_from:
        pid, exported = exported_values(profile, window, deadline, sleep)
        specs = {**exported, **specs}
    if not specs:
        return None, {}
    wanted = set(profile.vector) | {t.value for t in profile.reward} | \
        {c.value for c in profile.terminal + profile.playing} | \
        {s.until.value for s in profile.reset if s.until}
    missing = sorted(wanted - set(specs))
    if missing:
        raise UserError(f"{profile.path}: memory value {missing[0]!r} is used but not defined"
                        f"{did_you_mean(missing[0], specs)} (values: {', '.join(sorted(specs))})")
    if pid is None and profile.memory_process:
        pids = find_pids(profile.memory_process)
        if not pids:
            raise GameGone(f"no process named {profile.memory_process!r}")
        pid = pids[-1]
    if pid is None and window is not None:
        pid = window.pid
    if pid is None:
        raise UserError(f"{profile.path}: cannot tell the game's process from its window; set "
                        f"memory.process")
    return pid, specs

