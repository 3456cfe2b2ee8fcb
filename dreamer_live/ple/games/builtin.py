"""A built-in game (dreamer_live.envs.games) as a PLE game: `BuiltinGame`, the base of PLE's nine classes.

It reads the chosen key from pygame's event queue, as PLE's own games do, and advances the built-in game
one frame per `step` (1/30 s of game time: the built-in games' physics run per frame, so `dt` is not
used). `getGameState` gives the built-in game's state vector as a dict by PLE's field names; its values
are normalised (fractions of the screen, screen sizes per second), not PLE's pixels. Rewards: a game
whose events pay from a `rewards` table (Snake, WaterWorld, RaycastMaze, MonsterKong) takes the
overrides into that table; the others pay +1 and -1, scaled by `positive` and `-negative`. `tick` is
added every frame; `loss` and `win` only where the built-in game pays them.
"""

from __future__ import annotations

import numpy as np

from dreamer_live.envs import games  # GAMES imports the game modules on first use
from dreamer_live.envs.games.pygame_wrapper import PyGameWrapper
from dreamer_live.errors import UserError

DEFAULT_REWARDS = {"positive": 1.0, "negative": -1.0}  # what the +1/-1 built-in games pay


def pygame_key(name: str) -> int:
    """The pygame key code for a built-in game's key name ("left", "jump", "w", ...)."""
    import pygame
    special = {"left": pygame.K_LEFT, "right": pygame.K_RIGHT, "up": pygame.K_UP,
               "down": pygame.K_DOWN, "jump": pygame.K_SPACE}
    return special[name] if name in special else pygame.key.key_code(name)


class BuiltinGame(PyGameWrapper):
    """One of the built-in games behind PLE's game interface."""

    game_name = ""  # the built-in game's name in dreamer_live.envs.games.GAMES

    def __init__(self, **options):
        try:
            self.game = games.GAMES[self.game_name](seed=None, **options)
        except UserError as e:
            raise ValueError(str(e)) from None
        names = [keys[0] for keys in self.game.actions if keys]
        if any(len(keys) > 1 for keys in self.game.actions):
            raise TypeError(f"{self.game_name}: an action holds several keys; PLE has one per action")
        super().__init__(self.game.width, self.game.height, {name: pygame_key(name) for name in names})
        self._names = {code: name for name, code in self.actions.items()}
        own = getattr(self.game, "rewards", None)
        if own is not None:
            self.rewards = {**self.rewards, **own}
            self.game.rewards = dict(own)  # an instance copy: overrides stay with this game
        else:
            self.rewards = {**self.rewards, **DEFAULT_REWARDS}
        self._own_rewards = own is not None
        self._drawn = -1  # the frame self.screen shows

    def adjustRewards(self, rewards: dict) -> None:  # noqa: N802
        """Override rewards; the built-in game's own table follows."""
        super().adjustRewards(rewards)
        if self._own_rewards:
            self.game.rewards.update({k: self.rewards[k] for k in self.game.rewards})

    def init(self) -> None:
        """Start a new episode, reseeded from `self.rng` (PLE's RandomState)."""
        if self.rng is not None:
            self.game.rng = np.random.default_rng(int(self.rng.randint(2**31 - 1)))
        self.game.reset()
        self.score, self._drawn = 0.0, -1
        self.lives = int(getattr(self.game, "lives", 0))

    def step(self, dt) -> None:
        """One frame with the keys whose KEYDOWN is in the event queue."""
        import pygame
        down = {self._names[event.key] for event in pygame.event.get()
                if event.type == pygame.KEYDOWN and event.key in self._names}
        reward = self.game.tick(frozenset(down))
        if not self._own_rewards and reward:
            reward *= self.rewards["positive"] if reward > 0 else -self.rewards["negative"]
        reward += self.rewards["tick"]
        self.score += reward
        self.lives = int(getattr(self.game, "lives", 0))

    def getScore(self) -> float:  # noqa: N802
        """The score of this episode (PLE's rewards)."""
        return self.score

    def game_over(self) -> bool:
        """Whether the built-in game has ended."""
        return bool(self.game.game_over)

    def getGameState(self) -> dict:  # noqa: N802
        """The built-in game's state vector by field name."""
        return dict(zip(self.game.state_names, map(float, self.game.game_state())))

    def _render(self) -> None:
        if self._drawn != self.game.frame:
            self.game.draw(self.screen)
            self._drawn = self.game.frame


def fixed_size(game: str, given: tuple, fixed: tuple, what: str = "(width, height)") -> None:
    """A ValueError unless a PLE argument the built-in game cannot vary has its only value."""
    if tuple(given) != tuple(fixed):
        raise ValueError(f"{game}: {what} must be {fixed} here, not {tuple(given)}")
