"""Each built-in game's own rules, scripted: what scores, what costs a life, what ends the game (the
nine games' shared checks, random play in both clocks, live in test_games.py)."""

from __future__ import annotations

import numpy as np

from dreamer_live.envs.games import GameEnv
from dreamer_live.envs.games.catcher import Catcher
from dreamer_live.envs.games.flappybird import FlappyBird
from dreamer_live.envs.games.monsterkong import RESPAWN, MonsterKong
from dreamer_live.envs.games.pixelcopter import Pixelcopter
from dreamer_live.envs.games.pong import Pong
from dreamer_live.envs.games.puckworld import PuckWorld
from dreamer_live.envs.games.raycastmaze import RaycastMaze
from dreamer_live.envs.games.snake import Snake
from dreamer_live.envs.games.waterworld import WaterWorld

NOOP, LEFT, RIGHT, UP, DOWN = range(5)


def one_hot(index: int, n: int = 5) -> np.ndarray:
    """The agent's action format for a discrete action index."""
    return np.eye(n, dtype=np.float32)[index]


def run_noop_until_reward(env, limit=400):
    """Step the no-op until a non-zero reward; return that observation and the steps taken."""
    for steps in range(1, limit + 1):
        obs = env.step(0)
        if obs["reward"] != 0:
            return obs, steps
    raise AssertionError("no reward within the limit")


# --- Catcher --------------------------------------------------------------------------------------


def test_catcher_paddle_under_fruit_scores():
    env = GameEnv(Catcher(seed=0))
    env.reset()
    env.game.paddle_x = env.game.fruit_x
    obs, _ = run_noop_until_reward(env)
    assert obs["reward"] == 1 and env.game.lives == 3 and not obs["is_last"]


def test_catcher_miss_loses_a_life_and_three_misses_end_the_game():
    env = GameEnv(Catcher(seed=0))
    env.reset()
    for life in (2, 1, 0):
        game = env.game
        game.paddle_x = game.paddle_width / 2 if game.fruit_x > game.width / 2 else game.width - 1
        obs, _ = run_noop_until_reward(env)
        assert obs["reward"] == -1 and game.lives == life
        assert bool(obs["is_last"]) == (life == 0) == bool(obs["is_terminal"])
    assert env.game.game_over and env.game.score == -3
    assert env.step(0)["reward"] == 0  # a finished game waits for reset
    assert env.reset()["is_first"] and env.game.lives == 3


def test_catcher_left_right_move_the_paddle():
    env = GameEnv(Catcher(seed=0))
    env.reset()
    x0 = env.game.paddle_x
    env.step(1)
    assert env.game.paddle_x < x0
    for _ in range(5):
        env.step(2)
    assert env.game.paddle_x > x0


# --- Pong -----------------------------------------------------------------------------------------


def ball_towards_agent(game, y):
    game.ball_x, game.ball_y, game.ball_vx, game.ball_vy = game.width * 0.3, y, -game.ball_speed, 0.0


def test_pong_ball_past_the_agent_is_minus_one_and_a_cpu_point():
    env = GameEnv(Pong(seed=0))
    env.reset()
    game = env.game
    game.player_y = game.height - game.paddle_height / 2  # paddle at the bottom, ball at the top
    ball_towards_agent(game, game.height * 0.2)
    obs, _ = run_noop_until_reward(env)
    assert obs["reward"] == -1 and game.points == {"agent": 0, "cpu": 1}


def test_pong_paddle_in_front_returns_the_ball():
    env = GameEnv(Pong(seed=0))
    env.reset()
    game = env.game
    ball_towards_agent(game, game.height / 2)
    game.player_y = game.height / 2
    for _ in range(60):
        assert env.step(0)["reward"] == 0
        if game.ball_vx > 0:
            break
    assert game.ball_vx > 0 and game.ball_x > game.player_x


def test_pong_ends_at_max_score():
    env = GameEnv(Pong(seed=0, max_score=2))
    env.reset()
    for points in (1, 2):
        game = env.game
        game.player_y = game.height - game.paddle_height / 2
        ball_towards_agent(game, game.height * 0.2)
        obs, _ = run_noop_until_reward(env)
        assert game.points["cpu"] == points and bool(obs["is_terminal"]) == (points == 2)
    assert obs["is_last"] and env.game.score == -2


# --- FlappyBird -----------------------------------------------------------------------------------


def test_flappy_doing_nothing_falls_and_dies():
    env = GameEnv(FlappyBird(seed=0))
    y0 = env.reset()["vector"][0]
    obs, steps = run_noop_until_reward(env)
    assert obs["reward"] == -1 and obs["is_last"] and obs["is_terminal"]
    assert obs["vector"][0] > y0 and steps < 40  # fell to the ground in about a second


