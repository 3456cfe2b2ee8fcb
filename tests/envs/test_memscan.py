"""The memory scanner: finds the Catcher's score and paddle position by successive filtering.

The game runs as a separate process in a window on a private Xvfb display; `python -m dreamer_live.memscan
--script` reads commands from stdin. The game's own export file says where the values really are: the
test's oracle, never given to the scanner.
"""

from __future__ import annotations

import pathlib
import re
import struct
import subprocess
import sys
import threading
import time

import pytest
from conftest import poll
from live_fixtures import ROOT, fake_key, running_game
from procfs import stopped

from dreamer_live.envs.live.memory import MemoryReadError, Region
from dreamer_live.envs.live.memscan import Scanner, Session, pointer_paths, tolerance
from dreamer_live.errors import UserError

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux /proc and X11")


class Memscan:
    """A `memscan --script` child process driven one command at a time."""

    def __init__(self, *args: str, env=None):
        self.proc = subprocess.Popen([sys.executable, "-m", "dreamer_live.memscan", "--script", *args],
                                     cwd=ROOT, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)
        self.lines: list[str] = []
        self._thread = threading.Thread(target=lambda: self.lines.extend(
            iter(self.proc.stdout.readline, "")), daemon=True)
        self._thread.start()
        end = time.monotonic() + 60
        while not self.lines and self.proc.poll() is None and time.monotonic() < end:
            time.sleep(0.02)  # the banner ("memscan: process N ...") comes first

    def run(self, command: str, timeout: float = 60.0) -> list[str]:
        """Send a command; the lines it printed (its first line is the result)."""
        seen = len(self.lines)
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.write("wait 0\n")  # a marker: everything before "waited" belongs to the command
        self.proc.stdin.flush()
        end = time.monotonic() + timeout
        while not any(line.startswith("waited") for line in self.lines[seen:]):
            if self.proc.poll() is not None or time.monotonic() > end:
                raise AssertionError(f"memscan stopped: {self.proc.stderr.read()[-2000:]}")
            time.sleep(0.02)
        out = self.lines[seen:]
        return [line.rstrip() for line in out[:next(i for i, l in enumerate(out) if l.startswith("waited"))]]

    def count(self, command: str) -> int:
        """Run a scan command and return the candidates left."""
        first = self.run(command)[0]
        assert first.startswith("candidates: "), first
        return int(first.split()[1])

    def close(self) -> tuple[int, str]:
        """End the session; (exit status, stderr)."""
        self.proc.stdin.close()
        return self.proc.wait(30), self.proc.stderr.read()


@linux_only
def test_finds_catcher_score_by_successive_filtering(xvfb, tmp_path):
    """first VALUE, then `equal` each new score: the game's score address is among the one or two left."""
    with running_game(xvfb, tmp_path, "catcher", "--option", "init_lives=1000") as game:
        scan = Memscan("--pid", str(game.pid), "--type", "f64")
        try:
            # Each scan with the game stopped (SIGSTOP), as a user pausing it would: a score that moved
            # during a scan left no address holding it (on a CPU 1.8x slower, 1 of 3 suites).
            with stopped(game.pid):
                score = game.read("score")
                count = scan.count(f"first {score:g}")
            assert count > 1
            # A user filters each time the score has changed, until one or two are left: the game's own
            # Python float for the score can sit in a slot that each new score reuses (the float free
            # list), so it may hold the score as long as the exported copy does (2 left after 32
            # changes in 1 of 3 runs on one machine); the listing shows both.
            for _ in range(8):
                poll("the game's score to change", lambda: game.read("score") != score, timeout=30)
                with stopped(game.pid):
                    score = game.read("score")
                    count = scan.count(f"equal {score:g}")
                    listing = scan.run("list") if count <= 2 else []
                if count <= 1:
                    break
            assert 1 <= count <= 2
            assert len(listing) == 1 + count and any(
                line.startswith(f"0x{game.address('score'):X}  {score:g}") for line in listing[1:]), listing
        finally:
            status, err = scan.close()
        assert status == 0, err


