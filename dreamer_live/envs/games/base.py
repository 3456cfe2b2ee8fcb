"""The built-in game base: `Game` (one PLE-style game: logic + pygame drawing) and `GameEnv` (its Env).

A `Game` has no clock and no threads: `tick(keys)` advances exactly one frame of 1/fps seconds with a set
of key names held. `GameEnv` drives it either in lockstep (one `act` = `frame_skip` frames) or in real
time (a background thread advances the game at its fps on the wall clock whatever the agent does).
"""

from __future__ import annotations

import abc
import os
import threading
import time

import gymnasium
import numpy as np

from dreamer_live.envs.base import Env, action_to_env, step_spaces
from dreamer_live.errors import UserError
from dreamer_live.pacer import CATCH_UP_S, Pacer
from dreamer_live.steps import LOG_PREFIX


class Game(abc.ABC):
    """One PLE-style game: pure logic plus pygame drawing; no clock, no threads.

    A subclass sets width/height/fps/actions/state_names, implements one frame of its physics in
    `_advance` (which sets `game_over` when the game ends) and `_export` (`exported`: at least score, x,
    y; the same keys from construction on: the stand-alone mode lays out its export buffer from them),
    starts an episode in `reset` (score 0, frame 0, game_over False, then `_export()`), and draws all
    randomness from `self.rng` (a numpy Generator; replacing it reseeds the game). `tick` does the
    bookkeeping around `_advance`: nothing once the game is over, else count the frame, add the reward
    to `score`, export.
    """

    width: int = 64
    height: int = 64
    fps: int = 30
    actions: tuple[tuple[str, ...], ...] = ((),)  # index 0 is the no-op ()
    state_names: tuple[str, ...] = ()

    def __init__(self, seed: int | None = None, **kwargs):
        if kwargs:
            raise UserError(f"{type(self).__name__} has no option(s) {', '.join(sorted(kwargs))}")
        self.seed = seed
        # All of a game's randomness comes from this one stream: episodes differ, seeded runs repeat.
        self.rng = np.random.default_rng(seed)
        self.game_over = False
        self.score = 0.0
        self.frame = 0
        self.exported: dict[str, float] = {"score": 0.0, "x": 0.0, "y": 0.0}

    @property
    def name(self) -> str:
        """The game's name, e.g. "Catcher"."""
        return type(self).__name__

    @property
    def dt(self) -> float:
        """Seconds of game time per frame."""
        return 1.0 / self.fps

    def reset(self) -> None:
        """Start a new episode (score 0, frame 0, game_over False)."""
        self.score, self.frame, self.game_over = 0.0, 0, False
        self._start()
        self._export()

    @abc.abstractmethod
    def _start(self) -> None:
        """Set up the game's own state for a new episode (the counters are already reset)."""

    def tick(self, keys: frozenset[str]) -> float:
        """Advance one frame with `keys` held; return that frame's reward (0 once the game is over)."""
        if self.game_over:
            return 0.0
        self.frame += 1  # before the physics: a game may time events by frame (PuckWorld's dot)
        reward = self._advance(keys)
        self.score += reward
        self._export()
        return reward

    @abc.abstractmethod
    def _advance(self, keys: frozenset[str]) -> float:
        """The game's physics for one frame (`frame` already counts it); return the frame's reward."""

    @abc.abstractmethod
    def _export(self) -> None:
        """Refresh `exported` after a reset or a tick."""

    @abc.abstractmethod
    def draw(self, surface) -> None:
        """Render the current frame onto a width x height pygame.Surface."""

    @abc.abstractmethod
    def game_state(self) -> np.ndarray:
        """PLE's getGameState fields as a float32 vector in `state_names` order."""


def check_size(name: str, width, height, limit: int = 4096) -> tuple[int, int]:
    """Validate a game's width/height options (16..limit pixels); UserError on nonsense."""
    try:
        width, height = int(width), int(height)
    except (TypeError, ValueError):
        raise UserError(f"{name}: width and height must be integers, not {width!r} {height!r}") from None
    if not (16 <= width <= limit and 16 <= height <= limit):
        raise UserError(f"{name}: width and height must be in [16, {limit}], not {width}x{height}")
    return width, height


_headless_set = False  # whether we (not the user) set SDL_VIDEODRIVER=dummy in this process


