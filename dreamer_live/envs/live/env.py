"""LiveEnv: a live desktop game as an Env, through screen capture, held keys and memory reads.

Each observation: capture the window (or screen box) -> resize/grey -> `image`; read the profile's memory
values -> `vector` (the names in obs.vector) and `log/<name>` for every value (for the progress wrappers
and logs). The reward is the sum of the profile's reward terms over the value changes since the previous
observation (weighted, clipped, a new game's restart paying nothing); the profile's terminal conditions
end an episode as a death.

The game never waits: `act` holds the action's keys until the next `act`. Keys are released when the
action changes, when an episode ends, on pause/stop hotkeys, when the window loses focus, when the game
disappears or freezes, on close, at exit and on SIGINT/SIGTERM (keys.py). A vanished game, a focus loss
or a pause ends the episode as a truncation (is_last, not is_terminal) and `reset` waits for the game to
return (env.live.wait_s), launching it again when the profile has a launch command. A game whose
picture and memory values have not changed for env.live.frozen_s (hung, stopped, or still on purpose:
a menu, a cutscene) is gone in the same way: `reset` waits until it changes again.
"""

from __future__ import annotations

import collections
import dataclasses
import math
import os
import re
import signal
import sys
import threading
import time

import gymnasium
import numpy as np

from dreamer_live.envs.base import Env, action_to_env, step_spaces
from dreamer_live.envs.live import keys as keyslib
from dreamer_live.envs.live.attach import GameGone, GameLauncher, find_window, value_specs
from dreamer_live.envs.live.capture import BLACK_HINT, Capture, OffScreen, is_black
from dreamer_live.envs.live.memory import MemoryReadError, ProcessGone, open_process, read_value
from dreamer_live.envs.live.profile import Profile, ValueSpec
from dreamer_live.envs.live.window import open_windows
from dreamer_live.envs.wrappers import resize_image
from dreamer_live.errors import UserError, did_you_mean
from dreamer_live.process import RoleLock
from dreamer_live.steps import LOG_PREFIX

STATS_KEPT = 10000  # per-tick timings kept between two metrics() calls
CHAIN_RETRY_S = 10.0  # a pointer chain may be null while the game starts; retry this long, then fail
# A reading beyond SUSPECT_FACTOR x the largest magnitude seen of that value (SUSPECT_FLOOR at least) is
# garbage: a pointer chain that now points elsewhere (a level change, a game update).
SUSPECT_FACTOR, SUSPECT_FLOOR = 1000.0, 1e6
PLAY_RETRY_S = 10.0  # outside play, the reset steps run again this often until the game plays
FOCUS_POLICIES = ("wait", "refocus", "ignore")
LAUNCH_CHOICES = ("auto", "true", "false")
PRESS_PROMPT = "live: reset: press "  # then the keys joined by '+': what a person recording is asked to do


@dataclasses.dataclass(frozen=True)
class LiveOptions:
    """Run-time settings from env.live (see dreamer_live/configs/defaults.yaml)."""

    display: str = ""
    wait_s: float = 300.0
    launch: str = "auto"
    on_focus_loss: str = "wait"
    pause_key: str = "f9"
    stop_key: str = "f10"
    black_timeout_s: float = 10.0
    frozen_s: float = 10.0
    out_of_play_s: float = 60.0

    @classmethod
    def from_config(cls, live) -> LiveOptions:
        """From the env.live config section."""
        fields = {f.name for f in dataclasses.fields(cls)}
        options = cls(**{k: v for k, v in dict(live).items() if k in fields})
        if options.on_focus_loss not in FOCUS_POLICIES:
            raise UserError(f"env.live.on_focus_loss must be one of {', '.join(FOCUS_POLICIES)}, "
                            f"not {options.on_focus_loss!r}")
        if options.launch not in LAUNCH_CHOICES:
            raise UserError(f"env.live.launch must be one of {', '.join(LAUNCH_CHOICES)}, not "
                            f"{options.launch!r}")
        for name in ("pause_key", "stop_key"):
            value = getattr(options, name)
            if value and keyslib.key_name(value) is None:
                raise UserError(f"env.live.{name}: unknown key {value!r}"
                                f"{did_you_mean(value, keyslib.KEY_NAMES)}")
        return options


class _Stopped(Exception):
    """A wait was cut short by the stop key or a stop signal."""


