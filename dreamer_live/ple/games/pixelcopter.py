"""PLE's Pixelcopter(width=48, height=48): the built-in Pixelcopter behind PLE's interface."""

from __future__ import annotations

from dreamer_live.ple.games.builtin import BuiltinGame


class Pixelcopter(BuiltinGame):
    """PLE's Pixelcopter(width=48, height=48)."""

    game_name = "Pixelcopter"

    def __init__(self, width=48, height=48):
        super().__init__(width=width, height=height)