@linux_only
def test_finds_paddle_position_from_unknown_value(xvfb, tmp_path):
    """first ?, then increased / decreased / unchanged while the test holds keys in the game window."""
    conn = xvfb.xlib()
    with running_game(xvfb, tmp_path, "catcher", "--option", "init_lives=1000") as game:
        scan = Memscan("--window", "dreamer_live Catcher", "--display", xvfb.name, "--type", "f64",
                       env=xvfb.env())

        def push(keysym: str) -> None:
            fake_key(conn, keysym, True)
            time.sleep(0.4)
            fake_key(conn, keysym, False)
            time.sleep(0.3)  # the paddle stops (friction) before the scan reads it

        try:
            push("Left")
            everything = scan.count("first ?")
            assert everything > 100_000
            counts = []
            for _ in range(3):
                push("Right")
                counts.append(scan.count("increased"))
                push("Left")
                counts.append(scan.count("decreased"))
                counts.append(scan.count("unchanged"))
            counts.append(scan.count(f"equal {game.read('x'):.3f}"))
            assert counts == sorted(counts, reverse=True)
            assert counts[-1] <= 5
            addresses = [line.split()[0] for line in scan.run("list 100")[1:]]
            assert f"0x{game.address('x'):X}" in addresses
            assert scan.run(f"read {game.address('x')}")[0] == f"value: {game.read('x'):g}"
        finally:
            status, err = scan.close()
        assert status == 0, err
    conn.close()


