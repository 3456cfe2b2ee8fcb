"""Find where a running game keeps a value, by successive filtering (as Cheat Engine does).

    python -m dreamer_live.memscan --window "SuperTux" --type f32
    memscan> first ?            # unknown initial value: snapshot every writable region
    memscan> increased          # (walk right in the game) keep values that went up
    memscan> decreased          # (walk left)
    memscan> unchanged          # (stand still)
    memscan> list               # the candidates left, with module + offset when static
    memscan> pointers 0x55d0c2a4f3c0   # pointer chains from a module to it, for a profile

`--profile P --find NAME` does it by itself: it drives the game with the profile's keys and finds the
value and a pointer chain to it that survives restarts of the game (dreamer_live/envs/live/finder.py).

First scan: `first VALUE` (exact; floats match to the decimals typed, as Cheat Engine's "rounded") or
`first ?` (unknown). Next scans: `increased`, `decreased`, `unchanged`, `changed`, `equal VALUE`.
Commands come from the prompt or, with --script, one per line from stdin (for tests and scripts); each
prints one line starting with its result (`candidates: N`). Linux reads /proc/PID/mem, Windows uses
pymem: the same backends as the live env (dreamer_live/envs/live/memory.py).
"""

from __future__ import annotations

import argparse
import bisect
import dataclasses
import sys
import time

import numpy as np

from dreamer_live import cli
from dreamer_live.envs.live.memory import (
    MemoryReadError,
    ProcessGone,
    Region,
    find_pids,
    open_process,
)
from dreamer_live.envs.live.profile import TYPES
from dreamer_live.envs.live.window import open_windows
from dreamer_live.errors import UserError

DTYPES = {name: np.dtype(fmt) for name, fmt in TYPES.items()}
PIECE = 64 << 20  # regions are read in pieces of at most this many bytes
FEW = 4096  # below this many candidates in a region, read them one by one instead of the region
# What a value did between two readings (now, before): the scans' and the finder's one rule
CHANGES = {"increased": np.greater, "decreased": np.less, "unchanged": np.equal,
           "changed": np.not_equal}
NEXT_OPS = (*CHANGES, "equal")
NEXT_ALIASES = {"same": "unchanged", "=": "equal", "equals": "equal", "inc": "increased",
                "dec": "decreased"}


@dataclasses.dataclass
class Hits:
    """Candidates inside one region: element offsets (None = every element) and their last values."""

    region: Region
    shift: int  # byte offset of element 0 from the region start (unaligned scans use several)
    index: np.ndarray | None
    values: np.ndarray
    misses: np.ndarray | None = None  # scans each candidate failed, where some are allowed

    def addresses(self, itemsize: int) -> np.ndarray:
        """Absolute addresses of the candidates."""
        index = np.arange(len(self.values)) if self.index is None else self.index
        return self.region.start + self.shift + index.astype(np.int64) * itemsize

    def count(self) -> int:
        """How many candidates."""
        return len(self.values)


def tolerance(text: str, kind: str) -> float:
    """Half a unit of the last decimal typed, for floats (57.5 matches [57.45, 57.55)); 0 for ints."""
    if not kind.startswith("f"):
        return 0.0
    decimals = len(text.split(".", 1)[1]) if "." in text and "e" not in text.lower() else 0
    return 0.5 * 10.0 ** -decimals


def parse_number(text: str, kind: str) -> float:
    """A value as typed for the scan type."""
    try:
        return float(text) if kind.startswith("f") else int(text, 0)
    except ValueError:
        raise UserError(f"not a {kind} value: {text!r}") from None


