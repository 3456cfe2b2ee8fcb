"""The game every trainer plays side by side: a built-in game on its own clock that measures its idle time.

    gymnasium.make("realtime_game:Metered-v0", game="Catcher", obs="vector", log="run/game.jsonl")

obs "vector" gives the game's state, "image" its 64x64 RGB frame (each trainer resizes it as it would).

One gymnasium env for every trainer (this project, its synchronous loop, RLlib, sheeprl), so each sees
the same game, the same clock and the same time cap, and none measures itself. The game runs on the
wall clock (dreamer_live/Catcher-v0 with clock "realtime") at the `catcher` preset's rate and time cap
(15 steps/s, 2 frames of its 30 per step; 30 s), and keeps running when nobody calls `step`: its keys
are released after 0.5 s without input, as a live game's would be. An input is a `step` or a `reset`; a
gap between two inputs longer than one step period is time the game got no key, the part beyond the
period counts as idle. A gap of STALL_PERIODS periods or more is a stall: at least one tick the game
played without any key, where a shorter gap is a late tick (timer jitter).

`log` gets one JSON line per ended episode and one at least every HEARTBEAT_S of play, so a trainer
killed at its deadline leaves its figures: {"time": the wall clock (epoch seconds, so the bench measures
from the trainer's launch), "steps", "idle_s", "longest_gap_s", "stalls"} and, for an episode's end,
"return" and "length". Time after the last line is the bench's to count (bench/peers_realtime.py).
"""

from __future__ import annotations

import json
import time

import gymnasium

import dreamer_live.envs.registration  # noqa: F401  (registers dreamer_live/<Game>-v0)
from dreamer_live import config as configlib
from dreamer_live.envs import games, tick_hz

PRESET = configlib.resolve(["catcher"])
HZ = tick_hz(PRESET)  # steps per second: 2 frames of the game's 30 per step
TIME_CAP_S = PRESET.env.time_cap_s
HEARTBEAT_S = 1.0
STALL_PERIODS = 2  # a gap this many step periods long missed a whole tick


class MeteredGame(gymnasium.Wrapper):
    """A real-time built-in game whose `step`/`reset` times give its idle share, longest input gap and
    stalls."""

    def __init__(self, game: str = "Catcher", obs: str = "vector", log: str | None = None,
                 seed: int | None = None, render_mode: str | None = None):
        env = gymnasium.make(f"dreamer_live/{game}-v0", clock="realtime", obs=obs,
                             frame_skip=round(games.GAMES[game].fps / HZ), seed=seed, render_mode=render_mode)
        super().__init__(gymnasium.wrappers.TimeLimit(env, int(TIME_CAP_S * HZ)))
        self._log = open(log, "a") if log else None
        self._last = self._beat = None
        self.steps, self.idle_s, self.longest_gap_s, self.stalls = 0, 0.0, 0.0, 0
        self._return, self._length = 0.0, 0

    def _input(self) -> float:
        """Count the gap since the previous input; return now."""
        now = time.monotonic()
        if self._last is None:
            self._beat = now
        else:
            gap = now - self._last
            self.idle_s += max(0.0, gap - 1.0 / HZ)
            self.longest_gap_s = max(self.longest_gap_s, gap)
            self.stalls += gap >= STALL_PERIODS / HZ
        self._last = now
        return now

    def _write(self, now: float, **extra) -> None:
        if self._log is not None:
            line = {"time": round(time.time(), 3), "steps": self.steps, "idle_s": round(self.idle_s, 3),
                    "longest_gap_s": round(self.longest_gap_s, 3), "stalls": self.stalls, **extra}
            self._log.write(json.dumps(line) + "\n")
            self._log.flush()
        self._beat = now

    def reset(self, **kwargs):
        """Start an episode (an input: the gap since the last step counts)."""
        self._input()
        self._return, self._length = 0.0, 0
        return self.env.reset(**kwargs)

    def step(self, action):
        """One step of the game's clock with `action` held; the episode's line when it ends."""
        now = self._input()
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.steps += 1
        self._return += float(reward)
        self._length += 1
        if terminated or truncated:
            self._write(now, **{"return": self._return, "length": self._length})
        elif now - self._beat >= HEARTBEAT_S:
            self._write(now)
        return obs, reward, terminated, truncated, info

    def close(self):
        """A last line with the figures so far, then stop the game."""
        if self._last is not None:
            self._write(time.monotonic())
        if self._log is not None:
            self._log.close()
            self._log = None
        super().close()


gymnasium.register("Metered-v0", entry_point=MeteredGame, disable_env_checker=True)
