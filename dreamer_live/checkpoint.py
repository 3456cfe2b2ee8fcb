"""Learner checkpoints: the full state pytree plus step counters in one msgpack file, written atomically.

DIR/checkpoint/state.msgpack holds {"state": <flax state dict>, "meta": {counters}}; it is replaced whole
(temporary name, then rename), so a crash mid-save leaves the previous checkpoint intact. A readable
summary goes to DIR/checkpoint/meta.json. No pickle: flax's msgpack serialization only.
"""

from __future__ import annotations

import json
import os
import pathlib
import time
from typing import Any

from dreamer_live.atomic import write_atomic
from dreamer_live.errors import UserError

STATE_FILE = "state.msgpack"
META_FILE = "meta.json"


class Checkpointer:
    """Saves and restores one learner state (params, optimizer, counters) in a folder."""

    def __init__(self, directory: str | os.PathLike):
        self.directory = pathlib.Path(directory)
        self.path = self.directory / STATE_FILE

    def exists(self) -> bool:
        """True when a checkpoint has been written."""
        return self.path.exists()

    def save(self, state: Any, meta: dict | None = None) -> pathlib.Path:
        """Write `state` (any pytree of arrays) and `meta` (plain numbers/strings) atomically."""
        import jax
        from flax import serialization

        meta = dict(meta or {}, saved_time=time.time())
        state = jax.device_get(state)
        data = serialization.msgpack_serialize(
            {"state": serialization.to_state_dict(state), "meta": meta})
        self.directory.mkdir(parents=True, exist_ok=True)
        write_atomic(self.path, data)
        write_atomic(self.directory / META_FILE, (json.dumps(meta, indent=1) + "\n").encode())
        return self.path

    def load(self, template: Any) -> tuple[Any, dict]:
        """Restore (state, meta) shaped like `template`; an unreadable file is a UserError."""
        import jax
        import numpy as np
        from flax import serialization

        try:
            data = serialization.msgpack_restore(self.path.read_bytes())
            state = serialization.from_state_dict(template, data["state"])
            meta = dict(data.get("meta", {}))
        except FileNotFoundError:
            raise UserError(f"no checkpoint at {self.path}") from None
        except Exception as e:
            reason = str(e).splitlines()[0][:120] if str(e) else type(e).__name__
            raise UserError(f"checkpoint {self.path} is unreadable ({reason}); move it aside to "
                            "start fresh, or use a new --logdir") from None
        mismatch = _shape_mismatch(template, state)
        if mismatch:
            raise UserError(f"checkpoint {self.path} does not fit this agent ({mismatch}); move it "
                            "aside to start fresh, or use a new --logdir")
        state = jax.tree_util.tree_map(
            lambda t, x: jax.numpy.asarray(np.asarray(x), dtype=getattr(t, "dtype", None)),
            template, state)
        return state, meta


def _shape_mismatch(template: Any, state: Any) -> str:
    """A description of the first leaf whose shape differs, or ''."""
    import jax

    paths = jax.tree_util.tree_flatten_with_path(template)[0]
    leaves = jax.tree_util.tree_leaves(state)
    if len(paths) != len(leaves):
        return f"{len(leaves)} arrays, expected {len(paths)}"
    for (path, want), got in zip(paths, leaves):
        if tuple(getattr(want, "shape", ())) != tuple(getattr(got, "shape", ())):
            name = jax.tree_util.keystr(path)
            return f"{name} has shape {tuple(got.shape)}, expected {tuple(want.shape)}"
    return ""
