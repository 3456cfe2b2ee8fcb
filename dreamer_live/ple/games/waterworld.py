"""PLE's WaterWorld(width=48, height=48, num_creeps=3): the built-in WaterWorld behind PLE's interface."""

from __future__ import annotations

from dreamer_live.ple.games.builtin import BuiltinGame


class WaterWorld(BuiltinGame):
    """PLE's WaterWorld(width=48, height=48, num_creeps=3)."""

    game_name = "WaterWorld"

    def __init__(self, width=48, height=48, num_creeps=3):
        super().__init__(width=width, height=height, num_creeps=num_creeps)
