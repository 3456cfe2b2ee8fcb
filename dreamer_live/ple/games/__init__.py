"""PLE's games package: the nine games by PLE's module and class names, and `base` for your own.

`from dreamer_live.ple.games.catcher import Catcher` (as `from ple.games.catcher import Catcher`), or
`from dreamer_live.ple.games import Catcher`: the classes load on first use.
"""

from __future__ import annotations

import importlib

from dreamer_live.envs.games import GAME_MODULES


def __getattr__(name: str):
    """A game class by PLE's name, e.g. `FlappyBird`, imported on first use."""
    if name in GAME_MODULES:
        return getattr(importlib.import_module(f"{__name__}.{GAME_MODULES[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = list(GAME_MODULES)
