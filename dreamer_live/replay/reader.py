"""Replay reader (learner side): picks up new chunk files, holds the newest steps, samples sequences.

refresh() lists the folder once and loads only names it has not seen (a set lookup per file, so a
folder of thousands of chunks costs one directory listing). Chunks are dropped oldest-first (in the
order they were loaded) to stay within `capacity` steps. A prefetch thread keeps up to `prefetch`
batches of the default shape ready, so sample() returns at once while data is there.

The reader never modifies the folder except to move a bad chunk into `corrupt/` beside the chunks:
not a regular file, truncated, corrupt, declaring more steps than its name or capacity or a size beyond
deflate's ratio, holding NaN or infinity, or with other keys, shapes or dtypes than expected. Expected
is a given spec, else what the actor's spaces.json in the folder says, else (a replay without one) the
majority of the first load. With readonly=True it moves nothing and only reports. Every bad chunk is
logged once with its name and reason (logger "dreamer_live.replay").

Chunks held in memory whose files are gone (the folder deleted or pruned during a run) stay in memory,
said once in one line; steps_written() counts every chunk file the folder has held up to the last
refresh(), so the train ratio never falls when the folder shrinks.
"""

from __future__ import annotations

import collections
import logging
import os
import pathlib
import queue
import threading
import time

import numpy as np

from dreamer_live import spaces as spaceslib
from dreamer_live.errors import UserError
from dreamer_live.replay.chunk import (
    ChunkError,
    ChunkName,
    Spec,
    list_chunks,
    load_chunk,
    read_regular,
    spec_mismatch,
    written_order,
)
from dreamer_live.replay.stored import StoredChunk, Table

log = logging.getLogger("dreamer_live.replay")
PROGRESS_S = 5.0  # a load of new chunks that takes longer says how far it got this often
CORRUPT_DIR = "corrupt"


