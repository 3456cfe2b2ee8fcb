"""Parameter sync through a folder: the learner publishes versions, the actor polls and swaps them in.

Layout of the params folder (safe to share between Windows and Linux: no locks, no symlinks, every
file written whole under a temporary name and renamed into place):

    params-000042.msgpack   one version: flax msgpack of {"meta": {...}, "params": <to_bytes payload>}
    latest.json             pointer to the newest version: {"version", "file", "step", "time", ...}
    learner.json            the learner's live step, rewritten every few seconds: {"step", "time"}

meta holds version, learner step, wall time, the model hash (identity config sections) and the
payload's sha256, so a truncated, corrupt or foreign file is detected before it can replace anything.

JAX is imported inside functions, after cli.setup_jax has chosen its platform and set XLA's flags.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
import pathlib
import re
import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np
from flax import serialization

from dreamer_live.atomic import write_atomic
from dreamer_live.config import identity

log = logging.getLogger(__name__)
POINTER = "latest.json"
HEARTBEAT = "learner.json"
FILE_RE = re.compile(r"^params-(\d{6,})\.msgpack$")
FORMAT = 1


def model_hash(config) -> str:
    """A short hash of the run's identity (`config.identity`): what the parameters mean."""

    text = json.dumps(identity(config), sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def finite(params: Any) -> bool:
    """Whether every float leaf (bfloat16 included) holds only finite values: numpy on the host, as
    JAX ops would compile a small program per leaf shape (in the actor, whose tick counts compiles,
    and on every checkpoint load)."""
    import jax

    floating = jax.numpy.floating
    return all(np.isfinite(a).all() for a in map(np.asarray, _leaves(params))
               if jax.numpy.issubdtype(a.dtype, floating))


def version_file(version: int) -> str:
    """The file name of a parameter version."""
    return f"params-{version:06d}.msgpack"


def _versions_on_disk(directory: pathlib.Path) -> dict[int, pathlib.Path]:
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return {}
    found = {}
    for name in names:
        match = FILE_RE.match(name)
        if match:
            found[int(match.group(1))] = directory / name
    return found


def _read_json(path: pathlib.Path, key: str) -> dict | None:
    """A JSON object with an integer `key`, or None if the file is missing or damaged."""
    try:
        data = json.loads(path.read_text())
        return data if isinstance(data, dict) and isinstance(data.get(key), int) else None
    except (OSError, ValueError):
        return None


def _read_pointer(directory: pathlib.Path) -> dict | None:
    return _read_json(directory / POINTER, "version")


def _is_version(path: pathlib.Path, version: int) -> bool:
    """Whether `path` is a whole parameter file of `version` (its meta says so, its checksum holds)."""
    try:
        blob = serialization.msgpack_restore(path.read_bytes())
        meta = blob["meta"]
        return int(meta["version"]) == version and \
            hashlib.sha256(blob["params"]).hexdigest() == meta.get("sha256")
    except Exception:  # missing, truncated or not ours
        return False


def _newest_valid(directory: pathlib.Path) -> int:
    """The newest version whose file is valid; 0 when there is none."""
    for version, path in sorted(_versions_on_disk(directory).items(), reverse=True):
        if _is_version(path, version):
            return version
    return 0


def _retry(fn, attempts: int = 10, pause: float = 0.05):
    """Run fn, retrying PermissionError (Windows refuses to replace a file another process has open)."""
    for i in range(attempts):
        try:
            return fn()
        except PermissionError:
            if i == attempts - 1:
                raise
            time.sleep(pause)


class Publisher:
    """Learner side: write parameter versions atomically, keep the newest `keep`."""

    def __init__(self, directory: str | os.PathLike, model_hash: str, keep: int = 3):
        self.directory = pathlib.Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.model_hash, self.keep = model_hash, max(1, keep)
        # A restarted learner continues the numbering, so clients only ever see versions increase:
        # from the newest valid file, never from latest.json alone (a pointer claiming version 10^15
        # would make it jump there and prune every real version).
        self.version = _newest_valid(self.directory)
        pointer = _read_pointer(self.directory)
        if pointer is not None and pointer["version"] != self.version:
            log.warning("params: %s names version %d, but the newest valid file is version %d; "
                        "continuing from %d", self.directory / POINTER, pointer["version"],
                        self.version, self.version)

    def publish(self, params: Any, step: int) -> int:
        """Write `params` (any flax-serializable pytree) as the next version; return its number."""
        if not finite(params):
            raise ValueError("refusing to publish parameters holding NaN or infinity")
        payload = serialization.to_bytes(params)
        version = self.version + 1
        meta = {"format": FORMAT, "version": version, "step": int(step), "time": time.time(),
                "model_hash": self.model_hash, "sha256": hashlib.sha256(payload).hexdigest()}
        name = version_file(version)
        blob = serialization.msgpack_serialize({"meta": meta, "params": payload})
        write_atomic(self.directory / name, blob)
        pointer = {k: meta[k] for k in ("version", "step", "time", "model_hash")}
        pointer["file"] = name
        _retry(lambda: write_atomic(self.directory / POINTER, json.dumps(pointer).encode()))
        self.version = version
        self._prune()
        self.announce(pointer, blob)
        return version

    def heartbeat(self, step: int) -> None:
        """Record the learner's current step, so that clients can count the updates they lag."""
        beat = {"step": int(step), "time": time.time()}
        _retry(lambda: write_atomic(self.directory / HEARTBEAT, json.dumps(beat).encode()))
        self.announce(beat)

    def announce(self, record: dict, blob: bytes | None = None) -> None:
        """Hand a new pointer and its version file's bytes, or a heartbeat, to another transport
        besides the folder (none here)."""

    def _prune(self) -> None:
        for version, path in _versions_on_disk(self.directory).items():
            if version <= self.version - self.keep:
                try:
                    path.unlink()
                except OSError:
                    pass  # open on Windows or already gone: the next publish retries


@dataclasses.dataclass(frozen=True)
class Loaded:
    """Parameters in use and where they came from (version 0: the template, nothing loaded yet)."""

    params: Any
    version: int = 0
    step: int = 0
    time: float = 0.0


class Client:
    """Actor side: poll the params folder in a background thread; `current` is an O(1) read.

    A new version is decoded, checked, moved to the device and handed to `on_update` (the actor warms
    its policy there, so any compile happens off the tick) before it becomes `current`; a version the
    hook raises on is refused like a damaged file, and the one in use stays."""

    def __init__(self, directory: str | os.PathLike, template: Any, model_hash: str,
                 interval: float = 5.0, device_put: bool = True,
                 on_update: Callable[[Any], None] | None = None):
        self.directory = pathlib.Path(directory)
        self.template, self.model_hash, self.interval = template, model_hash, interval
        self.device_put, self.on_update = device_put, on_update
        self._refused = 0  # the newest version refused by on_update (never retried)
        self.last_error = ""  # the newest problem reported (empty while all is well)
        self._current = Loaded(template)
        self._learner_seen = (0.0, 0)  # (time, step) of the learner's newest heartbeat or version
        self._records: dict[str, tuple] = {}  # (time, step) of the pointer and heartbeat last read
        self._learner_seen_at: float | None = None  # when that record last changed, on our clock
        self._reported: set[tuple[str, str]] = set()
        self._poll_lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._template_paths = _key_paths(serialization.to_state_dict(template))
        self._template_leaves = [(np.shape(x), np.dtype(x.dtype) if hasattr(x, "dtype")
                                  else np.asarray(x).dtype) for x in _leaves(template)]

    def start(self) -> Client:
        """Start polling in the background (the first poll runs at once)."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="param-client", daemon=True)
            self._thread.start()
        return self

    @property
    def current(self) -> Loaded:
        """Parameters in use together with their version, learner step and publish time."""
        return self._current

    def lag(self) -> tuple[int, float]:
        """(learner updates since the version in use, as of the last poll; seconds since it was
        published); (0, 0.0) before any version is loaded. Seconds compare two machines' clocks."""
        current = self._current
        if current.version == 0:
            return 0, 0.0
        return max(0, self._learner_seen[1] - current.step), max(0.0, time.time() - current.time)

    def learner_silence(self) -> float | None:
        """Seconds since the learner's heartbeat or pointer last changed, on this machine's clock
        (no clock skew between machines); None before the learner was ever seen."""
        seen = self._learner_seen_at
        return None if seen is None else time.monotonic() - seen

    def poll(self) -> bool:
        """Check once for a newer version and swap it in if valid; True if the params changed."""
        with self._poll_lock:
            pointer, beat = self.fetch_pointer()
            if pointer is None:
                return False
            self._see_learner(pointer, beat or {})
            if pointer["version"] <= max(self._current.version, self._refused):
                return False
            name = pointer.get("file") or version_file(pointer["version"])
            if not FILE_RE.match(str(name)):
                self._report(str(name), "pointer names an invalid file")
                return False
            data = self.fetch_version(pointer, name)
            if data is None:
                return False
            try:
                loaded = self._decode(data, name)
            except ValueError as e:
                self._report(name, str(e))
                return False
            if self.on_update is not None:
                try:
                    self.on_update(loaded.params)
                except Exception as e:
                    self._refused = loaded.version
                    self._report(name, f"refused: {e}")
                    return False
            self._current = loaded  # one reference assignment: readers see old or new, whole
            self.last_error = ""
            return True

    def fetch_pointer(self) -> tuple[dict | None, dict | None]:
        """The newest version's pointer (None: nothing published) and the learner's heartbeat."""
        pointer = _read_pointer(self.directory)
        if pointer is None:  # missing or damaged pointer: fall back to listing the folder
            on_disk = _versions_on_disk(self.directory)
            if not on_disk:
                return None, None
            newest = max(on_disk)
            pointer = {"version": newest, "file": on_disk[newest].name}
        return pointer, _read_json(self.directory / HEARTBEAT, "step")

    def fetch_version(self, pointer: dict, name: str) -> bytes | None:
        """The bytes of the version file `name` that `pointer` names; None if they cannot be had now."""
        try:
            return (self.directory / name).read_bytes()
        except FileNotFoundError:
            return None  # pruned meanwhile; the pointer will name a newer one next time
        except OSError as e:
            self._report(name, f"cannot read: {e}")
            return None

    def _see_learner(self, pointer: dict, beat: dict) -> None:
        # A pointer or heartbeat that differs from the last one read is news from the learner, whatever
        # its wall time says (a learner whose clock jumped back is alive all the same); the learner's
        # step is the newest news's, not the largest step: a learner restarted from an older checkpoint
        # counts again from there. A missing or damaged heartbeat leaves the last one seen.
        news = []
        for kind, record in (("pointer", pointer), ("beat", beat)):
            stamp, step = record.get("time"), record.get("step")
            if isinstance(step, int) and isinstance(stamp, (int, float)) \
                    and self._records.get(kind) != (stamp, step):
                self._records[kind] = (stamp, step)
                news.append((stamp, step))
        if news:
            self._learner_seen = max(news)  # both at once: the later written of the two
            self._learner_seen_at = time.monotonic()

    def _decode(self, data: bytes, name: str) -> Loaded:
        try:
            blob = serialization.msgpack_restore(data)
            meta, payload = blob["meta"], blob["params"]
            version, step, stamp = int(meta["version"]), int(meta["step"]), float(meta["time"])
        except Exception as e:  # truncated or not ours: msgpack, key and type errors
            raise ValueError(f"unreadable ({type(e).__name__}: {e})") from None
        if meta.get("model_hash") != self.model_hash:
            raise ValueError(f"model hash {meta.get('model_hash')} differs from this actor's "
                             f"{self.model_hash} (different agent/env config)")
        if hashlib.sha256(payload).hexdigest() != meta.get("sha256"):
            raise ValueError("checksum mismatch (corrupt file)")
        try:
            state = serialization.msgpack_restore(payload)
            have, want = _key_paths(state), self._template_paths
            if have != want:
                raise ValueError(f"missing {sorted(want - have)[:3]}, "
                                 f"unexpected {sorted(have - want)[:3]}")
            params = serialization.from_state_dict(self.template, state)
        except Exception as e:
            raise ValueError(f"does not match the parameter template ({e})") from None
        leaves = _leaves(params)
        if len(leaves) != len(self._template_leaves):
            raise ValueError("does not match the parameter template (leaf count)")
        for leaf, (shape, dtype) in zip(leaves, self._template_leaves):
            if np.shape(leaf) != shape or np.asarray(leaf).dtype != dtype:
                raise ValueError(f"leaf {np.shape(leaf)} {np.asarray(leaf).dtype} does not match "
                                 f"the template's {shape} {dtype}")
        if not finite(params):
            raise ValueError("holds NaN or infinity")
        if self.device_put:
            import jax

            params = jax.block_until_ready(jax.device_put(params))
        return Loaded(params, version, step, stamp)

    def _report(self, name: str, reason: str) -> None:
        self.last_error = f"{name}: {reason}"
        if (name, reason) not in self._reported:
            self._reported.add((name, reason))
            log.warning("params: keeping version %d, ignoring %s: %s",
                        self._current.version, self.directory / name, reason)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.poll()
            except Exception as e:  # never let the polling thread die; report and go on
                self._report("?", f"poll failed: {e!r}")
            self._stop.wait(self.interval)

    def close(self) -> None:
        """Stop polling."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.close()


def _leaves(tree: Any) -> list:
    import jax

    return jax.tree_util.tree_leaves(tree)


def _key_paths(state: Any, prefix: str = "") -> set[str]:
    """Slash-joined paths of every leaf of a (nested dict) state dict."""
    if isinstance(state, dict) and state:
        return set().union(*(_key_paths(v, f"{prefix}/{k}") for k, v in state.items()))
    return {prefix}
