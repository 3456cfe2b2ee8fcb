"""`PLE`: the PyGame Learning Environment's main class, with its documented behaviour.

Lockstep: the game advances only inside `act`, `frame_skip` times `num_steps` game steps of 1000/fps ms
each (`force_fps=True`), or paced to `fps` on the wall clock with the measured milliseconds passed to the
game (`force_fps=False`). `act` takes an element of `getActionSet()` (a pygame key; the no-op is `NOOP`,
None by default, appended when `add_noop_action`); anything else acts as the no-op, as in PLE.
"""

from __future__ import annotations

import numpy as np

from dreamer_live.envs.games.base import window_scale
from dreamer_live.envs.games.pygame_wrapper import PyGameWrapper


class PLE:
    """PLE(game, fps=30, frame_skip=1, num_steps=1, reward_values={}, force_fps=True,
    display_screen=False, add_noop_action=True, NOOP=None, state_preprocessor=None, rng=24)."""

    def __init__(self, game, fps=30, frame_skip=1, num_steps=1, reward_values={},  # noqa: B006
                 force_fps=True, display_screen=False, add_noop_action=True, NOOP=None,  # noqa: N803
                 state_preprocessor=None, rng=24):
        if not isinstance(game, PyGameWrapper):
            raise TypeError(f"PLE needs a game derived from dreamer_live.ple.games.base.PyGameWrapper, "
                            f"not {type(game).__name__}")
        if int(fps) <= 0 or int(frame_skip) < 1 or int(num_steps) < 1:
            raise ValueError(f"fps must be > 0 and frame_skip, num_steps >= 1, not {fps}, {frame_skip}, "
                             f"{num_steps}")
        self.game = game
        self.fps, self.frame_skip, self.num_steps = fps, int(frame_skip), int(num_steps)
        self.force_fps, self.display_screen = bool(force_fps), bool(display_screen)
        self.add_noop_action, self.NOOP = bool(add_noop_action), NOOP
        self.last_action = None
        self.previous_score = 0.0
        self.frame_count = 0
        self._window = None
        if reward_values:
            self.game.adjustRewards(reward_values)
        self.rng = rng if isinstance(rng, np.random.RandomState) else np.random.RandomState(rng)
        self.game.setRNG(self.rng)
        self.init()
        self.state_preprocessor = state_preprocessor
        self.state_dim = None
        if state_preprocessor is not None:
            state = self.game.getGameState()
            if state is None:
                raise ValueError("Asked to return non-visual state on game that does not support it!")
            self.state_dim = np.shape(state_preprocessor(state))
        if game.allowed_fps is not None and self.fps != game.allowed_fps:
            raise ValueError(f"Game requires {game.allowed_fps}fps, was given {self.fps}.")

    def init(self) -> None:
        """Set up pygame and the game's screen, then start the game (PLE's init)."""
        self.game._setup(window=self.display_screen)
        self.game.init()
        self.game.clock.tick()  # the first wall-clock step counts from here

    def getActionSet(self) -> list:  # noqa: N802 (PLE's names)
        """The game's keys, and the no-op (NOOP) last when add_noop_action."""
        actions = self.game.getActions()
        return actions + [self.NOOP] if self.add_noop_action else actions

    def getFrameNumber(self) -> int:  # noqa: N802
        """Game steps taken since PLE was made (all episodes)."""
        return self.frame_count

    def game_over(self) -> bool:
        """Whether the game has reached a terminal state."""
        return bool(self.game.game_over())

    def score(self) -> float:
        """The game's score in this episode."""
        return self.game.getScore()

    def lives(self) -> int:
        """The lives left (0 in games without lives)."""
        return self.game.lives

    def reset_game(self) -> None:
        """Start a new episode."""
        self.last_action = None
        self.previous_score = 0.0
        self.game.reset()
        self.game.clock.tick()

    def getScreenRGB(self) -> np.ndarray:  # noqa: N802
        """The screen as uint8 [width, height, 3] (PLE's layout)."""
        return self.game.getScreenRGB()

    def getScreenGrayscale(self) -> np.ndarray:  # noqa: N802
        """The screen as uint8 [width, height], by relative luminance (PLE's weights)."""
        frame = self.getScreenRGB()
        grey = 0.21 * frame[:, :, 0] + 0.72 * frame[:, :, 1] + 0.07 * frame[:, :, 2]
        return np.round(grey).astype(np.uint8)

    def saveScreen(self, filename) -> None:  # noqa: N802
        """Save the screen as an image file (PNG by the name's suffix)."""
        from PIL import Image
        Image.fromarray(self.getScreenRGB().transpose(1, 0, 2)).save(filename)

    def getScreenDims(self) -> tuple[int, int]:  # noqa: N802
        """(width, height)."""
        return self.game.getScreenDims()

    def getGameStateDims(self):  # noqa: N802
        """The shape of the preprocessed state, or None without a state_preprocessor."""
        return self.state_dim

    def getGameState(self):  # noqa: N802
        """The game's state (a dict), through state_preprocessor when one was given."""
        state = self.game.getGameState()
        if state is None:
            raise ValueError("Was asked to return state vector for game that does not support it!")
        return self.state_preprocessor(state) if self.state_preprocessor is not None else state

    def act(self, action) -> float:
        """Take `action` (an element of getActionSet) for frame_skip steps; return the reward."""
        return sum(self._one_step(action) for _ in range(self.frame_skip))

    def _one_step(self, action) -> float:
        if self.game_over():
            return 0.0
        if action not in self.getActionSet():
            action = self.NOOP
        if action is not None and action != self.NOOP:
            self.game._setAction(action, self.last_action)
        self.last_action = None if action == self.NOOP else action
        for _ in range(self.num_steps):
            dt = 1000.0 / self.fps if self.force_fps else self.game.tick(self.fps)
            self.game.step(dt)
            if self.display_screen:
                self._show()
        self.frame_count += self.num_steps
        score = self.game.getScore()
        reward, self.previous_score = score - self.previous_score, score
        return reward

    def _show(self) -> None:
        import pygame
        if self._window is None:
            width, height = self.game.getScreenDims()
            scale = window_scale(self.game)
            self._window = pygame.display.set_mode((width * scale, height * scale))
            pygame.display.set_caption(f"dreamer_live.ple {type(self.game).__name__}")
        self.game._render()
        pygame.transform.scale(self.game.screen, self._window.get_size(), self._window)
        pygame.display.flip()
        pygame.event.pump()
