"""Scripted players for the built-in games: each reads the game's own state and picks an action index.

A player is a plain function `f(game) -> int` (an index into `type(game).actions`, 0 the no-op), called
once per agent decision and keeping no state of its own. They are tuned for the benchmark's pace: each
decision is held for `HOLD` frames (15 decisions a second in games that run at 30 fps). Where a key has a
strong delayed effect (momentum, coasting) the player simulates the game's own physics a little ahead.
"""

from __future__ import annotations

import collections
import itertools
from collections.abc import Callable

import numpy as np

from dreamer_live.envs.games import physics
from dreamer_live.envs.games.base import Game
from dreamer_live.envs.games.flappybird import BIRD_H, BIRD_W, FLAP_POWER, GRAVITY, MAX_DROP, PIPE_W, SPEED
from dreamer_live.envs.games.monsterkong import CELL, LADDER, PLAYER_SIZE
from dreamer_live.envs.games.raycastmaze import FREE, NEIGHBOURS

HOLD = 2  # frames each decision is held (GameEnv's frame_skip)
FLAP_MARGIN = 4  # pixels FlappyBird's bird keeps above a gap's bottom
COPTER_HORIZON = 40  # frames Pixelcopter's player looks ahead
PUCK_HORIZON = 20  # frames PuckWorld's player looks ahead
WATER_HORIZON = 30  # frames WaterWorld's player looks ahead
KONG_JUMP_DISTANCE = 40  # pixels from a fireball at which MonsterKong's player jumps


def _action(game: Game, *keys: str) -> int:
    """The index of the action that holds exactly `keys`."""
    return type(game).actions.index(tuple(keys))


# --- paddles ------------------------------------------------------------------------------------------
def catcher(game: Game) -> int:
    """The key that brings the paddle (it has momentum) nearest the fruit's x by the time the fruit
    reaches it, with no key held after this decision."""
    frames = max(round((game.paddle_y - game.paddle_height / 2 - game.fruit_y) / game.fruit_speed), HOLD)

    def landing(push: float) -> float:
        pos, vel = game.paddle_x, game.paddle_vel
        for frame in range(frames):
            vel = (vel + (push if frame < HOLD else 0.0)) * 0.9  # Catcher's paddle keeps 90 % a frame
            pos += vel
        return pos

    pushes = {(): 0.0, ("left",): -game.player_accel, ("right",): game.player_accel}
    return _action(game, *min(pushes, key=lambda keys: abs(landing(pushes[keys]) - game.fruit_x)))


def _pong_crossing(game: Game) -> tuple[int, float, float]:
    """(frame, y, vy): when and where the ball crosses the agent's paddle line (after the CPU returns
    it, if it moves away now), bouncing off the walls on the way."""
    x, y, vx, vy, dt = game.ball_x, game.ball_y, game.ball_vx, game.ball_vy, game.dt
    line = game.player_x + game.paddle_width / 2
    cpu_line = game.cpu_x - game.paddle_width / 2
    for frame in range(game.fps * 5):  # Pong._move_ball's arithmetic, the paddles left out
        x, y = x + vx * dt, y + vy * dt
        if x <= line:
            break
        if x >= cpu_line and vx > 0:
            vx = -(vx + game.ball_speed * 0.05)
        if y - game.ball_radius <= 0:
            vy, y = abs(vy) * 0.99, y + 1.0
        if y + game.ball_radius >= game.height:
            vy, y = -abs(vy) * 0.99, y - 1.0
    return frame, y, vy