def test_flappy_holding_jump_flies_into_the_top():
    env = GameEnv(FlappyBird(seed=0))
    y0 = env.reset()["vector"][0]
    assert env.step(1)["vector"][0] < y0
    for _ in range(100):
        obs = env.step(1)
        if obs["is_last"]:
            break
    assert obs["is_terminal"] and obs["reward"] == -1 and env.game.bird_y < y0 * env.game.height


def test_flappy_passing_a_pipe_scores():
    env = GameEnv(FlappyBird(seed=0))
    env.reset()
    game = env.game
    game.bird_vel = 0.0
    game.flapped = False
    game.pipes[0] = [game.bird_x + 10, game.bird_y - 50]  # the gap around the bird, centre just ahead
    obs, steps = run_noop_until_reward(env)
    assert obs["reward"] == 1 and steps == 3 and not obs["is_last"]


def test_flappy_pipe_hit_ends_the_game():
    env = GameEnv(FlappyBird(seed=0))
    env.reset()
    game = env.game
    game.pipes[0] = [game.bird_x + 30, game.bird_y + 20]  # gap top below the bird: it hits the pipe
    obs = env.step(0)
    assert obs["is_terminal"] and obs["reward"] == -1


# --- Pixelcopter ----------------------------------------------------------------------------------


def test_pixelcopter_doing_nothing_falls_and_dies():
    env = GameEnv(Pixelcopter(seed=0))
    y0 = env.reset()["vector"][0]
    for steps in range(1, 100):
        obs = env.step(0)
        if obs["is_last"]:
            break
    assert obs["is_terminal"] and obs["reward"] <= 0 and obs["vector"][0] > y0 and steps < 60


def test_pixelcopter_up_climbs_and_columns_passing_score():
    env = GameEnv(Pixelcopter(seed=0))
    y0 = env.reset()["vector"][0]
    assert env.step(1)["vector"][0] < y0
    env.reset()
    total = 0.0
    for _ in range(30):  # alternate to hover; the columns behind the pixel scroll off and pay +1
        obs = env.step(1 if env.game.momentum > 0.1 else 0)
        total += float(obs["reward"])
        if obs["is_last"]:
            break
    assert total > 0


def test_pixelcopter_block_hit_ends_the_game():
    env = GameEnv(Pixelcopter(seed=0))
    env.reset()
    game = env.game
    game.blocks = [[game.player_x + 1, game.player_y, 0.0]]
    obs = env.step(0)
    assert obs["is_terminal"] and obs["reward"] < 0


# --- Snake ----------------------------------------------------------------------------------------
def test_snake_dies_at_the_wall():
    env = GameEnv(Snake(seed=0), obs="vector")
    obs = env.reset()
    rewards = []
    while not obs["is_last"] and len(rewards) < 200:
        obs = env.step(one_hot(NOOP))  # heading right from the centre, into the right wall
        rewards.append(float(obs["reward"]))
    assert obs["is_terminal"] and rewards[-1] == -1.0 and sum(rewards) == -1.0
    assert env.game.body[0, 0] + env.game.segment / 2 > env.game.width
    assert 20 < len(rewards) < 60  # about 32 px at 29 px/s and 30 fps


def test_snake_cannot_reverse_and_dies_biting_itself():
    game = Snake(seed=0)
    env = GameEnv(game, obs="vector")
    env.reset()
    game.food = np.array([-100.0, -100.0])  # out of reach
    env.step(one_hot(LEFT))  # moving right: turning back is ignored
    np.testing.assert_array_equal(game.direction, [1.0, 0.0])
    for _ in range(5):
        game.grow()
    for _ in range(20):
        assert not env.step(one_hot(NOOP))["is_last"]
    obs = env.step(one_hot(UP))
    assert not obs["is_last"]
    obs = env.step(one_hot(LEFT))  # a U-turn straight back into its own body
    for _ in range(3):
        if obs["is_last"]:
            break
        obs = env.step(one_hot(NOOP))
    assert obs["is_terminal"] and float(obs["reward"]) == -1.0
    assert game.length == 8 and 20 < game.body[0, 0] < game.width - 5  # not at a wall


def test_short_snake_survives_a_u_turn():
    game = Snake(seed=0)
    game.food = np.array([-100.0, -100.0])
    for keys in [set()] * 20 + [{"up"}, {"left"}] + [set()] * 10:
        game.tick(frozenset(keys))
    assert not game.game_over  # 3 segments cannot reach the head (PLE: from 7 segments on)


