"""Catcher (PLE, after Eder Santana): move the paddle left and right to catch the falling fruit."""

from __future__ import annotations

import sys

import numpy as np

from dreamer_live.envs.games.base import Game, check_size
from dreamer_live.errors import UserError

PADDLE_COLOR = (255, 255, 255)
FRUIT_COLOR = (255, 120, 120)


class Catcher(Game):
    """PLE's Catcher: +1 per fruit caught, -1 per fruit missed (a life lost); over at 0 lives.

    State: paddle centre x and fruit centre x, y as fractions of the screen, paddle velocity in
    screen widths per second.
    """

    width = 64
    height = 64
    actions = ((), ("left",), ("right",))
    state_names = ("player_x", "player_vel", "fruit_x", "fruit_y")

    def __init__(self, seed: int | None = None, width: int = 64, height: int = 64, init_lives: int = 3,
                 **kwargs):
        super().__init__(seed, **kwargs)
        self.width, self.height = check_size("Catcher", width, height)
        if int(init_lives) < 1:
            raise UserError(f"Catcher: init_lives must be >= 1, not {init_lives}")
        self.init_lives = int(init_lives)
        # PLE's sizes and speeds, as fractions of the screen (PLE's speeds are per ms; ours per frame).
        self.fruit_size = round(self.height * 0.06)
        self.fruit_speed = 0.00095 * self.height * 1000.0 / self.fps
        self.player_accel = 0.021 * self.width  # added to the paddle velocity each frame a key is held
        self.paddle_width = round(self.width * 0.2)
        self.paddle_height = round(self.height * 0.04)
        self.paddle_y = self.height - self.paddle_height - 3 + self.paddle_height / 2  # centre
        self.reset()

    def _start(self) -> None:
        """New game: full lives, paddle in the middle, a new fruit above the screen."""
        self.lives = self.init_lives
        self.paddle_x = self.width / 2  # centre
        self.paddle_vel = 0.0
        self._new_fruit()

    def _new_fruit(self) -> None:
        size = self.fruit_size
        self.fruit_x = float(self.rng.choice(np.arange(size * 2, self.width - size * 2, size)))
        self.fruit_y = -float(self.rng.choice(np.arange(size, self.height // 2, size)))

    def _advance(self, keys: frozenset[str]) -> float:
        """One frame: accelerate the paddle with left/right, drop the fruit, score a catch or a miss."""
        push = (("right" in keys) - ("left" in keys)) * self.player_accel
        self.paddle_vel = (self.paddle_vel + push) * 0.9
        self.paddle_x += self.paddle_vel
        half = self.paddle_width / 2
        if not half <= self.paddle_x <= self.width - half:
            self.paddle_x = min(max(self.paddle_x, half), self.width - half)
            self.paddle_vel = 0.0
        self.fruit_y += self.fruit_speed
        reward = 0.0
        if self._caught():
            reward = 1.0
            self._new_fruit()
        elif self.fruit_y >= self.height:
            reward = -1.0
            self.lives -= 1
            self._new_fruit()
        self.game_over = self.lives <= 0
        return reward

    def _caught(self) -> bool:
        s = self.fruit_size / 2
        return (abs(self.fruit_x - self.paddle_x) < s + self.paddle_width / 2
                and abs(self.fruit_y - self.paddle_y) < s + self.paddle_height / 2)

    def _export(self) -> None:
        self.exported = {"score": self.score, "x": self.paddle_x, "y": self.paddle_y,
                         "lives": float(self.lives)}

    def draw(self, surface) -> None:
        """Black screen, white paddle, pink fruit."""
        import pygame
        surface.fill((0, 0, 0))
        pygame.draw.rect(surface, PADDLE_COLOR, pygame.Rect(
            round(self.paddle_x - self.paddle_width / 2), round(self.paddle_y - self.paddle_height / 2),
            self.paddle_width, self.paddle_height))
        s = self.fruit_size
        pygame.draw.rect(surface, FRUIT_COLOR,
                         pygame.Rect(round(self.fruit_x - s / 2), round(self.fruit_y - s / 2), s, s))

    def game_state(self) -> np.ndarray:
        """[player_x, player_vel, fruit_x, fruit_y], normalised by the screen size."""
        return np.array([self.paddle_x / self.width, self.paddle_vel * self.fps / self.width,
                         self.fruit_x / self.width, self.fruit_y / self.height], np.float32)


if __name__ == "__main__":  # python -m dreamer_live.envs.games.<game>: play it from the keyboard
    from dreamer_live.envs.games.standalone import main

    sys.exit(main(Catcher, sys.argv[1:]))