def import_pygame(window: bool):
    """Import pygame, headless (SDL dummy driver) unless a window is wanted."""
    global _headless_set
    if not window and "SDL_VIDEODRIVER" not in os.environ:
        os.environ["SDL_VIDEODRIVER"] = "dummy"
        _headless_set = True
    elif window and _headless_set and os.environ.get("SDL_VIDEODRIVER") == "dummy":
        del os.environ["SDL_VIDEODRIVER"]  # read when the display is initialised, not at import
        _headless_set = False
    os.environ.setdefault("SDL_AUDIODRIVER", "dummy")
    os.environ.setdefault("PYGAME_HIDE_SUPPORT_PROMPT", "1")
    import pygame
    return pygame


def window_scale(game: Game) -> int:
    """A window scale that shows the game at roughly 256 pixels on its longer side (at least 1x)."""
    return max(1, 256 // max(game.width, game.height))


def surface_pixels(surface) -> np.ndarray:
    """A pygame.Surface as uint8 [H, W, 3]."""
    import pygame.image
    width, height = surface.get_size()
    # tobytes is row-major already: ~8x faster than surfarray.array3d plus a transpose.
    return np.frombuffer(pygame.image.tobytes(surface, "RGB"), np.uint8).reshape(height, width, 3)


class GameEnv(Env):
    """A Game as an Env, in lockstep or real time, observing its vector state and/or its pixels.

    lockstep: `act` advances `frame_skip` frames with the action's keys held (fewer if the game ends).
    realtime: a clock thread advances one frame every 1/fps s from the first `reset` on; `act` sets the
    keys it holds; keys are released when no `act` came for `release_after` s (0/None: never); game
    over stops the clock until the next `reset`. `frame_skip` is ignored (the game runs at its fps).
    Both: `observe` gives the current frame/state and the reward summed since the previous observation;
    game over is is_last and is_terminal (time caps are wrappers). Images are the native size, RGB.
    """

    def __init__(self, game: Game, clock: str = "lockstep", obs: str = "vector", frame_skip: int = 1,
                 window: bool = False, release_after: float | None = 0.5, scale: int | None = None):
        if clock not in ("lockstep", "realtime"):
            raise UserError(f"clock must be lockstep or realtime, not {clock!r}")
        if obs not in ("vector", "image", "both"):
            raise UserError(f"obs must be vector, image or both, not {obs!r}")
        if int(frame_skip) < 1:
            raise UserError(f"frame_skip must be >= 1, not {frame_skip}")
        self.game, self.clock, self.obs_kind = game, clock, obs
        self.frame_skip = int(frame_skip)  # lockstep only; in real time the game runs at its own fps
        self.release_after = release_after if release_after and release_after > 0 else None
        self.window, self.scale = bool(window), int(scale or window_scale(game))
        self._pygame = import_pygame(self.window)
        self._surface = self._pygame.Surface((game.width, game.height))
        self._display = None
        self.obs_space = {}
        if obs in ("image", "both"):
            shape = (game.height, game.width, 3)
            self.obs_space["image"] = gymnasium.spaces.Box(0, 255, shape, np.uint8)
        if obs in ("vector", "both"):
            self.obs_space["vector"] = gymnasium.spaces.Box(
                -np.inf, np.inf, (len(game.state_names),), np.float32)
        self.obs_space.update(step_spaces())
        self.act_space = gymnasium.spaces.Discrete(len(game.actions))
        self._keys_table = [frozenset(keys) for keys in game.actions]
        self._lock = threading.RLock()
        self._started = False  # reset() called at least once
        self._keys = frozenset()
        self._last_act = 0.0
        self._reward = 0.0
        self._first = False
        self._frames = 0  # frames advanced since the env was made (all episodes)
        # real time: a game frame every 1/fps s; far behind (a stalled machine), frames are skipped
        self._pacer = Pacer(game.fps, spin_s=0.0, catch_up_s=CATCH_UP_S)
        self._rate_mark = (time.monotonic(), 0)
        self._stop = threading.Event()
        self._thread = None
        if clock == "realtime":
            self._thread = threading.Thread(target=self._run, name=f"{game.name}-clock", daemon=True)
            self._thread.start()

    # --- Env protocol ---------------------------------------------------------------------------------
    def reset(self) -> dict[str, np.ndarray]:
        """Restart the game (real time: the clock thread plays on from here); return the first obs."""
        with self._lock:
            self.game.reset()
            self._keys, self._last_act = frozenset(), time.monotonic()
            self._reward, self._first, self._started = 0.0, True, True
            return self._observe_locked()

    def act(self, action) -> None:
        """Hold the action's keys: lockstep advances frame_skip frames now; real time holds them."""
        if np.ndim(action) == 0:
            index = int(action)
        else:
            index = action_to_env(np.asarray(action), self.act_space)
        if not 0 <= index < len(self._keys_table):
            raise UserError(f"action {index} out of range: {self.game.name} has {len(self._keys_table)}")
        keys = self._keys_table[index]
        with self._lock:
            if not self._started:
                raise RuntimeError("call reset() before act()")
            self._keys, self._last_act = keys, time.monotonic()
            if self.clock == "lockstep":
                for _ in range(self.frame_skip):
                    if self.game.game_over:
                        break
                    self._advance_locked(keys)
                if self.window:
                    self._show_locked()

    def observe(self) -> dict[str, np.ndarray]:
        """The latest frame/state, with the reward gathered since the previous observation."""
        with self._lock:
            if not self._started:
                raise RuntimeError("call reset() before observe()")
            return self._observe_locked()

    def metrics(self) -> dict[str, float]:
        """game/frame (frames since the env was made), game/fps (measured since the last call), ..."""
        now = time.monotonic()
        with self._lock:
            frames, late = self._frames, self._pacer.missed
            released = self.clock == "realtime" and self._released(now)
            score, episode_frame = self.game.score, self.game.frame
        then, then_frames = self._rate_mark
        self._rate_mark = (now, frames)
        fps = (frames - then_frames) / (now - then) if now > then else 0.0
        return {"game/frame": float(frames), "game/fps": float(fps), "game/late_frames": float(late),
                "game/episode_frame": float(episode_frame), "game/score": float(score),
                "game/keys_released": float(released)}

    def close(self) -> None:
        """Stop the clock thread, release the keys, close the window."""
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=5.0)
        with self._lock:
            self._keys = frozenset()
            if self._display is not None:
                self._pygame.display.quit()
                self._display = None

    # --- internals ------------------------------------------------------------------------------------
    def _released(self, now: float) -> bool:
        return self.release_after is not None and now - self._last_act > self.release_after

    def _advance_locked(self, keys: frozenset[str]) -> None:
        self._reward += float(self.game.tick(keys))
        self._frames += 1

    def _observe_locked(self) -> dict[str, np.ndarray]:
        game = self.game
        out = {}
        if "image" in self.obs_space:
            game.draw(self._surface)
            out["image"] = surface_pixels(self._surface)
        if "vector" in self.obs_space:
            out["vector"] = np.asarray(game.game_state(), np.float32)
        over = bool(game.game_over)
        out["reward"] = np.array(self._reward, np.float32)
        out["is_first"] = np.array(self._first, bool)
        out["is_last"] = np.array(over, bool)
        out["is_terminal"] = np.array(over, bool)
        for name, value in game.exported.items():  # progress values for the wrappers; not model inputs
            out[LOG_PREFIX + name] = np.array(value, np.float32)
        self._reward, self._first = 0.0, False
        return out

    def _show_locked(self) -> None:
        pygame = self._pygame
        if self._display is None:
            pygame.display.init()
            size = (self.game.width * self.scale, self.game.height * self.scale)
            self._display = pygame.display.set_mode(size)
            pygame.display.set_caption(f"dreamer_live {self.game.name} (agent)")
        self.game.draw(self._surface)
        pygame.transform.scale(self._surface, self._display.get_size(), self._display)
        pygame.display.flip()
        pygame.event.pump()

    def _run(self) -> None:
        """Real-time clock: one game frame every 1/fps s of wall time, acted on or not."""
        while True:
            self._pacer.wait(self._stop)
            if self._stop.is_set():
                return
            with self._lock:
                if self._started and not self.game.game_over:
                    keys = frozenset() if self._released(time.monotonic()) else self._keys
                    self._advance_locked(keys)
                if self.window and self._started:
                    self._show_locked()
