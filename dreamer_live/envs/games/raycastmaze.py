"""RaycastMaze (PLE): find the red block of a random maze in a first-person (raycast) view."""

from __future__ import annotations

import collections
import sys

import numpy as np

from dreamer_live.envs.games.base import Game, check_size
from dreamer_live.errors import UserError

FREE, WALL, GOAL = 0, 1, 2
BLOCK_COLORS = {WALL: (255, 255, 255), GOAL: (255, 100, 100)}
CEILING, FLOOR = (0, 0, 0), (92, 92, 92)
PLANE = 0.66  # camera plane half-width: a field of view of about 66 degrees
NEIGHBOURS = ((1, 0), (-1, 0), (0, 1), (0, -1))
WALK_SUBSTEPS = 8


class RaycastMaze(Game):
    """PLE's RaycastMaze: walk a random maze (first-person view); +1 and the end of the game when the
    agent stands within 1.1 cells of the red block's centre while facing it (within 0.8 rad).
    Keys: up = forward, down = backward, left / right = turn. PLE has no state vector for this game;
    ours is the agent's position and facing and the goal block's centre, in map cells. Unlike PLE the
    agent starts in the middle of its cell and walks up to a wall rather than stopping a step short."""

    width = 48
    height = 48
    actions = ((), ("left",), ("right",), ("up",), ("down",))
    state_names = ("pos_x", "pos_y", "dir_x", "dir_y", "goal_x", "goal_y")
    rewards = {"win": 1.0}  # PLE documentation's value
    win_distance = 1.1
    win_angle = 0.8

    def __init__(self, seed: int | None = None, width: int = 48, height: int = 48, map_size: int = 10,
                 move_speed: float = 20.0, turn_speed: float = 13.0, resolution: int = 1,
                 init_pos_distance_to_target: int | None = None, **kwargs):
        super().__init__(seed, **kwargs)
        self.width, self.height = check_size("RaycastMaze", width, height, limit=2000)
        if not isinstance(map_size, int) or not 6 <= map_size <= 100:
            raise UserError(f"RaycastMaze: map_size must be an integer in [6, 100], not {map_size!r}")
        if not isinstance(resolution, int) or not 1 <= resolution <= self.width:
            raise UserError(f"RaycastMaze: resolution must be an integer in [1, width], not {resolution!r}")
        self.map_size, self.resolution = map_size, resolution
        self.move_speed = float(move_speed)  # cells per second
        self.turn_speed = float(turn_speed)  # radians per second
        self.max_target_distance = max(1, init_pos_distance_to_target or map_size * map_size)
        self.start = np.array([1.5, 1.5])  # centre of cell (1, 1), always free in these mazes
        self.reset()

    # --- the maze -------------------------------------------------------------------------------------------
    def _start(self) -> None:
        """A new maze and goal; the agent starts in cell (1, 1), turned away if the goal is in front."""
        self.grid = self._make_maze()
        self.goal = self._pick_goal()
        self.grid[tuple(self.goal)] = GOAL
        self.pos = self.start.copy()
        self.face(np.array([1.0, 0.0]))
        if self.angle_to_goal() < 1.5:
            self.face(-self.dir)

    def _make_maze(self, complexity: float = 0.75, density: float = 0.75) -> np.ndarray:
        """The random-walk maze generator PLE uses: walls grow from random even cells."""
        dim = self.map_size // 2 * 2 + 1
        complexity = int(complexity * (5 * (dim + dim)))
        density = int(density * ((dim // 2) * (dim // 2)))
        grid = np.zeros((dim, dim), np.int64)
        grid[0, :] = grid[-1, :] = grid[:, 0] = grid[:, -1] = WALL
        for _ in range(density):
            x, y = (int(v) * 2 for v in self.rng.integers(0, dim // 2 + 1, size=2))
            grid[y, x] = WALL
            for _ in range(complexity):
                options = [(ny, nx) for ny, nx in ((y, x - 2), (y, x + 2), (y - 2, x), (y + 2, x))
                           if 0 <= ny < dim and 0 <= nx < dim]
                ny, nx = options[int(self.rng.integers(len(options)))]
                if grid[ny, nx] == FREE:
                    grid[ny, nx] = WALL
                    grid[ny + (y - ny) // 2, nx + (x - nx) // 2] = WALL
                    x, y = nx, ny
        return grid

    def distances(self) -> dict[tuple[int, int], int]:
        """Steps from the start cell to every reachable free cell (breadth-first)."""
        start = (int(self.start[0]), int(self.start[1]))
        dist = {start: 0}
        queue = collections.deque([start])
        while queue:
            cell = queue.popleft()
            for dx, dy in NEIGHBOURS:
                nxt = (cell[0] + dx, cell[1] + dy)
                if nxt not in dist and self.grid[nxt] == FREE:
                    dist[nxt] = dist[cell] + 1
                    queue.append(nxt)
        return dist

    def _pick_goal(self) -> np.ndarray:
        """A random wall block next to a reachable cell, within the allowed walking distance."""
        candidates = set()
        for (x, y), d in self.distances().items():
            for dx, dy in NEIGHBOURS:
                block = (x + dx, y + dy)
                if self.grid[block] == WALL and d + 1 <= self.max_target_distance:
                    candidates.add(block)
        ordered = sorted(candidates)
        return np.array(ordered[int(self.rng.integers(len(ordered)))])

    def path_to_goal(self) -> list[tuple[int, int]]:
        """Free cells from the start cell to the nearest cell beside the goal (shortest walk)."""
        dist = self.distances()
        gx, gy = (int(v) for v in self.goal)
        beside = [c for c in ((gx + dx, gy + dy) for dx, dy in NEIGHBOURS) if c in dist]
        cell = min(beside, key=dist.get)
        path = [cell]
        while dist[cell] > 0:
            cell = next(n for n in ((cell[0] + dx, cell[1] + dy) for dx, dy in NEIGHBOURS)
                        if dist.get(n) == dist[cell] - 1)
            path.append(cell)
        return path[::-1]

    # --- the agent ------------------------------------------------------------------------------------------
    def face(self, direction) -> None:
        """Look along `direction` (normalised); the camera plane stays perpendicular to it."""
        direction = np.asarray(direction, float)
        self.dir = direction / np.linalg.norm(direction)
        self.plane = np.array([-self.dir[1], self.dir[0]]) * PLANE

    def angle_to_goal(self) -> float:
        """Angle (radians) between the facing direction and the way to the goal block's centre."""
        to_goal = self.goal + 0.5 - self.pos
        norm = np.linalg.norm(to_goal)
        if norm == 0:
            return 0.0
        return float(np.arccos(np.clip(np.dot(to_goal / norm, self.dir), -1.0, 1.0)))

    def _walk(self, sign: float) -> None:
        # PLE refuses a whole step that ends in a wall, which can leave the agent stuck short of the
        # goal; in sub-steps it walks on until the wall instead.
        step = sign * self.dir * self.move_speed * self.dt / WALK_SUBSTEPS
        for _ in range(WALK_SUBSTEPS):
            cell = np.floor(self.pos + step).astype(int)
            if (cell < 0).any() or (cell >= self.grid.shape).any() or self.grid[tuple(cell)] != FREE:
                break
            self.pos = self.pos + step

    def _turn(self, angle: float) -> None:
        c, s = np.cos(angle), np.sin(angle)
        rotation = np.array([[c, -s], [s, c]])
        self.dir, self.plane = rotation @ self.dir, rotation @ self.plane

    def _advance(self, keys: frozenset[str]) -> float:
        """Walk / turn with the held keys, then check whether the goal is reached."""
        if "up" in keys:
            self._walk(1.0)
        if "down" in keys:
            self._walk(-1.0)
        if "left" in keys:
            self._turn(-self.turn_speed * self.dt)
        if "right" in keys:
            self._turn(self.turn_speed * self.dt)
        reward = 0.0
        close = np.linalg.norm(self.pos - (self.goal + 0.5)) < self.win_distance
        if close and self.angle_to_goal() < self.win_angle:
            reward = self.rewards["win"]
            self.game_over = True
        return reward

    def _export(self) -> None:
        self.exported = {"score": float(self.score), "x": float(self.pos[0]), "y": float(self.pos[1]),
                         "dist_goal": float(np.linalg.norm(self.pos - (self.goal + 0.5)))}

    def game_state(self) -> np.ndarray:
        """Position and facing of the agent, centre of the goal block (map cells)."""
        return np.concatenate([self.pos, self.dir, self.goal + 0.5]).astype(np.float32)

    # --- the view -------------------------------------------------------------------------------------------
    def cast(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Cast one ray per screen column group (DDA, all rays at once).

        Returns the perpendicular wall distance, the block hit and the side hit (0: x, 1: y) per ray.
        """
        columns = np.arange(0, self.width, self.resolution)
        camera = 2.0 * columns / self.width - 1.0
        rays = self.dir[None, :] + self.plane[None, :] * camera[:, None]
        cell = np.tile(np.floor(self.pos).astype(int), (len(columns), 1))
        with np.errstate(divide="ignore"):
            delta = np.where(rays == 0, 1e30, np.abs(1.0 / rays))
        step = np.where(rays < 0, -1, 1)
        side_dist = np.where(rays < 0, (self.pos - cell) * delta, (cell + 1.0 - self.pos) * delta)
        hit = np.zeros(len(columns), bool)
        side = np.zeros(len(columns), np.int64)
        rows = np.arange(len(columns))
        for _ in range(4 * self.grid.shape[0]):  # a closed maze: every ray hits within this many steps
            axis = np.where(side_dist[:, 0] < side_dist[:, 1], 0, 1)
            move = ~hit
            side = np.where(move, axis, side)
            side_dist[rows[move], axis[move]] += delta[rows[move], axis[move]]
            cell[rows[move], axis[move]] += step[rows[move], axis[move]]
            np.clip(cell, 0, np.array(self.grid.shape) - 1, out=cell)
            hit |= self.grid[cell[:, 0], cell[:, 1]] != FREE
            if hit.all():
                break
        distance = side_dist[rows, side] - delta[rows, side]
        return np.maximum(distance, 1e-6), self.grid[cell[:, 0], cell[:, 1]], side

    def render(self) -> np.ndarray:
        """The first-person view as uint8 [width, height, 3] (x-major, as pygame.surfarray uses)."""
        distance, block, side = self.cast()
        h = self.height
        line = h / distance
        top = np.clip((-line / 2 + h / 2).astype(int), 0, h - 1)
        bottom = np.clip((line / 2 + h / 2).astype(int), 0, h - 1)
        colors = np.array([BLOCK_COLORS.get(int(b), BLOCK_COLORS[WALL]) for b in block], float)
        colors = np.clip(colors - np.abs(distance * 15)[:, None] * 1.5, 0, 255)
        colors[side == 1] *= 0.65  # darker y-facing walls: cheap lighting
        y = np.arange(h)
        background = np.where((y < h // 2)[:, None], np.array(CEILING), np.array(FLOOR))  # [h, 3]
        wall = (y[None, :] >= top[:, None]) & (y[None, :] <= bottom[:, None])  # [columns, h]
        view = np.where(wall[..., None], colors[:, None, :], background[None])
        return np.repeat(view, self.resolution, axis=0)[:self.width].astype(np.uint8)

    def draw(self, surface) -> None:
        """Black ceiling, grey floor, shaded white walls and the red goal block."""
        import pygame
        surface.blit(pygame.surfarray.make_surface(self.render()), (0, 0))


if __name__ == "__main__":  # python -m dreamer_live.envs.games.<game>: play it from the keyboard
    from dreamer_live.envs.games.standalone import main

    sys.exit(main(RaycastMaze, sys.argv[1:]))
