"""Process manners for the actor and learner: graceful stop on signals, parent watch, CPU sharing,
one process per role (a lock file holding its pid)."""

from __future__ import annotations

import json
import os
import pathlib
import signal
import socket
import sys
import threading
import time

from dreamer_live.errors import UserError

# Set by dreamer_live.run for its children: the launcher's pid; a child stops when it is gone.
PARENT_ENV = "DREAMER_LIVE_PARENT"


def describe_exit(code: int) -> str:
    """A child's exit status in words: 'exit code N' or 'killed by SIGNAME'."""
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


def say(text: str, error: bool = False, end: str = "\n") -> None:
    """Print a line of a launcher or a signal handler (stderr when `error`); a terminal that is gone
    (SIGHUP) is no error: the process goes on seeing its work out."""
    try:
        print(text, end=end, file=sys.stderr if error else sys.stdout, flush=True)
    except OSError:
        pass


class StopFlag:
    """Set by SIGINT/SIGTERM or by a dead parent. The first signal asks for a clean finish; the second
    is said in one line and changes nothing (cutting the save short would lose replay steps or the
    checkpoint); a third quits at once, saying what was not saved."""

    def __init__(self, name: str):
        self.name = name
        self.event = threading.Event()
        self.reason = ""
        self._parent = int(os.environ.get(PARENT_ENV, "0") or 0)
        self._signals = 0

    def install(self) -> StopFlag:
        """Install the signal handlers (main thread only)."""
        signal.signal(signal.SIGINT, self._handle)
        signal.signal(signal.SIGTERM, self._handle)
        return self

    def _handle(self, signum, frame) -> None:
        self._signals += 1
        name = signal.Signals(signum).name
        if self._signals == 1:
            self.set(name)
        elif self._signals == 2:
            say(f"\n{self.name}: {name}: already stopping, saving first; a third quits without saving",
                error=True)
        else:
            say(f"\n{self.name}: {name}: quitting now; what was not yet saved is lost", error=True)
            os._exit(130)

    def set(self, reason: str) -> None:
        """Ask the loop to stop, giving the reason shown on exit."""
        if not self.event.is_set():
            self.reason = reason
            self.event.set()

    def __bool__(self) -> bool:
        if not self.event.is_set() and self._parent and os.getppid() != self._parent:
            self.set("launcher exited")
        return self.event.is_set()

    def wait(self, seconds: float) -> bool:
        """Sleep up to `seconds`, waking early when stopped; return whether stopped."""
        return self.event.wait(seconds) or bool(self)


# Fastest actor tick rate beside which the learner takes every core by default. With the learner on
# core 0 too, the actor's ticks began up to 4 ms late on a 2-core VM (one 250 Hz kernel tick:
# bench/cadence.py, 60 Hz), which is under 10% of the period only at 25 Hz and below.
ALL_CORES_MAX_HZ = 25.0


def learner_threads(threads: int, actor_hz: float) -> int:
    """The learner.threads to apply: 0 (auto) becomes every core at actor ticks of ALL_CORES_MAX_HZ
    or slower, every core but core 0 above."""
    if threads == 0 and actor_hz > ALL_CORES_MAX_HZ:
        return -1
    return threads


def share_cpu(threads: int, nice: int, idle: bool) -> str:
    """Lower this process's priority below the actor's and optionally confine it to fewer cores.

    Must run before JAX is imported: XLA sizes its CPU thread pool from the cores this process may
    use, and its threads inherit the priority. idle: Linux's SCHED_IDLE, under which the learner runs
    only on CPU time no normal process wants, so a waking actor always takes the core at once
    (Windows: the idle priority class). threads: 0 = every core, -1 = every core but core 0, N = at
    most N cores (core 0 last); see learner_threads for the default.
    Returns a short description for the log.
    """
    if sys.platform == "win32":
        import psutil

        return share_cpu_windows(psutil, threads, nice, idle)
    # Linux's calls, not psutil's: priority and cores are per thread there, and psutil sets them on
    # the process's main thread, while a Ray worker runs the learner on a thread of its own.
    notes = []
    if nice > 0 and hasattr(os, "nice"):
        try:
            os.nice(nice)
            notes.append(f"nice +{nice}")
        except OSError:
            pass
    if idle and hasattr(os, "SCHED_IDLE"):
        try:
            os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
            notes.append("idle priority")
        except OSError:
            pass
    cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    if cores:
        if chosen := fewer_cores(cores, threads):
            os.sched_setaffinity(0, chosen)
        notes.append(cores_note(cores, chosen))
    return ", ".join(notes) or "no CPU limits"


def share_cpu_windows(psutil, threads: int, nice: int, idle: bool) -> str:
    """share_cpu through psutil (given as an argument: the tests hand it a stand-in on Linux), where
    priority and cores are the process's: the idle priority class for `idle`, below normal for a
    nice > 0, the cores as on Linux."""
    proc, notes = psutil.Process(), []
    if idle or nice > 0:
        level, name = ((psutil.IDLE_PRIORITY_CLASS, "idle priority class") if idle else
                       (psutil.BELOW_NORMAL_PRIORITY_CLASS, "below-normal priority class"))
        try:
            proc.nice(level)
            notes.append(name)
        except psutil.Error:
            pass
    cores = sorted(proc.cpu_affinity())
    if chosen := fewer_cores(cores, threads):
        proc.cpu_affinity(chosen)
    return ", ".join(notes + [cores_note(cores, chosen)])


def fewer_cores(cores: list[int], threads: int) -> list[int]:
    """The cores `threads` asks for out of `cores` (core 0 last: the actor keeps it); [] for all."""
    if not threads or len(cores) < 2:
        return []
    keep = len(cores) - 1 if threads < 0 else min(threads, len(cores))
    return (cores[1:] + cores[:1])[:keep]