def pong(game: Game) -> int:
    """Meet the ball moving along with it, as fast as still hits: the paddle's speed adds to the ball's
    vertical speed, and a steep ball outruns the CPU."""
    step = game.player_speed * game.dt
    # Plans: the first decision's key, then none until some frame, then one key until the hit. The paddle
    # (90 % of its speed kept a frame) is linear in its pushes: a push at frame j moves it reach[j] by the
    # hit and adds keep[j] to its speed then; the tails sum them from each possible start frame on.
    frames, ball_y, ball_vy = _pong_crossing(game)
    j = np.arange(frames)
    keep = 0.9 ** (frames - j)
    reach = 0.9 * (1 - keep) / 0.1
    first = min(HOLD, frames)
    tail_reach = np.append(np.cumsum(reach[::-1])[::-1], 0.0)[first:]
    tail_keep = np.append(np.cumsum(keep[::-1])[::-1], 0.0)[first:]
    pos = game.player_y + game.player_vel * (0.9 * (1 - 0.9 ** frames) / 0.1)
    vel = game.player_vel * 0.9 ** frames
    half = game.paddle_height / 2
    best = None
    for keys_first, push_first in (((), 0.0), (("up",), -step), (("down",), step)):
        for push_then in (0.0, -step, step):
            at = pos + push_first * reach[:first].sum() + push_then * tail_reach
            speed = (vel + push_first * keep[:first].sum() + push_then * tail_keep) * np.sign(ball_vy)
            speed[(at < half) | (at > game.height - half)] = 0.0  # the paddle stops at the walls
            miss = np.maximum(np.abs(np.clip(at, half, game.height - half) - ball_y) - (half - 1), 0.0)
            i = np.lexsort((-speed, miss))[0]
            if best is None or (miss[i], -speed[i]) < best[0]:
                best = ((miss[i], -speed[i]), keys_first)
    return _action(game, *best[1])


# --- flyers ---------------------------------------------------------------------------------------------
def flappybird(game: Game) -> int:
    """Flap when the bird would sink below its aim: low in the next gap, but while a pipe is around the
    bird, the point of its gap nearest the gap after it; never flap into the upper pipe."""
    pipes = sorted(p for p in game.pipes if p[0] + PIPE_W / 2 > game.bird_x - BIRD_W / 2)
    (x, gap_top), (_, next_top) = (pipes + pipes)[:2]
    aim = gap_top + game.pipe_gap - BIRD_H / 2 - FLAP_MARGIN
    near = abs(x - game.bird_x) < (PIPE_W + BIRD_W) / 2 + 2 * SPEED * HOLD  # in it, or in two decisions
    if near:
        aim = np.clip(next_top + game.pipe_gap - BIRD_H / 2 - FLAP_MARGIN, gap_top + BIRD_H / 2, aim)
    vel, y = game.bird_vel, game.bird_y
    for _ in range(HOLD):  # where a no-op decision leaves the bird
        vel = min(vel + GRAVITY, MAX_DROP)
        y += vel
    # A held flap lifts the bird FLAP_POWER - GRAVITY on its first frame and leaves it at rest.
    room = game.bird_y - (FLAP_POWER - GRAVITY) - BIRD_H / 2 - (gap_top if near else 0)
    return _action(game, "jump") if y > aim and room > 0 else _action(game)


