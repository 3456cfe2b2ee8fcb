"""Gymnasium ids as users write them: import the package that registers an id's namespace first.

gymnasium 1.x knows `ALE/Pong-v5` only after `import ale_py`; `gymnasium.make("ALE/Pong-v5")` alone
fails with "Namespace ALE not found". `import_namespace` imports the module a known namespace needs (the
table below) before `gymnasium.make`, and says in one line which package to install when it is missing.
`module:id` (e.g. `ale_py:ALE/Pong-v5`) keeps working: gymnasium imports the module itself.
"""

from __future__ import annotations

import importlib

import gymnasium

from dreamer_live.errors import UserError

# id namespace -> (module that registers it on import, what to pip install)
NAMESPACES: dict[str, tuple[str, str]] = {
    "ALE": ("ale_py", "ale-py"),
    "dm_control": ("shimmy", "shimmy[dm-control]"),
    "Meta-World": ("metaworld", "metaworld"),
}


def import_namespace(env_id: str) -> None:
    """Import the module that registers `env_id`'s namespace, if it is a known one not registered yet."""
    if ":" in env_id or "/" not in env_id:
        return
    namespace = env_id.split("/", 1)[0]
    if namespace not in NAMESPACES or any(spec.namespace == namespace
                                          for spec in gymnasium.registry.values()):
        return
    module, package = NAMESPACES[namespace]
    try:
        importlib.import_module(module)
    except ModuleNotFoundError as e:
        if e.name and module.startswith(e.name.split(".")[0]):
            raise UserError(f"{env_id}: the {namespace} envs come with the {package} package; install it "
                            f"(python -m pip install \"{package}\")") from None
        raise
