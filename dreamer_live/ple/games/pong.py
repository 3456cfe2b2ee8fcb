"""PLE's Pong: the built-in Pong behind PLE's interface."""

from __future__ import annotations

from dreamer_live.ple.games.builtin import BuiltinGame


class Pong(BuiltinGame):
    """PLE's Pong(width=64, height=48, cpu_speed_ratio=0.6, players_speed_ratio=0.4,
    ball_speed_ratio=0.75, MAX_SCORE=11): the match ends when a side reaches MAX_SCORE."""

    game_name = "Pong"

    def __init__(self, width=64, height=48, cpu_speed_ratio=0.6, players_speed_ratio=0.4,
                 ball_speed_ratio=0.75, MAX_SCORE=11):  # noqa: N803 (PLE's name)
        super().__init__(width=width, height=height, cpu_speed_ratio=cpu_speed_ratio,
                         players_speed_ratio=players_speed_ratio, ball_speed_ratio=ball_speed_ratio,
                         max_score=MAX_SCORE)