def pixelcopter(game: Game) -> int:
    """Plan up to two climbs over the next COPTER_HORIZON frames: the plan that crashes latest (or never)
    into the walls and blocks and keeps nearest the cavern's middle; climb if it climbs now."""
    decisions = COPTER_HORIZON // HOLD
    plans = [()] + [(i,) for i in range(decisions)] + list(itertools.combinations(range(decisions), 2))
    climbing = np.zeros((len(plans), decisions * HOLD), bool)
    for p, plan in enumerate(plans):
        for i in plan:
            climbing[p, i * HOLD:(i + 1) * HOLD] = True
    path, y, m = np.empty(climbing.shape), game.player_y, game.momentum
    for frame in range(climbing.shape[1]):
        m = (m + np.where(climbing[:, frame], game.climb, game.fall)) * 0.99  # Pixelcopter's damping
        y = y + m
        path[:, frame] = y
    shift = game.scroll * np.arange(1, climbing.shape[1] + 1)[:, None]  # [frames, 1]
    columns, blocks = np.array(game.columns), np.array(game.blocks).reshape(-1, 3)
    reach = shift[-1, 0] / 2  # only the columns that pass the player within the horizon
    columns = columns[np.abs(columns[:, 0] - game.player_x - reach) < reach + game.column_width]
    (pw, ph), (bw, bh), gap = game.player_size, game.block_size, game.height * 0.25
    at_column = np.abs(columns[:, 0] - shift - game.player_x) < (game.column_width + pw) / 2
    at_block = np.abs(blocks[:, 0] - shift - game.player_x) < (bw + pw) / 2  # [frames, blocks]
    middle = (at_column * columns[:, 1]).sum(1) / np.maximum(at_column.sum(1), 1)
    p = path[..., None]  # [plans, frames, 1]
    crash = ((path < game.height * 0.125) | (path > game.height * 0.875)
             | (at_column & ((p - ph / 2 <= columns[:, 1] - gap)
                             | (p + ph / 2 >= columns[:, 1] + gap))).any(2)
             | (at_block & (np.abs(p - blocks[:, 1]) < (bh + ph) / 2)).any(2))
    first = np.where(crash.any(1), crash.argmax(1), crash.shape[1])
    early = np.arange(crash.shape[1]) < first[:, None]
    deviation = ((path - middle) ** 2 * early).sum(1) / np.maximum(first, 1)
    best = plans[np.lexsort((deviation, -first))[0]]
    return _action(game, "up") if 0 in best else _action(game)


# --- thrusters (PuckWorld, WaterWorld) ---------------------------------------------------------------------
def _thruster_plans(game: Game, horizon: int) -> tuple[np.ndarray, np.ndarray]:
    """Plans of two thrusts (now, and a second one, e.g. a brake, some decisions later) for PLE's thruster
    body (velocity decays slowly): (first action of each plan, positions [plans, frames, 2])."""
    impulses = np.array([physics.thrust(frozenset(keys), game.agent_speed) for keys in type(game).actions])
    n, decisions = len(impulses), horizon // HOLD
    first, later, then = (a.ravel() for a in np.meshgrid(np.arange(n), np.arange(1, decisions), np.arange(n)))
    decision = np.arange(decisions * HOLD) // HOLD
    push = (impulses[first][:, None] * (decision == 0)[None, :, None]
            + impulses[then][:, None] * (decision[None] == later[:, None])[..., None])
    radius = getattr(game, "agent_radius", getattr(game, "radius", 0))
    low, high = np.full(2, float(radius)), np.array([game.width, game.height], float) - radius
    pos = np.tile(game.player_pos, (len(first), 1))
    vel = np.tile(game.player_vel, (len(first), 1))
    paths = np.empty(push.shape)
    for frame in range(push.shape[1]):  # physics.move, for all plans at once
        vel = vel + push[:, frame]
        new = pos + vel * game.dt
        hit = (new < low) | (new > high)
        pos, vel = np.clip(new, low, high), np.where(hit, 0.0, vel * physics.DECAY)
        paths[:, frame] = pos
    return first, paths


def puckworld(game: Game) -> int:
    """The thrust (with a brake planned later) that earns the most of PuckWorld's reward over the next
    PUCK_HORIZON frames: near the green dot, out of the red puck's radius."""
    first, paths = _thruster_plans(game, PUCK_HORIZON)
    to_good = np.linalg.norm(paths - game.good_pos, axis=-1)
    to_bad = np.linalg.norm(paths - game.bad_pos, axis=-1)
    loss = to_good + 2 * np.maximum(game.bad_radius_outer - to_bad, 0.0)  # minus PuckWorld's reward
    return int(first[np.argmin(loss.sum(1))])


