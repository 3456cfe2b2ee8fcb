"""Live-game I/O figures: what one tick's capture, key changes and memory reads cost.

    .venv/bin/python bench/live_io.py [--ticks 300] [--hz 15]
        Linux: starts Xvfb and the built-in Catcher in a 256x256 window (needs xvfb).
    .venv/bin/python bench/live_io.py --window "SuperTux" [--display :0]
        any platform: a game window already open (keys are sent to it: use a harmless one).
    .venv/bin/python bench/live_io.py --smoke      # 20 calls each on Catcher (skipped without Xvfb)

Prints milliseconds per call (median and p99) for capture + preprocess (64x64 RGB and grey), holding a
new key set (release one key, press another: the worst tick; XTest on Linux, pydirectinput with
PAUSE = 0 on Windows), a tick without key changes, a hotkey poll, and one memory value read, then their
sum as a fraction of the tick period (the budget the actor has).
"""

from __future__ import annotations

import argparse
import os
import pathlib
import shutil
import sys
import tempfile
import time

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from smoke import add_smoke, skip  # noqa: E402


def timed(fn, n: int) -> np.ndarray:
    """Milliseconds per call of fn(i) over n calls."""
    out = np.empty(n)
    for i in range(n):
        start = time.perf_counter()
        fn(i)
        out[i] = (time.perf_counter() - start) * 1000
    return out


def row(name: str, ms: np.ndarray) -> float:
    """Print one figure's median and p99; return the median."""
    median, p99 = float(np.median(ms)), float(np.percentile(ms, 99))
    print(f"  {name:<38} median {median:7.3f} ms   p99 {p99:7.3f} ms")
    return median


def main() -> int:
    """Measure and print."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ticks", type=int, default=300)
    p.add_argument("--hz", type=float, default=15.0, help="tick rate for the budget comparison")
    p.add_argument("--window", default="", help="title of an open game window (default: start Catcher)")
    p.add_argument("--display", default="", help="X display of that window (Linux)")
    add_smoke(p)
    args = p.parse_args()
    if args.smoke:
        args.ticks = 20
        if not args.window and not shutil.which("Xvfb"):
            return skip("live_io", "needs Xvfb (apt-get install xvfb)")

    from dreamer_live.envs.live.capture import Capture
    from dreamer_live.envs.live.keys import DirectInputKeys, KeyHolder, XTestKeys
    from dreamer_live.envs.live.memory import open_process, read_value
    from dreamer_live.envs.live.profile import ValueSpec
    from dreamer_live.envs.live.window import open_windows
    from dreamer_live.envs.wrappers import resize_image

    xvfb = game = None
    display, title, spec = args.display, args.window, None
    try:
        if not title:
            from live_fixtures import start_game, start_xvfb
            xvfb = start_xvfb()
            game = start_game(xvfb, pathlib.Path(tempfile.mkdtemp()), "catcher")
            display, title = xvfb.name, "dreamer_live Catcher"
            spec = ValueSpec("x", "f64", address=game.address("x"))
        windows = open_windows(display)
        window = windows.find(title)
        if window is None:
            print(f"no window titled like {title!r}")
            return 2
        windows.focus(window.handle)
        box = windows.geometry(window.handle)
        capture = Capture(display)
        backend = DirectInputKeys() if sys.platform == "win32" else XTestKeys(windows.display)
        keys = KeyHolder(backend)
        reader = open_process(window.pid) if window.pid else None
        if spec is None and reader is not None:  # any readable word of a writable region
            spec = ValueSpec("word", "i32", address=reader.regions()[0].start)
        n = args.ticks
        print(f"window {window.title!r} {box[2]}x{box[3]} on {display or 'the desktop'}, {n} calls each:")
        figures = {}
        figures["capture"] = row("capture + preprocess 64x64 RGB",
                                 timed(lambda i: resize_image(capture.grab(box), (64, 64), False), n))
        row("capture + preprocess 64x64 grey",
            timed(lambda i: resize_image(capture.grab(box), (64, 64), True), n))
        row("capture only", timed(lambda i: capture.grab(box), n))
        sets = [{"left"}, {"right"}]
        figures["keys"] = row("key change (release 1, press 1, sync)",
                              timed(lambda i: keys.set(sets[i % 2]), n))
        row("tick without key change", timed(lambda i: keys.set(sets[1]), n))
        keys.release_all()
        figures["hotkeys"] = row("hotkey poll (2 keys)", timed(lambda i: backend.pressed({"f9", "f10"}), n))
        figures["focus"] = row("focus check", timed(lambda i: windows.has_focus(window.handle), n))
        figures["geometry"] = row("window geometry", timed(lambda i: windows.geometry(window.handle), n))
        if reader is not None and spec is not None:
            figures["memory"] = row("memory value read", timed(lambda i: read_value(spec, reader), n))
        total = sum(figures.values())
        period = 1000.0 / args.hz
        print(f"per tick (median sum): {total:.3f} ms = {total / period:.4f} of the {period:.1f} ms tick "
              f"at {args.hz:g} Hz; key change / capture = {figures['keys'] / figures['capture']:.3f}")
        keys.release_all()
        capture.close()
        windows.close()
    finally:
        if game is not None:
            game.stop()
        if xvfb is not None:
            xvfb.proc.terminate()
            xvfb.proc.wait()
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYGAME_HIDE_SUPPORT_PROMPT", "1")
    raise SystemExit(main())
