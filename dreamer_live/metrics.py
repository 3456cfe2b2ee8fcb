"""Metrics: DIR/metrics.jsonl lines, TensorBoard event files (DIR/tensorboard/<name>/), and a live terminal
status line.

All file writing happens on a background thread so that a real-time loop only pays for a queue put; the
terminal (status line, messages) has a thread of its own, so a disk or share whose writes block cannot
stop the status line.
Several processes append to one metrics.jsonl: each line goes out as a single O_APPEND write, so lines
never interleave. TensorBoard files go to DIR/tensorboard/<name>/ (one folder per writer process:
TensorBoard reads concurrent event files in one folder badly), written on the same thread (not
tensorboardX's SummaryWriter, whose worker thread dies on a full disk and then blocks every later
write and the process's exit); after a failed write the next event goes to a new file.
"""

from __future__ import annotations

import json
import math
import os
import pathlib
import queue
import sys
import threading
import time
from collections.abc import Mapping

import numpy as np

# Set by dreamer_live.run for its children: it draws one combined status line itself.
NO_STATUS_ENV = "DREAMER_LIVE_NO_STATUS"
TB_FLUSH_S = 10.0  # TensorBoard events reach the disk at least this often while lines come
FAILURE_EVERY_S = 60.0  # metric lines that cannot be written (disk full) are reported this often
PLAIN_STATUS_S = 10.0  # piped (not a terminal), the status line is printed as a plain line this often


def _plain(value):
    """A JSON-safe scalar: numpy/jax numbers to float/int, non-finite floats to None."""
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    try:
        value = float(value)
    except (TypeError, ValueError):
        return str(value)
    return value if math.isfinite(value) else None


def encode_line(source: str, step: int, metrics: Mapping, when: float | None = None) -> str:
    """One metrics.jsonl line: time, source, step, then the flat metric keys."""
    record = {"time": time.time() if when is None else when, "source": source, "step": int(step)}
    record.update({key: _plain(value) for key, value in metrics.items()})
    return json.dumps(record, separators=(",", ":")) + "\n"


def read_lines(path: str | os.PathLike, source: str | None = None) -> list[dict]:
    """Parse metrics.jsonl (optionally one source); a half-written last line is skipped."""
    return [r for r in MetricsTail(pathlib.Path(path)).read()
            if source is None or r.get("source") == source]


class MetricsTail:
    """Reads the lines appended to metrics.jsonl since the last call."""

    def __init__(self, path: pathlib.Path):
        self.path, self.offset, self.partial = path, 0, b""

    def read(self) -> list[dict]:
        """New complete records (a half-written last line waits for the next call)."""
        try:
            with self.path.open("rb") as f:
                f.seek(self.offset)
                data = f.read()
        except FileNotFoundError:
            return []
        self.offset += len(data)
        lines = (self.partial + data).split(b"\n")
        self.partial = lines.pop()
        out = []
        for line in lines:
            try:
                out.append(json.loads(line))
            except ValueError:
                pass
        return out