def waterworld(game: Game) -> int:
    """The thrust (with a second one planned later) that touches a green creep soonest within the next
    WATER_HORIZON frames without touching a red one first; creeps drift in straight lines meanwhile."""
    if not game.creep_good.any():
        return _action(game)
    first, paths = _thruster_plans(game, WATER_HORIZON)
    frames = np.arange(1, paths.shape[1] + 1)[:, None, None]
    creeps = game.creep_pos + game.creep_dir * game.creep_speed_of[:, None] * game.dt * frames  # [f, c, 2]
    touching = (np.abs(paths[:, :, None] - creeps[None]) < 2 * game.radius).all(-1)  # [plans, frames, creeps]
    good, bad = touching[..., game.creep_good].any(-1), touching[..., ~game.creep_good].any(-1)
    eat = np.where(good.any(1), good.argmax(1), paths.shape[1])
    hurt = np.where(bad.any(1), bad.argmax(1), paths.shape[1])
    near = np.linalg.norm(paths[:, -1, None] - creeps[-1][game.creep_good], axis=-1).min(1)
    cost = eat + np.where(eat < paths.shape[1], 0.0, near) + 100.0 * (hurt <= eat)
    return int(first[np.argmin(cost)])


# --- Snake ------------------------------------------------------------------------------------------
def _snake_safe(game: Game, direction: np.ndarray, reach: float = 8.0) -> bool:
    """Whether the head can go `reach` pixels straight along `direction` without a wall or its body."""
    half = game.segment / 2
    body = game.body[6:]
    for s in np.arange(1.0, reach + 1.0):
        head = game.body[0] + direction * s
        if (head - half < 0).any() or head[0] + half > game.width or head[1] + half > game.height:
            return False
        if len(body) and physics.boxes_overlap(head, game.segment + 1, body, game.segment).any():
            return False
    return True


def snake(game: Game) -> int:
    """Greedy towards the food along the safe directions, never straight back onto the body."""
    head, food = game.body[0], game.food
    options = []
    for keys, direction in physics.KEY_DIRECTIONS.items():
        direction = np.array(direction)
        if np.dot(direction, game.direction) < -0.5:
            continue
        turning = not np.array_equal(direction, game.direction)
        distance = np.abs(head + direction * 2 - food).sum()
        options.append((not _snake_safe(game, direction), distance + turning * 0.5, keys))
    return _action(game, min(options)[2])


# --- RaycastMaze ------------------------------------------------------------------------------------------
def _maze_path(game: Game, start: tuple[int, int]) -> list[tuple[int, int]]:
    """Free cells from `start` to the nearest cell beside the goal (breadth-first, as the game's own
    `path_to_goal`, which starts from the start cell only)."""
    gx, gy = (int(v) for v in game.goal)
    beside = {(gx + dx, gy + dy) for dx, dy in NEIGHBOURS}
    came = {start: None}
    queue = collections.deque([start])
    while queue:
        cell = queue.popleft()
        if cell in beside:
            path = []
            while cell is not None:
                path.append(cell)
                cell = came[cell]
            return path[::-1]
        for dx, dy in NEIGHBOURS:
            nxt = (cell[0] + dx, cell[1] + dy)
            if nxt not in came and game.grid[nxt] == FREE:
                came[nxt] = cell
                queue.append(nxt)
    return [start]


def raycastmaze(game: Game) -> int:
    """Walk the shortest path cell by cell: turn to face the next cell's centre, step when facing it;
    beside the goal, face the goal block and step up to it."""
    cell = (int(game.pos[0]), int(game.pos[1]))
    path = _maze_path(game, cell)
    target = game.goal + 0.5 if len(path) == 1 else np.array(path[1]) + 0.5
    to = target - game.pos
    angle = np.arctan2(game.dir[0] * to[1] - game.dir[1] * to[0], np.dot(game.dir, to))
    step = game.turn_speed * game.dt * HOLD
    if abs(angle) > step / 2:
        return _action(game, "right" if angle > 0 else "left")
    return _action(game, "up")


