"""PuckWorld (PLE, after Karpathy's REINFORCEjs): thrust towards the green dot, away from the red puck."""

from __future__ import annotations

import sys

import numpy as np

from dreamer_live.envs.games import physics
from dreamer_live.envs.games.base import Game, check_size

BACKGROUND = (255, 255, 255)
AGENT_COLOR = (60, 60, 140)
GOOD_COLOR = (40, 140, 40)
BAD_CENTER_COLOR = (110, 45, 45)
BAD_OUTER_COLOR = (150, 95, 95, 191)  # 75 % opaque, as in PLE


class PuckWorld(Game):
    """PLE's PuckWorld: each frame's reward is minus the distance (pixels) to the green dot, plus
    2 * (distance - radius) while inside the red puck's radius; the dot jumps every 500 frames and
    the puck slowly follows the agent. No terminal state (a continuous game)."""

    width = 64
    height = 64
    actions = ((), ("left",), ("right",), ("up",), ("down",))
    state_names = ("player_x", "player_y", "player_velocity_x", "player_velocity_y",
                   "good_creep_x", "good_creep_y", "bad_creep_x", "bad_creep_y")
    good_move_every = 500  # frames between jumps of the green dot

    def __init__(self, seed: int | None = None, width: int = 64, height: int = 64, **kwargs):
        super().__init__(seed, **kwargs)
        self.width, self.height = check_size("PuckWorld", width, height, limit=2000)
        # Sizes and speeds scale with the screen width, as in PLE.
        self.agent_radius = max(1, round(0.047 * self.width))
        self.agent_speed = 0.2 * self.width  # velocity added per frame a key is held (px/s)
        self.good_radius = max(1, round(0.047 * self.width))
        self.bad_radius_center = max(1, round(0.047 * self.width))
        self.bad_radius_outer = max(2, round(0.265 * self.width))
        self.bad_speed = 0.05 * self.width  # px/s
        self.reset()

    def _start(self) -> None:
        """Agent in the top-left corner at rest, puck in the bottom-right, dot somewhere random."""
        start = self.agent_radius * 1.5
        self.player_pos = np.array([start, start])
        self.player_vel = np.zeros(2)
        self.good_pos = self._random_good_pos()
        self.bad_pos = np.array([float(self.width), float(self.height)])

    def _random_good_pos(self) -> np.ndarray:
        r = self.good_radius
        return np.array([self.rng.uniform(r * 3, self.width - r * 2.5),
                         self.rng.uniform(r * 3, self.height - r * 2.5)])

    def distances(self) -> tuple[float, float]:
        """(distance to the green dot, distance to the red puck's centre) in pixels."""
        return (float(np.linalg.norm(self.player_pos - self.good_pos)),
                float(np.linalg.norm(self.player_pos - self.bad_pos)))

    def reward_here(self) -> float:
        """The reward PuckWorld pays for one frame at the current positions."""
        to_good, to_bad = self.distances()
        reward = -to_good
        if to_bad < self.bad_radius_outer:
            reward += 2.0 * (to_bad - self.bad_radius_outer)
        return reward

    def _advance(self, keys: frozenset[str]) -> float:
        """Thrust, score the new position, then move the puck towards the agent."""
        dt = self.dt
        self.player_pos, self.player_vel = physics.move(
            self.player_pos, self.player_vel, physics.thrust(keys, self.agent_speed), dt,
            self.agent_radius, (self.width, self.height))
        reward = self.reward_here()
        if self.frame % self.good_move_every == 0:
            self.good_pos = self._random_good_pos()
        offset = self.player_pos - self.bad_pos
        norm = float(np.linalg.norm(offset))
        if norm > 0:
            self.bad_pos = self.bad_pos + offset / norm * self.bad_speed * dt
        return reward

    def _export(self) -> None:
        to_good, _ = self.distances()
        self.exported = {"score": float(self.score), "x": float(self.player_pos[0]),
                         "y": float(self.player_pos[1]), "dist_good": to_good}

    def game_state(self) -> np.ndarray:
        """Player position and velocity, green dot and red puck positions."""
        return np.concatenate([self.player_pos, self.player_vel, self.good_pos, self.bad_pos]).astype(
            np.float32)

    def draw(self, surface) -> None:
        """White field, green dot, translucent red puck, blue agent."""
        import pygame
        surface.fill(BACKGROUND)
        pygame.draw.circle(surface, GOOD_COLOR, self.good_pos.round(), self.good_radius)
        r = self.bad_radius_outer
        puck = pygame.Surface((2 * r, 2 * r), pygame.SRCALPHA)
        pygame.draw.circle(puck, BAD_OUTER_COLOR, (r, r), r)
        surface.blit(puck, (round(self.bad_pos[0]) - r, round(self.bad_pos[1]) - r))
        pygame.draw.circle(surface, BAD_CENTER_COLOR, self.bad_pos.round(), self.bad_radius_center)
        pygame.draw.circle(surface, AGENT_COLOR, self.player_pos.round(), self.agent_radius)


if __name__ == "__main__":  # python -m dreamer_live.envs.games.<game>: play it from the keyboard
    from dreamer_live.envs.games.standalone import main

    sys.exit(main(PuckWorld, sys.argv[1:]))
