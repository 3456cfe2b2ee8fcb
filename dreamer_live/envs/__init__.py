"""Environments: `make_env(config)` builds the configured game with its wrappers, as an Env.

env.name picks the game: a built-in game (`dreamer_live/Catcher-v0`, lockstep or real time per env.clock),
a PLE game of your own (`my_module:MyGame`, a dreamer_live.ple PyGameWrapper class; clocks as built-in
games), any gymnasium id (`CartPole-v1`, `ALE/Pong-v5`; lockstep, env.clock does not apply), or `live` (a
live desktop game from env.profile). Wrappers, innermost first, each only when configured:

    action repeat   lockstep only: built-in games take it as frame_skip, gymnasium envs repeat step();
                    real-time envs (env.clock realtime, live, env.pace_hz) tick slower: see `tick_hz`
    real time       env.pace_hz > 0: a lockstep env runs on its own clock (RealtimeRunner)
    resize          image to env.size [height, width], RGB or env.grayscale
    frame stack     env.frame_stack > 1
    teleport death, stagnation, milestones, death zone   read log/<env.progress_key> (see wrappers.py)
    time cap        env.time_cap_steps / env.time_cap_s (truncation)

Importing this package registers the built-in games with gymnasium.
"""

from __future__ import annotations

import os
import pathlib

from dreamer_live import spaces as spaceslib
from dreamer_live.envs import (
    games,  # GAMES imports the game modules on first use
    wrappers as w,
)
from dreamer_live.envs.base import Env
from dreamer_live.envs.gym_adapter import GymEnv
from dreamer_live.envs.live import make_live_env
from dreamer_live.envs.ple_game import DEFAULT_FPS, game_class, load_game
from dreamer_live.envs.realtime import RealtimeRunner
from dreamer_live.envs.registration import game_name, register_games
from dreamer_live.envs.wrappers import ActionRepeat
from dreamer_live.errors import UserError

CLOCKS = ("realtime", "lockstep")


def is_game(name: str) -> bool:
    """Whether env.name is a game with a clock: a built-in game or a PLE game ("module:Class")."""
    if game_name(name) is not None:
        return True
    return game_class(name) is not None


def is_realtime(config) -> bool:
    """Whether the configured env runs on its own clock (built-in realtime, live, or paced)."""
    env = config.env
    if env.name == "live" or env.pace_hz > 0:
        return True
    return is_game(env.name) and env.clock == "realtime"


def tick_hz(config) -> float:
    """The actor's tick rate: actor.hz, divided by env.action_repeat for a real-time env."""
    if is_realtime(config):
        return config.actor.hz / max(1, config.env.action_repeat)
    return config.actor.hz


def step_seconds(config) -> float:
    """Episode time per observation for the time-based wrappers: 0 (wall clock) in real time."""
    return 0.0 if is_realtime(config) else 1.0 / config.actor.hz


def lockstep_twin(config):
    """The config that steps the configured env's episodes in lockstep, as fast as the CPU allows, with
    the same frames per observation and the same time caps (lockstep counts 1/actor.hz per step): a
    real-time game switched to lockstep, a paced env unpaced. A live game (it cannot be stepped) and a
    lockstep env come back as they are."""
    env = config.env
    if env.name == "live" or not is_realtime(config):
        return config
    hz = tick_hz(config)
    if env.pace_hz > 0:
        rate, change = env.pace_hz, {"env.pace_hz": 0.0}
    else:
        rate, change = _game_fps(config), {"env.clock": "lockstep"}
    return config.update({**change, "actor.hz": hz, "env.action_repeat": max(1, round(rate / hz))})


def _game_fps(config) -> float:
    """The frame rate of a built-in or PLE game's own clock."""
    name = game_name(config.env.name)
    if name is None:  # a PLE game: its fps option
        return float(config.env.kwargs.to_dict().get("fps", DEFAULT_FPS))
    return games.GAMES[name].fps


def _check(config) -> None:
    env = config.env
    if env.clock not in CLOCKS:
        raise UserError(f"env.clock must be realtime or lockstep, not {env.clock!r}")
    if env.action_repeat < 1:
        raise UserError(f"env.action_repeat must be >= 1, not {env.action_repeat}")
    if env.frame_stack < 0:
        raise UserError(f"env.frame_stack must be >= 0, not {env.frame_stack}")
    if env.pace_hz < 0:
        raise UserError(f"env.pace_hz must be >= 0, not {env.pace_hz}")
    if config.actor.hz <= 0:
        raise UserError(f"actor.hz must be > 0, not {config.actor.hz}")
    if env.pace_hz > 0 and (env.name == "live" or (is_game(env.name) and env.clock == "realtime")):
        raise UserError(f"env.pace_hz paces a lockstep env, but {env.name} already runs in real time "
                        f"(use --env.clock lockstep or --env.pace_hz 0)")


