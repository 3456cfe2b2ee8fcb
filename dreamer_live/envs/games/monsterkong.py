"""MonsterKong (PLE's Donkey Kong spin-off): climb to the princess, collect coins, dodge fireballs."""

from __future__ import annotations

import sys

import numpy as np

from dreamer_live.envs.games.base import Game
from dreamer_live.envs.games.physics import boxes_overlap

CELL = 15  # the level is a grid of 15 px blocks
FREE, WALL, LADDER = 0, 1, 2
PLAYER_SIZE = (15.0, 15.0)
PRINCESS = ((50.0, 48.0), (18.0, 25.0))  # centre, size
RESPAWN = (50.0, 440.0)  # where the player restarts after a hit or a rescue; fireballs end here too
MONSTER_HOMES = ((100.0, 117.0), (300.0, 117.0), (400.0, 117.0))  # PLE puts the 2nd at x=700, off screen
FIREBALL_TIMES = (0, 23, 46)  # frame of the 70-frame cycle at which monster i throws
NEAREST_FIREBALLS = 5  # fireball slots in the state vector
COLORS = {"background": (40, 20, 0), "wall": (150, 90, 40), "wall_edge": (90, 50, 20),
          "ladder": (200, 170, 60), "coin": (250, 210, 40), "fireball": (255, 110, 0),
          "monster": (120, 60, 160), "princess": (255, 140, 200), "player": (80, 160, 255)}


