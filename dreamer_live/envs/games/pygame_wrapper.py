"""PLE's game base class, `PyGameWrapper` (alias `Game`; PLE's name: dreamer_live.ple.games.base): what
a game written for PLE derives from.

As PLE's documentation teaches: `__init__` calls `super().__init__(width, height, actions={name:
pygame key})`; the game implements `init` (new episode: score, lives, positions), `getScore`,
`game_over`, `step(dt)` (dt in milliseconds; key presses come from pygame's event queue, where PLE posts
the chosen action's KEYDOWN and the previous one's KEYUP) and optionally `getGameState` (a dict); it
draws on `self.screen` and draws its randomness from `self.rng` (a numpy RandomState). Rewards it pays
come from `self.rewards`, which PLE's `reward_values` override.

Unlike PLE's, `self.screen` is an off-screen Surface of the game's size: headless by default (SDL's dummy
driver), shown in a window only when asked for (`PLE(display_screen=True)` or `--env.window true`).
"""

from __future__ import annotations

import numpy as np

from dreamer_live.envs.games.base import import_pygame, surface_pixels

REWARDS = {"positive": 1.0, "negative": -1.0, "tick": 0.0, "loss": -5.0, "win": 5.0}


class PyGameWrapper:
    """PLE's base class for games: screen, actions, rewards, rng and the event-queue key protocol."""

    def __init__(self, width, height, actions={}):  # noqa: B006 (PLE's signature; never mutated)
        self.actions = actions
        self.score = 0.0
        self.lives = 0
        self.screen = None
        self.clock = None
        self.height = height
        self.width = width
        self.screen_dim = (width, height)
        self.allowed_fps = None
        self.rng = None
        self.rewards = dict(REWARDS)
        self.NOOP = None  # set by _setup: pygame's K_F15, as in PLE

    # --- what PLE calls ------------------------------------------------------------------------------
    def _setup(self, window: bool = False) -> None:
        """Start pygame (headless unless `window`) and give the game its screen and clock."""
        pygame = import_pygame(window)
        pygame.init()
        if pygame.display.get_surface() is None:
            # A display mode lets games convert() loaded images, as PLE's (1, 1) window did.
            pygame.display.set_mode((1, 1), pygame.NOFRAME)
        self.NOOP = pygame.K_F15
        self.screen = pygame.Surface(self.getScreenDims())
        self.clock = pygame.time.Clock()

    def _setAction(self, action, last_action) -> None:  # noqa: N802 (PLE's name)
        """Post the action's KEYDOWN and the previous action's KEYUP to pygame's event queue."""
        import pygame
        action = self.NOOP if action is None else action
        last_action = self.NOOP if last_action is None else last_action
        pygame.event.post(pygame.event.Event(pygame.KEYDOWN, {"key": action}))
        pygame.event.post(pygame.event.Event(pygame.KEYUP, {"key": last_action}))

    def _render(self) -> None:
        """Bring `self.screen` up to date (games that draw in `step` have nothing to do)."""

    def getScreenRGB(self) -> np.ndarray:  # noqa: N802
        """The screen as uint8 [width, height, 3] (PLE's layout: x first)."""
        self._render()
        return surface_pixels(self.screen).transpose(1, 0, 2)

    def tick(self, fps) -> float:
        """Sleep to keep `fps` (PLE spins instead); return the milliseconds since the previous call."""
        return float(self.clock.tick(fps))

    def adjustRewards(self, rewards: dict) -> None:  # noqa: N802
        """Override the rewards whose keys the game has (positive, negative, tick, loss, win)."""
        for key, value in rewards.items():
            if key in self.rewards:
                self.rewards[key] = value

    def setRNG(self, rng) -> None:  # noqa: N802
        """Give the game its random stream, unless it made its own."""
        if self.rng is None:
            self.rng = rng

    def getGameState(self):  # noqa: N802
        """The game's non-visual state as a dict, or None when it has none."""
        return None

    def getScreenDims(self) -> tuple[int, int]:  # noqa: N802
        """(width, height)."""
        return self.screen_dim

    def getActions(self) -> list:  # noqa: N802
        """The pygame keys the game responds to."""
        return list(self.actions.values())

    # --- what the game implements --------------------------------------------------------------------
    def init(self) -> None:
        """Start a new episode (score, lives, positions)."""
        raise NotImplementedError("Please override this method")

    def reset(self) -> None:
        """Start a new episode (calls init)."""
        self.init()

    def getScore(self) -> float:  # noqa: N802
        """The score since the last init."""
        raise NotImplementedError("Please override this method")

    def game_over(self) -> bool:
        """Whether the game has reached a terminal state."""
        raise NotImplementedError("Please override this method")

    def step(self, dt) -> None:
        """Advance the game by dt milliseconds."""
        raise NotImplementedError("Please override this method")


Game = PyGameWrapper
