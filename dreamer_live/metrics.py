"""Metrics: DIR/metrics.jsonl lines, TensorBoard event files beside it, and a live terminal status line.

All file writing happens on a background thread so that a real-time loop only pays for a queue put.
Several processes append to one metrics.jsonl: each line goes out as a single O_APPEND write, so lines
never interleave. TensorBoard files go to DIR/tensorboard/<name>/ (one folder per writer process:
TensorBoard reads concurrent event files in one folder badly).
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
        self._tb = None
        self._queue: queue.Queue = queue.Queue()
        self._thread = threading.Thread(target=self._work, name=f"metrics-{self.name}", daemon=True)
        self._thread.start()

    def write(self, step: int, metrics: Mapping) -> None:
        """Queue one line of metrics (values: numbers; they are converted on the writer thread)."""
        self._queue.put(("line", time.time(), int(step), {**self.fields, **metrics}))

    def status(self, text: str) -> None:
        """Show `text` as the live status line (carriage return on a terminal; skipped when quiet)."""
        if self.show_status:
            self._queue.put(("status", text))

    def message(self, text: str) -> None:
        """Print a one-off message on its own line (never lost under the status line)."""
        self._queue.put(("message", text))

    def close(self) -> None:
        """Write what is queued, close the event files, and end the status line."""
        if not self._thread.is_alive():
            return
        self._queue.put(("close",))
        self._thread.join(timeout=30)

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
                    elif kind == "status":
                        self._draw(item[1])
                    elif kind == "message":
                        self._end_status()
                        print(item[1], flush=True)
                    elif kind == "close":
                        break
                except Exception as e:  # a full disk must not kill the actor's loop
                    print(f"{self.name}: metrics write failed: {e}", file=sys.stderr)
        finally:
            os.close(fd)
            if self._tb is not None:
                self._tb.close()
            self._end_status()

    def _write_line(self, fd: int, when: float, step: int, metrics: dict) -> None:
        os.write(fd, encode_line(self.source, step, metrics, when).encode())
        if not self._tensorboard:
            return
        if self._tb is None:
            from tensorboardX import SummaryWriter

            folder = self.logdir / "tensorboard" / self.name
            self._tb = SummaryWriter(str(folder), flush_secs=10,
                                     filename_suffix=f".{os.getpid()}")
        for key, value in metrics.items():
            value = _plain(value)
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                self._tb.add_scalar(key, value, step, walltime=when)

    def _draw(self, text: str) -> None:
        if self._tty:
            pad = max(0, self._status_width - len(text))
            sys.stdout.write("\r" + text + " " * pad)
            sys.stdout.flush()
            self._status_width = len(text)
        elif time.monotonic() - self._last_plain_status >= 10.0:  # piped: a plain line now and then
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
