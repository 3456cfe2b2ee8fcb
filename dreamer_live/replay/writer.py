"""Replay writer (actor side): steps gather into chunks that a background thread writes to disk.

`add()` only copies the step into a preallocated chunk buffer; a full chunk (chunk_steps), an old one
(chunk_seconds since its first step, checked on add and by the background thread), or an episode's end
(is_last) hands the buffer to the thread, which writes it under a temporary name and renames it. A
SIGKILL therefore loses at most the steps not yet handed over (bounded by chunk_seconds, or twice that
if the actor stalls between adds) plus chunks still queued, and never leaves a partial file under a
chunk name.

A chunk the disk refuses (full, or a share that went away) is held in memory and written again every
RETRY_S, oldest first, together with every later chunk; `held()` says so for the actor's status line.
Only when the oldest has waited `hold_s` does add() raise, and close() makes one last try; what it
could not write is raised as one line: the steps lost and written, and how long the disk refused them.

A folder deleted during a run (or gone with its logdir, renamed or moved) is made again by the next
chunk write, with the files it held beside the chunks when the Writer started (spaces.json: the actor
saves it before making its sink), said in one line with the steps the old folder took with it; every
chunk not yet written when it went is kept. A folder that is there but another than the one written so
far (the logdir moved back over a new one, a copy put in its place) is said the same way.
"""

from __future__ import annotations

import collections
import logging
import os
import pathlib
import queue
import secrets
import threading
import time

import numpy as np

from dreamer_live import spaces as spaceslib
from dreamer_live.atomic import is_temporary, write_atomic
from dreamer_live.errors import UserError
from dreamer_live.replay.chunk import ALLOWED_KINDS, WRITER_ID_RE, ChunkName, timestamp, write_chunk

log = logging.getLogger("dreamer_live.replay")
STALL_S = 5.0  # a chunk write blocked this long: the disk or share stalls (said in the status line)
STALE_TEMP_S = 3600.0  # temporary chunk files older than this are leftovers of a killed writer
RETRY_S = 1.0  # chunks held after a failed write are tried again this often
BESIDE = (spaceslib.FILE,)  # files a replay folder holds beside its chunks (the learner needs them)
_STOP = object()