class Scanner:
    """Successive-filter scan of one process's writable memory for values of one type."""

    def __init__(self, reader, kind: str = "i32", align: int = 0):
        if kind not in DTYPES:
            raise UserError(f"unknown type {kind!r}; types: {', '.join(DTYPES)}")
        self.reader, self.kind, self.dtype = reader, kind, DTYPES[kind]
        self.align = align or self.dtype.itemsize
        if self.align not in (1, 2, 4, 8) or self.align > self.dtype.itemsize:
            raise UserError(f"--align must be 1, 2, 4 or 8 and at most the type's size "
                            f"({self.dtype.itemsize})")
        self.hits: list[Hits] | None = None  # None until the first scan
        self.bytes_scanned = 0

    def count(self) -> int:
        """Candidates left (0 before the first scan)."""
        return sum(h.count() for h in self.hits or [])

    def _read_region(self, region: Region) -> bytes | None:
        parts = []
        for start in range(region.start, region.end, PIECE):
            size = min(PIECE, region.end - start)
            try:
                parts.append(self.reader.read(start, size))
            except MemoryReadError:
                return None  # unmapped meanwhile, or a guard page
        self.bytes_scanned += region.size
        return b"".join(parts)

    def _views(self, region: Region, data: bytes):
        """(shift, array of every aligned element) for each alignment phase."""
        size = self.dtype.itemsize
        for shift in range(0, size, self.align):
            count = (len(data) - shift) // size
            if count > 0:
                yield shift, np.frombuffer(data, self.dtype, count, shift)

    def first(self, value: str | None) -> int:
        """First scan: every element equal to `value` (as typed), or every element (value None)."""
        self.hits, self.bytes_scanned = [], 0
        target = None if value is None else parse_number(value, self.kind)
        tol = 0.0 if value is None else tolerance(value, self.kind)
        for region in self.reader.regions():
            data = self._read_region(region)
            if data is None:
                continue
            for shift, array in self._views(region, data):
                if target is None:
                    self.hits.append(Hits(region, shift, None, array.copy()))
                    continue
                index = np.flatnonzero(self._equal(array, target, tol))
                if len(index):
                    self.hits.append(Hits(region, shift, index, array[index].copy()))
        return self.count()

    def _equal(self, array: np.ndarray, target: float, tol: float) -> np.ndarray:
        if tol:
            with np.errstate(invalid="ignore", over="ignore"):
                return np.abs(array.astype(np.float64) - target) < tol
        return array == target

    def _current(self, hits: Hits) -> np.ndarray | None:
        """The candidates' values now (None if the region is gone)."""
        size = self.dtype.itemsize
        if hits.index is not None and len(hits.index) < FEW:
            out = np.empty(len(hits.index), self.dtype)
            for i, address in enumerate(hits.addresses(size)):
                try:
                    out[i] = np.frombuffer(self.reader.read(int(address), size), self.dtype)[0]
                except MemoryReadError:
                    return None
            return out
        data = self._read_region(hits.region)
        if data is None:
            return None
        count = (len(data) - hits.shift) // size
        array = np.frombuffer(data, self.dtype, count, hits.shift)
        return array if hits.index is None else array[hits.index]

    def next(self, op: str, value: str | None = None, allowed_misses: int = 0) -> int:
        """Keep the candidates whose value increased / decreased / stayed / changed / equals `value`
        (allowed_misses: or that failed no more than that many such scans in all)."""
        if self.hits is None:
            raise UserError("no first scan yet: `first VALUE` or `first ?`")
        if op not in NEXT_OPS:
            raise UserError(f"unknown scan {op!r}; use one of {', '.join(NEXT_OPS)}")
        if op == "equal":
            if value is None:
                raise UserError("equal needs a value: equal 42")
            target, tol = parse_number(value, self.kind), tolerance(value, self.kind)
        test = (lambda now, old: self._equal(now, target, tol)) if op == "equal" else CHANGES[op]
        return self._keep(test, allowed_misses)

    def refresh(self) -> int:
        """Read every candidate's value again, keeping them all: the next scan compares with now."""
        if self.hits is None:
            raise UserError("no first scan yet: `first VALUE` or `first ?`")
        return self._keep(lambda now, old: np.ones(len(now), bool))

    def _keep(self, test, allowed_misses: int = 0) -> int:
        """Keep the candidates for which test(values now, last values) holds, or that failed it at
        most allowed_misses times in all; the count left."""
        self.bytes_scanned = 0
        kept = []
        for hits in self.hits:
            now = self._current(hits)
            if now is None:
                continue
            with np.errstate(invalid="ignore"):
                keep = test(now, hits.values)
            misses = hits.misses
            if allowed_misses:
                misses = (np.zeros(len(now), np.uint8) if misses is None else misses) + ~keep
                keep = misses <= allowed_misses
            index = np.flatnonzero(keep)
            if hits.index is None and len(index) == len(now):  # all kept: the region whole still
                kept.append(Hits(hits.region, hits.shift, None, now.copy(), misses))
            elif len(index):
                full = index if hits.index is None else hits.index[index]
                kept.append(Hits(hits.region, hits.shift, full, now[index].copy(),
                                 None if misses is None else misses[index]))
        self.hits = kept
        return self.count()

    def candidates(self, limit: int = 20) -> list[tuple[int, float | int]]:
        """Up to `limit` (address, current value) pairs, those that missed fewest scans first."""
        out = []
        for hits in sorted(self.hits or [], key=lambda h: 0 if h.misses is None else h.misses.min()):
            order = np.arange(len(hits.values)) if hits.misses is None else np.argsort(
                hits.misses, kind="stable")
            addresses = hits.addresses(self.dtype.itemsize)
            for i in order[:limit]:
                out.append((int(addresses[i]), hits.values[i].item(),
                            0 if hits.misses is None else int(hits.misses[i])))
        out.sort(key=lambda row: row[2])
        return [(address, value) for address, value, _ in out[:limit]]