def test_snake_eats_food_and_grows():
    game = Snake(seed=0)
    env = GameEnv(game, obs="both")
    env.reset()
    game.food = game.body[0] + np.array([game.segment + game.food_size / 2, 0.0])  # just ahead
    length = game.length
    rewards = [float(env.step(one_hot(NOOP))["reward"]) for _ in range(3)]
    assert rewards.count(1.0) == 1 and sum(rewards) == 1.0
    assert game.length == length + 1 and game.score == 1.0 and not game.game_over
    assert not np.allclose(game.food, game.body[0] + [game.segment + game.food_size / 2, 0.0])
    state = game.game_state()
    assert state[4 + length - 1] > 0 and (state[4 + length:] == -1).all()  # one more body distance


# --- WaterWorld ---
def test_waterworld_good_creep_pays_and_bad_creep_costs():
    game = WaterWorld(seed=0, num_creeps=3)
    env = GameEnv(game, obs="vector")
    env.reset()
    good = int(np.flatnonzero(game.creep_good)[0])
    game.player_pos = game.creep_pos[good].copy()
    obs = env.step(one_hot(NOOP))
    assert float(obs["reward"]) == 1.0
    assert not np.allclose(game.creep_pos[good], game.player_pos, atol=2 * game.radius)  # respawned away
    game.creep_good[:] = [False, True, True]
    game.player_pos = game.creep_pos[0].copy()
    obs = env.step(one_hot(NOOP))
    assert float(obs["reward"]) == -1.0 and not obs["is_last"]


def test_waterworld_ends_when_no_good_creep_is_left():
    game = WaterWorld(seed=0, num_creeps=1)
    env = GameEnv(game, obs="vector")
    env.reset()
    eaten = 0
    while not game.game_over and eaten < 100:
        assert game.creep_good[0]
        game.player_pos = game.creep_pos[0].copy()
        obs = env.step(one_hot(NOOP))
        assert float(obs["reward"]) == 1.0
        eaten += 1
    assert obs["is_terminal"] and game.good_left == 0 and game.score == eaten


def test_waterworld_thrust_moves_the_agent():
    game = WaterWorld(seed=0)
    x = game.player_pos[0]
    for _ in range(5):
        game.tick(frozenset({"right"}))
    assert game.player_pos[0] > x and game.player_vel[0] > 0
    for _ in range(300):
        game.tick(frozenset({"right"}))
    assert game.player_pos[0] == game.width - game.radius  # stopped by the wall


# --- PuckWorld ---
def test_puckworld_reward_is_higher_near_the_goal():
    game = PuckWorld(seed=0)
    game.bad_pos = np.array([game.width - 1.0, game.height - 1.0])
    game.good_pos = np.array([20.0, 20.0])
    rewards = []
    for offset in (0.0, 5.0, 15.0, 30.0):
        game.player_pos, game.player_vel = game.good_pos + [offset, 0.0], np.zeros(2)
        rewards.append(game.tick(frozenset()))
    assert rewards == sorted(rewards, reverse=True) and rewards[0] > -1.0 and rewards[-1] < -25
    # Inside the red puck's radius there is an extra penalty.
    game.player_pos, game.player_vel = game.good_pos + [10.0, 0.0], np.zeros(2)
    free = game.reward_here()
    game.bad_pos = game.player_pos + [3.0, 0.0]
    assert game.reward_here() < free - 10


def test_puckworld_puck_chases_the_agent():
    game = PuckWorld(seed=0)
    before = np.linalg.norm(game.player_pos - game.bad_pos)
    for _ in range(60):
        game.tick(frozenset())
    assert np.linalg.norm(game.player_pos - game.bad_pos) < before - 2


# --- RaycastMaze ---
def test_raycastmaze_next_to_the_goal_wins():
    game = RaycastMaze(seed=0)
    env = GameEnv(game, obs="both")
    env.reset()
    beside = np.array(game.path_to_goal()[-1]) + 0.5
    game.pos = beside
    game.face(-(game.goal + 0.5 - beside))  # back to the goal: nothing yet
    obs = env.step(one_hot(NOOP))
    assert float(obs["reward"]) == 0.0 and not obs["is_last"]
    reddish = obs["image"][..., 0].astype(int) - obs["image"][..., 1] > 60
    assert not reddish.any()
    game.face(game.goal + 0.5 - beside)
    obs = env.step(one_hot(NOOP))
    assert float(obs["reward"]) == 1.0 and obs["is_terminal"]
    view = game.render()
    assert (view[..., 0].astype(int) - view[..., 1] > 60).mean() > 0.2  # the red block fills the view