def cores_note(cores: list[int], chosen: list[int]) -> str:
    """The log's words for the cores kept."""
    if chosen:
        return f"cores {','.join(map(str, sorted(chosen)))} of {len(cores)}"
    return f"all {len(cores)} cores"


class RoleLock:
    """An exclusive lock on a file that holds the owner's pid and host: one process per role (an
    actor id, the learner, on a logdir; a game window). The OS drops it when the owner dies, so a dead
    owner's lock is taken over; a clean release empties the file, so a pid left in it tells of an
    owner that died."""

    _OFFSET = 1 << 20  # Windows locks this byte (beyond the text), so others can still read the pid

    def __init__(self, path: str | os.PathLike, role: str, hint: str = "",
                 busy: str = "already runs on this logdir", command: bool = False):
        self.path, self.role = pathlib.Path(path), role
        self.hint = hint  # what else the refused process may do, after "stop it first"
        self.busy = busy  # what the refusal says of the role
        self.command = command  # the owner's command line goes into the file, and into a refusal
        self._fd: int | None = None
        self.took_over = ""  # "pid N on host H" of an owner that died holding it

    def acquire(self) -> RoleLock:
        """Take the lock; a UserError naming the owner while another process holds it."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            _lock(fd, self._OFFSET)
        except OSError:
            owner = _owner(_read_all(fd))
            os.close(fd)
            raise UserError(f"{self.role} {self.busy} ({owner}, lock {self.path}); "
                            f"stop it first{' or ' + self.hint if self.hint else ''}") from None
        previous = _read_all(fd)
        self.took_over = _owner(previous) if previous.strip() else ""
        record = {"pid": os.getpid(), "host": socket.gethostname(), "started": time.time()}
        if self.command:
            record["command"] = command_line()
        _rewrite(fd, json.dumps(record).encode())
        self._fd = fd
        return self

    def release(self) -> None:
        """Empty the file and drop the lock (the file stays: removing it could race a new owner)."""
        if self._fd is not None:
            try:
                _rewrite(self._fd, b"")
            finally:
                os.close(self._fd)  # closing drops the lock
                self._fd = None


def stat_fields(pid: int) -> list[str] | None:
    """The fields of /proc/PID/stat after the command name (state first, then ppid); None when gone."""
    try:
        return pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None


def descendants(pid: int) -> set[int]:
    """Every live process below `pid` (Ray's system processes and workers included)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc") if os.path.isdir("/proc") else ():
        if entry.isdigit() and (fields := stat_fields(int(entry))):
            children.setdefault(int(fields[1]), []).append(int(entry))
    found, todo = set(), [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.add(child)
            todo.append(child)
    return found


def alive(pid: int) -> bool:
    """Whether `pid` exists and is not a zombie."""
    fields = stat_fields(pid)
    return fields is not None and fields[0] != "Z"


def start_times(pids: set[int]) -> dict[int, str]:
    """Each live one of `pids` with its start time (which tells it from a later process of its pid)."""
    return {pid: fields[19] for pid in pids if (fields := stat_fields(pid)) and fields[0] != "Z"}


def kill_leftovers(started: dict[int, str], grace_s: float = 2.0) -> list[str]:
    """SIGKILL those of `started` (start_times) still alive after grace_s; return their names."""
    deadline = time.monotonic() + grace_s
    while any(alive(pid) for pid in started) and time.monotonic() < deadline:
        time.sleep(0.1)
    killed = []
    for pid, start in started.items():
        fields = stat_fields(pid)
        if fields and fields[0] != "Z" and fields[19] == start:  # the same process, not a reused pid
            try:
                name = pathlib.Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].decode(
                    errors="replace")
                os.kill(pid, signal.SIGKILL)
                killed.append(name or str(pid))
            except OSError:
                pass
    return killed


def waiting_jobs() -> int:
    """Jobs to run at once when each waits on real time (games, child processes) about half its life:
    1.5 per core this process may use (the test suite's workers, the benches' smoke runs)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return max(1, (cores or 1) * 3 // 2)


def command_line(limit: int = 200) -> str:
    """This process's command as a person typed it, e.g. `python -m dreamer_live.actor --logdir X`."""
    argv = list(sys.argv)
    if argv and argv[0].endswith(".py") and "dreamer_live" in argv[0]:  # python -m dreamer_live.<x>
        parts = pathlib.Path(argv[0]).with_suffix("").parts
        parts = parts[len(parts) - 1 - parts[::-1].index("dreamer_live"):]
        argv[0] = "python -m " + ".".join(parts[:-1] if parts[-1] == "__main__" else parts)
    text = " ".join(argv)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _owner(text: bytes) -> str:
    try:
        record = json.loads(text)
        owner = f"pid {int(record['pid'])} on host {record.get('host', '?')}"
        return f"{owner}: {record['command']}" if record.get("command") else owner
    except (ValueError, KeyError, TypeError):
        return "owner unknown"


def _read_all(fd: int) -> bytes:
    os.lseek(fd, 0, os.SEEK_SET)
    return os.read(fd, 4096)


def _rewrite(fd: int, data: bytes) -> None:
    os.lseek(fd, 0, os.SEEK_SET)
    os.ftruncate(fd, 0)
    os.write(fd, data)
    os.fsync(fd)


if sys.platform == "win32":
    def _lock(fd: int, offset: int) -> None:
        import msvcrt

        os.lseek(fd, offset, os.SEEK_SET)
        msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)  # OSError when another process holds it
else:
    def _lock(fd: int, offset: int) -> None:
        import fcntl

        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # BlockingIOError when held; NFS: a POSIX lock
