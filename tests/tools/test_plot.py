"""Learning curves: metrics.jsonl of several runs -> one PNG; bad input is one line and exit 2."""

import subprocess
import sys

import numpy as np
import pytest
from PIL import Image

from dreamer_live.metrics import encode_line
from dreamer_live.tools import plot


def write_run(logdir, seed, lines=30, partial_tail=True):
    """A metrics.jsonl as the actor and learner write it (real encoder), ending half-written."""
    logdir.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    with open(logdir / "metrics.jsonl", "w") as f:
        for k in range(lines):
            when = 1.7e9 + 6 * k
            f.write(encode_line("actor", 100 * k, {
                "episode/return": 0.2 * k * (seed + 1) + rng.normal(), "episode/length": 100,
                "episode/furthest_x": 40.0 * k,
                "actor/late_ticks": int(rng.integers(3)), "actor/late_ms_p50": 1.0,
                "actor/late_ms_p99": 4.0 + seed, "actor/late_ms_max": 9.0,
                "actor/policy_lag_steps": 20 + k, "actor/policy_lag_s": 3.0}, when))
            f.write(encode_line("learner", 25 * k, {
                "train/image_loss": 50.0 / (k + 1), "train/reward_loss": 1.0 / (k + 1),
                "train/policy_loss": float("nan") if k == 2 else rng.normal(),
                "learner/updates_per_s": 5.0}, when + 1))
        if partial_tail:  # a writer caught mid-line must not break the plot
            f.write('{"time": 1.7e9, "source": "act')


def test_several_runs_share_one_figure_with_a_legend(tmp_path):
    write_run(tmp_path / "fast", 0)
    write_run(tmp_path / "slow", 1)
    out = tmp_path / "curves.png"
    proc = subprocess.run([sys.executable, "-m", "dreamer_live.plot", str(tmp_path / "fast"),
                           str(tmp_path / "slow"), "--out", str(out)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert f"wrote {out}" in proc.stdout and "60 metric lines" in proc.stdout
    rows = -(-len(plot.panels([plot.Run(tmp_path / "fast", "fast")])) // plot.COLUMNS)
    with Image.open(out) as image:
        assert image.size == (round(plot.PANEL_INCHES[0] * plot.COLUMNS * 100),
                              round(plot.PANEL_INCHES[1] * rows * 100))

    runs = [plot.Run(tmp_path / "fast", "fast"), plot.Run(tmp_path / "slow", "slow")]
    fig = plot.figure(runs)
    titles = {ax.get_title(): ax for ax in fig.axes if ax.get_visible()}
    for title in ("episode return vs env steps", "episode return vs wall-clock",
                  "furthest x per episode", "train/image_loss", "train/reward_loss", "train/policy_loss",
                  "tick lateness (ms): p99 solid, p50 dashed", "policy lag (learner updates)",
                  "policy lag (seconds)"):
        assert title in titles, title
    returns = titles["episode return vs env steps"]
    assert {line.get_label() for line in returns.get_lines()} >= {"fast", "slow"}
    assert [t.get_text() for t in fig.legends[0].get_texts()] == ["fast", "slow"]
    # the wall-clock axis is minutes since each run's first line: 30 lines 6 s apart
    xs, ys = runs[0].curve("actor", "episode/return", "minutes")
    assert len(xs) == 30 and xs[0] == 0 and xs[-1] == pytest.approx(29 * 6 / 60)
    lag_x, lag = runs[1].curve("actor", "actor/policy_lag_steps", "step")
    assert lag[-1] == 49 and lag_x[-1] == 2900


def test_minutes_leave_out_the_time_a_resumed_run_was_stopped(tmp_path):
    (tmp_path / "run").mkdir()
    legs = [1.7e9, 1.7e9 + 5 * 60 + 86400]  # 5 minutes of lines, a day stopped, 5 minutes more
    with open(tmp_path / "run" / "metrics.jsonl", "w") as f:
        for leg, k in ((leg, k) for leg in legs for k in range(61)):
            f.write(encode_line("actor", k, {"episode/furthest_x": 1.0}, leg + 5 * k))
    run = plot.Run(tmp_path / "run", "run")
    xs, _ = run.curve("actor", "episode/furthest_x", "minutes")
    assert xs[60] == pytest.approx(5) and xs[61] == pytest.approx(5) and xs[-1] == pytest.approx(10)
    assert np.all(np.diff(xs) >= 0)
    # The resumed actor counted its steps from 0 again: its env steps follow on from the first's.
    steps, _ = run.curve("actor", "episode/furthest_x")
    assert list(steps) == list(range(61)) + [60 + k for k in range(61)]


def test_env_steps_count_on_per_actor_across_restarts(tmp_path):
    """Two actors in one logdir, each restarted once: each one's steps go on from its last line, and
    the learner's (updates, restored from its checkpoint) stay as written."""
    (tmp_path / "run").mkdir()
    lines = [("actor", 0, 100), ("actor", 1, 40), ("learner", None, 7), ("actor", 0, 300),
             ("actor", 1, 10), ("actor", 0, 20), ("learner", None, 5), ("actor", 1, 30), ("actor", 0, 5)]
    with open(tmp_path / "run" / "metrics.jsonl", "w") as f:
        for k, (source, actor, step) in enumerate(lines):
            fields = {"x": float(k)} if actor is None else {"actor/id": actor, "x": float(k)}
            f.write(encode_line(source, step, fields, 1.7e9 + k))
    run = plot.Run(tmp_path / "run", "run")
    assert run.steps == [100, 40, 7, 300, 50, 320, 5, 70, 325]
    assert list(run.curve("learner", "x")[0]) == [7, 5]


def test_missing_panels_say_no_data(tmp_path):
    write_run(tmp_path / "run", 0, lines=3, partial_tail=False)
    text = (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()
    (tmp_path / "run" / "metrics.jsonl").write_text("\n".join(t for t in text if "learner" in t) + "\n")
    fig = plot.figure([plot.Run(tmp_path / "run", "run")])
    empty = [ax.get_title() for ax in fig.axes
             if any(t.get_text() == "no data yet" for t in ax.texts)]
    assert "episode return vs env steps" in empty and "train/image_loss" not in empty


def test_smooth_ignores_gaps():
    y = np.array([1.0, np.nan, 3.0, 5.0])
    assert np.allclose(plot.smooth(y, 2), [1.0, 1.0, 3.0, 4.0])


@pytest.mark.parametrize("case, message", [
    ("missing", "does not exist: no metrics yet"),
    ("empty", "no metric lines yet"),
    ("not_a_dir", "is not a directory"),
    ("jpg", "plots are written as .png"),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path, case, message):
    run = tmp_path / "run"
    run.mkdir()
    args = [str(run)]
    if case == "empty":
        (run / "metrics.jsonl").write_text("")
    if case == "not_a_dir":
        args = [str(tmp_path / "file.txt")]
        (tmp_path / "file.txt").write_text("x")
    if case == "jpg":
        write_run(run, 0, lines=2)
        args += ["--out", str(tmp_path / "x.jpg")]
    proc = subprocess.run([sys.executable, "-m", "dreamer_live.plot", *args],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], proc.stderr
