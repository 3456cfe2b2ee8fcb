"""Ray ends of the transport seams (the `ray` extra): chunks and parameter versions through Ray's object
store, for the processes the Ray launcher starts (dreamer_live/launch/rayrun.py; transport.use_ray).

Actor side. The replay sink is the ordinary Writer, writing into an outbox folder on the actor's own
disk; a shipper thread sends each finished chunk file's bytes to the Hub, at most ray.inflight at a
time, and deletes the file once the Hub has persisted it. The tick never waits on Ray: while the
learner side is unreachable the chunks wait in the outbox (a Hub started anew under the same name is
found again), and a restarted actor (same id, same outbox) ships what the killed one left. The
variable source is sync.Client reading the Hub's pointer and the version's bytes from the object store
instead of a folder (the same checks and on_update hook).

The shipper also hands the Hub what the actor wrote beside its replay for the learner: its
spaces.json (the first actor's is kept, so a learner whose actors are all on other machines builds its
agent), and, when the actor's logdir is not the Hub's own folder, its metric lines, which the Hub
appends to DIR/metrics.jsonl. The Hub leaves a mark with a token of its own in DIR: an actor that finds
that token in its logdir shares the Hub's folder (the same machine, or one disk both machines mount)
and sends no lines, as its logger writes them into the same file.

Learner side. The Hub, a small Ray actor on the logdir's machine, writes each chunk into DIR/replay
under its own name, so the learner's replay source is the file one and offline training, viz, eval and
resume see an ordinary replay folder; it also holds the newest parameter pointer and heartbeat. The
publisher writes DIR/params as the file transport does (eval reads it) and puts each version in the
object store once.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import pathlib
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

import ray

from dreamer_live import spaces as spaceslib
from dreamer_live.atomic import write_atomic
from dreamer_live.cli import cache_dir
from dreamer_live.metrics import MetricsTail
from dreamer_live.replay import Writer
from dreamer_live.replay.chunk import (
    ChunkError,
    ChunkName,
    folder_steps,
    list_chunks,
    read_regular,
    written_order,
)
from dreamer_live.transport import sync

log = logging.getLogger("dreamer_live.ray")
HUB_NAME = "dreamer_live_hub"
FETCH_TIMEOUT_S = 10.0  # one call to the Hub or one object fetch; past it the learner side is away
SHIP_POLL_S = 0.2  # the shipper looks for new chunk files and acknowledgements this often
SHIP_GRACE_S = 30.0  # on close, how long the shipper goes on shipping; the rest waits in the outbox
RETRY_MAX_S = 5.0  # longest pause between shipping attempts while the learner side is away
MAX_LINES = 10_000  # metric lines an actor keeps for the Hub while it is away; the oldest go first
HUB_MARK = "ray_hub.token"  # in the Hub's logdir: its token, for actors to tell whether they share it


class Hub:
    """The learner side's mailbox (a Ray actor): chunks into DIR/replay, the newest parameters."""

    def __init__(self, logdir: str):
        self.logdir = pathlib.Path(logdir).resolve()
        self.replay = self.logdir / "replay"
        self.replay.mkdir(parents=True, exist_ok=True)
        self.pointer: dict | None = None
        self.beat: dict | None = None
        # The run's spaces.json, written again with the next chunk when DIR/replay was deleted
        path = self.replay / spaceslib.FILE
        self.spaces = path.read_bytes() if path.exists() else None
        self.token = uuid.uuid4().hex
        write_atomic(self.logdir / HUB_MARK, self.token.encode())

    def mark(self) -> str:
        """The token this Hub wrote into DIR/HUB_MARK: an actor whose logdir holds it shares DIR."""
        return self.token

    def put_spaces(self, text: str) -> str:
        """Persist an actor's spaces.json into DIR/replay unless one is there (the first actor's is
        kept: the learner's agent is built from it); return '' when the run's spaces are these, else
        why not."""
        spaceslib.parse(text)  # ValueError: not spaces.json within the sizes allowed
        path = self.replay / spaceslib.FILE
        if self.spaces is None and path.exists():  # written since by an actor sharing this logdir
            self.spaces = path.read_bytes()
        if self.spaces is None:
            write_atomic(path, text.encode())
            self.spaces = text.encode()
            return ""
        if spaceslib.parse(self.spaces.decode()) == spaceslib.parse(text):
            return ""
        return f"its spaces differ from the run's {path}, which the learner's agent is built for"

    def put_lines(self, lines: list[str]) -> int:
        """Append actors' metric lines (one JSON object each, source actor) to DIR/metrics.jsonl in one
        O_APPEND write, as the Logger writes them; return how many were taken."""
        taken = []
        for line in lines:
            record = json.loads(line)
            if isinstance(record, dict) and record.get("source") == "actor":
                taken.append(json.dumps(record, separators=(",", ":")) + "\n")
        if taken:
            fd = os.open(self.logdir / "metrics.jsonl", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                os.write(fd, "".join(taken).encode())
            finally:
                os.close(fd)
        return len(taken)

    def put_chunk(self, name: str, data: bytes) -> int:
        """Persist one chunk file into DIR/replay under its own name; return its size."""
        if ChunkName.parse(name) is None:  # also keeps paths out: the name is all the file gets
            raise ValueError(f"not a chunk file name: {name!r}")
        path = self.replay / name
        if self.spaces is not None and not (self.replay / spaceslib.FILE).exists():
            gone = self.replay if not self.replay.is_dir() else self.replay / spaceslib.FILE
            log.warning("replay: %s was gone; making it again with %s, writing on from chunk %s",
                        gone, spaceslib.FILE, name)
            write_atomic(self.replay / spaceslib.FILE, self.spaces)
        if not path.exists():  # shipped again after a lost acknowledgement: the same bytes
            write_atomic(path, data)
        return len(data)

    def announce(self, record: dict, refs: list | None = None) -> None:
        """Take a heartbeat, or (refs: [the version's object]) a new version's pointer."""
        if refs is None:
            self.beat = record
        else:
            self.pointer = dict(record, ref=refs[0])  # in a list, so Ray hands us the ref, not bytes

    def latest(self) -> tuple[dict | None, dict | None]:
        """The newest version's pointer (with its object ref) and the newest heartbeat."""
        return self.pointer, self.beat


class HubRef:
    """The Hub's handle, looked up by name, and again after a failure (a Hub started anew)."""

    def __init__(self, name: str = HUB_NAME):
        self.name = name
        self._handle = None

    def get(self):
        """The handle; ValueError while no Hub of that name exists."""
        if self._handle is None:
            self._handle = ray.get_actor(self.name)
        return self._handle

    def lost(self) -> None:
        """Forget the handle: the next get() looks the Hub up again."""
        self._handle = None


class Outbox:
    """Actor side of replay over Ray: a Writer into a local folder, and a thread shipping its chunks."""

    def __init__(self, config, directory: pathlib.Path, writer_id: int | str, hub: HubRef,
                 logdir: pathlib.Path | None = None):
        self.directory, self.hub, self.inflight = pathlib.Path(directory), hub, config.ray.inflight
        self.writer = Writer.from_config(config, self.directory, writer_id)
        self.shipped, self.shipped_steps, self.waiting = 0, 0, 0
        self.last_error, self._last_kind = "", ""
        self._deadline = float("inf")
        # What the actor wrote into its own logdir for the learner: spaces.json (written before the
        # sink is made) and, from now on, this process's metric lines (sent only to a Hub whose
        # logdir is not this one: _tell).
        self.logdir = None if logdir is None else pathlib.Path(logdir).resolve()
        self._spaces_told = self.logdir is None
        self._remote: bool | None = None if self.logdir is not None else False
        self._lines: list[str] = []
        self.lines_sent, self.lines_dropped = 0, 0
        self._tail = None
        if self.logdir is not None:
            self._tail = MetricsTail(self.logdir / "metrics.jsonl")
            try:
                self._tail.offset = self._tail.path.stat().st_size  # an earlier run's lines stay
            except OSError:
                pass
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="replay-shipper", daemon=True)
        self._thread.start()

    def add(self, step: dict) -> None:
        """Queue one step with the Writer (never waits on disk or on Ray)."""
        self.writer.add(step)

    def held(self) -> str:
        """What the Writer holds in memory because the outbox's disk refuses it ('' when nothing)."""
        return self.writer.held()

    def metrics(self) -> dict:
        """The Writer's counts, and chunks and steps shipped, chunks waiting in the outbox."""
        return {**self.writer.metrics(), "ray/chunks_shipped": self.shipped,
                "ray/steps_shipped": self.shipped_steps, "ray/chunks_waiting": self.waiting}

    def _collect_lines(self) -> None:
        """Take this process's new metric lines from its own metrics.jsonl (while they may go to
        the Hub: _remote not known to be False)."""
        if self._tail is None or self._remote is False:
            return
        pid = os.getpid()
        self._lines += [json.dumps(r, separators=(",", ":")) for r in self._tail.read()
                        if r.get("source") == "actor" and r.get("actor/pid") == pid]
        if len(self._lines) > MAX_LINES:
            self.lines_dropped += len(self._lines) - MAX_LINES
            del self._lines[:len(self._lines) - MAX_LINES]

    def _tell(self) -> None:
        """Hand the Hub this actor's spaces.json (once per Hub reached) and, when the Hub's logdir is
        not this one, its metric lines; on trouble keep them for the next round."""
        self._collect_lines()
        if self._spaces_told and not (self._lines and self._remote is not False):
            return
        try:
            hub = self.hub.get()
            if self._remote is None:
                token = ray.get(hub.mark.remote(), timeout=FETCH_TIMEOUT_S)
                try:
                    self._remote = (self.logdir / HUB_MARK).read_text() != token
                except OSError:
                    self._remote = True
                if not self._remote:
                    self._lines = []  # the Hub's metrics.jsonl is this one: the lines are there
            if not self._spaces_told:
                path = self.logdir / "replay" / spaceslib.FILE
                if path.exists():
                    refused = ray.get(hub.put_spaces.remote(path.read_text()), timeout=FETCH_TIMEOUT_S)
                    if refused:
                        log.warning("replay shipper: the learner side keeps its spaces.json: %s",
                                    refused)
                    self._spaces_told = True
            if self._lines and self._remote:
                lines = self._lines
                ray.get(hub.put_lines.remote(lines), timeout=FETCH_TIMEOUT_S)
                del self._lines[:len(lines)]
                self.lines_sent += len(lines)
        except ValueError:
            pass  # no Hub now: the chunks' part of the loop says so
        except ray.exceptions.RayError:
            self.hub.lost()
            self._spaces_told = self.logdir is None  # a Hub started anew is told again

    def close(self) -> None:
        """Write the partial chunk, ship what the learner side takes within SHIP_GRACE_S, stop."""
        try:
            self.writer.close()
        finally:
            self._deadline = time.monotonic() + SHIP_GRACE_S
            self._stop.set()
            self._thread.join()

    def _run(self) -> None:
        pending: dict[Any, str] = {}  # object ref of the Hub's answer -> chunk name
        failures = 0
        while not (self._stop.is_set() and time.monotonic() > self._deadline):
            stopping = self._stop.is_set()
            if not failures:
                self._tell()
            waiting = [(name, fields) for fields, name in
                       written_order(list_chunks(self.directory, set(pending.values())))]
            self.waiting = len(waiting) + len(pending)
            try:
                hub = self.hub.get() if waiting and len(pending) < self.inflight else None
            except ValueError:
                hub = None
                failures += 1
                self._error("no hub", f"no Hub named {self.hub.name}; {len(waiting)} chunks wait "
                            f"in {self.directory}")
                self._stop.wait(min(RETRY_MAX_S, SHIP_POLL_S * 2 ** failures))
            for name, _ in waiting[:max(0, self.inflight - len(pending))] if hub else ():
                try:
                    data = read_regular(self.directory / name)
                except (OSError, ChunkError):
                    continue  # gone meanwhile, or not a file: nothing to ship
                pending[hub.put_chunk.remote(name, data)] = name
            if not pending or (stopping and failures):  # stopping, learner side away: keep them
                if stopping:
                    break
                self._stop.wait(SHIP_POLL_S)
                continue
            done, _ = ray.wait(list(pending), num_returns=1, timeout=SHIP_POLL_S)
            for ref in done:
                name = pending.pop(ref)
                try:
                    ray.get(ref)
                except ray.exceptions.RayError as e:
                    failures += 1
                    self.hub.lost()
                    self._error(type(e).__name__, f"learner side unreachable ({type(e).__name__}), "
                                f"{name} stays in {self.directory}")
                    self._stop.wait(min(RETRY_MAX_S, SHIP_POLL_S * 2 ** failures))
                    continue
                failures, self._last_kind = 0, ""
                (self.directory / name).unlink(missing_ok=True)
                self.shipped += 1
                self.shipped_steps += ChunkName.parse(name).length
        if not failures and self._remote and time.monotonic() <= self._deadline:
            self._tell()  # the actor's last lines: its logger wrote them before this closed

    def _error(self, kind: str, text: str) -> None:
        if kind != self._last_kind:  # once per kind of trouble, not once per chunk
            log.warning("replay shipper: %s", text)
        self._last_kind, self.last_error = kind, text


