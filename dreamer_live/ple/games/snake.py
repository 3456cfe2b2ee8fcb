"""PLE's Snake(width=64, height=64, init_length=3): the built-in Snake behind PLE's interface."""

from __future__ import annotations

from dreamer_live.ple.games.builtin import BuiltinGame


class Snake(BuiltinGame):
    """PLE's Snake(width=64, height=64, init_length=3)."""

    game_name = "Snake"

    def __init__(self, width=64, height=64, init_length=3):
        super().__init__(width=width, height=height, init_length=init_length)
