"""PLE's Catcher(width=64, height=64, init_lives=3): the built-in Catcher behind PLE's interface."""

from __future__ import annotations

from dreamer_live.ple.games.builtin import BuiltinGame


class Catcher(BuiltinGame):
    """PLE's Catcher(width=64, height=64, init_lives=3)."""

    game_name = "Catcher"

    def __init__(self, width=64, height=64, init_lives=3):
        super().__init__(width=width, height=height, init_lives=init_lives)
