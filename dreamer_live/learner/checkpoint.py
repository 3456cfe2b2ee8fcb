"""Learner checkpoints: the full state pytree plus its counters, one msgpack file per save, newest K kept.

DIR/checkpoint/state_<updates, 8 digits>.msgpack holds {"state": <flax state dict>, "meta": {counters}}
behind a sha256 checksum, as parameter files do, so flipped bytes are caught instead of loaded; meta.json
is a readable copy of the newest one's meta. Each file is written whole under a temporary name and
renamed into place before the oldest beyond `keep` is deleted, so a crash at any moment leaves every
finished checkpoint. Loading takes the newest readable one; damaged newer ones (truncated, corrupt,
failing the checksum or holding NaN or infinity) are renamed to `*.damaged` (kept for inspection, never
read again) with a warning. No pickle: flax msgpack only.

JAX and flax are imported inside functions, after cli.setup_jax has chosen JAX's platform.
"""

from __future__ import annotations

import hashlib
import json
import os
import pathlib
import re
import sys
import time
from collections.abc import Callable
from typing import Any

from dreamer_live.atomic import is_temporary, write_atomic
from dreamer_live.errors import UserError

FILE = "state_{:08d}.msgpack"
FILE_RE = re.compile(r"state_(\d{8,})\.msgpack")
META_FILE = "meta.json"
FORMAT = 2  # {"format", "sha256" of payload, "payload": msgpack of {"state", "meta"}}


class _Unreadable(Exception):
    """A checkpoint file that is truncated or corrupt (the reason is the message)."""


