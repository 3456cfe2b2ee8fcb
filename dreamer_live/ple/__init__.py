"""The PyGame Learning Environment's API on dreamer_live's games: `from dreamer_live.ple import PLE`.

A PLE script runs after two renames: `from ple import PLE` -> `from dreamer_live.ple import PLE` and
`from ple.games.<game> import <Game>` -> `from dreamer_live.ple.games.<game> import <Game>`. A game of
your own derives from `dreamer_live.ple.games.base.PyGameWrapper` (alias `Game`) as PLE teaches, and
then also runs as a gymnasium env and under the actor (`--env.name my_module:MyGame`).
"""

from dreamer_live.ple.ple import PLE

__all__ = ["PLE"]