class Reader:
    """The newest `capacity` steps of a replay folder, sampled as [batch, length] sequences."""

    def __init__(self, directory: str | os.PathLike, capacity: int = 1_000_000, seed: int = 0,
                 recency: float = 0.0, prefetch: int = 4, batch: int = 16, length: int = 64, *,
                 recency_window: int = 10_000, readonly: bool = False, spec: Spec | None = None,
                 step_ids: bool = False):
        self.directory = pathlib.Path(directory)
        if self.directory.exists() and not self.directory.is_dir():
            raise UserError(f"replay folder {self.directory} is a file, not a folder")
        if readonly and not self.directory.is_dir():
            raise UserError(f"replay folder not found: {self.directory}")
        if capacity < 1 or batch < 1 or length < 1 or not 0.0 <= recency <= 1.0:
            raise UserError(f"replay reader needs capacity, batch, length >= 1 and recency in "
                            f"[0, 1], got {capacity}, {batch}, {length}, {recency}")
        self.capacity, self.seed, self.recency = int(capacity), seed, float(recency)
        self.recency_window, self.readonly = int(recency_window), readonly
        self.batch, self.length = int(batch), int(length)
        self.step_ids = step_ids  # batches carry steps.STEP_ID (replay context)
        self.corrupt: list[str] = []  # names of bad chunks found (moved aside unless readonly)
        # expected keys -> (per-step shape, dtype); unless given, the majority of the first load's
        self._spec = None if spec is None else {
            k: (tuple(shape), np.dtype(dtype)) for k, (shape, dtype) in spec.items()}
        self._known: set[str] = set()  # every name handled: loaded, skipped, dropped or bad
        self._parsed: dict[str, ChunkName] = {}  # every chunk name listed: its fields (list_chunks)
        self._unreadable: set[str] = set()  # names whose read failed with an OSError (retried)
        self._counted: dict[str, int] = {}  # every chunk file seen in the folder: its steps
        self._written = 0  # their sum (gone ones included)
        self._missing: set[str] = set()  # held chunks whose files are gone (said once)
        self._stored: collections.deque[StoredChunk] = collections.deque()  # arrival order
        self._arrived = 0  # steps loaded so far (positions for the recency mix)
        self._held = 0  # steps in _stored
        self._table = Table([], 0)
        self._refresh_lock = threading.Lock()
        self._rng = np.random.default_rng([seed, 0])
        self._queue: queue.Queue = queue.Queue(maxsize=max(1, prefetch))
        self._changed = threading.Event()
        self._stop = threading.Event()
        self._error: BaseException | None = None
        self.refresh()
        self._thread = None
        if prefetch > 0:
            self._thread = threading.Thread(target=self._prefetch, name="replay-prefetch",
                                            daemon=True)
            self._thread.start()

    @classmethod
    def from_config(cls, config, directory: str | os.PathLike, readonly: bool = False,
                    batch: int | None = None):
        """A reader with the replay section's capacity, recency and prefetch and the run's batch shape
        (`batch` sequences when given): batch_length steps after agent.replay_context steps of
        context, with step ids when there is context."""
        r, context = config.replay, config.agent.replay_context
        return cls(directory, r.capacity, config.seed, r.recency, r.prefetch,
                   batch or config.batch_size, config.batch_length + context,
                   recency_window=r.recency_window, readonly=readonly, step_ids=context > 0)

    # ---- index -------------------------------------------------------------------------------

    def refresh(self) -> int:
        """Load chunk files that appeared since the last call; return the number of new steps."""
        with self._refresh_lock:
            self._spec_from_spaces()
            present = list_chunks(self.directory, parsed=self._parsed)
            self._count(present)
            self._notice_gone(present)
            new = written_order({name: f for name, f in present.items() if name not in self._known})
            if not new:
                return 0
            # Newest first, only as many as fit in capacity (older ones would be dropped at once);
            # a chunk that turns out bad takes no room, so it cannot crowd out the good ones.
            loaded, total, full, last_report = [], 0, False, time.monotonic()
            for i, (fields, name) in enumerate(reversed(new)):
                if not 0 < fields.length <= self.capacity:
                    self._known.add(name)
                    self._reject(self.directory / name, f"declares {fields.length} steps; "
                                 f"replay.capacity is {self.capacity}")
                    continue
                full = full or (bool(loaded) and total + fields.length > self.capacity)
                if full:
                    self._known.add(name)
                    continue
                arrays = self._load(name, fields)
                if arrays is not None:  # compressed at once: the raw arrays of one chunk at a time
                    loaded.append(StoredChunk(fields, arrays, arrival=0))
                    total += fields.length
                del arrays
                if time.monotonic() - last_report > PROGRESS_S:
                    log.info("replay: loaded %d/%d chunks from %s", i + 1, len(new),
                             self.directory)
                    last_report = time.monotonic()
            for chunk in reversed(loaded):  # arrival order: oldest first
                chunk.arrival = self._arrived
                self._stored.append(chunk)
                self._arrived += chunk.length
                self._held += chunk.length
            added = total
            if self._spec is None and self._stored:
                added -= self._settle_spec()
            while self._held > self.capacity and len(self._stored) > 1:
                self._held -= self._stored.popleft().length
            if added or len(self._stored) != len(self._table.chunks):
                self._table = Table(list(self._stored), self._arrived)
                self._changed.set()
            return added

    def _notice_gone(self, present: dict) -> None:
        """Say in one line when chunks held in memory are gone from the folder (they stay in memory)."""
        gone = [c for c in self._stored if c.name not in present and c.name not in self._missing]
        if not gone:
            return
        self._missing.update(c.name for c in gone)
        how = "shrank" if self.directory.is_dir() else "is gone"
        log.warning("replay: %s %s: %d chunks (%d steps) loaded from it are no longer on disk; "
                    "training goes on with the %d steps held in memory and new chunks",
                    self.directory, how, len(gone), sum(c.length for c in gone), self._held)

    def _spec_from_spaces(self) -> None:
        """Take the expected keys, shapes and dtypes from the actor's spaces.json once it is there."""
        if self._spec is not None or self._stored:
            return
        found = spaceslib.load(self.directory)
        if found is not None:
            self._spec = spaceslib.replay_spec(*found)

    def _load(self, name: str, fields: ChunkName) -> dict[str, np.ndarray] | None:
        path = self.directory / name
        try:
            data = read_regular(path)
        except FileNotFoundError:
            self._known.add(name)  # moved away meanwhile (another reader found it bad)
            return None
        except ChunkError as e:
            self._known.add(name)
            self._reject(path, str(e))
            return None
        except OSError as e:  # in use or a network hiccup: not the file's fault, retry next time
            if name not in self._unreadable:
                log.warning("replay: cannot read %s yet (%s); will retry", path, e)
                self._unreadable.add(name)
            return None
        self._known.add(name)
        try:
            return load_chunk(data, fields.length, self._spec)
        except ChunkError as e:
            self._reject(path, str(e))
            return None

    def _settle_spec(self) -> int:
        """Fix the expected keys/shapes/dtypes to those of most steps loaded so far (so one odd file
        cannot condemn a whole replay); reject the other chunks. Returns the steps rejected."""
        votes: collections.Counter = collections.Counter()
        for chunk in self._stored:
            votes[_spec_key(chunk.spec)] += chunk.length
        best = max(votes, key=votes.get)
        self._spec = next(c.spec for c in self._stored if _spec_key(c.spec) == best)
        rejected = 0
        for chunk in [c for c in self._stored if _spec_key(c.spec) != best]:
            self._stored.remove(chunk)
            self._held -= chunk.length
            rejected += chunk.length
            self._reject(self.directory / chunk.name, spec_mismatch(chunk.spec, self._spec))
        return rejected

    def _reject(self, path: pathlib.Path, reason: str) -> None:
        self.corrupt.append(path.name)
        self._written -= self._counted.pop(path.name, 0)  # a bad chunk's steps are not counted
        if self.readonly:
            log.warning("replay: skipped bad chunk %s (%s); read-only, left in place", path, reason)
            return
        dest = path.parent / CORRUPT_DIR / path.name
        try:
            dest.parent.mkdir(exist_ok=True)
            os.replace(path, dest)
            log.warning("replay: moved bad chunk %s to %s/ (%s)", path, dest.parent, reason)
        except FileNotFoundError:
            log.warning("replay: skipped bad chunk %s (%s); already moved", path, reason)
        except OSError as e:
            log.warning("replay: skipped bad chunk %s (%s); could not move it: %s", path, reason, e)

    def steps_written(self) -> int:
        """Env steps in the chunk files the folder has held in all, as of the last refresh() (from
        their names; bad ones moved aside left out, deleted ones kept): what the actors have written,
        beyond what capacity holds in memory. Lists nothing itself: one scan of the folder a refresh."""
        return self._written

    def _count(self, listed: dict[str, ChunkName]) -> None:
        for name, fields in listed.items():
            if name not in self._counted:
                self._counted[name] = fields.length
                self._written += fields.length

    # ---- sampling ----------------------------------------------------------------------------

    def ready(self, length: int | None = None) -> bool:
        """True once at least one sequence of `length` steps (default: the reader's) can be drawn."""
        return self._table.can_sample(length or self.length)

    def sample(self, batch: int | None = None, length: int | None = None) -> dict[str, np.ndarray]:
        """A dict of [batch, length, ...] arrays; the default shape comes from the prefetch queue.

        Raises ValueError while the replay holds no sequence of `length` steps (check ready()).
        """
        batch, length = batch or self.batch, length or self.length
        if self._thread is None or (batch, length) != (self.batch, self.length):
            table = self._table
            self._require(table, length)
            return table.sample(self._rng, batch, length, self.recency, self.recency_window,
                                self.step_ids)
        while True:
            try:
                return self._queue.get(timeout=0.05)
            except queue.Empty:
                if self._error is not None:
                    raise RuntimeError(f"replay prefetch thread failed: {self._error}")
                self._require(self._table, length)

    def _require(self, table: Table, length: int) -> None:
        if not table.can_sample(length):
            raise ValueError(f"replay {self.directory} holds no sequence of {length} steps yet "
                             f"({table.num_steps} steps); call refresh() and check ready()")

    def _prefetch(self) -> None:
        rng = np.random.default_rng([self.seed, 1])
        try:
            while not self._stop.is_set():
                table = self._table
                if not table.can_sample(self.length):
                    self._changed.wait(0.5)
                    self._changed.clear()
                    continue
                batch = table.sample(rng, self.batch, self.length, self.recency,
                                     self.recency_window, self.step_ids)
                while not self._stop.is_set():
                    try:
                        self._queue.put(batch, timeout=0.5)
                        break
                    except queue.Full:
                        continue
        except BaseException as e:  # reported by sample()
            log.error("replay prefetch thread failed: %r", e)
            self._error = e

    # ---- inspection --------------------------------------------------------------------------

    @property
    def num_steps(self) -> int:
        """Steps held in memory."""
        return self._table.num_steps

    @property
    def nbytes(self) -> int:
        """Bytes of step data held in memory (compressed images plus raw small arrays)."""
        return sum(c.nbytes for c in self._table.chunks)

    @property
    def streams(self) -> list[str]:
        """Writer streams with data held ("<writer id>_<suffix>", one per Writer instance)."""
        return sorted({c.stream for c in self._table.chunks})

    def read_stream(self, key: str) -> dict[str, np.ndarray]:
        """Every held value of `key` per stream, in sequence order (for inspection and tests)."""
        parts: dict[str, list[np.ndarray]] = {}
        for chunk in self._table.chunks:
            parts.setdefault(chunk.stream, []).append(chunk.read(key))
        return {stream: np.concatenate(arrays) for stream, arrays in parts.items()}

    def read_runs(self, keys) -> list[dict[str, np.ndarray]]:
        """Every held step of `keys`, one dict per run (a stream's chunks with consecutive sequence
        numbers: the stretches a sampled sequence may cross), in stream and sequence order."""
        table = self._table
        bounds = [*np.flatnonzero(table.starts_run).tolist(), len(table.chunks)]
        return [{k: np.concatenate([c.read(k) for c in table.chunks[a:b]]) for k in keys}
                for a, b in zip(bounds, bounds[1:])]

    def close(self) -> None:
        """Stop the prefetch thread."""
        self._stop.set()
        self._changed.set()
        if self._thread is not None:
            self._thread.join()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _spec_key(spec: Spec) -> tuple:
    return tuple(sorted((key, shape, dtype.str) for key, (shape, dtype) in spec.items()))
