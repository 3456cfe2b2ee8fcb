"""Pixelcopter (PLE's helicopter game): hold "up" to climb through a scrolling cavern past blocks."""

from __future__ import annotations

import math
import sys

import numpy as np

from dreamer_live.envs.games.base import Game, check_size

GREEN = (120, 240, 80)
WHITE = (255, 255, 255)


class Pixelcopter(Game):
    """PLE's Pixelcopter: +1 for each cavern column that scrolls past and each block passed; -1 and
    game over on touching anything green (cavern walls, blocks) or leaving the middle 3/4 of the screen.

    State: y positions and distances as fractions of the height (the gate's x distance of the width),
    velocity in heights per second.
    """

    width = 48
    height = 48
    actions = ((), ("up",))
    state_names = ("player_y", "player_vel", "player_dist_to_ceil", "player_dist_to_floor",
                   "next_gate_dist_to_player", "next_gate_block_top", "next_gate_block_bottom")

    def __init__(self, seed: int | None = None, width: int = 48, height: int = 48, **kwargs):
        super().__init__(seed, **kwargs)
        self.width, self.height = check_size("Pixelcopter", width, height)
        ms = 1000.0 / self.fps  # PLE's speeds are per millisecond
        self.scroll = 0.0004 * self.width * ms  # px per frame
        self.climb = -0.875 * 0.0004 * self.width * ms  # momentum change per frame, key held
        self.fall = 0.09 * 0.0004 * self.width * ms  # momentum change per frame, key up
        self.player_x = float(int(self.width * 0.35))
        self.player_size = (self.width * 0.05, self.height * 0.05)
        self.column_width = int(self.width * 0.1)
        self.block_size = (int(self.width * 0.1), int(self.height * 0.2))
        self.reset()

    def _start(self) -> None:
        """New flight: mid-height, four screens of cavern ahead, one block."""
        self.player_y = self.height / 2
        self.momentum = 0.0
        self.columns: list[list[float]] = []  # [centre x, centre y of the gap]
        self._add_columns(self.column_width / 2)
        self.blocks: list[list[float]] = []  # [centre x, centre y, passed]
        self._add_block()

    def _add_columns(self, start: float) -> None:
        """Four screens of cavern from x=start: a sine wave with PLE's frequency and phase jitter."""
        w, h = self.column_width, self.height
        freq = 4.5 / self.width + self.rng.uniform(-0.01, 0.01)
        for i in range(4 * self.width // w):
            x = start + i * w
            y = int(h / 2 + h * 0.125 * math.sin(freq * (x - start) + self.rng.uniform(0.0, 0.5)))
            self.columns.append([x, float(y)])

    def _add_block(self) -> None:
        x = self.rng.integers(self.width, int(self.width * 1.5))
        y = self.rng.integers(int(self.height * 0.25), int(self.height * 0.75))
        self.blocks.append([float(x), float(y), 0.0])

    def _advance(self, keys: frozenset[str]) -> float:
        """One frame: climb or fall, scroll, score what passed, crash into green."""
        self.momentum = (self.momentum + (self.climb if "up" in keys else self.fall)) * 0.99
        self.player_y += self.momentum
        reward = 0.0
        for column in self.columns:
            column[0] -= self.scroll
        for block in self.blocks:
            block[0] -= self.scroll
            if not block[2] and block[0] <= self.player_x:
                block[2] = 1.0
                reward += 1.0
                self._add_block()
        gone = [c for c in self.columns if c[0] <= -self.column_width]
        reward += len(gone)
        self.columns = self.columns[len(gone):]
        self.blocks = [b for b in self.blocks if b[0] > -self.block_size[0]]
        if len(self.columns) <= 13:
            self._add_columns(self.columns[-1][0] + self.column_width)
        if self._crashed():
            reward -= 1.0
            self.game_over = True
        return reward

    def _crashed(self) -> bool:
        pw, ph = self.player_size
        top, bottom = self.player_y - ph / 2, self.player_y + ph / 2
        if self.player_y < self.height * 0.125 or self.player_y > self.height * 0.875:
            return True
        gap = self.height * 0.25
        for x, y in self.columns:
            if abs(x - self.player_x) < (self.column_width + pw) / 2 and (
                    top <= y - gap or bottom >= y + gap):
                return True
        bw, bh = self.block_size
        return any(abs(x - self.player_x) < (bw + pw) / 2 and abs(y - self.player_y) < (bh + ph) / 2
                   for x, y, _ in self.blocks)

    def _column_at_player(self) -> list[float]:
        return min(self.columns, key=lambda c: abs(c[0] - self.player_x))

    def _export(self) -> None:
        self.exported = {"score": self.score, "x": self.player_x, "y": self.player_y,
                         "vel": self.momentum}

    def draw(self, surface) -> None:
        """Black cavern with green walls and blocks, the white pixel."""
        import pygame
        surface.fill((0, 0, 0))
        w, h, gap = self.column_width, self.height, self.height * 0.25
        for x, y in self.columns:
            left = round(x - w / 2)
            if left > self.width:
                break
            pygame.draw.rect(surface, GREEN, pygame.Rect(left, 0, w, round(y - gap)))
            floor = round(y + gap)
            pygame.draw.rect(surface, GREEN, pygame.Rect(left, floor, w, h - floor))
        bw, bh = self.block_size
        for x, y, _ in self.blocks:
            pygame.draw.rect(surface, GREEN, pygame.Rect(round(x - bw / 2), round(y - bh / 2), bw, bh))
        pw, ph = self.player_size
        pygame.draw.rect(surface, WHITE, pygame.Rect(
            round(self.player_x - pw / 2), round(self.player_y - ph / 2), max(1, round(pw)),
            max(1, round(ph))))

    def game_state(self) -> np.ndarray:
        """PLE's Pixelcopter state, normalised by the screen size."""
        h, gap = self.height, self.height * 0.25
        _, cy = self._column_at_player()
        ahead = [b for b in self.blocks if b[0] > self.player_x]
        bx, by, _ = min(ahead, key=lambda b: b[0]) if ahead else (self.width * 1.5, h / 2, 0.0)
        bh = self.block_size[1]
        return np.array([self.player_y / h, self.momentum * self.fps / h,
                         (self.player_y - (cy - gap)) / h, ((cy + gap) - self.player_y) / h,
                         (bx - self.player_x) / self.width, (by - bh / 2) / h, (by + bh / 2) / h],
                        np.float32)


if __name__ == "__main__":  # python -m dreamer_live.envs.games.<game>: play it from the keyboard
    from dreamer_live.envs.games.standalone import main

    sys.exit(main(Pixelcopter, sys.argv[1:]))
