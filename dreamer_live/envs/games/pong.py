"""Pong (PLE): the agent's paddle on the left against a CPU paddle on the right."""

from __future__ import annotations

import sys

import numpy as np

from dreamer_live.envs.games.base import Game, check_size
from dreamer_live.errors import UserError

WHITE = (255, 255, 255)


def _segments_cross(p0, p1, q0, q1) -> bool:
    """True when segment p0-p1 meets segment q0-q1."""
    s1 = (p1[0] - p0[0], p1[1] - p0[1])
    s2 = (q1[0] - q0[0], q1[1] - q0[1])
    denom = -s2[0] * s1[1] + s1[0] * s2[1]
    if denom == 0:
        return False
    s = (-s1[1] * (p0[0] - q0[0]) + s1[0] * (p0[1] - q0[1])) / denom
    t = (s2[0] * (p0[1] - q0[1]) - s2[1] * (p0[0] - q0[0])) / denom
    return 0 <= s <= 1 and 0 <= t <= 1


class Pong(Game):
    """PLE's Pong: +1 when the ball passes the CPU, -1 when it passes the agent; over when either
    side reaches max_score points (PLE's MAX_SCORE, default 11).

    State: positions as fractions of the screen, velocities in screen sizes per second.
    """

    width = 64
    height = 48
    actions = ((), ("up",), ("down",))
    state_names = ("player_y", "player_velocity", "cpu_y", "ball_x", "ball_y", "ball_velocity_x",
                   "ball_velocity_y")

    def __init__(self, seed: int | None = None, width: int = 64, height: int = 48,
                 cpu_speed_ratio: float = 0.6, players_speed_ratio: float = 0.4,
                 ball_speed_ratio: float = 0.75, max_score: int = 11, **kwargs):
        super().__init__(seed, **kwargs)
        self.width, self.height = check_size("Pong", width, height)
        if min(cpu_speed_ratio, players_speed_ratio, ball_speed_ratio) <= 0 or int(max_score) < 1:
            raise UserError("Pong: speed ratios must be > 0 and max_score >= 1")
        self.max_score = int(max_score)
        self.ball_radius = round(self.height * 0.03)
        self.paddle_width = round(self.width * 0.023)
        self.paddle_height = round(self.height * 0.15)
        self.paddle_dist = round(self.width * 0.0625)
        self.ball_speed = ball_speed_ratio * self.height  # px per second, as in PLE
        self.player_speed = players_speed_ratio * self.height
        self.cpu_speed = cpu_speed_ratio * self.height
        self.player_x = float(self.paddle_dist)
        self.cpu_x = float(self.width - self.paddle_dist)
        self.reset()

    def _start(self) -> None:
        """New match: 0-0, paddles centred, ball served from the centre in a random direction."""
        self.points = {"agent": 0, "cpu": 0}
        self.player_y = self.cpu_y = self.height / 2
        self.player_vel = 0.0  # px per frame (PLE's paddle momentum)
        self.ball_x, self.ball_y = self.width / 2, self.height / 2
        self._serve(1 if self.rng.random() > 0.5 else -1)

    def _serve(self, direction: int) -> None:
        """Ball back to the centre line (keeping its height), at starting speed towards `direction`."""
        self.ball_x = self.width / 2
        self.ball_vx = self.ball_speed * direction
        self.ball_vy = self.rng.random() * self.ball_speed - self.ball_speed * 0.5

    def _advance(self, keys: frozenset[str]) -> float:
        """One frame: move the ball (bounces off paddles and walls), score, then move the paddles."""
        dt = self.dt
        self._move_ball(dt)
        reward = 0.0
        if self.ball_x <= 0:
            reward = -1.0
            self.points["cpu"] += 1
            self._serve(-1)
        elif self.ball_x >= self.width:
            reward = 1.0
            self.points["agent"] += 1
            self._serve(1)
        else:  # as in PLE, the paddles stay put on the frame a point is scored
            push = (("down" in keys) - ("up" in keys)) * self.player_speed
            self.player_vel = (self.player_vel + push * dt) * 0.9
            self.player_y, stopped = self._clamp(self.player_y + self.player_vel)
            if stopped:
                self.player_vel = 0.0
            self._move_cpu(dt)
        self.game_over = max(self.points.values()) >= self.max_score
        return reward

    def _clamp(self, y: float) -> tuple[float, bool]:
        half = self.paddle_height / 2
        clamped = min(max(y, half), self.height - half)
        return clamped, clamped != y

    def _move_ball(self, dt: float) -> None:
        before = (self.ball_x, self.ball_y)
        self.ball_x += self.ball_vx * dt
        self.ball_y += self.ball_vy * dt
        after = (self.ball_x, self.ball_y)
        half_w, half_h = self.paddle_width / 2, self.paddle_height / 2
        hit = False
        line_x = self.player_x + half_w
        if self.ball_x <= self.player_x + self.paddle_width and _segments_cross(
                before, after, (line_x, self.player_y - half_h), (line_x, self.player_y + half_h)):
            self.ball_x = max(0.0, self.ball_x) + self.ball_radius
            # PLE's arithmetic: a hit flips vx and adds 5 % of the base speed before flipping.
            self.ball_vx = -(self.ball_vx + self.ball_speed * 0.05)
            self.ball_vy += self.player_vel * 2.0
            hit = True
        line_x = self.cpu_x - half_w
        if self.ball_x >= self.cpu_x - self.paddle_width and _segments_cross(
                before, after, (line_x, self.cpu_y - half_h), (line_x, self.cpu_y + half_h)):
            self.ball_x = min(float(self.width), self.ball_x) - self.ball_radius
            self.ball_vx = -(self.ball_vx + self.ball_speed * 0.05)
            hit = True
        if hit:  # a little randomness so rallies do not loop
            self.ball_vy += self.rng.random() * 0.001 - 0.0005
        if self.ball_y - self.ball_radius <= 0:
            self.ball_vy = abs(self.ball_vy) * 0.99
            self.ball_y += 1.0
        if self.ball_y + self.ball_radius >= self.height:
            self.ball_vy = -abs(self.ball_vy) * 0.99
            self.ball_y -= 1.0

    def _move_cpu(self, dt: float) -> None:
        """PLE's CPU: chase the ball while it comes towards it in its half, else drift to the middle."""
        if self.ball_vx >= 0 and self.ball_x >= self.width / 2:
            dy = -self.cpu_speed if self.cpu_y > self.ball_y else self.cpu_speed
        else:
            dy = -self.cpu_speed / 4 if self.cpu_y > self.height / 2 else self.cpu_speed / 4
        self.cpu_y, _ = self._clamp(self.cpu_y + dy * dt)

    def _export(self) -> None:
        self.exported = {"score": self.score, "x": self.player_x, "y": self.player_y,
                         "agent_points": float(self.points["agent"]),
                         "cpu_points": float(self.points["cpu"])}

    def draw(self, surface) -> None:
        """Black table, white paddles and ball."""
        import pygame
        surface.fill((0, 0, 0))
        w, h = self.paddle_width, self.paddle_height
        for x, y in ((self.player_x, self.player_y), (self.cpu_x, self.cpu_y)):
            pygame.draw.rect(surface, WHITE, pygame.Rect(round(x - w / 2), round(y - h / 2), w, h))
        pygame.draw.circle(surface, WHITE, (round(self.ball_x), round(self.ball_y)), self.ball_radius)

    def game_state(self) -> np.ndarray:
        """PLE's Pong state, normalised by the screen size (velocities per second)."""
        w, h = self.width, self.height
        return np.array([self.player_y / h, self.player_vel * self.fps / h, self.cpu_y / h,
                         self.ball_x / w, self.ball_y / h, self.ball_vx / w, self.ball_vy / h],
                        np.float32)


if __name__ == "__main__":  # python -m dreamer_live.envs.games.<game>: play it from the keyboard
    from dreamer_live.envs.games.standalone import main

    sys.exit(main(Pong, sys.argv[1:]))