def _builtin(config) -> Env:
    env = config.env
    name, seed = game_name(env.name), config.seed + config.actor.id
    lockstep = env.clock == "lockstep"
    if name is None:  # a PLE game, "module:Class"
        game = load_game(env.name, seed=seed, window=env.window, **env.kwargs.to_dict())
    elif name not in games.GAMES:
        known = ", ".join(f"dreamer_live/{n}-v0" for n in games.GAMES) or "none yet"
        raise UserError(f"unknown built-in game '{env.name}' (built-in games: {known})")
    else:
        game = games.GAMES[name](seed=seed, **env.kwargs.to_dict())
    return games.GameEnv(game, clock=env.clock, obs=env.obs,
                   frame_skip=env.action_repeat if lockstep else 1, window=env.window)


def _gym(config) -> Env:
    env = GymEnv(config.env.name, obs=config.env.obs, seed=config.seed + config.actor.id,
                 make_kwargs=config.env.kwargs.to_dict())
    if config.env.action_repeat > 1 and config.env.pace_hz <= 0:
        env = ActionRepeat(env, config.env.action_repeat)
    return env


def base_env(config, inject_keys: bool = True) -> Env:
    """The configured game without the shaping wrappers (action repeat applied); a live game sends no
    key at all with inject_keys False (a person plays: `record`)."""
    _check(config)
    if config.env.name == "live":
        return make_live_env(config, inject_keys=inject_keys)
    if is_game(config.env.name):
        return _builtin(config)
    return _gym(config)


def apply_wrappers(env: Env, config) -> Env:
    """Wrap `env` per the config's env section, in the fixed order of this module's docstring."""
    cfg = config.env
    if cfg.pace_hz > 0:
        env = RealtimeRunner(env, cfg.pace_hz)
    if "image" in env.obs_space:
        want = (*cfg.size, 1 if cfg.grayscale else 3)
        if tuple(env.obs_space["image"].shape) != tuple(want):
            env = w.Resize(env, cfg.size, cfg.grayscale)
    if cfg.frame_stack > 1:
        env = w.FrameStack(env, cfg.frame_stack)
    dt, key = step_seconds(config), cfg.progress_key
    if cfg.teleport.relative > 0 or cfg.teleport.absolute > 0:
        env = w.TeleportDeath(env, key, cfg.teleport.relative, cfg.teleport.absolute,
                              cfg.teleport.reward)
    if cfg.stagnation.seconds > 0:
        env = w.Stagnation(env, key, cfg.stagnation.seconds, cfg.stagnation.epsilon,
                           cfg.stagnation.terminal, step_seconds=dt)
    if cfg.milestone.every > 0:
        env = w.Milestones(env, key, cfg.milestone.every, cfg.milestone.reward)
    if cfg.deathzone.radius > 0:
        env = w.DeathZone(env, key, cfg.deathzone.radius, cfg.deathzone.penalty, cfg.deathzone.growth)
    if cfg.time_cap_steps > 0 or cfg.time_cap_s > 0:
        env = w.TimeCap(env, cfg.time_cap_steps, cfg.time_cap_s, step_seconds=dt)
    return env


def make_env(config, inject_keys: bool = True) -> Env:
    """The configured env with its wrappers, ready for reset() (inject_keys: see `base_env`)."""
    env = base_env(config, inject_keys)
    try:
        return apply_wrappers(env, config)
    except BaseException:
        env.close()  # a real-time game's clock thread must not outlive a bad config
        raise


register_games()

__all__ = ["Env", "apply_wrappers", "base_env", "is_game", "is_realtime", "make_env", "step_seconds", "tick_hz"]


def spaces_of_run(config, directory: str | os.PathLike):
    """The spaces the run's agent is built for: the actor's spaces.json in the replay `directory`, else
    those of the configured game, built in lockstep (a live game's window may be on another machine,
    so there the file is required)."""
    found = spaceslib.load(directory)
    if found is not None:
        return found
    if config.env.name == "live":
        raise UserError(f"{pathlib.Path(directory) / spaceslib.FILE} is missing; copy it from the "
                        "actor's replay folder")
    env = make_env(lockstep_twin(config))
    try:
        return env.obs_space, env.act_space
    finally:
        env.close()
