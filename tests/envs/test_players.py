"""The scripted players (dreamer_live/envs/games/players.py): one for each built-in game, each beating
uniform random play clearly over short seeded lockstep episodes at the benchmark's pace (each decision
held for 2 frames, as at 15 decisions a second in a 30 fps game)."""

from __future__ import annotations

import numpy as np
import pytest

from dreamer_live.envs.games import GAME_MODULES, GAMES, GameEnv
from dreamer_live.envs.games.catcher import Catcher
from dreamer_live.envs.games.players import PLAYERS, play_episodes, scripted_action
from dreamer_live.envs.wrappers import TimeCap

SEEDS = (0, 1)
# Game -> (decisions per episode at most, episodes per seed, the least by which the scripted player's
# mean return beats random's). Measured (scripted / random means, seeds 0 and 1): Catcher 11.0 / -1.75,
# Pong 1.0 / -10.0, FlappyBird 7.5 / -0.75, Pixelcopter 51.0 / -0.25, PuckWorld -1643 / -9738,
# Snake 11.5 / -0.75, WaterWorld 2.5 / 0.25, RaycastMaze 1.0 / 0.17, MonsterKong 55.0 / -12.5.
CASES = {
    "Catcher": (200, 2, 8.0),
    "Pong": (300, 1, 6.0),
    "FlappyBird": (200, 2, 4.0),
    "Pixelcopter": (150, 2, 30.0),
    "PuckWorld": (150, 2, 5000.0),  # minus the pixel distance to the dot, every frame
    "Snake": (150, 2, 8.0),
    "WaterWorld": (150, 4, 1.0),  # an episode ends once no green creep is left: short for a good player
    "RaycastMaze": (150, 3, 0.5),
    "MonsterKong": (300, 2, 30.0),
}


def test_a_player_for_every_registered_game():
    assert set(PLAYERS) == set(GAME_MODULES) == set(CASES)


def test_play_episodes_on_a_bare_game_env_plays_to_game_over():
    env = GameEnv(Catcher(seed=0), frame_skip=2)
    returns = play_episodes(env, "random", 2)
    assert len(returns) == 2 and env.game.game_over and env.game.lives == 0
    assert returns[-1] == env.game.score
    assert play_episodes(GameEnv(Catcher(seed=0), frame_skip=2), "random", 2) == returns  # seeded


@pytest.mark.parametrize("name", list(GAME_MODULES))
def test_scripted_player_beats_random(name):
    cap, episodes, margin = CASES[name]
    means = {}
    for player in (scripted_action, "random"):
        returns = []
        for seed in SEEDS:
            env = TimeCap(GameEnv(GAMES[name](seed=seed), clock="lockstep", obs="vector", frame_skip=2),
                          steps=cap)
            returns += play_episodes(env, player, episodes, seed=seed)
        means[player if isinstance(player, str) else "scripted"] = float(np.mean(returns))
    assert means["scripted"] - means["random"] > margin, means