class Client(sync.Client):
    """Actor side of parameters over Ray: the Hub's pointer, the version's bytes from the store."""

    def __init__(self, hub: HubRef, template: Any, model_hash: str, interval: float,
                 on_update: Callable[[Any], None] | None = None):
        super().__init__(pathlib.Path("<ray object store>"), template, model_hash, interval=interval,
                         on_update=on_update)
        self.hub = hub

    def fetch_pointer(self) -> tuple[dict | None, dict | None]:
        """The Hub's newest pointer and heartbeat; (None, None) while it cannot be reached."""
        try:
            return ray.get(self.hub.get().latest.remote(), timeout=FETCH_TIMEOUT_S)
        except (ray.exceptions.RayError, ValueError) as e:
            self.hub.lost()
            self._report("hub", f"unreachable ({type(e).__name__})")
            return None, None

    def fetch_version(self, pointer: dict, name: str) -> bytes | None:
        """The version's bytes from the object store; None if its owner (the learner) is gone."""
        try:
            return ray.get(pointer["ref"], timeout=FETCH_TIMEOUT_S)
        except ray.exceptions.RayError as e:
            self._report(name, f"cannot fetch ({type(e).__name__})")
            return None


class Publisher(sync.Publisher):
    """Learner side of parameters over Ray: DIR/params as with files, and each version put in the
    object store once, its pointer (and every heartbeat) told to the Hub."""

    def __init__(self, directory: pathlib.Path, model_hash: str, hub: HubRef):
        super().__init__(directory, model_hash)
        self.hub = hub
        self._newest = None  # the newest version's object: owned by this process, kept alive here
        self._pointer: tuple[dict, list] | None = None
        self._told = None  # the Hub's answer to the last announcement

    def announce(self, record: dict, blob: bytes | None = None) -> None:
        """Tell the Hub (never waiting for it): a heartbeat, or a new version put in the store. A Hub
        that failed the last announcement is looked up again and told the newest version."""
        if blob is not None:
            self._newest = ray.put(blob)
            self._pointer = (record, [self._newest])
        if self._told is not None and ray.wait([self._told], timeout=0)[0]:
            try:
                ray.get(self._told)
            except ray.exceptions.RayError:
                self.hub.lost()
                if blob is None and self._pointer is not None:
                    self._tell(*self._pointer)
        self._tell(record, None if blob is None else [self._newest])

    def _tell(self, record: dict, refs: list | None) -> None:
        try:
            self._told = self.hub.get().announce.remote(record, refs)
        except ValueError:  # no Hub now: the next announcement tries again
            self._told = None


