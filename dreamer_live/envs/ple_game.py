"""A PLE game (your own `PyGameWrapper` subclass) as a built-in `Game`, for GameEnv, gymnasium and the actor.

`--env.name my_module:MyGame` names it (the module importable, e.g. its folder on PYTHONPATH);
`env.kwargs` go to its constructor, except `fps` (PLE's fps, default 30): one frame is 1000/fps ms of
game time, and in real time the game's clock runs at fps frames per second. Each frame the held action's
KEYDOWN and the previous action's KEYUP are posted to pygame's event queue, as PLE does, before
`step(1000/fps)`; the frame's reward is the change of `getScore()`. The state vector is `getGameState()`
flattened in its key order (numbers, or fixed-length sequences of numbers).
"""

from __future__ import annotations

import importlib
import re

import numpy as np

from dreamer_live.envs.games.base import Game
from dreamer_live.envs.games.pygame_wrapper import PyGameWrapper
from dreamer_live.errors import UserError

_SPEC = re.compile(r"^([A-Za-z_][\w.]*):([A-Za-z_]\w*)$")
DEFAULT_FPS = 30


def game_class(name: str) -> type[PyGameWrapper] | None:
    """The PLE game class `name` ("module:Class") names, or None when it names none (e.g. a gym id)."""
    match = _SPEC.match(name) if isinstance(name, str) else None
    if match is None:
        return None
    module_name, attr = match.groups()
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as e:
        if e.name and module_name.startswith(e.name):
            raise UserError(f"env.name {name}: no module named {e.name} (put its folder on "
                            f"PYTHONPATH)") from None
        raise
    cls = getattr(module, attr, None)
    return cls if isinstance(cls, type) and issubclass(cls, PyGameWrapper) else None


def load_game(game, seed: int | None = None, window: bool = False, **kwargs) -> PLEGame:
    """A PLEGame from a "module:Class" name, a PyGameWrapper class, or an instance (kwargs: fps, options)."""
    fps = kwargs.pop("fps", DEFAULT_FPS)
    if isinstance(game, str):
        cls = game_class(game)
        if cls is None:
            raise UserError(f"{game} is not a PLE game (a class derived from "
                            f"dreamer_live.ple.games.base.PyGameWrapper)")
        game = cls
    if isinstance(game, type):
        try:
            game = game(**kwargs)
        except TypeError as e:
            raise UserError(f"bad env.kwargs for {game.__name__}: {e}") from None
    elif kwargs:
        raise UserError(f"options {sorted(kwargs)} given for a game already made")
    return PLEGame(game, seed=seed, fps=fps, window=window)


def _flat(state) -> dict[str, np.ndarray]:
    if state is None:
        return {}
    if not isinstance(state, dict):
        raise UserError(f"getGameState() must return a dict or None, not {type(state).__name__}")
    return {k: np.asarray(v, np.float32).reshape(-1) for k, v in state.items()}


class PLEGame(Game):
    """A PyGameWrapper game behind the built-in Game interface (tick = one PLE frame)."""

    def __init__(self, game: PyGameWrapper, seed: int | None = None, fps: int = DEFAULT_FPS,
                 window: bool = False):
        if not isinstance(game, PyGameWrapper):
            raise UserError(f"{type(game).__name__} is not derived from "
                            f"dreamer_live.ple.games.base.PyGameWrapper")
        try:
            fps = int(fps)
        except (TypeError, ValueError):
            raise UserError(f"fps must be a number, not {fps!r}") from None
        if not 1 <= fps <= 1000:
            raise UserError(f"fps must be in [1, 1000], not {fps}")
        self.ple_game = game
        self.fps = game.allowed_fps or fps
        game._setup(window=window)
        super().__init__(seed)  # sets self.rng: the game's RandomState is drawn from it
        self.width, self.height = (int(v) for v in game.getScreenDims())
        self._keys = dict(game.actions)
        self.actions = ((),) + tuple((name,) for name in self._keys)
        self._last_key = None
        game.init()
        self._sizes = {k: v.size for k, v in _flat(game.getGameState()).items()}
        self.state_names = tuple(k if n == 1 else f"{k}_{i}" for k, n in self._sizes.items()
                                 for i in range(n))
        self.exported = {}
        self.reset()

    @property
    def name(self) -> str:
        """The PLE game's class name."""
        return type(self.ple_game).__name__

    @property
    def rng(self) -> np.random.Generator:
        """The random stream; replacing it reseeds the PLE game's RandomState from it."""
        return self._rng

    @rng.setter
    def rng(self, generator: np.random.Generator) -> None:
        self._rng = generator
        self.ple_game.rng = np.random.RandomState(int(generator.integers(2**31 - 1)))

    def _start(self) -> None:
        self.ple_game.reset()
        self._last_key = None
        self.game_over = bool(self.ple_game.game_over())

    def _advance(self, keys: frozenset[str]) -> float:
        """Post the held action's key events (as PLE), step 1000/fps ms, return the score's change."""
        key = self._keys[next(iter(keys))] if keys else None
        if key is not None:
            self.ple_game._setAction(key, self._last_key)
        self._last_key = key
        before = self.ple_game.getScore()
        self.ple_game.step(1000.0 / self.fps)
        self.game_over = bool(self.ple_game.game_over())
        return float(self.ple_game.getScore() - before)

    def _export(self) -> None:
        state = _flat(self.ple_game.getGameState())
        x, y = (float(state[k][0]) if k in state else 0.0 for k in ("player_x", "player_y"))
        self.exported = {"score": float(self.ple_game.getScore()), "x": x, "y": y,
                         "lives": float(self.ple_game.lives)}

    def draw(self, surface) -> None:
        """Copy the PLE game's screen."""
        self.ple_game._render()
        surface.blit(self.ple_game.screen, (0, 0))

    def game_state(self) -> np.ndarray:
        """getGameState() flattened in state_names order."""
        state = _flat(self.ple_game.getGameState())
        sizes = {k: v.size for k, v in state.items()}
        if sizes != self._sizes:
            raise UserError(f"{self.name}.getGameState() changed its fields or sizes: {self._sizes} "
                            f"at the start, now {sizes}")
        return np.concatenate(list(state.values())) if state else np.zeros(0, np.float32)