class _Frozen(GameGone):
    """The game's picture and memory values have not changed for env.live.frozen_s."""


class LiveEnv(Env):
    """A live game in a window: capture -> obs, memory -> reward, discrete actions -> held keys."""

    def __init__(self, profile: Profile, size=(64, 64), grayscale: bool = False, obs: str = "image",
                 options: LiveOptions = LiveOptions(), inject_keys: bool = True):
        if obs not in ("image", "vector", "both"):
            raise UserError(f"env.obs must be image, vector or both, not {obs!r}")
        if obs in ("vector", "both") and not profile.vector:
            raise UserError(f"env.obs {obs} needs obs.vector (memory value names) in {profile.path}")
        if missing := [v for v in profile.values if not v.located]:
            raise UserError(
                f"{profile.path}: memory value{'s' if len(missing) > 1 else ''} "
                f"{', '.join(f'{v.name} ({v.type})' for v in missing)} not found yet: find each by "
                f"playing with python -m dreamer_live.memscan --profile {profile.path} --find "
                f"{missing[0].name} --write (docs/howto/supertux-windows.md, step 2)")
        self.profile, self.options = profile, options
        self.size, self.grayscale = (int(size[0]), int(size[1])), bool(grayscale)
        self.obs_space = {}
        if obs in ("image", "both"):
            channels = 1 if self.grayscale else 3
            self.obs_space["image"] = gymnasium.spaces.Box(0, 255, (*self.size, channels), np.uint8)
        if obs in ("vector", "both"):
            self.obs_space["vector"] = gymnasium.spaces.Box(
                -np.inf, np.inf, (len(profile.vector),), np.float32)
        self.obs_space.update(step_spaces())
        self.act_space = gymnasium.spaces.Discrete(len(profile.actions))
        self._action_keys = [keys for _, keys in profile.actions]
        self._hotkeys = {k for k in (options.pause_key, options.stop_key) if k}
        for name, keys in profile.actions:
            clash = self._hotkeys & set(keys)
            if clash:
                raise UserError(f"action {name!r} uses the hotkey {sorted(clash)[0]!r}; change "
                                f"env.live.pause_key / env.live.stop_key")
        self.launcher = GameLauncher(profile, options.launch, options.display)  # before any X call
        self.windows = open_windows(options.display)
        if sys.platform == "win32":
            backend = keyslib.DirectInputKeys()
        else:
            backend = keyslib.XTestKeys(self.windows.display)
        self.inject_keys = inject_keys
        self.keys = keyslib.KeyHolder(backend if inject_keys else keyslib.ReadOnlyKeys(backend))
        self.capture = Capture(options.display) if "image" in self.obs_space else None
        self._window = None  # Window once connected
        self._window_lock: tuple[str, RoleLock] | None = None  # (key, lock) of the window played
        self._reader = None
        self._specs: dict[str, ValueSpec] = {}
        self._prev: dict[str, float] = {}
        self._best: dict[str, float] = {}  # the episode's best reading of each `record` reward value
        self._last: dict[str, np.ndarray] | None = None
        self._over = True  # no episode running (before reset, after an end)
        self._interrupt = ""  # why the running episode must end at the next observe
        self._ends_in: int | None = None  # observations left before a terminal condition's end
        self._paused = False
        self._hot_down: set[str] = set()
        self._black_since: float | None = None
        self._warned_black = False
        self._sensed: tuple | None = None  # (image, values) as they last changed in play, and when
        self._moved_at = 0.0
        self._frozen: tuple | None = None  # (image, values) of a game that froze, until it changes
        self._stats = {k: collections.deque(maxlen=STATS_KEPT)
                       for k in ("capture_ms", "memory_ms", "input_ms")}
        self._counts = {"reconnects": 0, "focus_losses": 0, "memory_errors": 0, "pauses": 0,
                        "freezes": 0, "out_of_play": 0, "bad_values": 0}
        self._bad: dict[str, str] = {}  # memory values of the last reading that failed or are garbage
        self._said_bad: set[str] = set()  # ... those already said in a line
        self._seen_max: dict[str, float] = {}  # the largest magnitude of each sane reading
        self._closed = False

    # --- Env protocol -------------------------------------------------------------------------------------
    def reset(self) -> dict[str, np.ndarray]:
        """Wait for the game (and focus, and resume), run the profile's reset steps, observe."""
        self.keys.release_all()
        self._over = True
        try:
            while True:
                self._poll_hotkeys()
                self._wait_while_paused()
                if self._window is None:
                    self._connect()
                try:
                    self._wait_for_focus()
                    self._run_reset_steps()
                    image, values = self._sense()
                    if self._not_ready(values):
                        image, values = self._await_play()
                except GameGone as e:
                    self._lost(str(e))
                    continue
                break
        except _Stopped:
            return self._stopped_obs()
        self._interrupt, self._over, self._prev, self._ends_in = "", False, values, None
        self._best = {t.value: values[t.value] for t in self.profile.reward if t.record}
        self._sensed, self._moved_at = (image, values), time.monotonic()
        self._last = self._obs(image, values, 0.0, first=True)
        return self._last

    def act(self, action) -> None:
        """Hold the action's keys from now on (nothing while no episode runs or the window lacks focus)."""
        self._poll_hotkeys()
        if self._over or self._interrupt or self._window is None:
            self.keys.release_all()
            return
        index = int(action) if np.ndim(action) == 0 else action_to_env(np.asarray(action), self.act_space)
        policy = self.options.on_focus_loss
        if policy != "ignore" and self._window.handle and not self.windows.has_focus(self._window.handle):
            if policy == "refocus":
                self.windows.focus(self._window.handle)
            else:
                self.keys.release_all()
                self._counts["focus_losses"] += 1
                self._interrupt = "the game window lost the keyboard focus"
                return
        self._stats["input_ms"].append(self.keys.set(self._action_keys[index]))

    def observe(self) -> dict[str, np.ndarray]:
        """Capture and read the game now; reward = weighted value changes since the last observation."""
        self._poll_hotkeys()
        if self._last is None:
            raise RuntimeError("call reset() before observe()")
        if self._over:
            return self._end_obs(terminal=False)
        if self._interrupt:
            print(f"live: episode ended: {self._interrupt}; keys released", flush=True)
            return self._end_obs(terminal=False)
        try:
            image, values = self._sense()
            self._check_frozen(image, values)
        except GameGone as e:
            self._lost(str(e))
            return self._end_obs(terminal=False)
        if self._bad:
            # Garbage or unreadable memory is never an observation or a reward: the episode ends at
            # the step before, and reset() waits until the values read sane again.
            self._counts["bad_values"] += 1
            for name, why in self._bad.items():
                if name not in self._said_bad:
                    self._said_bad.add(name)
                    print(f"live: memory value {name!r} {why}: episode cut at the step before, keys "
                          f"released; play resumes when it reads sane (counted in live/bad_values)",
                          flush=True)
            return self._end_obs(terminal=False)
        reward = sum(t.pay((self._best if t.record else self._prev)[t.value], values[t.value])
                     for t in self.profile.reward)
        if self._ends_in is None:
            self._ends_in = min((c.after_steps for c in self.profile.terminal
                                 if c.holds(self._prev[c.value], values[c.value])), default=None)
        terminal = self._ends_in == 0
        if self._ends_in is None and not self.profile.in_play(values):
            # A menu or game-over screen is no play: the episode is cut at the last step in play (a
            # terminal condition's countdown, a death animation, runs on); reset() brings play back.
            self._counts["out_of_play"] += 1
            if self._counts["out_of_play"] == 1:
                print(f"live: the game left play ({self._not_playing(values)}): episode cut, keys "
                      f"released, the reset steps run until it plays again (counted in live/out_of_play)",
                      flush=True)
            return self._end_obs(terminal=False)
        if self._ends_in:
            self._ends_in -= 1
        self._prev = values
        self._best.update({v: max(best, values[v]) for v, best in self._best.items()})
        self._last = self._obs(image, values, reward, last=terminal, terminal=terminal)
        if terminal:
            self._over = True
            self.keys.release_all()
        return self._last

    def metrics(self) -> dict[str, float]:
        """live/capture_ms (capture + preprocess), live/input_ms (key changes), live/memory_ms, counters."""
        out = {}
        for name, samples in self._stats.items():
            if samples:
                out[f"live/{name}"] = float(np.mean(samples))
                out[f"live/{name}_max"] = float(np.max(samples))
            samples.clear()
        out.update({f"live/{k}": float(v) for k, v in self._counts.items()})
        out["live/paused"] = float(self._paused)
        return out

    def close(self) -> None:
        """Release every key; stop a game this env launched; close the handles (once)."""
        if self._closed:
            return
        self._closed = True
        try:
            self.keys.release_all()
        finally:
            if self._reader is not None:
                self._reader.close()
                self._reader = None
            self.launcher.stop()
            if self.capture is not None:
                self.capture.close()
            self.windows.close()
            self._release_window()

    @property
    def game_pid(self) -> int | None:
        """The game's process id once connected: the memory reader's, else the window's."""
        if self._reader is not None:
            return self._reader.pid
        return self._window.pid if self._window is not None else None

    # --- observations -------------------------------------------------------------------------------------
    def _obs(self, image, values, reward, first=False, last=False, terminal=False):
        out = {}
        if image is not None:
            out["image"] = image
        if "vector" in self.obs_space:
            out["vector"] = np.array([values[n] * self._specs[n].scale for n in self.profile.vector],
                                     np.float32)
        out.update({LOG_PREFIX + n: np.array(v, np.float32) for n, v in values.items()})
        out["reward"] = np.array(reward, np.float32)
        out["is_first"], out["is_last"] = np.array(first), np.array(last)
        out["is_terminal"] = np.array(terminal)
        return out

    def _end_obs(self, terminal: bool) -> dict[str, np.ndarray]:
        """The last observation again, marking the episode's end (a truncation: nothing new happened)."""
        self._over = True
        self.keys.release_all()
        obs = dict(self._last)
        obs.update(reward=np.array(0.0, np.float32), is_first=np.array(False), is_last=np.array(True),
                   is_terminal=np.array(terminal))
        return obs

    def _stopped_obs(self) -> dict[str, np.ndarray]:
        """reset() gave up (stop key or signal): hand back the last observation so the actor can stop."""
        if self._last is None:  # no observation yet to hand back: stop the way a plain Ctrl-C does
            raise KeyboardInterrupt  # (the actor's and record's loops take it as their stop)
        obs = dict(self._last)
        obs.update(reward=np.array(0.0, np.float32), is_first=np.array(True), is_last=np.array(False),
                   is_terminal=np.array(False))
        self._over = True  # act() sends nothing; the actor stops at its next check
        return obs

    def _sense(self):
        """(image or None, {name: value}) now; GameGone if the window or process vanished or the window
        is not wholly on the screen."""
        box = self._capture_box()  # also for memory values alone: a gone window is a gone game
        image = None
        if self.capture is not None:
            start = time.perf_counter()
            try:
                frame = self.capture.grab(box)
            except OffScreen:
                raise GameGone(f"window {self._window.title!r} is not wholly on the screen (at "
                               f"{list(box)}); move it back") from None
            except Exception as e:  # mss.ScreenShotError
                raise GameGone(f"cannot capture {box}: {e}") from None
            image = resize_image(frame, self.size, self.grayscale)
            self._stats["capture_ms"].append((time.perf_counter() - start) * 1000)
            self._check_black(image)
        start = time.perf_counter()
        values = self._read_values(strict=False)
        self._stats["memory_ms"].append((time.perf_counter() - start) * 1000)
        return image, values

    def _capture_box(self) -> tuple[int, int, int, int]:
        """The screen box to capture now: the profile's screen_region, or the window's (region of its)
        client area; GameGone if the window is gone."""
        if self.profile.screen_region:
            return self.profile.screen_region
        geometry = self.windows.geometry(self._window.handle)
        if geometry is None:
            raise GameGone(f"window {self._window.title!r} is gone (closed or minimised)")
        return self._box(geometry)

    def _box(self, geometry) -> tuple[int, int, int, int]:
        left, top, width, height = geometry
        region = self.profile.region
        if region is None:
            return left, top, width, height
        if region[0] + region[2] > width or region[1] + region[3] > height:
            raise UserError(f"{self.profile.path}: window.region {list(region)} lies outside the "
                            f"window's {width}x{height} client area")
        return left + region[0], top + region[1], region[2], region[3]

    def _read_values(self, strict: bool) -> dict[str, float]:
        """Every memory value now. A read that fails (MemoryReadError when `strict`) or a reading that is
        garbage (not finite, outside the value's range, or far beyond any magnitude seen) is noted in
        self._bad with what was read, and the last sane reading stands in for it."""
        values, self._bad = {}, {}
        for name, spec in self._specs.items():
            try:
                value = read_value(spec, self._reader)
            except ProcessGone as e:
                raise GameGone(str(e)) from None
            except MemoryReadError as e:
                if spec.absent is not None:  # the thing is not there now (LBreakout2's ball between balls)
                    values[name] = spec.absent
                    continue
                if strict:
                    raise
                self._counts["memory_errors"] += 1
                self._bad[name] = f"could not be read ({e})"
                values[name] = self._prev.get(name, 0.0)
                continue
            why = self._garbage(spec, value)
            if why:
                self._bad[name] = why
                values[name] = self._prev.get(name, 0.0)
            else:
                values[name] = value
                self._seen_max[name] = max(self._seen_max.get(name, 0.0), abs(value))
        return values

    def _garbage(self, spec: ValueSpec, value: float) -> str:
        """Why `value` read for `spec` is not believable ('' when it is)."""
        if not math.isfinite(value):
            return f"read {value}, not a number"
        if not spec.low <= value <= spec.high:
            return f"read {value:g}, outside its range [{spec.low:g}, {spec.high:g}]"
        seen = self._seen_max.get(spec.name)
        if seen is not None and abs(value) > max(SUSPECT_FLOOR, SUSPECT_FACTOR * seen):
            return f"read {value:g}, far beyond any reading before (up to {seen:g})"
        return ""

    def _check_frozen(self, image, values) -> None:
        """_Frozen once the picture and every memory value have stayed as they are for
        env.live.frozen_s (0: never); reset() then waits until they change (_await_change)."""
        if not self.options.frozen_s:
            return
        now = time.monotonic()
        if not _same((image, values), self._sensed):
            self._sensed, self._moved_at = (image, values), now
        elif now - self._moved_at >= self.options.frozen_s:
            self._frozen = self._sensed
            self._counts["freezes"] += 1
            raise _Frozen(f"{self._window.title!r} froze: its {self._sensed_what()} have not changed "
                          f"for {self.options.frozen_s:g} s (env.live.frozen_s)")

    def _sensed_what(self) -> str:
        """What a freeze is judged on: the picture and/or the memory values."""
        return " and ".join(name for name, on in (("picture", self.capture is not None),
                                                  ("memory values", bool(self._specs))) if on)

    def _check_black(self, image: np.ndarray) -> None:
        if not is_black(image):
            self._black_since, self._warned_black = None, False
            return
        now = time.monotonic()
        if self._black_since is None:
            self._black_since = now
        elif not self._warned_black and now - self._black_since > self.options.black_timeout_s:
            print(f"live: warning: {BLACK_HINT}", flush=True)
            self._warned_black = True

    # --- connecting ---------------------------------------------------------------------------------------
    def _connect(self) -> None:
        """Find the window, open the process's memory, check the values and the capture."""
        deadline = time.monotonic() + self.options.wait_s
        while True:
            window = find_window(self.windows, self.profile, self.launcher, self.options.wait_s,
                                 deadline, self._sleep)
            self._hold(window)
            if self.profile.focus and window.handle:
                self.windows.focus(window.handle)
            self._window = window
            try:
                self._open_memory(deadline)
                if self._frozen is not None:
                    self._await_change(deadline)
                if self.capture is not None:
                    self._await_on_screen(deadline)
                    self._await_picture(deadline)
            except GameGone as e:
                self._lost(str(e))
                continue
            pid = f" (pid {self._reader.pid})" if self._reader else ""
            print(f"live: playing {window.title!r}{pid}", flush=True)
            return

    def _hold(self, window) -> None:
        """Lock the window for this process: one player per game (two would each store steps whose
        keys the other chose); a UserError naming the holder while another process plays it."""
        display = self.options.display or (os.environ.get("DISPLAY", "") if sys.platform != "win32" else "")
        if window.handle:
            where = f"{'X ' if sys.platform != 'win32' else ''}window {window.handle:#x}"
        else:
            where = f"screen region {self.profile.screen_region}"
        where += f" on display {display}" if display else ""
        key = re.sub(r"[^A-Za-z0-9._-]+", "_", where)
        if self._window_lock is not None and self._window_lock[0] == key:
            return
        self._release_window()
        from dreamer_live.cli import cache_dir

        lock = RoleLock(cache_dir() / "windows" / f"{key}.lock", f"game window {window.title!r} ({where})",
                        busy="is already played by another dreamer_live process", command=True,
                        hint="give each actor a game of its own").acquire()
        self._window_lock = (key, lock)

    def _release_window(self) -> None:
        if self._window_lock is not None:
            self._window_lock[1].release()
            self._window_lock = None

    def _open_memory(self, deadline: float) -> None:
        """Open the game's process and read every value once (a pointer chain may need a moment)."""
        pid, specs = value_specs(self.profile, self._window, deadline, self._sleep)
        if self._reader is not None:
            self._reader.close()
            self._reader = None
        self._specs, self._seen_max = specs, {}  # the first reading is taken as sane
        if not specs:
            return
        try:
            self._reader = open_process(pid, self.profile.pointer_size)
        except ProcessGone as e:
            raise GameGone(str(e)) from None
        if self.profile.playing:
            # A game's menus may leave a chain's pointer null (LBreakout2's score before a game):
            # reset() waits for play, and a chain that never reads says so after env.live.out_of_play_s.
            self._prev = self._read_values(strict=False)
            return
        give_up = min(deadline, time.monotonic() + CHAIN_RETRY_S)
        while True:
            try:
                self._prev = self._read_values(strict=True)
                return
            except MemoryReadError as e:
                if time.monotonic() >= give_up:
                    raise UserError(f"{self.profile.path}: bad memory value: {e}") from None
                self._sleep(0.25)

    def _await_on_screen(self, deadline: float) -> None:
        """Wait, without a word more (the loss was said), until the window lies wholly on the screen;
        a UserError at `deadline` (env.live.wait_s)."""
        while not self.capture.on_screen(box := self._capture_box()):
            if self.profile.screen_region:
                raise UserError(f"{self.profile.path}: window.screen_region {list(box)} is not wholly "
                                f"on the screen")
            if time.monotonic() >= deadline:
                raise UserError(f"live game: {self._window.title!r} has not been wholly on the screen "
                                f"for {self.options.wait_s:.0f} s (env.live.wait_s)")
            self._sleep(0.2)

    def _await_picture(self, deadline: float) -> None:
        """Capture until a frame is not all black; all black for black_timeout_s is an error."""
        until = min(deadline, time.monotonic() + self.options.black_timeout_s)
        while True:
            image, _ = self._sense()
            if not is_black(image):
                return
            if time.monotonic() >= until:
                raise UserError(f"{self.profile.path}: {BLACK_HINT}")
            self._sleep(0.2)

    def _await_change(self, deadline: float) -> None:
        """After a freeze: sense until the picture or a memory value differs from the frozen ones
        (a UserError at `deadline`, env.live.wait_s, as for a window that never came back)."""
        while _same(self._sense(), self._frozen):
            if time.monotonic() >= deadline:
                raise UserError(f"live game: {self._window.title!r} has not changed for "
                                f"{self.options.wait_s:.0f} s (env.live.wait_s) since it froze")
            self._sleep(0.1)
        self._frozen = None

    def _lost(self, why: str) -> None:
        """The game went away: keys up, forget the window and process."""
        self.keys.release_all()
        print(f"live: {why}; keys released, waiting for the game", flush=True)
        self._counts["reconnects"] += 1
        self._window = None
        if self._reader is not None:
            self._reader.close()
            self._reader = None

    # --- waiting, hotkeys, reset steps --------------------------------------------------------------------
    def _sleep(self, seconds: float) -> None:
        """Sleep while watching the hotkeys and signals; _Stopped if a stop was asked."""
        end = time.monotonic() + seconds
        while True:
            self._poll_hotkeys()
            if keyslib.STOP_EVENT.is_set():
                raise _Stopped
            left = end - time.monotonic()
            if left <= 0:
                return
            time.sleep(min(left, 0.05))

    def _poll_hotkeys(self) -> None:
        if not self._hotkeys:
            return
        try:
            down = self.keys.backend.pressed(self._hotkeys)
        except Exception:
            return
        pressed, self._hot_down = down - self._hot_down, down
        if self.options.stop_key in pressed:
            self.keys.release_all()
            self._interrupt = "stop key"
            print(f"live: {self.options.stop_key} pressed: keys released, stopping", flush=True)
            keyslib.STOP_EVENT.set()
            if (signal.getsignal(signal.SIGINT) == signal.SIG_IGN
                    and threading.current_thread() is threading.main_thread()):
                # Started with Ctrl-C ignored (a background job of a script, nohup): a SIGINT to
                # ourselves would be dropped and the loop would play on. The key is an explicit stop.
                raise KeyboardInterrupt
            os.kill(os.getpid(), signal.SIGINT)  # the actor's stop handler finishes cleanly
        elif self.options.pause_key in pressed:
            self._paused = not self._paused
            self.keys.release_all()
            if self._paused:
                self._counts["pauses"] += 1
                self._interrupt = "paused"
                print(f"live: paused, keys released ({self.options.pause_key} resumes)", flush=True)
            else:
                print("live: resumed", flush=True)

    def _wait_while_paused(self) -> None:
        while self._paused:
            self._sleep(0.05)
        if keyslib.STOP_EVENT.is_set():
            raise _Stopped

    def _wait_for_focus(self) -> None:
        window = self._window
        if self.options.on_focus_loss != "wait" or not window.handle:
            return
        announced = False
        while not self.windows.has_focus(window.handle):
            if self.windows.geometry(window.handle) is None:
                raise GameGone(f"window {window.title!r} is gone")
            if not announced:
                print(f"live: waiting for {window.title!r} to have the keyboard focus (click it)",
                      flush=True)
                announced = True
            self._sleep(0.1)

    def _run_reset_steps(self) -> None:
        steps = self.profile.reset
        retried = [0] * len(steps)
        i = 0
        while i < len(steps):
            step, here = steps[i], i
            i += 1
            if step.keys and not self.inject_keys:
                print(f"{PRESS_PROMPT}{'+'.join(step.keys)} (nothing is sent while a person plays)", flush=True)
            elif step.keys:
                self.keys.tap(step.keys, step.hold_s)
            elif step.wait_s:
                self._sleep(step.wait_s)
            elif step.until is not None and not self._wait_until(step.until, step.timeout_s):
                missed = f"live: reset: {step.until.value} did not reach the condition in {step.timeout_s:g} s"
                if retried[here] < step.retries:
                    retried[here] += 1
                    print(f"{missed}; again from the first step (retry {retried[here]} of {step.retries})",
                          flush=True)
                    i = 0
                else:
                    print(f"{missed}; going on", flush=True)

    def _not_playing(self, values: dict[str, float]) -> str:
        """The profile's `playing:` conditions that fail, with the values read."""
        return ", ".join(f"{c.value} {c.op} {c.arg:g} is false: {c.value} = {values[c.value]:g}"
                         for c in self.profile.playing if not c.holds(None, values[c.value]))

    def _not_ready(self, values: dict[str, float]) -> str:
        """Why this reading is no play ('' when it is): garbage memory values, or not in play."""
        return ", ".join([f"memory value {n!r} {why}" for n, why in self._bad.items()]
                         + ([self._not_playing(values)] if not self.profile.in_play(values) else []))

    def _await_play(self):
        """Outside play (a menu, a game-over screen, garbage memory values): keys up, nothing observed
        for the episode; poll the values and run the reset steps again every PLAY_RETRY_S until the
        values read sane and the profile's `playing:` holds. One line when that fails for
        env.live.out_of_play_s. Returns the first (image, values) in play."""
        self.keys.release_all()
        began, said = time.monotonic(), False
        while True:
            retry = time.monotonic() + PLAY_RETRY_S
            while time.monotonic() < retry:
                image, values = self._sense()
                why = self._not_ready(values)
                if not why:
                    return image, values
                if not said and time.monotonic() - began >= self.options.out_of_play_s:
                    print(f"live: the game has not been in play for {self.options.out_of_play_s:g} s "
                          f"({why}); the reset steps keep running (env.live.out_of_play_s)", flush=True)
                    said = True
                self._sleep(0.1)
            self._run_reset_steps()

    def _wait_until(self, until, timeout_s: float) -> bool:
        """Whether the memory value meets `until` within `timeout_s`."""
        end = time.monotonic() + timeout_s
        while True:
            _, values = self._sense()
            if until.holds(None, values[until.value]):
                return True
            if time.monotonic() >= end:
                return False
            self._sleep(0.05)


def _same(a: tuple | None, b: tuple | None) -> bool:
    """Whether two (image or None, {name: value}) readings are equal, pixel for pixel."""
    if a is None or b is None:
        return False
    (image_a, values_a), (image_b, values_b) = a, b
    return values_a == values_b and (image_a is None if image_b is None
                                     else image_a is not None and np.array_equal(image_a, image_b))
