"""PLE's FlappyBird(width=288, height=512, pipe_gap=100): the built-in FlappyBird behind PLE's interface."""

from __future__ import annotations

from dreamer_live.ple.games.builtin import BuiltinGame, fixed_size


class FlappyBird(BuiltinGame):
    """PLE's FlappyBird(width=288, height=512, pipe_gap=100); the screen is always 288x512."""

    game_name = "FlappyBird"

    def __init__(self, width=288, height=512, pipe_gap=100):
        fixed_size("FlappyBird", (width, height), (288, 512))
        super().__init__(pipe_gap=pipe_gap)
