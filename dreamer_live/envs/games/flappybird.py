"""FlappyBird (PLE, physics from sourabhv's FlapPyBird): flap through the gaps between pipes."""

from __future__ import annotations

import sys

import numpy as np

from dreamer_live.envs.games.base import Game
from dreamer_live.errors import UserError

BACKGROUNDS = {"day": (78, 192, 202), "night": (0, 135, 147)}
BIRD_COLORS = {"red": (230, 80, 60), "blue": (70, 130, 230), "yellow": (250, 210, 60)}
PIPE_COLORS = {"green": (84, 184, 51), "red": (200, 70, 40)}
GROUND_COLOR = (222, 216, 149)

BIRD_W, BIRD_H = 34, 24  # PLE's bird sprite
PIPE_W = 52  # PLE's pipe sprite
FLAP_POWER, GRAVITY, MAX_DROP = 9.0, 1.0, 10.0  # px per frame at 30 fps
SPEED = 4.0  # pipes scroll this many px per frame


class FlappyBird(Game):
    """PLE's FlappyBird: +1 per pipe passed, -1 and game over on touching a pipe, the ground or the
    top of the screen. Holding "jump" flaps every other frame (PLE flaps on each frame the key is down).

    State: y positions as fractions of the height, x distances as fractions of the width (pipe centre
    minus bird centre), the bird's velocity in heights per second.
    """

    width = 288
    height = 512
    actions = ((), ("jump",))
    state_names = ("player_y", "player_vel", "next_pipe_dist_to_player", "next_pipe_top_y",
                   "next_pipe_bottom_y", "next_next_pipe_dist_to_player", "next_next_pipe_top_y",
                   "next_next_pipe_bottom_y")

    def __init__(self, seed: int | None = None, pipe_gap: int = 100, **kwargs):
        super().__init__(seed, **kwargs)
        if not 40 <= int(pipe_gap) <= 200:
            raise UserError(f"FlappyBird: pipe_gap must be in [40, 200], not {pipe_gap}")
        self.pipe_gap = int(pipe_gap)
        self.ground_y = 0.79 * self.height
        self.pipe_min = self.pipe_gap // 4
        self.pipe_max = int(self.height * 0.79 * 0.6 - self.pipe_gap / 2)
        self.bird_x = float(int(self.width * 0.2))
        self.reset()

    def _start(self) -> None:
        """New flight: random colours, the bird mid-screen, three pipes queued off to the right."""
        self.background = BACKGROUNDS[self.rng.choice(sorted(BACKGROUNDS))]
        self.bird_color = BIRD_COLORS[self.rng.choice(sorted(BIRD_COLORS))]
        self.pipe_color = PIPE_COLORS[self.rng.choice(sorted(PIPE_COLORS))]
        self.bird_y = self.height / 2 + 8 * np.sin(self.rng.random() * np.pi)
        self.bird_vel = 0.0
        self.flapped, self.thrusting = True, False  # PLE starts with a flap
        # Pipes as [centre x, gap top y]; PLE's initial offsets 0, W/2, W beyond the right edge.
        self.pipes = [[self.width + PIPE_W + offset, self._gap()]
                      for offset in (0, self.width * 0.5, self.width)]

    def _gap(self) -> float:
        return float(self.rng.integers(self.pipe_min, self.pipe_max + 1))

    def _advance(self, keys: frozenset[str]) -> float:
        """One frame: flap if "jump" is held, fall, scroll the pipes, score passes and crashes."""
        if "jump" in keys and self.bird_y > -2.0 * BIRD_H:
            self.bird_vel, self.flapped = 0.0, True
        # PLE's thrust: a flap sets the velocity to -FLAP_POWER (+ gravity) for one frame, after which
        # one frame passes without gravity.
        if self.bird_vel < MAX_DROP and not self.thrusting:
            self.bird_vel += GRAVITY
        if self.flapped and not self.thrusting:
            self.thrusting = True
            self.bird_vel -= FLAP_POWER
        else:
            self.thrusting = self.flapped = False
        self.bird_y += self.bird_vel
        reward = 0.0
        for pipe in self.pipes:
            before = pipe[0]
            pipe[0] -= SPEED
            if before > self.bird_x >= pipe[0]:
                reward += 1.0
            if pipe[0] < -PIPE_W:
                pipe[:] = [self.width + PIPE_W + self.width * 0.2, self._gap()]
        if self._crashed():
            reward -= 1.0
            self.game_over = True
        return reward

    def _crashed(self) -> bool:
        top, bottom = self.bird_y - BIRD_H / 2, self.bird_y + BIRD_H / 2
        if bottom >= self.ground_y or top <= 0:
            return True
        for x, gap_top in self.pipes:
            if abs(x - self.bird_x) < (PIPE_W + BIRD_W) / 2:
                if top < gap_top or bottom > gap_top + self.pipe_gap:
                    return True
        return False

    def _next_pipes(self) -> list[list[float]]:
        """The two pipes the bird has not yet cleared, nearest first."""
        ahead = [p for p in self.pipes if p[0] + PIPE_W / 2 > self.bird_x - BIRD_W / 2]
        ahead.sort(key=lambda p: p[0])
        while len(ahead) < 2:
            ahead.append([self.width + PIPE_W + self.width * 0.2, self.height * 0.3])
        return ahead[:2]

    def _export(self) -> None:
        self.exported = {"score": self.score, "x": self.bird_x, "y": self.bird_y,
                         "vel": self.bird_vel}

    def draw(self, surface) -> None:
        """Sky, pipes, ground, bird (flat colours instead of PLE's sprites)."""
        import pygame
        surface.fill(self.background)
        for x, gap_top in self.pipes:
            left = round(x - PIPE_W / 2)
            pygame.draw.rect(surface, self.pipe_color, pygame.Rect(left, 0, PIPE_W, round(gap_top)))
            bottom = round(gap_top + self.pipe_gap)
            pygame.draw.rect(surface, self.pipe_color,
                             pygame.Rect(left, bottom, PIPE_W, self.height - bottom))
        ground = round(self.ground_y)
        pygame.draw.rect(surface, GROUND_COLOR, pygame.Rect(0, ground, self.width, self.height - ground))
        pygame.draw.rect(surface, self.bird_color, pygame.Rect(
            round(self.bird_x - BIRD_W / 2), round(self.bird_y - BIRD_H / 2), BIRD_W, BIRD_H))

    def game_state(self) -> np.ndarray:
        """PLE's FlappyBird state, normalised by the screen size."""
        w, h = self.width, self.height
        (x1, g1), (x2, g2) = self._next_pipes()
        return np.array([self.bird_y / h, self.bird_vel * self.fps / h,
                         (x1 - self.bird_x) / w, g1 / h, (g1 + self.pipe_gap) / h,
                         (x2 - self.bird_x) / w, g2 / h, (g2 + self.pipe_gap) / h], np.float32)


if __name__ == "__main__":  # python -m dreamer_live.envs.games.<game>: play it from the keyboard
    from dreamer_live.envs.games.standalone import main

    sys.exit(main(FlappyBird, sys.argv[1:]))
