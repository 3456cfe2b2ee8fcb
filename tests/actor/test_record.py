"""`python -m dreamer_live.record`: a person's play on a live game window recorded as demonstrations,
with no key ever sent."""

from __future__ import annotations

import itertools
import json
import shutil
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
from live_fixtures import (
    ROOT,
    KeyWatch,
    eventually,
    running_game,
    stop_process,
    wait_for_line,
    write_profile,
)


def xdotool(xvfb, *args: str) -> None:
    """xdotool on the display: the person at the keyboard."""
    subprocess.run(["xdotool", *args], env=xvfb.env(), check=True, timeout=10)


@pytest.mark.slow
@pytest.mark.skipif(not shutil.which("xdotool"), reason="xdotool is not installed (apt-get install xdotool)")
def test_record_follows_the_persons_keys_and_sends_none(xvfb, tmp_path):
    """`record` on the Catcher window while xdotool holds right 3 s, left 3 s, then both 1 s: the demo's
    actions follow the keys in that order (both -> the nearest action, counted); no key is ever sent
    (the profile's reset taps Enter, the actor would hold each action); Ctrl-C loses nothing."""
    from dreamer_live.replay import Reader
    out = subprocess.run([sys.executable, "-m", "dreamer_live.record", "--help"], cwd=ROOT,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and "DIR/demos" in out.stdout
    out = subprocess.run([sys.executable, "-m", "dreamer_live.record", "--logdir", str(tmp_path / "bad"),
                          "--configs", "catcher"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and out.stderr.strip().count("\n") == 0 and "--env.window true" in out.stderr

    watch = KeyWatch(xvfb, ("Right", "Left", "Return"))
    with running_game(xvfb, tmp_path, "catcher", "--option", "init_lives=1000") as game:
        logdir = tmp_path / "run"
        proc = subprocess.Popen(
            [sys.executable, "-m", "dreamer_live.record", "--logdir", str(logdir), "--configs", "catcher_live",
             "--env.profile", str(write_profile(tmp_path, game.export)), "--env.live.display", xvfb.name,
             "--run.quiet", "true"], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env=xvfb.env())
        try:
            lines = wait_for_line(proc, "live: playing", timeout=60)
            assert eventually(lambda: any("reset: press enter" in line for line in lines))
            time.sleep(1.0)  # the first ticks: nothing held
            xdotool(xvfb, "keydown", "Right")
            right_at = time.monotonic()
            assert eventually(lambda: game.read("x") > 50, timeout=3.0)  # the person moves the paddle
            time.sleep(max(0.0, right_at + 3.0 - time.monotonic()))
            xdotool(xvfb, "keyup", "Right", "keydown", "Left")
            left_at = time.monotonic()
            time.sleep(3.0)
            xdotool(xvfb, "keydown", "Right")  # both: no action holds them
            both_at = time.monotonic()
            time.sleep(1.0)
            xdotool(xvfb, "keyup", "Right", "keyup", "Left")
            time.sleep(1.0)
            stopped_at = time.time()
            assert stop_process(proc, signal.SIGINT, timeout=30) == 0, proc.stderr.read()[-3000:]
        finally:
            stop_process(proc, signal.SIGKILL)
    watch.close()
    # Nothing was sent: Enter (the reset step) never went down, nor Right while the person held only Left.
    assert not watch.seen("Return")
    assert not watch.seen("Right", left_at + 0.2, both_at - 0.05)
    assert eventually(lambda: any("held keys no action holds" in line for line in lines))

    assert not (logdir / "replay").exists()
    with Reader(logdir / "demos", prefetch=0, readonly=True) as reader:
        (stream,) = reader.streams
        assert stream.startswith("demo0_")
        actions = reader.read_stream("action")[stream].argmax(-1)
        times = reader.read_stream("tick_time")[stream]
        firsts = reader.read_stream("is_first")[stream]
    assert firsts[0] and stopped_at - times[-1] < 1.0  # Ctrl-C: the last ticks were written too
    assert np.diff(times[1:]).mean() == pytest.approx(1 / 15, rel=0.1)  # the actor's tick rate
    runs = [(int(a), len(list(g))) for a, g in itertools.groupby(actions)]
    names = {0: "idle", 1: "left", 2: "right"}
    long_runs = [names[a] for a, n in runs if n >= 10]
    assert long_runs == ["idle", "right", "left", "idle"], runs  # both held -> left (nearest, first)
    assert sum(n for a, n in runs if a == 2) >= 40  # ~3 s
    left_ticks = sum(n for a, n in runs if a == 1)
    assert left_ticks >= 40 + 12  # ~3 s of left, and ~1 s of both recorded as left
    metrics = [json.loads(line) for line in (logdir / "metrics.jsonl").read_text().splitlines()]
    unmatched = [m["record/unmatched"] for m in metrics if "record/unmatched" in m]
    assert unmatched and 10 <= unmatched[-1] <= 20
