"""PLE's `ple.games.base`: `PyGameWrapper` (alias `Game`), the base class a game written for PLE
derives from (defined in dreamer_live/envs/games/pygame_wrapper.py)."""

from dreamer_live.envs.games.pygame_wrapper import Game, PyGameWrapper

__all__ = ["Game", "PyGameWrapper"]
