"""PLE's MonsterKong(): the built-in MonsterKong behind PLE's interface."""

from __future__ import annotations

from dreamer_live.ple.games.builtin import BuiltinGame


class MonsterKong(BuiltinGame):
    """PLE's MonsterKong()."""

    game_name = "MonsterKong"

    def __init__(self):
        super().__init__()
