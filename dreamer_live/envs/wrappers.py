"""Env wrappers: image resize, action repeat, frame stack, time cap, and progress-based shaping.

Each wrapper is an Env around an Env, configured from the `env:` section and off unless set; `make_env`
applies them in a fixed order (see dreamer_live/envs/__init__.py). They transform observations as they pass
(reset and observe) and leave actions alone, except ActionRepeat.

Progress convention: an env may add non-model keys prefixed `log/` to its observations, e.g. `log/x`
(position along the level) or `log/score`. They are not in `obs_space`, never reach the agent or replay,
and carry per-step values for wrappers and logs. The progress wrappers (TeleportDeath, Stagnation,
Milestones, DeathZone) read the float `log/<env.progress_key>`; a missing key is a UserError naming the
`log/` keys the env does give. TeleportDeath adds `log/death_at` (progress just before the drop), which
DeathZone uses as the place of death.

Episode time: Stagnation and TimeCap count seconds on the wall clock when the env runs in real time, and
`step_seconds` per observation (make_env: 1 / actor.hz) for a lockstep env, so a lockstep run is
reproducible and the same config means the same limits at the actor's tick rate.

Episode ends added by wrappers: a time cap or stagnation is a truncation (is_last, not is_terminal; a
stagnation counts as a death with terminal=True); a teleport drop is a death (is_last and is_terminal).
"""

from __future__ import annotations

import collections
import math
import time
from collections.abc import Callable

import gymnasium
import numpy as np
from PIL import Image

from dreamer_live.envs.base import Env
from dreamer_live.errors import UserError
from dreamer_live.steps import LOG_PREFIX, is_log

DEATH_AT = LOG_PREFIX + "death_at"


def _flag(obs: dict, key: str) -> bool:
    return bool(obs[key])


