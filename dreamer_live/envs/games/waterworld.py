"""WaterWorld (PLE, after Karpathy's REINFORCEjs): thrust around eating green creeps, avoiding red ones."""

from __future__ import annotations

import sys

import numpy as np

from dreamer_live.envs.games import physics
from dreamer_live.envs.games.base import Game, check_size
from dreamer_live.errors import UserError

BACKGROUND = (255, 255, 255)
AGENT_COLOR = (60, 60, 140)
CREEP_COLORS = {True: (40, 140, 40), False: (150, 95, 95)}  # good (green), bad (red)


class WaterWorld(Game):
    """PLE's WaterWorld: +1 for each green creep the agent touches, -1 for each red one; a touched
    creep respawns elsewhere as green or red at random, and the game ends once no green creep is left.
    Creeps drift and bounce off the walls; speeds scale with the screen width."""

    width = 48
    height = 48
    actions = ((), ("left",), ("right",), ("up",), ("down",))
    rewards = {"positive": 1.0, "negative": -1.0}  # PLE documentation's values

    def __init__(self, seed: int | None = None, width: int = 48, height: int = 48, num_creeps: int = 3,
                 **kwargs):
        super().__init__(seed, **kwargs)
        self.width, self.height = check_size("WaterWorld", width, height, limit=2000)
        if not isinstance(num_creeps, int) or not 1 <= num_creeps <= 100:
            raise UserError(f"WaterWorld: num_creeps must be an integer in [1, 100], not {num_creeps!r}")
        self.num_creeps = num_creeps
        self.radius = max(1, round(0.047 * self.width))  # agent and creeps alike
        self.creep_speed = 0.25 * self.width  # the fastest a creep drifts (px/s)
        self.agent_speed = 0.25 * self.width  # velocity added per frame a key is held (px/s)
        # PLE's creep_dist / creep_pos lists, as one fixed slot per creep with its kind.
        self.state_names = ("player_x", "player_y", "player_velocity_x", "player_velocity_y") + tuple(
            f"creep_{i}_{field}" for i in range(num_creeps) for field in ("x", "y", "dist", "good"))
        self.reset()

    def _start(self) -> None:
        """Agent at rest in the centre; creeps at random (the first one green, so the game can start)."""
        self.player_pos = np.array([self.width / 2, self.height / 2])
        self.player_vel = np.zeros(2)
        n = self.num_creeps
        self.creep_pos = np.zeros((n, 2))
        self.creep_dir = np.zeros((n, 2))
        self.creep_speed_of = np.zeros(n)
        self.creep_jitter = np.zeros(n)
        self.creep_good = np.zeros(n, bool)
        for i in range(n):
            self._spawn(i, good=True if i == 0 else None)

    def _spawn(self, i: int, good: bool | None = None) -> None:
        """(Re)place creep slot i at a random spot off the agent, green or red at random."""
        self.creep_good[i] = bool(self.rng.integers(2) == 0) if good is None else good
        margin = self.radius * 1.5
        for _ in range(100):
            pos = np.array([self.rng.uniform(margin, self.width - margin),
                            self.rng.uniform(margin, self.height - margin)])
            if not physics.boxes_overlap(pos, 2 * self.radius, self.player_pos, 2 * self.radius):
                break
        self.creep_pos[i] = pos
        direction = self.rng.choice([-1.0, 1.0], 2)
        self.creep_dir[i] = direction / np.linalg.norm(direction)
        self.creep_speed_of[i] = self.rng.random() * self.creep_speed
        self.creep_jitter[i] = self.rng.random()

    @property
    def good_left(self) -> int:
        """Green creeps on the screen."""
        return int(self.creep_good.sum())

    def _advance(self, keys: frozenset[str]) -> float:
        """Thrust, eat what the agent touches (each respawns), then let the creeps drift."""
        dt = self.dt
        self.player_pos, self.player_vel = physics.move(
            self.player_pos, self.player_vel, physics.thrust(keys, self.agent_speed), dt, self.radius,
            (self.width, self.height))
        reward = 0.0
        touched = physics.boxes_overlap(self.player_pos, 2 * self.radius, self.creep_pos, 2 * self.radius)
        for i in np.flatnonzero(touched):
            reward += self.rewards["positive"] if self.creep_good[i] else self.rewards["negative"]
            self._spawn(i)
        self.game_over = self.good_left == 0
        self._drift(dt)
        return reward

    def _drift(self, dt: float) -> None:
        """PLE's Creep.update: straight lines, bouncing off the walls with a little jitter."""
        step = self.creep_dir * self.creep_speed_of[:, None] * dt
        new = self.creep_pos + step
        low, high = self.radius, np.array([self.width, self.height], float) - self.radius
        over, under = new > high, new <= low
        self.creep_pos = np.where(over, high, np.where(under, low, new))
        bounce = -(1 + 0.5 * self.creep_jitter[:, None])
        direction = np.where(over | under, self.creep_dir * bounce, self.creep_dir)
        self.creep_dir = direction / np.linalg.norm(direction, axis=1, keepdims=True)

    def _export(self) -> None:
        self.exported = {"score": float(self.score), "x": float(self.player_pos[0]),
                         "y": float(self.player_pos[1]), "good_left": float(self.good_left)}

    def game_state(self) -> np.ndarray:
        """Player position and velocity, then per creep: position, distance, 1 if green else 0."""
        dist = np.linalg.norm(self.creep_pos - self.player_pos, axis=1)
        creeps = np.column_stack([self.creep_pos, dist, self.creep_good.astype(float)])
        return np.concatenate([self.player_pos, self.player_vel, creeps.ravel()]).astype(np.float32)

    def draw(self, surface) -> None:
        """White water, blue agent, green and red creeps."""
        import pygame
        surface.fill(BACKGROUND)
        pygame.draw.circle(surface, AGENT_COLOR, self.player_pos.round(), self.radius)
        for pos, good in zip(self.creep_pos, self.creep_good):
            pygame.draw.circle(surface, CREEP_COLORS[bool(good)], pos.round(), self.radius)


if __name__ == "__main__":  # python -m dreamer_live.envs.games.<game>: play it from the keyboard
    from dreamer_live.envs.games.standalone import main

    sys.exit(main(WaterWorld, sys.argv[1:]))
