"""A user's own game, written the way PLE's documentation teaches, with nothing but dreamer_live.ple.

Fruit falls at a random x; the paddle (keys a / d) catches it for `positive` or lets it fall for
`negative` and a life; the game is over when the lives are gone (`loss` paid once).
"""

import pygame
from pygame.constants import K_a, K_d

from dreamer_live.ple.games.base import PyGameWrapper

PADDLE_SPEED = 0.06  # pixels per millisecond
FRUIT_SPEED = 0.04


class FruitCatch(PyGameWrapper):
    """A small catching game in PLE's style."""

    def __init__(self, width=48, height=48, init_lives=3):
        actions = {"left": K_a, "right": K_d}
        super().__init__(width, height, actions=actions)
        self.init_lives = init_lives
        self.paddle_width = width // 4
        self.fruit_size = 4

    def _handle_player_events(self):
        self.dx = 0.0
        for event in pygame.event.get():
            if event.type == pygame.KEYDOWN:
                if event.key == self.actions["left"]:
                    self.dx -= PADDLE_SPEED
                if event.key == self.actions["right"]:
                    self.dx += PADDLE_SPEED

    def _new_fruit(self):
        self.fruit_x = float(self.rng.randint(0, self.width - self.fruit_size))
        self.fruit_y = 0.0

    def init(self):
        """New game: full lives, paddle in the middle, a fruit at the top."""
        self.score = 0.0
        self.lives = self.init_lives
        self.paddle_x = (self.width - self.paddle_width) / 2
        self.dx = 0.0
        self._new_fruit()

    def getScore(self):
        """The score so far."""
        return self.score

    def game_over(self):
        """Over when no lives are left."""
        return self.lives <= 0

    def getGameState(self):
        """Paddle x and fruit position in pixels."""
        return {"player_x": self.paddle_x, "fruit_x": self.fruit_x, "fruit_y": self.fruit_y}

    def step(self, dt):
        """Move the paddle by the pressed keys and the fruit by gravity; score; draw."""
        self._handle_player_events()
        self.score += self.rewards["tick"]
        self.paddle_x = min(max(self.paddle_x + self.dx * dt, 0), self.width - self.paddle_width)
        self.fruit_y += FRUIT_SPEED * dt
        paddle_top = self.height - 4
        if self.fruit_y + self.fruit_size >= paddle_top:
            if self.paddle_x - self.fruit_size <= self.fruit_x <= self.paddle_x + self.paddle_width:
                self.score += self.rewards["positive"]
            else:
                self.score += self.rewards["negative"]
                self.lives -= 1
                if self.lives <= 0:
                    self.score += self.rewards["loss"]
            self._new_fruit()
        self.screen.fill((0, 0, 0))
        pygame.draw.rect(self.screen, (255, 255, 255),
                         (round(self.paddle_x), paddle_top, self.paddle_width, 4))
        pygame.draw.rect(self.screen, (255, 120, 120),
                         (round(self.fruit_x), round(self.fruit_y), self.fruit_size, self.fruit_size))