class Writer:
    """Append steps to an on-disk replay folder in chunk files; add() never waits on disk."""

    def __init__(self, directory: str | os.PathLike, writer_id: int | str = 0,
                 chunk_steps: int = 1024, chunk_seconds: float = 10.0, hold_s: float = 120.0):
        if not WRITER_ID_RE.match(str(writer_id)):
            raise UserError(f"replay writer id {writer_id!r} must be 1-32 letters, digits or _")
        if chunk_steps < 1 or chunk_seconds <= 0:
            raise UserError(f"replay chunks need chunk_steps >= 1 and chunk_seconds > 0, "
                            f"got {chunk_steps} and {chunk_seconds}")
        self.directory = pathlib.Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        # A new stream per Writer instance: a restarted actor never continues an old stream.
        self.stream = f"{writer_id}_{secrets.token_hex(3)}"
        self.chunk_steps = chunk_steps
        self.chunk_seconds = chunk_seconds
        self.hold_s = hold_s
        self.chunks_written = 0
        self.steps_written = 0  # in the chunks written
        self._held: collections.deque = collections.deque()  # (name, arrays) the disk refused
        self._held_steps = 0
        self._held_since: float | None = None  # monotonic time of the oldest held chunk's failure
        self._write_began: float | None = None  # monotonic time the chunk write under way began
        self._waiting_steps = 0  # steps handed to the background thread, not yet on disk
        self._problem = ""  # why the disk refuses them
        self._gave_up = False  # held longer than hold_s, or closed while held
        self._refused_s = 0.0  # how long the disk had refused the oldest held chunk when given up
        self._spec: dict[str, tuple[tuple[int, ...], np.dtype]] | None = None
        self._buffer: dict[str, np.ndarray] | None = None
        self._count = 0
        self._started_wall = 0.0
        # A chunk's name is labelled with the wall time at this writer's start plus the monotonic time
        # since: a wall clock that jumps (NTP, a resumed VM) cannot reorder its chunks.
        self._wall0, self._mono0 = time.time(), time.monotonic()
        self._deadline = float("inf")
        self._seq = 0
        self._lock = threading.Lock()  # guards the buffer between add() and the time-based flush
        self._queue: queue.Queue = queue.Queue()
        self._error: BaseException | None = None
        self._closed = False
        self._beside = _read_beside(self.directory)  # written again if the folder loses them
        self._said_gone = False
        self._identity = folder_identity(self.directory)  # the folder the chunks so far went to
        _remove_stale_temporaries(self.directory)
        self._thread = threading.Thread(target=self._run, name=f"replay-writer-{self.stream}",
                                        daemon=True)
        self._thread.start()

    @classmethod
    def from_config(cls, config, directory: str | os.PathLike, writer_id: int | str | None = None):
        """A writer with the replay section's chunking; the id defaults to actor.id."""
        return cls(directory, config.actor.id if writer_id is None else writer_id,
                   config.replay.chunk_steps, config.replay.chunk_seconds, config.replay.hold_s)

    def add(self, step: dict[str, np.ndarray]) -> None:
        """Copy one step (same keys and shapes every time) into the current chunk; never blocks on disk."""
        self._check()
        if self._closed:
            raise ValueError("replay writer is closed")
        with self._lock:
            if self._spec is None:
                spec = {k: (np.shape(v), np.asarray(v).dtype) for k, v in step.items()}
                odd = [k for k, (_, dtype) in spec.items() if dtype.kind not in ALLOWED_KINDS]
                if odd:
                    raise ValueError(f"step values {odd} are not numeric or bool arrays")
                self._spec = spec
            if self._buffer is None:
                self._buffer = {k: np.empty((self.chunk_steps, *shape), dtype)
                                for k, (shape, dtype) in self._spec.items()}
                self._started_wall = self._wall0 + time.monotonic() - self._mono0
                self._deadline = time.monotonic() + self.chunk_seconds
            if len(step) != len(self._spec):
                raise ValueError(f"step keys {sorted(step)} differ from the first step's "
                                 f"{sorted(self._spec)}")
            index = self._count
            for key, value in step.items():
                if key not in self._spec:
                    raise ValueError(f"step key '{key}' was not in the first step")
                if np.shape(value) != self._spec[key][0]:
                    raise ValueError(f"step '{key}' has shape {np.shape(value)}, "
                                     f"the first step had {self._spec[key][0]}")
                self._buffer[key][index] = value
            self._count += 1
            if (self._count >= self.chunk_steps or bool(step.get("is_last", False))
                    or time.monotonic() >= self._deadline):
                self._hand_over()

    def held(self) -> str:
        """'' while every chunk reaches the disk; else how many steps wait in memory, for how long
        and why (one line for a status line)."""
        began, since, steps = self._write_began, self._held_since, self._held_steps
        if began is not None and time.monotonic() - began >= STALL_S:
            return (f"replay: a chunk write has blocked for {time.monotonic() - began:.0f} s (the disk "
                    f"or share stalls); {self._waiting_steps} steps wait in memory, play goes on")
        if since is None or not steps:
            return ""
        return (f"replay: {steps} steps held in memory for {time.monotonic() - since:.0f} s, cannot "
                f"write them ({self._problem}); retrying, stopping after {self.hold_s:.0f} s")

    def metrics(self) -> dict:
        """Counts for the actor's metric lines: chunks written so far."""
        return {"replay/chunks_written": self.chunks_written}

    def flush(self, wait: bool = False) -> None:
        """Hand the partial chunk to the background thread; with wait, return once all is on disk
        (or held in memory: see held())."""
        self._check()
        with self._lock:
            self._hand_over()
        if wait:
            self._queue.join()
            self._check()

    def close(self) -> None:
        """Flush the partial chunk, wait until every chunk is on disk, stop the thread."""
        if self._closed:
            return
        self._closed = True
        with self._lock:
            self._hand_over()
        self._queue.put(_STOP)
        self._thread.join()
        self._check()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _hand_over(self) -> None:
        """Queue the current chunk (caller holds the lock)."""
        if not self._count:
            return
        arrays = {k: v[:self._count] for k, v in self._buffer.items()}
        name = ChunkName(timestamp(self._started_wall), self.stream, self._seq, self._count)
        self._queue.put((str(name), arrays))
        self._waiting_steps += self._count
        self._seq += 1
        self._buffer, self._count, self._deadline = None, 0, float("inf")

    def _check(self) -> None:
        if self._error is not None:
            raise UserError(f"replay writer cannot write to {self.directory}: {self._error}")
        if self._gave_up:
            raise UserError(self._gave_up_line())

    def _gave_up_line(self) -> str:
        """Why the held chunks were given up: how long the disk refused them (hold_s reached, or a
        close before) and, once closed, the steps lost and those written."""
        why = "replay.hold_s" if self._refused_s >= self.hold_s else "then stopped, before replay.hold_s"
        line = (f"replay: could not write to {self.directory} for {self._refused_s:.0f} s ({why}): "
                f"{self._problem}")
        if self._closed:
            line += (f"; {self._held_steps} steps held in memory are lost, {self.steps_written} "
                     "steps were written")
        return line

    def _run(self) -> None:
        while True:
            # wake by the current chunk's deadline; a chunk started meanwhile is seen within
            # min(chunk_seconds, 1 s), so a stalled actor's steps reach disk within 2 x chunk_seconds
            timeout = min(self._deadline - time.monotonic(), self.chunk_seconds, 1.0, RETRY_S)
            try:
                item = self._queue.get(timeout=max(0.0, timeout))
            except queue.Empty:
                if time.monotonic() >= self._deadline:
                    with self._lock:
                        if time.monotonic() >= self._deadline:
                            self._hand_over()
                self._write_held(last=False)
                continue
            try:
                if item is _STOP:
                    self._write_held(last=True)
                    return
                self._held.append(item)
                self._held_steps += len(next(iter(item[1].values())))
                self._write_held(last=False)
            finally:
                self._queue.task_done()

    def _write_held(self, last: bool) -> None:
        """Write the held chunks oldest first; keep them on an OSError until hold_s has passed (or,
        with `last`, give up at once)."""
        while self._held and self._error is None:
            name, arrays = self._held[0]
            self._write_began = time.monotonic()
            try:
                self._restore_folder()
                write_chunk(self.directory / name, arrays)
            except OSError as e:  # disk full, share gone, permissions: hold and retry
                now = time.monotonic()
                if self._held_since is None:
                    self._held_since = now
                self._problem = f"{type(e).__name__}: {e.strerror or e}"
                if last or now - self._held_since >= self.hold_s:
                    self._gave_up, self._refused_s = True, now - self._held_since
                return
            except Exception as e:  # not the disk: reported on the next add/flush/close
                log.error("replay writer failed to write %s: %s", name, e)
                self._error = e
                return
            finally:
                self._write_began = None
            self._held.popleft()
            steps = len(next(iter(arrays.values())))
            self._held_steps -= steps
            self._waiting_steps -= steps
            self.steps_written += steps
            self.chunks_written += 1
            self._said_gone = False
            self._identity = folder_identity(self.directory)
        if not self._held:
            self._held_since, self._problem, self._gave_up = None, "", False

    def _restore_folder(self) -> None:
        """Write the files beside the chunks again where they are gone (write_atomic makes the folder
        of a deleted replay, and so does the chunk write after); say when the folder was gone or is
        another one than the chunks so far went to."""
        here = folder_identity(self.directory)
        if here != self._identity and not self._said_gone:
            self._said_gone = True  # once until a chunk is written (a share gone: retried each second)
            before = (f"the {self.steps_written} steps written before are in the old folder, wherever "
                      "it went" if self.steps_written else "no steps were written before")
            if here is None:
                log.warning("replay: %s was gone (deleted, or its logdir renamed or moved); %s; making "
                            "it again%s, writing on from chunk %s", self.directory, before,
                            f" with {', '.join(self._beside)}" if self._beside else "", self._held[0][0])
            else:
                log.warning("replay: %s is another folder than the one written so far (moved or "
                            "replaced); %s; writing on in it from chunk %s", self.directory, before,
                            self._held[0][0])
        for name, data in self._beside.items():
            if not (self.directory / name).exists():
                write_atomic(self.directory / name, data)


def folder_identity(directory: pathlib.Path) -> tuple[int, int] | None:
    """(device, inode) of a folder, None where it is gone: tells a folder from one made in its place."""
    try:
        st = os.stat(directory)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def _read_beside(directory: pathlib.Path) -> dict[str, bytes]:
    """The BESIDE files in `directory` now, by name (those missing left out)."""
    found = {}
    for name in BESIDE:
        try:
            found[name] = (directory / name).read_bytes()
        except OSError:
            pass
    return found


def _remove_stale_temporaries(directory: pathlib.Path) -> None:
    """Delete temporary chunk files a killed writer left behind (old enough to be nobody's)."""
    now = time.time()
    for path in directory.iterdir():
        if not (is_temporary(path) and ".npz." in path.name):
            continue
        try:
            if now - path.stat().st_mtime > STALE_TEMP_S:
                path.unlink()
        except OSError:
            pass  # another writer removed it, or it is in use on a shared folder
