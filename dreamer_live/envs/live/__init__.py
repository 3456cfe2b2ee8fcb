"""Live desktop games: screen capture, held keys and memory reads, configured by a game profile.

`make_live_env(config)` builds a LiveEnv from env.profile (a YAML file, e.g. one under
dreamer_live/configs/games/) and the env.live settings; `make_env` calls it for env.name live and
adds the shaping wrappers.
"""

from __future__ import annotations

from dreamer_live.config import CONFIG_DIR
from dreamer_live.envs.live.env import LiveEnv, LiveOptions
from dreamer_live.envs.live.profile import Profile, load_profile, profile_path
from dreamer_live.errors import UserError


def make_live_env(config, inject_keys: bool = True) -> LiveEnv:
    """The LiveEnv for config.env.profile, its frames at env.size in env.grayscale; with inject_keys False
    it never sends a key (a person plays)."""
    env = config.env
    if not env.profile:
        raise UserError("env.name live needs a game profile: --env.profile PATH.yaml, or a name "
                        f"from {CONFIG_DIR / 'games'}")
    profile = load_profile(profile_path(env.profile))
    return LiveEnv(profile, size=tuple(env.size), grayscale=env.grayscale, obs=env.obs,
                   options=LiveOptions.from_config(env.live), inject_keys=inject_keys)


__all__ = ["LiveEnv", "LiveOptions", "Profile", "load_profile", "make_live_env", "profile_path"]