def test_raycastmaze_scripted_walk_reaches_the_goal():
    for seed in range(3):
        game = RaycastMaze(seed=seed)
        env = GameEnv(game, obs="vector")
        env.reset()
        targets = [np.array(c) + 0.5 for c in game.path_to_goal()[1:]] + [game.goal + 0.5]
        total, steps, obs = 0.0, 0, None
        for i, target in enumerate(targets):
            while steps < 500 and not game.game_over:
                to = target - game.pos
                angle = np.arctan2(game.dir[0] * to[1] - game.dir[1] * to[0], game.dir @ to)
                if i < len(targets) - 1 and np.linalg.norm(to) < 0.4:
                    break
                action = (RIGHT if angle > 0 else LEFT) if abs(angle) > 0.22 else UP
                obs = env.step(one_hot(action))
                total += float(obs["reward"])
                steps += 1
                assert game.grid[tuple(np.floor(game.pos).astype(int))] == 0  # never inside a wall
        assert obs["is_terminal"] and total == 1.0, seed


def test_raycastmaze_walls_block():
    game = RaycastMaze(seed=0)
    game.face([-1.0, 0.0])  # the border wall is half a cell away
    for _ in range(10):
        game.tick(frozenset({"up"}))
    assert 1.0 <= game.pos[0] < 1.2 and game.pos[1] == 1.5


# --- MonsterKong ---
def quiet_kong(seed: int = 0) -> MonsterKong:
    """A MonsterKong whose monster never throws (it is stuck in its throwing pause)."""
    game = MonsterKong(seed=seed)
    game.fireball_timer = 1
    game.monsters[0]["stop"] = 10**9
    return game


def test_monsterkong_coin_fireball_and_lives():
    game = quiet_kong()
    env = GameEnv(game, obs="vector")
    env.reset()
    game.fireball_timer, game.monsters[0]["stop"] = 1, 10**9
    for _ in range(20):
        env.step(one_hot(NOOP))  # settle on the floor
    row, col = game.coins[0]
    coins = len(game.coins)
    game.player[:] = (col * 15 + 7.5, row * 15 + 7.5)
    obs = env.step(one_hot(NOOP))
    assert float(obs["reward"]) == 5.0 and len(game.coins) == coins - 1
    for lives in (2, 1, 0):
        ball = {"pos": game.player + [0.0, -5.0], "dir": 0, "fall": True, "speed": 2.5}
        game.fireballs.append(ball)
        obs = env.step(one_hot(NOOP))
        assert float(obs["reward"]) == -25.0 and game.lives == lives
        np.testing.assert_allclose(game.player, RESPAWN, atol=3)  # sent back to the start
        assert obs["is_terminal"] == (lives == 0)


def test_monsterkong_reaching_the_princess_starts_a_new_round():
    game = quiet_kong()
    env = GameEnv(game, obs="vector")
    env.reset()
    game.fireball_timer, game.monsters[0]["stop"] = 1, 10**9
    game.player[:] = (80.0, 51.5)  # on the princess's floor
    obs = env.step(one_hot(NOOP))
    assert float(obs["reward"]) == 50.0 and not obs["is_last"]
    assert len(game.monsters) == 2 and 16 <= len(game.coins) <= 26 and game.lives == 3
    np.testing.assert_allclose(game.player, RESPAWN, atol=3)


def test_monsterkong_jump_and_climb():
    game = quiet_kong()
    for _ in range(20):
        game.tick(frozenset())  # drop onto the floor
    floor_y = game.player[1]
    assert floor_y + 7.5 < 30 * 15 <= floor_y + 9.5 and not game.jumping
    heights = []
    game.tick(frozenset({"jump"}))
    for _ in range(30):
        game.tick(frozenset())
        heights.append(game.player[1])
    assert min(heights) < floor_y - 25 and heights[-1] == floor_y  # up and back down on the floor
    # Walk to the bottom ladder, climb it and step off onto the floor above.
    ladder_cols = np.flatnonzero(game.grid[25] == 2)
    target = ladder_cols.mean() * 15 + 7.5
    while abs(game.player[0] - target) > 3:
        game.tick(frozenset({"left" if game.player[0] > target else "right"}))
    for _ in range(40):
        game.tick(frozenset({"up"}))
    for _ in range(12):
        game.tick(frozenset({"right"}))
    for _ in range(10):
        game.tick(frozenset())
    assert game.player[1] < 25 * 15 and not game.on_ladder  # standing on floor 25, off the ladder
    assert abs(game.player[0] - target) >= 40
