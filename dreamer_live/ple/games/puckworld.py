"""PLE's PuckWorld(width=64, height=64): the built-in PuckWorld behind PLE's interface."""

from __future__ import annotations

from dreamer_live.ple.games.builtin import BuiltinGame


class PuckWorld(BuiltinGame):
    """PLE's PuckWorld(width=64, height=64)."""

    game_name = "PuckWorld"

    def __init__(self, width=64, height=64):
        super().__init__(width=width, height=height)