def test_bad_commands_fail_in_one_line(tmp_path):
    """Unknown process, unknown command: exit status 2 and one line."""
    out = subprocess.run([sys.executable, "-m", "dreamer_live.memscan", "--process", "no_such_game_x"],
                         cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and out.stderr.strip().splitlines() == [
        "memscan: error: no process named 'no_such_game_x'"]
    import os
    scan = Memscan("--pid", str(os.getpid()))
    scan.proc.stdin.write("frobnicate\n")
    status, err = scan.close()
    assert status == 2 and err.strip().splitlines() == [
        "memscan: error: unknown command 'frobnicate' (help lists them)"]


# --- the scanner's logic over a fake reader (the OS seam: what pymem or /proc/PID/mem would return) ---
class FakeReader:
    """A process's memory as a few bytearrays: regions to scan and module images."""

    def __init__(self, pointer_size: int = 8):
        self.pid, self.pointer_size = 4242, pointer_size
        self.memory: dict[int, bytearray] = {}
        self.modules: dict[str, Region] = {}

    def add(self, start: int, size: int) -> bytearray:
        self.memory[start] = bytearray(size)
        return self.memory[start]

    def read(self, address: int, size: int) -> bytes:
        for start, data in self.memory.items():
            if start <= address and address + size <= start + len(data):
                return bytes(data[address - start:address - start + size])
        raise MemoryReadError(f"unmapped 0x{address:X}")

    def regions(self):
        return [Region(s, s + len(d)) for s, d in sorted(self.memory.items())]

    def images(self):
        return list(self.modules.values())

    def module_base(self, name: str) -> int:
        return self.modules[name].start

    def close(self):
        pass


def put(mem: bytearray, offset: int, fmt: str, value) -> None:
    struct.pack_into(fmt, mem, offset, value)


def test_scanner_filters_over_a_seam_reader():
    """Exact / unknown first scans and every next scan, aligned and unaligned, on known memory."""
    reader = FakeReader()
    heap = reader.add(0x10000, 4096)
    put(heap, 64, "<i", 100)  # the "health" value
    put(heap, 200, "<i", 100)  # a decoy with the same value
    put(heap, 301, "<i", 100)  # unaligned decoy: only an unaligned scan sees it
    scanner = Scanner(reader, "i32")
    assert scanner.first("100") == 2
    put(heap, 64, "<i", 90)
    assert scanner.next("decreased") == 1
    assert scanner.candidates() == [(0x10000 + 64, 90.0)]
    assert Scanner(reader, "i32", align=1).first("100") == 2  # 200 and 301 (64 holds 90 now)

    unknown = Scanner(reader, "i32")
    assert unknown.first(None) == 1024  # every aligned i32 of the region
    put(heap, 64, "<i", 95)
    put(heap, 128, "<i", -5)
    assert unknown.next("changed") == 2
    assert unknown.next("unchanged") == 2
    put(heap, 64, "<i", 96)
    assert unknown.next("increased") == 1 and unknown.candidates()[0][0] == 0x10000 + 64
    assert unknown.next("equal", "96") == 1 and unknown.next("equal", "97") == 0

    floats = Scanner(reader, "f32")
    put(heap, 512, "<f", 57.5)
    put(heap, 516, "<f", 57.56)
    assert floats.first("57.5") == 1  # rounded to the decimals typed, like Cheat Engine
    assert floats.first("57.6") == 1 and floats.candidates()[0][0] == 0x10000 + 516
    assert tolerance("58", "f32") == 0.5 and tolerance("5", "i32") == 0
    with pytest.raises(UserError, match="no first scan yet"):
        Scanner(reader, "i32").next("increased")
    with pytest.raises(UserError, match="not a i32 value"):
        Scanner(reader, "i32").first("abc")


def test_pointer_paths_find_chains_from_module_statics():
    """A two-level chain game.exe+0x30 -> [+0x10] -> [+0x8] is found for the value's address."""
    for size in (8, 4):
        reader = FakeReader(size)
        fmt = "<Q" if size == 8 else "<I"
        image = reader.add(0x400000, 0x1000)
        reader.modules["game.exe"] = Region(0x400000, 0x401000, "game.exe")
        world, player = reader.add(0x20000, 0x100), reader.add(0x30000, 0x100)
        put(image, 0x30, fmt, 0x20000)  # static pointer to the world
        put(world, 0x10, fmt, 0x30000)  # world->player
        put(player, 0x8, "<f", 321.0)  # player->x
        paths = pointer_paths(reader, 0x30008, depth=3, max_offset=0x100)
        assert ("game.exe", 0x30, [0x10, 0x8]) in paths
        # The chain in profile form reads the value back through the same seam.
        from dreamer_live.envs.live.memory import read_value
        from dreamer_live.envs.live.profile import ValueSpec
        spec = ValueSpec("x", "f32", module="game.exe", offset=0x30, offsets=(0x10, 0x8))
        assert read_value(spec, reader) == 321.0


def test_session_commands_over_a_seam_reader():
    """The command interpreter: type, first, next, list, read, errors."""
    import io
    reader = FakeReader()
    heap = reader.add(0x10000, 256)
    put(heap, 16, "<d", 3.0)
    out = io.StringIO()
    session = Session(reader, "i32", 0, out)
    for line in ["type f64", "first 3", "count", "list", "read 0x10010 f64", "# a comment", ""]:
        assert session.run(line)
    assert not session.run("quit")
    text = out.getvalue().splitlines()
    assert text[0] == "type: f64" and text[1].startswith("candidates: 1 ")
    assert "0x10010  3" in text and "value: 3" in text
    with pytest.raises(UserError, match="usage: first"):
        session.run("first")
    # every spelling of the equal filter: the word in --help and HELP, and the aliases
    for spelling in ("equal 3", "equals 3", "= 3", "next equal 3"):
        assert session.run(spelling) and out.getvalue().splitlines()[-1].startswith("candidates: 1 ")
    # a pointer (u64) reads exactly and in hex, the address to give `first` or `pointers` next
    put(heap, 32, "<Q", 0x55A743882AA0)
    for line in ["read 0x10020 u64", "type u64", "first 0x55A743882AA0", "list"]:
        assert session.run(line)
    text = out.getvalue().splitlines()
    assert "value: 94176880896672 (0x55A743882AA0)" in text
    assert text[-2:] == ["candidates: 1", "0x10020  94176880896672 (0x55A743882AA0)"]


# --- finding a value by playing (memscan --profile P --find NAME) ----------------------------------
def finder_profile(folder, base: str, **changes) -> pathlib.Path:
    """A profile of `base` (a bundled profile's name) whose x is not found yet, with top-level changes."""
    from dreamer_live.config import dump_yaml

    path = folder / "finding.yaml"
    path.write_text(dump_yaml({"base": base, "memory": {"values": {"x": {"type": "f64"}}}, **changes}))
    return path


def find(*args: str, env=None, timeout: float = 240) -> subprocess.CompletedProcess:
    """`python -m dreamer_live.memscan ARGS` run to its end."""
    return subprocess.run([sys.executable, "-m", "dreamer_live.memscan", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout)


@linux_only
def test_the_finder_drives_catcher_to_its_paddle_x_and_writes_it(xvfb, tmp_path):
    """--find x on a running Catcher window: the finder holds right, left and nothing itself and keeps
    what moved as told, until one address is left: the game's own (its export file, the oracle, read
    by the profile for the game's other values only); --write puts it into the profile."""
    from dreamer_live.envs.live.profile import load_profile

    with running_game(xvfb, tmp_path, "catcher", "--option", "init_lives=1000") as game:
        profile = finder_profile(tmp_path, "catcher_window", launch=None,
                                 memory={"addresses_from": str(game.export),
                                         "values": {"x": {"type": "f64"}}})
        done = find("--profile", str(profile), "--find", "x", "--display", xvfb.name, "--write",
                    env=xvfb.env())
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
        assert "the game was running already: its chains are checked in this run of it only" in done.stdout
        assert re.search(r"^find: round 1: right -> increased: [\d,]+ \| left -> decreased: [\d,]+ \| "
                         r"idle -> unchanged: [\d,]+$", done.stdout, re.M), done.stdout
        x = load_profile(profile).values[0]
        assert (x.name, x.address, x.type) == ("x", game.address("x"), "f64"), done.stdout[-2000:]
        assert f"find: x: {{address: 0x{game.address('x'):X}, type: f64}}" in done.stdout


@pytest.mark.parametrize("args, error", [
    (["--pid", "1", "--find", "x"], "--find needs --profile: the game's window, keys and launch "
                                    "come from it"),
    (["--profile", "PROFILE", "--find", "x", "--drive", "jump:increased"],
     r"--drive jump:increased: .*finding\.yaml has no action 'jump' \(actions: idle, left, right\)"),
    (["--profile", "PROFILE", "--find", "x", "--drive", "left:grew"],
     "--drive left:grew: the effect must be one of increased, decreased, unchanged, changed"),
    (["--profile", "PROFILE", "--find", "x", "--launch", "false", "--wait-s", "0.5"],
     r"no window with title containing 'dreamer_live Catcher' after 0 s \(open windows: .*\)"),
    (["--pid", "1", "--relaunches", "1"],
     "--drive, --guided, --mark-key, --relaunches, --module and --write go with --find NAME"),
])
def test_the_finder_refuses_bad_input_in_one_line(xvfb, tmp_path, args, error):
    profile = finder_profile(tmp_path, "catcher_window")
    done = find(*[str(profile) if a == "PROFILE" else a for a in args], "--display", xvfb.name,
                env=xvfb.env(), timeout=60)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1 and re.fullmatch(f"memscan: error: {error}",
                                                                      lines[0]), done.stderr


def _supertux() -> str:
    import os
    import shutil

    debian = "/usr/games/supertux2"  # /usr/games is not on every PATH
    return shutil.which("supertux2") or (debian if os.path.exists(debian) else "")


@linux_only
@pytest.mark.slow
@pytest.mark.timeout(300)
@pytest.mark.skipif(not _supertux(), reason="SuperTux is not installed (apt-get install supertux)")
def test_the_finder_finds_tux_x_from_a_fresh_launch_and_a_chain_that_survives_a_relaunch(xvfb, tmp_path):
    """SuperTux's profile with x not found yet: the finder starts the game, finds x by walking Tux,
    a pointer chain from the game's statics to it, starts the game again and keeps the chains that
    still follow the keys; the one written reads what the shipped profile's hand-found chain reads."""
    from dreamer_live.envs.live import LiveEnv, LiveOptions
    from dreamer_live.envs.live.memory import read_value
    from dreamer_live.envs.live.profile import load_profile, profile_path

    profile = finder_profile(tmp_path, str(profile_path("supertux")),
                             memory={"values": {"x": {"type": "f32"}}})
    env = dict(xvfb.env(), SUPERTUX2_USER_DIR=str(tmp_path / "supertux"))
    done = find("--profile", str(profile), "--find", "x", "--display", xvfb.name, "--launch", "true",
                "--relaunches", "1", "--write", env=env)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "find: relaunch 1 of 1: " in done.stdout and " and 1 relaunches" in done.stdout
    found = load_profile(profile).values[0]
    assert found.module == "supertux2", found  # a chain from the game's statics, or a static itself
    shipped = load_profile(profile_path("supertux"))
    live = LiveEnv(shipped, size=(16, 16), grayscale=True,
                   options=LiveOptions(display=xvfb.name, launch="true", wait_s=60))
    try:
        live.reset()
        right = shipped.action_names.index("right")
        readings = []
        for action in (right, 0):
            live.act(action)
            time.sleep(0.6)
            live.keys.release_all()
            time.sleep(0.6)  # at rest, both copies of x agree
            readings.append((read_value(shipped.values[0], live._reader),
                             read_value(found, live._reader)))
    finally:
        live.close()
    assert readings[0][0] > 150 and all(a == b for a, b in readings), readings


@linux_only
def test_the_guided_finder_finds_catchers_lives_from_the_moments_a_player_marks(xvfb, tmp_path):
    """--guided decreased: nobody catches, so a life goes with every fruit; the test, as the person
    would, presses F8 a moment after each loss it sees (the game's export file, its oracle). Within 5
    marks the finder is down to a few candidates, the game's own lives among them (its score falls
    with every loss too)."""
    conn = xvfb.xlib()
    with running_game(xvfb, tmp_path, "catcher", "--option", "init_lives=8") as game:
        profile = finder_profile(tmp_path, "catcher_window", launch=None,
                                 memory={"addresses_from": str(game.export),
                                         "values": {"lives": {"type": "f64"}}})
        marking = threading.Event()

        def person() -> None:
            last = game.read("lives")
            while not marking.wait(0.02):
                lives = game.read("lives")
                if lives < last:
                    time.sleep(0.3)  # seen, then pressed
                    fake_key(conn, "F8", True)
                    time.sleep(0.1)
                    fake_key(conn, "F8", False)
                last = lives

        thread = threading.Thread(target=person, daemon=True)
        thread.start()
        try:
            done = find("--profile", str(profile), "--find", "lives", "--guided", "decreased",
                        "--display", xvfb.name, env=xvfb.env(), timeout=120)
        finally:
            marking.set()
            thread.join()
    conn.close()
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    marks = re.findall(r"^find: mark (\d+): decreased: ([\d,]+) candidates$", done.stdout, re.M)
    assert marks and int(marks[-1][0]) <= 5, done.stdout
    found = re.findall(r"^find: (?:lives:|  also) \{address: (0x[0-9A-F]+), type: f64\}", done.stdout, re.M)
    assert f"0x{game.address('lives'):X}" in found, done.stdout
