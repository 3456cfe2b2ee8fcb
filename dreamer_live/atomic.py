"""Files written whole under a temporary name, then renamed into place (never read half-written), in a
folder made when missing."""

from __future__ import annotations

import contextlib
import os
import pathlib
import uuid


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike):
    """Yield a temporary path beside `path` (its folder made if missing: one deleted during a run
    comes back at the next write); on success fsync it and rename it to `path`."""
    path = pathlib.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        yield tmp
        with open(tmp, "rb+") as f:
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


def write_atomic(path: str | os.PathLike, data: bytes) -> None:
    """Write `data` to `path` atomically."""
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)


def is_temporary(path: str | os.PathLike) -> bool:
    """True for the temporary names atomic_path uses (readers skip them)."""
    name = pathlib.Path(path).name
    return name.startswith(".") and name.endswith(".tmp")
