"""Snake (PLE): a continuously moving snake eats food squares and grows; walls and its own body kill."""

from __future__ import annotations

import sys

import numpy as np

from dreamer_live.envs.games import physics
from dreamer_live.envs.games.base import Game, check_size
from dreamer_live.errors import UserError

BACKGROUND = (25, 25, 25)
BODY_COLOR = (100, 255, 100)
HEAD_COLOR = (0, 155, 0)
FOOD_COLOR = (255, 100, 100)
# Key name -> direction; checked in this order, as PLE handles its key events (a later key wins).
TURNS = (("left", (-1.0, 0.0)), ("right", (1.0, 0.0)), ("up", (0.0, -1.0)), ("down", (0.0, 1.0)))
FOLLOW = 0.9  # each segment moves this fraction of the way to the one ahead per frame (PLE's smoothing)
FIRST_HITTABLE = 6  # the head can only bite segments from the 7th on (PLE: "after only 7 segments")


class Snake(Game):
    """PLE's Snake: +1 for each food square the head touches (the snake grows a segment), -1 and the
    end of the game when the head leaves the screen or hits its own body. The snake moves on its own
    at a speed that scales with the screen; it cannot turn back on itself."""

    width = 64
    height = 64
    actions = ((), ("left",), ("right",), ("up",), ("down",))
    body_slots = 32  # segment distances in the state vector (PLE's variable-length snake_body, padded)
    rewards = {"positive": 1.0, "loss": -1.0}  # PLE documentation's values

    def __init__(self, seed: int | None = None, width: int = 64, height: int = 64, init_length: int = 3,
                 **kwargs):
        super().__init__(seed, **kwargs)
        self.width, self.height = check_size("Snake", width, height, limit=2000)
        if not isinstance(init_length, int) or not 3 <= init_length <= 100:
            raise UserError(f"Snake: init_length must be an integer in [3, 100], not {init_length!r}")
        self.init_length = init_length
        self.speed = round(0.45 * self.width)  # px/s
        self.segment = max(2, round(0.05 * self.width))  # side of a body square
        self.food_size = max(2, round(0.09 * self.width))
        self.hitbox_depth = max(1, round(0.25 * self.segment))  # the head hits with a thin leading edge
        self.state_names = ("snake_head_x", "snake_head_y", "food_x", "food_y") + tuple(
            f"snake_body_{i}" for i in range(1, self.body_slots + 1))
        self.reset()

    def _start(self) -> None:
        """A short snake in the middle heading right; food somewhere off its body."""
        self.direction = np.array([1.0, 0.0])
        self.body = np.array([[self.width / 2 - self.segment * i, self.height / 2]
                              for i in range(self.init_length)])
        self.colors = [HEAD_COLOR] + [BODY_COLOR] * (self.init_length - 1)
        self.food = self._place_food()

    @property
    def length(self) -> int:
        """Number of segments, head included."""
        return len(self.body)

    def grow(self) -> None:
        """Add a segment on top of the tail (it unfolds as the snake moves on)."""
        self.body = np.concatenate([self.body, self.body[-1:]])
        add = 100 if self.length % 2 == 0 else -100
        self.colors.append((BODY_COLOR[0] + add, BODY_COLOR[1], BODY_COLOR[2] + add))

    def _place_food(self) -> np.ndarray:
        size = self.food_size
        xs = np.arange(2 * size, self.width - 2 * size, size)
        ys = np.arange(2 * size, self.height - 2 * size, size)
        for _ in range(100):
            food = np.array([self.rng.choice(xs), self.rng.choice(ys)], float)
            if not physics.boxes_overlap(self.body, self.segment, food, size).any():
                break
        return food

    def head_hitbox(self) -> tuple[np.ndarray, np.ndarray]:
        """(centre, size) of the thin box along the head's leading edge that collides."""
        along = np.abs(self.direction)
        size = along * self.hitbox_depth + (1 - along) * self.segment
        return self.body[0] + self.direction * self.segment / 2, size

    def _advance(self, keys: frozenset[str]) -> float:
        """Turn (never back onto itself), move, then eat / die."""
        for key, direction in TURNS:
            if key in keys and np.dot(direction, self.direction) > -0.5:
                self.direction = np.array(direction)
        self.body[1:] = FOLLOW * self.body[:-1] + (1 - FOLLOW) * self.body[1:]
        self.body[0] += self.direction * self.speed * self.dt
        reward = 0.0
        center, size = self.head_hitbox()
        if physics.boxes_overlap(center, size, self.food, self.food_size):
            reward += self.rewards["positive"]
            self.grow()
            self.food = self._place_food()
        bitten = physics.boxes_overlap(center, size, self.body[FIRST_HITTABLE:], self.segment / 2).any()
        head, half = self.body[0], self.segment / 2
        outside = (head - half < 0).any() or head[0] + half > self.width or head[1] + half > self.height
        if bitten or outside:
            reward += self.rewards["loss"]
            self.game_over = True
        return reward

    def _export(self) -> None:
        self.exported = {"score": float(self.score), "x": float(self.body[0, 0]),
                         "y": float(self.body[0, 1]), "length": float(self.length)}

    def game_state(self) -> np.ndarray:
        """Head and food positions, then the head's distance to each following segment (-1: none)."""
        dists = np.full(self.body_slots, -1.0)
        found = np.linalg.norm(self.body[1:self.body_slots + 1] - self.body[0], axis=-1)
        dists[:len(found)] = found
        return np.concatenate([self.body[0], self.food, dists]).astype(np.float32)

    def draw(self, surface) -> None:
        """Dark field, red food square, the snake drawn tail first so the head is on top."""
        import pygame
        surface.fill(BACKGROUND)
        size = self.food_size
        pygame.draw.rect(surface, FOOD_COLOR, (round(self.food[0] - size / 2), round(self.food[1] - size / 2),
                                               size, size))
        side = self.segment
        for pos, color in zip(self.body[::-1], self.colors[::-1]):
            pygame.draw.rect(surface, color, (round(pos[0] - side / 2), round(pos[1] - side / 2), side, side))


if __name__ == "__main__":  # python -m dreamer_live.envs.games.<game>: play it from the keyboard
    from dreamer_live.envs.games.standalone import main

    sys.exit(main(Snake, sys.argv[1:]))