def outbox_dir(config, logdir: pathlib.Path, writer_id: int | str) -> pathlib.Path:
    """Where an actor's chunks wait to be shipped: ray.outbox, else a folder per run under the user's
    cache folder; per writer id, so a restarted actor ships what the killed one left."""

    if config.ray.outbox:
        return pathlib.Path(config.ray.outbox) / f"actor{writer_id}"
    run = hashlib.sha256(str(pathlib.Path(logdir).resolve()).encode()).hexdigest()[:12]
    return cache_dir() / "outbox" / run / f"actor{writer_id}"


def steps_waiting(config, logdir: pathlib.Path, writer_id: int | str) -> int:
    """The steps of the chunks waiting in an actor's outbox on this machine (outbox_dir)."""
    return folder_steps(outbox_dir(config, logdir, writer_id))


class Link:
    """The Ray ends of one process (transport.use_ray), all reaching the Hub by its name."""

    def __init__(self, logdir: pathlib.Path, hub_name: str = HUB_NAME):
        self.hub_name, self.logdir = hub_name, pathlib.Path(logdir)

    def replay_sink(self, config, writer_id: int | str) -> Outbox:
        """The actor's replay sink: an outbox shipped to the Hub."""
        return Outbox(config, outbox_dir(config, self.logdir, writer_id), writer_id,
                      HubRef(self.hub_name), self.logdir)

    def variable_source(self, config, template: Any,
                        on_update: Callable[[Any], None] | None = None) -> Client:
        """The actor's parameter source, started: the Hub polled every actor.param_interval s."""
        return Client(HubRef(self.hub_name), template, sync.model_hash(config),
                      config.actor.param_interval, on_update).start()

    def variable_publisher(self, config, logdir: pathlib.Path) -> Publisher:
        """The learner's parameter publisher: DIR/params and the object store."""
        return Publisher(pathlib.Path(logdir) / "params", sync.model_hash(config),
                         HubRef(self.hub_name))