# --- MonsterKong ------------------------------------------------------------------------------------------
def _kong_ladder_busy(game: Game, ladder_x: float, top_y: float) -> bool:
    """Whether a fireball is coming down the ladder at x (its top at y): falling in its column, or
    rolling towards its top on the floor above."""
    for ball in game.fireballs:
        (bx, by), step = ball["pos"], (ball["speed"] if ball["dir"] == 0 else -ball["speed"])
        if abs(bx - ladder_x) < 30 and by < game.player[1] + 10 and (ball["fall"] or abs(by - top_y) < 20):
            return True
        if abs(by - top_y) < 20 and abs(bx - ladder_x) < 100 and step * (ladder_x - bx) > 0:
            return True
    return False


def monsterkong(game: Game) -> int:
    """Climb floor by floor to the princess: walk to the ladder up from this floor, line up and climb
    when no fireball is coming down it (else wait aside, or step off it); jump the fireballs that roll
    towards the player on its floor, walking over them in the air."""
    x, y = game.player
    floor = int(np.ceil((y + PLAYER_SIZE[1] / 2) / (5 * CELL))) * 5  # floors are every 5th grid row
    cols = np.flatnonzero(game.grid[min(floor, game.grid.shape[0] - 1) - 1] == LADDER)
    ladder = (cols.min() + cols.max() + 1) / 2 * CELL if len(cols) else x
    top = (floor - 5) * CELL - CELL / 2  # a fireball's height rolling on the floor above
    for ball in game.fireballs:
        dx, dy = ball["pos"][0] - x, ball["pos"][1] - y
        coming = dx * (1 if ball["dir"] == 1 else -1) > 0  # dir 1 rolls left
        if game.on_ladder or abs(dy) > CELL + (30 if game.jumping else 0):
            continue
        if game.jumping and abs(dx) < 4 * CELL:  # in the air: over a fireball coming, away from one gone
            return _action(game, "right" if (dx > 0) == coming else "left")
        if not game.jumping and coming and abs(dx) < KONG_JUMP_DISTANCE:
            return _action(game, "jump")
    aligned = abs(ladder - x) <= game.speed * HOLD / 2 or game.on_ladder and abs(ladder - x) < CELL / 2
    if _kong_ladder_busy(game, ladder, top):
        if game.on_ladder:  # low on the ladder drop off it, high on it climb down ahead of the fireball
            if y < top + 2 * CELL:
                return _action(game, "down")
            return _action(game, "left" if ladder > game.width / 2 else "right")
        if abs(ladder - x) < 3 * CELL:
            return _action(game, "left" if ladder > x else "right")
        return _action(game)
    if aligned:
        return _action(game, "up")
    return _action(game, "right" if ladder > x else "left")


PLAYERS: dict[str, Callable[[Game], int]] = {
    "Catcher": catcher, "Pong": pong, "FlappyBird": flappybird, "Pixelcopter": pixelcopter,
    "PuckWorld": puckworld, "Snake": snake, "WaterWorld": waterworld, "RaycastMaze": raycastmaze,
    "MonsterKong": monsterkong,
}


def scripted_action(game: Game) -> int:
    """The scripted player's action index for the game's current state."""
    return PLAYERS[game.name](game)


def play_episodes(env, player: Callable[[Game], int] | str, episodes: int, seed: int = 0) -> list[float]:
    """Play whole episodes (to game over or a wrapper's cap) with `player` or "random"; their returns."""
    game = getattr(env, "unwrapped", env).game
    n = len(type(game).actions)
    rng = np.random.default_rng(seed)
    returns = []
    for _ in range(episodes):
        obs, total = env.reset(), 0.0
        while not obs["is_last"]:
            action = int(rng.integers(n)) if player == "random" else player(game)
            env.act(np.eye(n, dtype=np.float32)[action])
            obs = env.observe()
            total += float(obs["reward"])
        returns.append(total)
    return returns