class Statics:
    """Which addresses are statics: inside a module's image (its .data and .bss)."""

    def __init__(self, reader):
        self.reader = reader
        self.images = sorted(reader.images(), key=lambda r: r.start)
        self._starts = [r.start for r in self.images]

    def owner(self, address: int) -> tuple[str, int] | None:
        """(module, offset from the module's base) for a static address, else None."""
        i = bisect.bisect_right(self._starts, address) - 1
        if i < 0 or address >= self.images[i].end:
            return None
        name = self.images[i].path
        return name, address - self.reader.module_base(name)


def pointer_paths(reader, target: int, depth: int = 2, max_offset: int = 4096, limit: int = 10,
                  module: str = "") -> list[tuple[str, int, list[int]]]:
    """Pointer chains (module, offset, offsets) from module statics to `target`, shortest first.

    Only statics of `module` count when it is given (the game's own executable is the stable choice).
    """
    size = reader.pointer_size
    dtype = np.dtype("<u8" if size == 8 else "<u4")
    values, where = [], []
    for region in reader.regions():
        try:
            data = reader.read(region.start, region.size)
        except MemoryReadError:
            continue
        array = np.frombuffer(data, dtype, len(data) // size)
        plausible = array >= 0x10000
        index = np.flatnonzero(plausible)
        values.append(array[index].astype(np.uint64))
        where.append(region.start + index.astype(np.uint64) * size)
    if not values:
        return []
    values, where = np.concatenate(values), np.concatenate(where)
    order = np.argsort(values, kind="stable")
    values, where = values[order], where[order]
    statics = Statics(reader)
    found: list[tuple[str, int, list[int]]] = []
    frontier = [(target, [])]
    for _ in range(depth):
        next_frontier = []
        for address, tail in frontier:
            lo = np.searchsorted(values, np.uint64(max(0, address - max_offset)), "left")
            hi = np.searchsorted(values, np.uint64(address), "right")
            for i in range(lo, min(hi, lo + 2000)):
                location, offset = int(where[i]), address - int(values[i])
                chain = [offset] + tail
                owner = statics.owner(location)
                if owner is not None and module and owner[0] != module:
                    continue  # another module's static: neither a result nor worth following
                if owner is not None:
                    found.append((owner[0], owner[1], chain))
                else:
                    next_frontier.append((location, chain))
        if len(found) >= limit:
            break
        frontier = next_frontier[:20000]
    found.sort(key=lambda f: (len(f[2]), sum(f[2])))
    return found[:limit]


def shown(value, kind: str) -> str:
    """A reading as printed: floats as %g, integers exactly, 8-byte ones also in hex (a pointer to follow)."""
    if kind.startswith("f"):
        return f"{float(value):g}"
    number = int(value)
    return f"{number} (0x{number:X})" if DTYPES[kind].itemsize == 8 and number >= 0 else str(number)


HELP = """commands:
  type T                 scan type: i8 u8 i16 u16 i32 u32 i64 u64 f32 f64 (resets the scan)
  first VALUE | first ?  first scan: an exact value, or unknown (snapshot everything)
  increased | decreased | unchanged | changed | equal VALUE    next scan against the last values
  count                  candidates left
  list [N]               up to N candidates: address, value, module+offset when static
  read ADDRESS [T]       the value at an address now
  pointers ADDRESS [DEPTH [MAX_OFFSET [MODULE]]]   pointer chains from statics (of MODULE) to it
  wait SECONDS           pause (for scripts)
  help, quit"""


class Session:
    """The command interpreter over one process."""

    def __init__(self, reader, kind: str, align: int, out=sys.stdout):
        self.reader, self.out, self.align = reader, out, align
        self.scanner = Scanner(reader, kind, align)

    def say(self, text: str) -> None:
        """Print one line of output."""
        print(text, file=self.out, flush=True)

    def run(self, line: str) -> bool:
        """Run one command line; False on quit."""
        words = line.split("#", 1)[0].split()
        if not words:
            return True
        cmd, args = words[0].lower(), words[1:]
        s = self.scanner
        began = time.perf_counter()
        if cmd in ("quit", "exit", "q"):
            return False
        if cmd == "help":
            self.say(HELP)
        elif cmd == "type":
            self.scanner = Scanner(self.reader, self._arg(args, 0, "type"), self.align)
            self.say(f"type: {self.scanner.kind}")
        elif cmd == "first":
            value = self._arg(args, 0, "first VALUE or first ?")
            count = s.first(None if value == "?" else value)
            self._count(count, began, s.bytes_scanned)
        elif cmd in NEXT_OPS or cmd in NEXT_ALIASES or cmd == "next":
            if cmd == "next":
                cmd, args = self._arg(args, 0, "next OP"), args[1:]
            cmd = NEXT_ALIASES.get(cmd, cmd)
            count = s.next(cmd, args[0] if args else None)
            self._count(count, began, s.bytes_scanned)
        elif cmd == "count":
            self.say(f"candidates: {s.count()}")
        elif cmd == "list":
            limit = int(args[0]) if args else 20
            rows, statics = s.candidates(limit), Statics(self.reader)
            self.say(f"candidates: {s.count()}" + ("" if s.count() <= limit else f" (showing {limit})"))
            for address, value in rows:
                owner = statics.owner(address)
                where = f'  "{owner[0]}"+0x{owner[1]:X}' if owner else ""
                self.say(f"0x{address:X}  {shown(value, s.kind)}{where}")
        elif cmd == "read":
            address = int(self._arg(args, 0, "read ADDRESS [TYPE]"), 0)
            kind = args[1] if len(args) > 1 else s.kind
            if kind not in DTYPES:
                raise UserError(f"unknown type {kind!r}")
            data = self.reader.read(address, DTYPES[kind].itemsize)
            self.say(f"value: {shown(np.frombuffer(data, DTYPES[kind])[0], kind)}")
        elif cmd == "pointers":
            address = int(self._arg(args, 0, "pointers ADDRESS"), 0)
            depth = int(args[1]) if len(args) > 1 else 2
            max_offset = int(args[2], 0) if len(args) > 2 else 4096
            module = args[3] if len(args) > 3 else ""
            paths = pointer_paths(self.reader, address, depth, max_offset, module=module)
            self.say(f"pointer paths: {len(paths)}")
            for module, offset, chain in paths:
                offsets = ", ".join(f"0x{o:X}" for o in chain)
                self.say(f"  {{module: {module}, offset: 0x{offset:X}, offsets: [{offsets}], "
                         f"type: {s.kind}}}")
        elif cmd == "wait":
            time.sleep(float(self._arg(args, 0, "wait SECONDS")))
            self.say("waited")
        else:
            raise UserError(f"unknown command {cmd!r} (help lists them)")
        return True

    def _arg(self, args, i, usage):
        if len(args) <= i:
            raise UserError(f"usage: {usage}")
        return args[i]

    def _count(self, count: int, began: float, scanned: int) -> None:
        took = time.perf_counter() - began
        self.say(f"candidates: {count}  ({scanned / 1e6:.0f} MB read in {took:.2f} s)")


def find_value(args) -> int:
    """--profile P --find NAME: find the value by driving the game; print or write its chain."""
    from dreamer_live.envs.live.finder import DRIVE, Finder, as_yaml, parse_drive
    from dreamer_live.envs.live.profile import load_profile, profile_path, write_value

    if not args.profile:
        raise UserError("--find needs --profile: the game's window, keys and launch come from it")
    profile = load_profile(profile_path(args.profile))
    spec = next((v for v in profile.values if v.name == args.find), None)
    kind = args.type or (spec.type if spec else "i32")
    if args.guided:
        if args.drive is not None:
            raise UserError("--guided is for values you mark while you play; --drive for values the "
                            "finder drives with the keys: give one")
        from dreamer_live.envs.live.keys import key_name

        mark = key_name(args.mark_key)
        if mark is None or mark in {k for _, keys in profile.actions for k in keys}:
            raise UserError(f"--mark-key {args.mark_key}: give a key the game's actions do not use "
                            "(f8 by default)")
        how, drive = f"you, marking with {mark.upper()} each time it {args.guided}", ()
    else:
        if args.drive is None and not {a for a, _ in DRIVE} <= set(profile.action_names):
            raise UserError(f"{profile.path} has no actions named right, left and idle: say what its "
                            "actions do to the value with --drive ACTION:EFFECT ...")
        drive = parse_drive(args.drive or [f"{a}:{e}" for a, e in DRIVE], profile)
        how = ", ".join(f"{a} -> {e}" for a, e in drive)
    print(f"find: {args.find} ({kind}) of {profile.path}, driven by {how}; reading the game's "
          "memory only (nothing is written to it); Ctrl-C leaves the profile as it is", flush=True)
    finder = Finder(profile, args.find, kind, drive, args.module, args.display, args.launch,
                    args.wait_s)
    chains = finder.guided(args.guided, mark) if args.guided else finder.run(args.relaunches)
    best, survived = chains[0], finder.relaunched
    seen = "did as marked in this run" if args.guided else "followed the keys in this run"
    print(f"find: {args.find}: {as_yaml(best)} ({seen}"
          f"{f' and {survived} relaunches' if survived else ''}"
          f"{f'; {len(chains) - 1} more chains did too' if len(chains) > 1 else ''})", flush=True)
    for other in chains[1:6]:
        print(f"find:   also {as_yaml(other)}", flush=True)
    if args.guided:
        print("find: a marked value's chain is not checked across restarts of the game: run `python -m "
              "dreamer_live.check` after one", flush=True)
    if args.write:
        write_value(profile.path, dataclasses.replace(best, name=args.find))
        print(f"find: written into {profile.path} as memory.values.{args.find}", flush=True)
    return 0


def find_pid(args) -> int:
    """The process to scan from --pid, --process, --window or --profile."""
    if args.pid:
        return args.pid
    if args.profile:
        from dreamer_live.envs.live.profile import load_profile, profile_path

        profile = load_profile(profile_path(args.profile))
        args.process = profile.memory_process or profile.process
        args.window = profile.title
        if not (args.process or args.window):
            raise UserError(f"{profile.path} names neither a process nor a window title to scan")
    if args.process:
        if sys.platform == "win32":
            import pymem.process
            entry = pymem.process.process_from_name(args.process)
            if entry is None:
                raise UserError(f"no process named {args.process!r}")
            return int(entry.th32ProcessID)
        pids = find_pids(args.process)
        if not pids:
            raise UserError(f"no process named {args.process!r}")
        return pids[-1]
    windows = open_windows(args.display)
    try:
        window = windows.find(args.window)
        if window is None or not window.pid:
            titles = ", ".join(repr(w.title) for w in windows.list()[:8]) or "none"
            raise UserError(f"no window titled like {args.window!r} with a known process "
                            f"(open windows: {titles})")
        return window.pid
    finally:
        windows.close()


@cli.main
def main(argv: list[str] | None = None) -> int:
    """Command line: python -m dreamer_live.memscan --pid PID | --process NAME | --window TITLE."""
    p = argparse.ArgumentParser(
        prog=cli.usage_name("dreamer_live.memscan"),
        description="Find a value's address in a running game by successive filtering (first scan for "
                    "a value or unknown, then keep what increased/decreased/unchanged/changed/equal). "
                    "Type `help` at the prompt for the commands.")
    who = p.add_mutually_exclusive_group(required=True)
    who.add_argument("--pid", type=int, help="process id of the game")
    who.add_argument("--process", help="executable name of the game (supertux2, game.exe)")
    who.add_argument("--window", help="part of the game window's title")
    who.add_argument("--profile", help="a game profile (path, or a bundled name like supertux): its "
                                       "window and process; with --find, its keys and launch too")
    p.add_argument("--display", default="", help="X display of the window (Linux; default $DISPLAY)")
    p.add_argument("--type", choices=list(DTYPES),
                   help="value type (default: the profile's for the value found, else i32)")
    p.add_argument("--align", type=int, default=0,
                   help="address alignment in bytes (default: the type's size, Cheat Engine's fast scan)")
    p.add_argument("--script", action="store_true",
                   help="read commands from stdin without a prompt; stop at the first error")
    find = p.add_argument_group("finding a value by playing (--profile P --find NAME)")
    find.add_argument("--find", metavar="NAME",
                      help="the memory value to find: the game is driven with the profile's keys")
    find.add_argument("--drive", nargs="+", metavar="ACTION:EFFECT",
                      help="what each action does to the value: increased, decreased, unchanged or "
                           "changed (default right:increased left:decreased idle:unchanged)")
    find.add_argument("--guided", metavar="EFFECT", choices=("increased", "decreased", "changed"),
                      help="you play and press --mark-key each time the value does EFFECT (a score "
                           "increased, lives decreased): for values the keys do not drive")
    find.add_argument("--mark-key", default="f8", help="the key that marks a moment (default f8)")
    find.add_argument("--relaunches", type=int, default=3,
                      help="starts of the game anew a chain must survive (default 3; needs the "
                           "profile's launch.command and a game this started)")
    find.add_argument("--module", default="",
                      help="the module pointer chains start from (default the game's executable)")
    find.add_argument("--write", action="store_true",
                      help="write the best chain into the profile's memory.values (else printed)")
    find.add_argument("--launch", default="auto", choices=("auto", "true", "false"),
                      help="run the profile's launch.command (as env.live.launch; default auto)")
    find.add_argument("--wait-s", type=float, default=60.0,
                      help="how long to wait for the game's window (default 60)")
    args = p.parse_args(argv)
    if args.find:
        return find_value(args)
    if any(getattr(args, k) != p.get_default(k) for k in ("drive", "relaunches", "module", "write",
                                                           "guided", "mark_key")):
        raise UserError("--drive, --guided, --mark-key, --relaunches, --module and --write go with "
                        "--find NAME")
    args.type = args.type or "i32"
    pid = find_pid(args)
    try:
        reader = open_process(pid)
    except ProcessGone:
        raise UserError(f"no process {pid}") from None
    session = Session(reader, args.type, args.align)
    print(f"memscan: process {pid}, type {args.type}; reading its memory only (nothing is written)",
          flush=True)
    interactive = sys.stdin.isatty() and not args.script
    try:
        while True:
            if interactive:
                try:
                    line = input("memscan> ")
                except EOFError:
                    break
            else:
                line = sys.stdin.readline()
                if not line:
                    break
            try:
                if not session.run(line):
                    break
            except (UserError, ValueError) as e:
                if not interactive:
                    raise UserError(str(e)) from None
                print(f"error: {e}", flush=True)
            except ProcessGone:
                raise UserError(f"process {pid} exited") from None
    finally:
        reader.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
