"""The built-in real-time games (the PyGame Learning Environment set): GAMES maps name -> Game class.

The game modules are imported on first use of GAMES (not when this package is imported), so that
`python -m dreamer_live.envs.games.<game>` runs its module once, as __main__.
"""

from __future__ import annotations

import importlib

from dreamer_live.envs.games.base import Game, GameEnv

# Game name -> module in this package holding the class of that name (one line per game).
GAME_MODULES: dict[str, str] = {
    "Catcher": "catcher",
    "Pong": "pong",
    "FlappyBird": "flappybird",
    "Pixelcopter": "pixelcopter",
    "PuckWorld": "puckworld",
    "Snake": "snake",
    "WaterWorld": "waterworld",
    "RaycastMaze": "raycastmaze",
    "MonsterKong": "monsterkong",
}


def __getattr__(name: str):
    """`GAMES`, built on first access: {"Catcher": Catcher, ...}."""
    if name == "GAMES":
        games = {game: getattr(importlib.import_module(f"{__name__}.{module}"), game)
                 for game, module in GAME_MODULES.items()}
        globals()["GAMES"] = games
        return games
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["GAMES", "GAME_MODULES", "Game", "GameEnv"]