class Logger:
    """Writes metric lines and TensorBoard scalars off the caller's thread; draws a status line."""

    def __init__(self, logdir: str | os.PathLike, source: str, name: str | None = None,
                 quiet: bool = False, tensorboard: bool = True, fields: Mapping | None = None):
        self.logdir = pathlib.Path(logdir)
        self.fields = dict(fields or {})  # carried by every line (which of several actors wrote it)
        self.logdir.mkdir(parents=True, exist_ok=True)
        self.source = source
        self.name = name or source
        self.path = self.logdir / "metrics.jsonl"
        self.show_status = not quiet and not os.environ.get(NO_STATUS_ENV)
        self._tty = sys.stdout.isatty()
        self._last_plain_status = 0.0
        self._status_width = 0
        self._tensorboard = tensorboard
        self._tb = None  # the open TensorBoard event file (tensorboardX EventsWriter)
        self._tb_files = 0
        self._tb_flushed = 0.0
        self._said_failing = -math.inf  # when a dropped metric line (disk full) was last reported
        self._queue: queue.Queue = queue.Queue()  # to the disk: metric lines
        self._terminal: queue.Queue = queue.Queue()  # to the terminal: status line and messages
        self._thread = threading.Thread(target=self._work, name=f"metrics-{self.name}", daemon=True)
        self._printer = threading.Thread(target=self._print, name=f"status-{self.name}", daemon=True)
        self._thread.start()
        self._printer.start()

    def write(self, step: int, metrics: Mapping) -> None:
        """Queue one line of metrics (values: numbers; they are converted on the writer thread)."""
        self._queue.put(("line", time.time(), int(step), {**self.fields, **metrics}))

    def status(self, text: str, alert: bool = False) -> None:
        """Show `text` as the live status line (carriage return on a terminal; skipped when quiet);
        piped, a plain line every PLAIN_STATUS_S, and at once when `alert` (a warning just began)."""
        if self.show_status:
            self._terminal.put(("status", text, alert))

    def message(self, text: str) -> None:
        """Print a one-off message on its own line (never lost under the status line)."""
        self._terminal.put(("message", text))

    def flush(self, timeout: float = 10.0) -> None:
        """Wait (up to `timeout` s in all) until everything queued so far is written and printed."""
        end = time.monotonic() + timeout
        for thread, to in ((self._thread, self._queue), (self._printer, self._terminal)):
            if thread.is_alive():
                done = threading.Event()
                to.put(("flush", done))
                done.wait(max(0.0, end - time.monotonic()))

    def close(self) -> None:
        """Write what is queued, close the event files, and end the status line."""
        if self._thread.is_alive():
            self._queue.put(("close",))
            self._thread.join(timeout=30)
        if self._printer.is_alive():
            self._terminal.put(("close",))
            self._printer.join(timeout=5)

    # -- writer thread ------------------------------------------------------------------------

    def _work(self) -> None:
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            while True:
                item = self._queue.get()
                kind = item[0]
                try:
                    if kind == "line":
                        self._write_line(fd, *item[1:])
                    elif kind == "flush":
                        item[1].set()
                    elif kind == "close":
                        break
                except Exception as e:  # a full disk must not kill the actor's loop
                    if time.monotonic() - self._said_failing >= FAILURE_EVERY_S:
                        self._said_failing = time.monotonic()
                        self.message(f"{self.name}: cannot write metrics ({e}); dropping metric lines "
                                     "until it can")
        finally:
            os.close(fd)
            self._close_tb()

    def _print(self) -> None:
        try:
            while True:
                item = self._terminal.get()
                kind = item[0]
                if kind == "flush":
                    item[1].set()
                    continue
                if kind == "close":
                    break
                try:
                    if kind == "status":
                        self._draw(*item[1:])
                    else:
                        self._end_status()
                        print(item[1], flush=True)
                except (OSError, ValueError):  # a closed or broken stdout: nothing to show it on
                    pass
        finally:
            self._end_status()

    def _write_line(self, fd: int, when: float, step: int, metrics: dict) -> None:
        os.write(fd, encode_line(self.source, step, metrics, when).encode())
        if not self._tensorboard:
            return
        from tensorboardX.event_file_writer import EventsWriter
        from tensorboardX.proto.event_pb2 import Event
        from tensorboardX.summary import scalar

        try:
            if self._tb is None:
                folder = self.logdir / "tensorboard" / self.name
                folder.mkdir(parents=True, exist_ok=True)
                self._tb_files += 1  # a new name even within the same second
                self._tb = EventsWriter(str(folder / "events"), f".{os.getpid()}.{self._tb_files}")
            for key, value in metrics.items():
                value = _plain(value)
                if isinstance(value, (int, float)) and not isinstance(value, bool):
                    self._tb.write_event(Event(wall_time=when, step=step, summary=scalar(key, value)))
            if time.monotonic() - self._tb_flushed >= TB_FLUSH_S:
                self._tb.flush()
                self._tb_flushed = time.monotonic()
        except OSError:
            self._close_tb()  # its last record may be cut short: the next event starts a new file
            raise

    def _close_tb(self) -> None:
        if self._tb is not None:
            tb, self._tb = self._tb, None
            try:
                tb.close()
            except OSError:
                pass

    def _draw(self, text: str, alert: bool) -> None:
        if self._tty:
            pad = max(0, self._status_width - len(text))
            sys.stdout.write("\r" + text + " " * pad)
            sys.stdout.flush()
            self._status_width = len(text)
        elif alert or time.monotonic() - self._last_plain_status >= PLAIN_STATUS_S:
            self._last_plain_status = time.monotonic()
            print(text, flush=True)

    def _end_status(self) -> None:
        if self._tty and self._status_width:
            sys.stdout.write("\n")
            sys.stdout.flush()
            self._status_width = 0


class Samples:
    """Values gathered since the last log line (lateness, episode returns, ...), then summarized."""

    def __init__(self):
        self.values: list[float] = []

    def add(self, value: float) -> None:
        """Record one value."""
        self.values.append(float(value))

    def percentile(self, q: float) -> float:
        """The q-th percentile of the values so far (0 when empty)."""
        return float(np.percentile(self.values, q)) if self.values else 0.0

    def max(self) -> float:
        """The largest value so far (0 when empty)."""
        return max(self.values) if self.values else 0.0

    def reset(self) -> None:
        """Start a new window."""
        self.values = []

    def __len__(self) -> int:
        return len(self.values)
