"""DreamerV3 agent: `Agent(config, obs_space, act_space)` with jitted init/policy/train/report/dream."""

from dreamer_live.agent.agent import Agent

__all__ = ["Agent"]
