"""PLE's RaycastMaze: the built-in RaycastMaze behind PLE's interface."""

from __future__ import annotations

from dreamer_live.ple.games.builtin import BuiltinGame, fixed_size


class RaycastMaze(BuiltinGame):
    """PLE's RaycastMaze(init_pos=(1, 1), resolution=1, move_speed=20, turn_speed=13, map_size=10,
    height=48, width=48, init_pos_distance_to_target=None); the start is always cell (1, 1)."""

    game_name = "RaycastMaze"

    def __init__(self, init_pos=(1, 1), resolution=1, move_speed=20, turn_speed=13, map_size=10,
                 height=48, width=48, init_pos_distance_to_target=None):
        fixed_size("RaycastMaze", tuple(init_pos), (1, 1), what="init_pos")
        super().__init__(width=width, height=height, map_size=map_size, move_speed=move_speed,
                         turn_speed=turn_speed, resolution=resolution,
                         init_pos_distance_to_target=init_pos_distance_to_target)