def _warn(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


class Checkpointer:
    """Saves and restores learner states (params, optimizer, counters); keeps the newest `keep`."""

    def __init__(self, directory: str | os.PathLike, keep: int = 3):
        if int(keep) < 1:
            raise UserError(f"learner.keep_checkpoints must be >= 1, got {keep}")
        self.directory = pathlib.Path(directory)
        self.keep = int(keep)
        self.path: pathlib.Path | None = None  # the file last saved or loaded

    def kept(self) -> list[tuple[int, pathlib.Path]]:
        """(learner updates, file) of every kept checkpoint, newest first."""
        try:
            names = os.listdir(self.directory)
        except FileNotFoundError:
            return []
        found = [(int(m.group(1)), self.directory / name)
                 for name in names if (m := FILE_RE.fullmatch(name))]
        return sorted(found, reverse=True)

    def exists(self) -> bool:
        """True when a checkpoint has been written."""
        return bool(self.kept())

    def describe(self) -> str:
        """The kept update counts as one line, e.g. '300 (latest), 250, 200'."""
        steps = [str(step) for step, _ in self.kept()]
        if steps:
            steps[0] += " (latest)"
        return ", ".join(steps) or "none"

    def find(self, step: int) -> pathlib.Path:
        """The file of the checkpoint at `step` updates; a UserError naming the kept ones if none."""
        for kept_step, path in self.kept():
            if kept_step == int(step):
                return path
        raise UserError(f"no checkpoint at {step} updates in {self.directory}; kept: {self.describe()}")

    def save(self, state: Any, meta: dict | None = None) -> pathlib.Path:
        """Write `state` (any pytree of arrays) with `meta` (meta["updates"] names the file) as the
        newest checkpoint, then delete the oldest beyond `keep`."""
        import jax
        from flax import serialization

        meta = dict(meta or {}, saved_time=time.time())
        state = serialization.to_state_dict(jax.device_get(state))
        path = self.directory / FILE.format(int(meta.get("updates", 0)))
        payload = serialization.msgpack_serialize({"state": state, "meta": meta})
        write_atomic(path, serialization.msgpack_serialize(
            {"format": FORMAT, "sha256": hashlib.sha256(payload).hexdigest(), "payload": payload}))
        write_atomic(self.directory / META_FILE, (json.dumps(meta, indent=1) + "\n").encode())
        self.path = path
        self._prune()
        return path

    def load(self, template: Any, step: int | None = None,
             warn: Callable[[str], None] | None = None) -> tuple[Any, dict]:
        """Restore (state, meta) shaped like `template`: the newest readable checkpoint, or the one at
        `step` updates. Damaged newer files are set aside with a warning (`warn`, default stderr)."""
        for _ in range(5):  # a learner pruning meanwhile may delete a file: look again
            try:
                return self._load(template, step, warn or _warn)
            except FileNotFoundError:
                time.sleep(0.2)
        raise UserError(f"checkpoint files in {self.directory} kept changing while being read; "
                        "try again")

    def _load(self, template, step, warn) -> tuple[Any, dict]:
        if step is not None:
            path = self.find(step)
            try:
                state, meta = self._read(path, template)
            except _Unreadable as e:
                raise UserError(f"checkpoint {path} is unreadable ({e})") from None
            self.path = path
            return state, meta
        damaged: list[tuple[pathlib.Path, str]] = []
        for _, path in self.kept():
            try:
                state, meta = self._read(path, template)
            except _Unreadable as e:
                damaged.append((path, str(e)))
                continue
            if damaged:  # set aside, so that the next save does not leave them newer than itself
                for bad, _ in damaged:
                    os.replace(bad, bad.with_name(bad.name + ".damaged"))
                names = ", ".join(bad.name for bad, _ in damaged)
                warn(f"warning: checkpoint {names} in {self.directory} unreadable ({damaged[0][1]}); "
                     f"renamed to *.damaged; using {path.name} ({meta.get('updates')} updates)")
            self.path = path
            return state, meta
        if not damaged:
            raise UserError(f"no checkpoint in {self.directory}")
        path, reason = damaged[0]
        older = f" (and the {len(damaged) - 1} older ones)" if len(damaged) > 1 else ""
        raise UserError(f"checkpoint {path} is unreadable ({reason}){older}; move it aside to start "
                        "fresh, or use a new --logdir")

    def _read(self, path: pathlib.Path, template: Any) -> tuple[Any, dict]:
        """(state, meta) from one file; _Unreadable when damaged, UserError when it does not fit."""
        import jax
        import numpy as np
        from flax import serialization

        from dreamer_live.transport import sync

        data = path.read_bytes()  # FileNotFoundError: pruned meanwhile, load() looks again
        try:
            blob = serialization.msgpack_restore(data)
            if "payload" in blob:  # format 2; format 1 files (no checksum) held state and meta
                if hashlib.sha256(blob["payload"]).hexdigest() != blob.get("sha256"):
                    raise _Unreadable("checksum mismatch")
                blob = serialization.msgpack_restore(blob["payload"])
            state = serialization.from_state_dict(template, blob["state"])
            meta = dict(blob.get("meta", {}))
        except _Unreadable:
            raise
        except Exception as e:
            raise _Unreadable(str(e).splitlines()[0][:120] if str(e) else type(e).__name__) from None
        if not sync.finite(state):
            raise _Unreadable("holds NaN or infinity")
        mismatch = _shape_mismatch(template, state)
        if mismatch:
            raise UserError(f"checkpoint {path} does not fit this agent ({mismatch}); move it "
                            "aside to start fresh, or use a new --logdir")
        # Each leaf where the template's is (a learner's mesh): placed on the default device
        # instead, the restored state's types differ from the train step's outputs', and the
        # learner traced and compiled its train step twice.
        state = jax.tree_util.tree_map(
            lambda t, x: jax.device_put(np.asarray(x, dtype=getattr(t, "dtype", None)),
                                        getattr(t, "sharding", None)),
            template, state)
        return state, meta

    def _prune(self) -> None:
        """Delete checkpoints beyond the newest `keep`, and temporary files a killed save left
        (one learner writes a checkpoint folder)."""
        for name in os.listdir(self.directory):
            if is_temporary(name):
                (self.directory / name).unlink(missing_ok=True)
        for _, path in self.kept()[self.keep:]:
            path.unlink(missing_ok=True)


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


# --- choosing a run's checkpoint (viz, eval) -------------------------------------------------------
def load_state(logdir: pathlib.Path, agent, which: str | int | None = "latest"):
    """The learner state from DIR/checkpoint as (state, meta): the newest, or the one at `which`
    updates; a clear UserError when there is none."""
    checkpointer = check_checkpoint(logdir, which)
    return checkpointer.load(agent.state_shapes(), step=checkpoint_step(which))


def checkpoint_step(which: str | int | None) -> int | None:
    """--checkpoint's value as a learner update count; None for 'latest'."""
    if which is None or str(which) == "latest":
        return None
    if not str(which).isdigit():
        raise UserError(f"--checkpoint must be 'latest' or a learner update count, got {which!r}")
    return int(which)


def check_checkpoint(logdir: pathlib.Path, which: str | int | None = "latest") -> Checkpointer:
    """Fail early (before any JAX set-up) when the logdir has no checkpoint, or none at `which`."""
    step = checkpoint_step(which)
    checkpointer = Checkpointer(logdir / "checkpoint")
    if not checkpointer.exists():
        raise UserError(f"no checkpoint yet in {checkpointer.directory} (the learner writes one every "
                        "run.checkpoint_every minutes and when it stops)")
    if step is not None:
        checkpointer.find(step)
    return checkpointer