class Wrapper(Env):
    """Passes everything through; subclasses override `transform` (applied on reset and observe)."""

    def __init__(self, env: Env):
        self.env = env
        self.obs_space = dict(env.obs_space)
        self.act_space = env.act_space
        self._counts: dict[str, float] = {}

    def reset(self) -> dict[str, np.ndarray]:
        """Reset the wrapped env; its first observation goes through `transform`."""
        return self.transform(self.env.reset())

    def act(self, action: np.ndarray) -> None:
        """Pass the action on."""
        self.env.act(action)

    def observe(self) -> dict[str, np.ndarray]:
        """The wrapped env's observation through `transform`."""
        return self.transform(self.env.observe())

    def transform(self, obs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Change one observation; `obs["is_first"]` marks the start of an episode."""
        return obs

    def metrics(self) -> dict[str, float]:
        """The wrapped env's metrics plus this wrapper's counters."""
        return {**self.env.metrics(), **self._counts}

    def close(self) -> None:
        """Close the wrapped env."""
        self.env.close()

    @property
    def unwrapped(self) -> Env:
        """The innermost env."""
        return self.env.unwrapped if isinstance(self.env, Wrapper) else self.env


class EpisodeClock:
    """Seconds since the episode began: the wall clock, or `step_seconds` per observation when > 0."""

    def __init__(self, step_seconds: float = 0.0, clock: Callable[[], float] = time.monotonic):
        self.step_seconds, self._clock = float(step_seconds), clock
        self._steps, self._start = 0, clock()

    def start(self) -> None:
        """Begin an episode at time 0."""
        self._steps, self._start = 0, self._clock()

    def tick(self) -> float:
        """Count one observation; return the episode time now."""
        self._steps += 1
        return self.now()

    def now(self) -> float:
        """Episode time in seconds."""
        if self.step_seconds > 0:
            return self._steps * self.step_seconds
        return self._clock() - self._start


# --- observation shape ----------------------------------------------------------------------------------
class Resize(Wrapper):
    """Resizes `image` to size [height, width], as RGB (3 channels) or grayscale (1 channel)."""

    def __init__(self, env: Env, size: tuple[int, int] | list[int], grayscale: bool = False,
                 key: str = "image"):
        super().__init__(env)
        if key not in env.obs_space:
            raise UserError(f"cannot resize: the env has no '{key}' observation")
        if len(size) != 2 or min(size) < 1:
            raise UserError(f"env.size must be [height, width], not {size!r}")
        self.key, self.size, self.grayscale = key, (int(size[0]), int(size[1])), bool(grayscale)
        channels = 1 if grayscale else 3
        self.obs_space[key] = gymnasium.spaces.Box(0, 255, (*self.size, channels), np.uint8)

    def transform(self, obs):
        """Resize the image and convert its colour (`resize_array`)."""
        return {**obs, self.key: resize_array(obs[self.key], self.size, self.grayscale)}


def resize_array(image: np.ndarray, size: tuple[int, int], grayscale: bool) -> np.ndarray:
    """`resize_image` of a uint8 [H, W, 1] or [H, W, 3] array."""
    image = np.asarray(image, np.uint8)
    return resize_image(Image.fromarray(image[..., 0] if image.shape[-1] == 1 else image), size, grayscale)


def resize_image(image: Image.Image, size: tuple[int, int], grayscale: bool) -> np.ndarray:
    """Resize to size [height, width] (antialiased bilinear) and convert: uint8 [H, W, 1] grey or
    [H, W, 3] RGB."""
    mode = "L" if grayscale else "RGB"
    if image.mode != mode:  # (a converted copy of a whole screenshot costs milliseconds)
        image = image.convert(mode)
    height, width = size
    if image.size != (width, height):
        image = image.resize((width, height), Image.Resampling.BILINEAR, reducing_gap=3.0)
    out = np.asarray(image, np.uint8)
    return out[..., None] if grayscale else out


class FrameStack(Wrapper):
    """Concatenates the last `frames` images (channels) and vectors (features), oldest first."""

    def __init__(self, env: Env, frames: int, keys: tuple[str, ...] = ("image", "vector")):
        super().__init__(env)
        self.frames = int(frames)
        self.keys = tuple(k for k in keys if k in env.obs_space)
        self._history = {k: collections.deque(maxlen=self.frames) for k in self.keys}
        for key in self.keys:
            space = env.obs_space[key]
            shape = (*space.shape[:-1], space.shape[-1] * self.frames)
            low = np.concatenate([np.broadcast_to(space.low, space.shape)] * self.frames, -1)
            high = np.concatenate([np.broadcast_to(space.high, space.shape)] * self.frames, -1)
            self.obs_space[key] = gymnasium.spaces.Box(low, high, shape, space.dtype)

    def transform(self, obs):
        """Append this observation; at an episode start fill the history with it."""
        obs = dict(obs)
        for key, history in self._history.items():
            if _flag(obs, "is_first"):
                history.extend([obs[key]] * self.frames)
            else:
                history.append(obs[key])
            obs[key] = np.concatenate(list(history), -1)
        return obs


# --- actions and time -----------------------------------------------------------------------------------
class ActionRepeat(Wrapper):
    """Lockstep only: each act steps the wrapped env `repeat` times (until an episode end), summing reward.

    Real-time envs do not use it: a game on its own clock cannot be stepped twice; there env.action_repeat
    lowers the actor's tick rate instead (`dreamer_live.envs.tick_hz`). Built-in lockstep games take it as
    their frame_skip.
    """

    def __init__(self, env: Env, repeat: int):
        super().__init__(env)
        self.repeat = int(repeat)
        self._obs: dict[str, np.ndarray] | None = None

    def reset(self):
        """Reset the wrapped env."""
        self._obs = None
        return self.env.reset()

    def act(self, action):
        """Step `repeat` times now; the summed observation waits for observe."""
        total = 0.0
        for _ in range(self.repeat):
            self.env.act(action)
            obs = self.env.observe()
            total += float(obs["reward"])
            if _flag(obs, "is_last"):
                break
        self._obs = {**obs, "reward": np.array(total, np.float32)}

    def observe(self):
        """The observation after the last act, with the summed reward."""
        if self._obs is None:
            return self.env.observe()
        obs, self._obs = self._obs, None
        return obs


class TimeCap(Wrapper):
    """Truncates an episode (is_last without is_terminal) after `steps` steps or `seconds` of episode time."""

    def __init__(self, env: Env, steps: int = 0, seconds: float = 0.0, step_seconds: float = 0.0,
                 clock: Callable[[], float] = time.monotonic):
        super().__init__(env)
        self.steps, self.seconds = int(steps), float(seconds)
        self.clock = EpisodeClock(step_seconds, clock)
        self._count = 0
        self._counts = {"wrappers/time_caps": 0.0}

    def transform(self, obs):
        """Count the step; past a limit, mark the observation as the episode's last."""
        if _flag(obs, "is_first"):
            self._count = 0
            self.clock.start()
            return obs
        self._count += 1
        now = self.clock.tick()
        capped = (self.steps > 0 and self._count >= self.steps) or (0 < self.seconds <= now)
        if capped and not _flag(obs, "is_last"):
            self._counts["wrappers/time_caps"] += 1
            return {**obs, "is_last": np.array(True)}
        return obs


# --- progress-based shaping -----------------------------------------------------------------------------
class ProgressWrapper(Wrapper):
    """Base for wrappers that read the progress value `log/<key>` from each observation."""

    def __init__(self, env: Env, key: str):
        super().__init__(env)
        if not key:
            raise UserError(f"{type(self).__name__} needs env.progress_key (the env's log/<key> to read)")
        self.key = LOG_PREFIX + key

    def progress(self, obs: dict[str, np.ndarray]) -> float:
        """The progress value of this observation."""
        try:
            return float(obs[self.key])
        except KeyError:
            given = ", ".join(k for k in obs if is_log(k)) or "none"
            raise UserError(f"env.progress_key: observations have no '{self.key}' "
                            f"(log/ keys given: {given})") from None


class TeleportDeath(ProgressWrapper):
    """Ends the episode as a death when progress drops at once by at least every threshold that is set.

    `relative`: a fraction of the previous value (|previous| * relative); `absolute`: progress units. With
    both set, both must hold (the absolute one keeps small jitters near 0 from counting). The death
    step's reward is `reward`, not the env's: the env's is the respawn's jump back (minus the progress
    made, for a reward on progress), which would teach that progress is worth nothing.
    """

    def __init__(self, env: Env, key: str, relative: float = 0.0, absolute: float = 0.0,
                 reward: float = 0.0):
        super().__init__(env, key)
        if relative <= 0 and absolute <= 0:
            raise UserError("TeleportDeath needs env.teleport.relative or env.teleport.absolute > 0")
        self.relative, self.absolute, self.reward = float(relative), float(absolute), float(reward)
        self._previous = 0.0
        self._counts = {"wrappers/teleport_deaths": 0.0}

    def is_drop(self, previous: float, current: float) -> bool:
        """Whether going from `previous` to `current` is a teleport."""
        drop = previous - current
        if drop <= 0:
            return False
        if self.absolute > 0 and drop < self.absolute:
            return False
        return not (self.relative > 0 and drop < self.relative * abs(previous))

    def transform(self, obs):
        """Mark a sudden drop as is_last + is_terminal with the death reward, and log/death_at = the
        value before it."""
        current = self.progress(obs)
        previous, self._previous = self._previous, current
        if _flag(obs, "is_first") or _flag(obs, "is_last") or not self.is_drop(previous, current):
            return obs
        self._counts["wrappers/teleport_deaths"] += 1
        return {**obs, "is_last": np.array(True), "is_terminal": np.array(True),
                "reward": np.array(self.reward, np.float32), DEATH_AT: np.array(previous, np.float32)}


class Stagnation(ProgressWrapper):
    """Ends the episode when progress has not risen more than `epsilon` above its mark for `seconds`.

    The mark is the progress when the episode began or last advanced by more than epsilon; going back and
    forth below it is stagnation. A truncation unless `terminal`.
    """

    def __init__(self, env: Env, key: str, seconds: float, epsilon: float = 0.0,
                 terminal: bool = False, step_seconds: float = 0.0,
                 clock: Callable[[], float] = time.monotonic):
        super().__init__(env, key)
        if seconds <= 0:
            raise UserError("Stagnation needs env.stagnation.seconds > 0")
        self.seconds, self.epsilon, self.terminal = float(seconds), float(epsilon), bool(terminal)
        self.clock = EpisodeClock(step_seconds, clock)
        self._mark, self._mark_time = 0.0, 0.0
        self._counts = {"wrappers/stagnations": 0.0}

    def transform(self, obs):
        """Move the mark on progress; end the episode when it has stood still too long."""
        current = self.progress(obs)
        if _flag(obs, "is_first"):
            self.clock.start()
            self._mark, self._mark_time = current, 0.0
            return obs
        now = self.clock.tick()
        if current > self._mark + self.epsilon:
            self._mark, self._mark_time = current, now
            return obs
        if now - self._mark_time >= self.seconds and not _flag(obs, "is_last"):
            self._counts["wrappers/stagnations"] += 1
            return {**obs, "is_last": np.array(True), "is_terminal": np.array(self.terminal)}
        return obs


class Milestones(ProgressWrapper):
    """Adds `reward` each time progress first passes a multiple of `every` in an episode.

    Levels are absolute (floor(progress / every)); the level an episode starts on earns nothing.
    """

    def __init__(self, env: Env, key: str, every: float, reward: float = 1.0):
        super().__init__(env, key)
        if every <= 0:
            raise UserError("Milestones needs env.milestone.every > 0")
        self.every, self.reward = float(every), float(reward)
        self._level = 0
        self._counts = {"wrappers/milestones": 0.0}

    def transform(self, obs):
        """Reward each new level reached beyond the best so far."""
        level = math.floor(self.progress(obs) / self.every)
        if _flag(obs, "is_first"):
            self._level = level
            return obs
        if level <= self._level:
            return obs
        passed, self._level = level - self._level, level
        self._counts["wrappers/milestones"] += passed
        return {**obs, "reward": np.array(float(obs["reward"]) + passed * self.reward, np.float32)}


class DeathZone(ProgressWrapper):
    """On a death (is_terminal), adds -penalty * (1 + growth * earlier deaths within `radius`).

    Deaths are remembered across episodes (the last `memory`), at `log/death_at` when TeleportDeath set
    it, else at the terminal observation's progress. Truncations are not deaths.
    """

    def __init__(self, env: Env, key: str, radius: float, penalty: float = 1.0, growth: float = 1.0,
                 memory: int = 1000):
        super().__init__(env, key)
        if radius <= 0:
            raise UserError("DeathZone needs env.deathzone.radius > 0")
        self.radius, self.penalty, self.growth = float(radius), float(penalty), float(growth)
        self.deaths: collections.deque[float] = collections.deque(maxlen=int(memory))
        self._counts = {"wrappers/deathzone_penalty": 0.0, "wrappers/deaths": 0.0}

    def penalty_at(self, place: float) -> float:
        """The penalty a death at `place` costs now (before it is remembered)."""
        nearby = sum(abs(place - d) <= self.radius for d in self.deaths)
        return self.penalty * (1.0 + self.growth * nearby)

    def transform(self, obs):
        """Charge and remember a death."""
        if _flag(obs, "is_first") or not _flag(obs, "is_terminal"):
            return obs
        place = float(obs[DEATH_AT]) if DEATH_AT in obs else self.progress(obs)
        cost = self.penalty_at(place)
        self.deaths.append(place)
        self._counts["wrappers/deathzone_penalty"] = cost
        self._counts["wrappers/deaths"] += 1
        return {**obs, "reward": np.array(float(obs["reward"]) - cost, np.float32)}
