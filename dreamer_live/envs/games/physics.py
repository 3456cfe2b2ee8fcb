"""Small physics shared by the games: PLE's thruster body and box overlaps."""

from __future__ import annotations

import numpy as np

# Unit vectors for the key names the thruster games use (screen y grows downwards).
KEY_DIRECTIONS = {"left": (-1.0, 0.0), "right": (1.0, 0.0), "up": (0.0, -1.0), "down": (0.0, 1.0)}
DECAY = 0.975  # velocity kept per frame while not against a wall (PLE's primitives.Player)


def thrust(keys: frozenset[str], strength: float) -> np.ndarray:
    """The velocity impulse of one frame with `keys` held (opposite keys cancel)."""
    impulse = np.zeros(2)
    for key in keys:
        if key in KEY_DIRECTIONS:
            impulse += KEY_DIRECTIONS[key]
    return impulse * strength


def move(pos: np.ndarray, vel: np.ndarray, impulse: np.ndarray, dt: float, radius: float,
         size: tuple[int, int]) -> tuple[np.ndarray, np.ndarray]:
    """One frame of PLE's Player.update: add the impulse, move, stop at the walls, else decay.

    `pos` is the body's centre; it stays within [radius, size - radius] on each axis.
    """
    vel = vel + impulse
    new = pos + vel * dt
    low = np.full(2, float(radius))
    high = np.asarray(size, float) - radius
    hit = (new < low) | (new > high)
    new = np.clip(new, low, high)
    vel = np.where(hit, 0.0, vel * DECAY)
    return new, vel


def boxes_overlap(center_a, size_a, center_b, size_b) -> np.ndarray:
    """Whether axis-aligned boxes overlap (broadcasts over leading dims; touching edges do not)."""
    gap = np.abs(np.asarray(center_a, float) - np.asarray(center_b, float))
    reach = (np.asarray(size_a, float) + np.asarray(size_b, float)) / 2
    return np.all(gap < reach, axis=-1)