class MonsterKong(Game):
    """PLE's MonsterKong: +5 per coin, -25 and a life lost per fireball that hits the player (back to
    the start), +50 for reaching the princess's floor (the level restarts with new coins and one more
    monster, up to 3). The game ends when the 3 lives are gone. Monsters walk the top floor throwing
    fireballs that roll along the floors and fall through holes and down ladders.
    Keys: left / right walk, jump, up / down climb ladders (up at a ladder's foot steps onto it).
    Drawn with plain shapes (PLE's sprites are not bundled); PLE has no state vector for this game."""

    width = 500
    height = 465
    actions = ((), ("left",), ("right",), ("up",), ("down",), ("jump",))
    rewards = {"positive": 5.0, "win": 50.0, "negative": -25.0}  # PLE's values
    lives_at_start = 3
    speed = 5.0  # px per frame walking; half that climbing
    jump_speed, gravity, max_fall = 7.0, 0.85, 8.0
    state_names = (("player_x", "player_y", "player_on_ladder", "player_jumping", "lives", "coins_left",
                    "nearest_coin_dx", "nearest_coin_dy", "monster_x", "monster_y")
                   + tuple(f"fireball_{i}_{field}" for i in range(NEAREST_FIREBALLS)
                           for field in ("dx", "dy", "present")))

    def __init__(self, seed: int | None = None, **kwargs):
        super().__init__(seed, **kwargs)
        self.reset()

    # --- the level ----------------------------------------------------------------------------------------
    def _start(self) -> None:
        """A new level: floors with holes, one random ladder per floor, coins; 3 lives, one monster."""
        self.grid = self._make_level()
        self.coins: list[tuple[int, int]] = []
        self._place_coins()
        self.player = np.array([self.width / 2, 435.0])
        self.on_ladder, self.jumping, self.fall_speed = False, False, 0.0
        self.monsters: list[dict] = []
        self._add_monster()
        self.fireballs: list[dict] = []
        self.fireball_timer = 0
        self.lives = self.lives_at_start
        self._static = None  # cached drawing of walls and ladders

    def _make_level(self) -> np.ndarray:
        rows, cols = int((self.height + 10) / CELL + 1), int(self.width / CELL)
        grid = np.zeros((rows, cols), np.int64)
        grid[:rows - 1, 0] = grid[:rows - 1, cols - 1] = WALL
        floors = range(2, int((self.height + 10) / (CELL * 4)))
        for i in floors:
            grid[i * 5, :] = WALL
        grid[0:4, 9] = WALL  # the princess's chamber, reached by a fixed ladder
        grid[4, 0:10] = WALL
        grid[4:10, 7:9] = LADDER
        for i in range(2, floors.stop - 1):  # one ladder down from each floor, away from the one above
            while True:
                col = 7 + int(self.rng.random() * (cols - 20))
                if not (grid[(i - 1) * 5, max(col - 4, 0):col + 5] == LADDER).any():
                    break
            grid[i * 5:i * 5 + 5, col:col + 2] = LADDER
        for i in range(3, floors.stop - 1):  # holes at alternate ends: fireballs (and players) fall through
            if i % 2 == 0:
                grid[i * 5, 1:6] = FREE
            else:
                grid[i * 5, cols - 6:cols - 1] = FREE
        return grid

    def _place_coins(self) -> None:
        """PLE's coin scatter: free cells just above a floor, about 3 % of them, 16 to 26 in all."""
        rows, cols = self.grid.shape
        taken = set(self.coins)
        while len(self.coins) <= 15:
            for i in range(6, rows):
                for j in range(cols):
                    if self.grid[i, j] != FREE or (i, j) in taken:
                        continue
                    if not ((i + 1 < rows and self.grid[i + 1, j] == WALL)
                            or (i + 2 < rows and self.grid[i + 2, j] == WALL)):
                        continue
                    if int(self.rng.random() * 1000) % 35 == 0 and len(self.coins) <= 25 \
                            and (i, j - 1) not in taken:
                        self.coins.append((i, j))
                        taken.add((i, j))

    def _add_monster(self) -> None:
        x, y = MONSTER_HOMES[len(self.monsters)]
        self.monsters.append({"pos": np.array([x, y]), "dir": int(self.rng.integers(2)), "stop": 0})

    def hits(self, center, size, kind: int, dy: float = 0.0) -> list[tuple[int, int]]:
        """Grid cells of `kind` overlapped by the box (shifted down by dy), topmost first."""
        x, y = center[0], center[1] + dy
        left, right = x - size[0] / 2, x + size[0] / 2
        top, bottom = y - size[1] / 2, y + size[1] / 2
        c0, c1 = max(int(np.floor(left / CELL)), 0), min(int(np.ceil(right / CELL)), self.grid.shape[1])
        r0, r1 = max(int(np.floor(top / CELL)), 0), min(int(np.ceil(bottom / CELL)), self.grid.shape[0])
        return [(r, c) for r in range(r0, r1) for c in range(c0, c1) if self.grid[r, c] == kind]

    # --- one frame ----------------------------------------------------------------------------------------
    def _advance(self, keys: frozenset[str]) -> float:
        """Throw fireballs, move the player with the held keys, roll fireballs, score, move monsters."""
        for i, at in enumerate(FIREBALL_TIMES):
            if self.fireball_timer == at and i < len(self.monsters):
                self._throw(i)
        self.fireball_timer = (self.fireball_timer + 1) % 70
        self._move_player(keys)
        reward = self._roll_fireballs()
        for cell in [c for c in self.coins if boxes_overlap(self.player, PLAYER_SIZE, _cell_center(c),
                                                               (CELL, CELL))]:
            self.coins.remove(cell)
            reward += self.rewards["positive"]
        if boxes_overlap(self.player, PLAYER_SIZE, *PRINCESS) or self.player[1] < 4 * CELL:
            reward += self.rewards["win"]
            self._next_round()
        for monster in self.monsters:
            self._walk_monster(monster)
        self.game_over = self.lives <= 0
        return reward

    def _move_player(self, keys: frozenset[str]) -> None:
        p, size = self.player, PLAYER_SIZE
        ladders_below, walls_below = self.hits(p, size, LADDER, 2), self.hits(p, size, WALL, 2)
        if ladders_below and not walls_below:
            if any(_cell_center(c)[1] >= p[1] for c in ladders_below):
                self.on_ladder, self.jumping = True, False
                if self.hits(p, size, WALL, -2):
                    p[1] += 3
        else:
            self.on_ladder = False
        if ("jump" in keys and not self.on_ladder) or ("up" in keys and self.hits(p, size, LADDER)):
            if not self.jumping and walls_below:
                self.jumping, self.fall_speed = True, self.jump_speed
        for key, dx in (("right", self.speed), ("left", -self.speed)):
            if key in keys:
                p[0] += dx
                if self.hits(p, size, WALL):
                    p[0] -= dx
        if "up" in keys and self.on_ladder:
            # PLE also refuses a step that leaves the ladder, which strands the player at the top of
            # every ladder (PLE issue #56); only walls stop the climb here.
            p[1] -= self.speed / 2
            if self.hits(p, size, WALL):
                p[1] += self.speed / 2
        if "down" in keys and self.on_ladder:
            p[1] += self.speed / 2
        if self.on_ladder:
            return
        walls = self.hits(p, size, WALL)
        if not self.jumping and not self.hits(p, size, WALL, 2) and not self.hits(p, size, LADDER, 2):
            self.jumping, self.fall_speed = True, 0.0  # nothing underfoot: fall
        if self.jumping:
            if walls:
                wall_y = _cell_center(walls[0])[1]
                if wall_y > p[1]:  # landed
                    self.jumping = False
                    p[1] = wall_y - (size[1] + 1)
                elif wall_y < p[1]:  # bumped the ceiling
                    self.fall_speed = 0.0
                    p[1] = wall_y + (size[1] + 1)
            if self.jumping:
                p[1] -= self.fall_speed
                self.fall_speed = max(self.fall_speed - self.gravity, -self.max_fall)

    def _throw(self, i: int) -> None:
        if len(self.fireballs) >= 5 * len(self.monsters):
            return
        monster = self.monsters[i]
        self.fireballs.append({"pos": monster["pos"] + [0.0, 15.0], "dir": int(self.rng.integers(2)),
                               "fall": False, "speed": 2 + len(self.monsters) / 2})
        monster["stop"] = 15  # the monster pauses (and hops) while throwing
        monster["pos"][1] -= 12

    def _roll_fireballs(self) -> float:
        """PLE's fireballs: roll, turn at walls, fall off edges and (sometimes) down ladders."""
        reward, size, kept = 0.0, (CELL, CELL), []
        for ball in self.fireballs:
            pos, speed = ball["pos"], ball["speed"]
            if ball["fall"]:
                pos[1] += speed
                if self.hits(pos, size, WALL, speed):
                    ball["fall"], ball["dir"] = False, int(self.rng.integers(2))
            else:
                ladder, wall = self.hits(pos, size, LADDER, speed), self.hits(pos, size, WALL, speed)
                if ladder and not wall:
                    ball["fall"] = int(self.rng.random() * 100) % 20 >= 15
                if not ladder and not wall:
                    ball["fall"] = True
                dx = speed if ball["dir"] == 0 else -speed
                pos[0] += dx
                if self.hits(pos + [dx, 0.0], size, WALL):
                    ball["dir"] = 1 - ball["dir"]
                    pos[0] -= dx
            if boxes_overlap(pos + [0.0, speed], size, self.player, PLAYER_SIZE):
                self.player[:] = RESPAWN
                self.lives -= 1
                reward += self.rewards["negative"]
            elif not boxes_overlap(pos, size, RESPAWN, (CELL, CELL)):  # else it has reached its end
                kept.append(ball)
        self.fireballs = kept
        return reward

    def _next_round(self) -> None:
        self.fireballs = []
        self.player[:] = RESPAWN
        self.coins = []
        self._place_coins()
        if len(self.monsters) < len(MONSTER_HOMES):
            self._add_monster()

    def _walk_monster(self, monster: dict) -> None:
        if monster["stop"] == 0:
            dx = 2.0 if monster["dir"] == 0 else -2.0
            monster["pos"][0] += dx
            if self.hits(monster["pos"] + [np.sign(dx) * 20, 0.0], (CELL, CELL), WALL):
                monster["dir"] = 1 - monster["dir"]
                monster["pos"][0] -= dx
        else:
            monster["stop"] -= 1
            if monster["stop"] == 0:
                monster["pos"][1] += 12

    # --- outputs ------------------------------------------------------------------------------------------
    def _export(self) -> None:
        self.exported = {"score": float(self.score), "x": float(self.player[0]), "y": float(self.player[1]),
                         "lives": float(self.lives), "coins": float(len(self.coins))}

    def game_state(self) -> np.ndarray:
        """Player, lives, coins (count, nearest offset), first monster, nearest fireballs (offsets)."""
        p = self.player
        coin = min((np.subtract(_cell_center(c), p) for c in self.coins), key=np.linalg.norm,
                   default=np.zeros(2))
        balls = sorted((b["pos"] - p for b in self.fireballs), key=np.linalg.norm)[:NEAREST_FIREBALLS]
        slots = np.zeros((NEAREST_FIREBALLS, 3))
        for i, offset in enumerate(balls):
            slots[i] = (offset[0], offset[1], 1.0)
        head = [p[0], p[1], float(self.on_ladder), float(self.jumping), float(self.lives),
                float(len(self.coins)), coin[0], coin[1], *self.monsters[0]["pos"]]
        return np.concatenate([head, slots.ravel()]).astype(np.float32)

    def draw(self, surface) -> None:
        """Blocks and ladders (cached), coins, princess, monsters, fireballs, player."""
        import pygame
        if self._static is None:
            self._static = pygame.Surface((self.width, self.height))
            self._static.fill(COLORS["background"])
            for (r, c), kind in np.ndenumerate(self.grid):
                x, y = c * CELL, r * CELL
                if kind == WALL:
                    pygame.draw.rect(self._static, COLORS["wall"], (x, y, CELL, CELL))
                    pygame.draw.rect(self._static, COLORS["wall_edge"], (x, y, CELL, CELL), 1)
                elif kind == LADDER:
                    for rail in (x + 2, x + CELL - 3):
                        pygame.draw.line(self._static, COLORS["ladder"], (rail, y), (rail, y + CELL - 1))
                    pygame.draw.line(self._static, COLORS["ladder"], (x + 2, y + 7), (x + CELL - 3, y + 7))
        surface.blit(self._static, (0, 0))
        for cell in self.coins:
            pygame.draw.circle(surface, COLORS["coin"], _cell_center(cell), 5)
        (px, py), (pw, ph) = PRINCESS
        pygame.draw.rect(surface, COLORS["princess"], (px - pw / 2, py - ph / 2, pw, ph))
        for monster in self.monsters:
            x, y = monster["pos"]
            pygame.draw.rect(surface, COLORS["monster"], (x - 20, y - 10, 40, 40))
        for ball in self.fireballs:
            pygame.draw.circle(surface, COLORS["fireball"], ball["pos"], 7)
        x, y = self.player
        pygame.draw.rect(surface, COLORS["player"], (x - 7.5, y - 7.5, 15, 15))


def _cell_center(cell: tuple[int, int]) -> tuple[float, float]:
    """Pixel centre (x, y) of grid cell (row, col)."""
    return (cell[1] * CELL + CELL / 2, cell[0] * CELL + CELL / 2)


if __name__ == "__main__":  # python -m dreamer_live.envs.games.<game>: play it from the keyboard
    from dreamer_live.envs.games.standalone import main

    sys.exit(main(MonsterKong, sys.argv[1:]))
