"""eval on a real short run (conftest.run_dir): episodes, metrics lines, best and worst videos, and
the plot panel those lines get."""

import re
import shutil
import signal
import subprocess
import sys

import numpy as np
import pytest
from conftest import IMAGE_AGENT, TRAIN_STEPS
from live_fixtures import stop_process, wait_for_line
from PIL import Image

from dreamer_live import metrics

IMAGE = IMAGE_AGENT["env.size"][0]


@pytest.mark.slow  # shares the session's short training run (conftest.run_dir, ~15 s to build)
def test_eval_writes_best_and_worst_videos_and_metrics(run_dir, capsys, tmp_path):
    from dreamer_live.tools import eval as evallib, plot

    code = evallib.main(["--logdir", str(run_dir), "--episodes", "2", "--max-steps", "40"])
    out = capsys.readouterr()
    assert code == 0, out.err
    assert f"params version 1 ({TRAIN_STEPS} updates)" in out.out
    assert f"eval: appending results to {run_dir / 'metrics.jsonl'}" in out.out
    assert re.search(r"return -?\d+\.\d\d \+- \d+\.\d\d over 2 episodes", out.out), out.out
    lengths = [int(n) for n in re.findall(r"episode \d/2: return \S+, length (\d+)", out.out)]
    returns = [float(n) for n in re.findall(r"episode \d/2: return (\S+),", out.out)]
    assert len(lengths) == 2
    # metrics.jsonl: one line per episode, then the summary; all at the params' update count
    lines = metrics.read_lines(run_dir / "metrics.jsonl", "eval")
    episodes, summary = lines[:-1], lines[-1]
    assert [r["eval/length"] for r in episodes] == lengths
    assert [round(r["eval/return"], 2) for r in episodes] == returns
    assert summary["eval/return_mean"] == pytest.approx(np.mean([r["eval/return"] for r in episodes]))
    assert summary["eval/episodes"] == 2 and summary["eval/length_mean"] == np.mean(lengths)
    for r in lines:
        assert r["step"] == TRAIN_STEPS and r["eval/params_version"] == 1 and r["eval/greedy"] == 1
        assert "eval/checkpoint" not in r
    # the plot command reads a metrics file holding eval lines, and draws them in a panel of their own
    titles = [title for title, _, _ in plot.panels([plot.Run(run_dir, "run")])]
    assert titles[-1].startswith("eval return")
    assert plot.main([str(run_dir), "--out", str(tmp_path / "curves.png")]) == 0
    assert (tmp_path / "curves.png").stat().st_size > 0
    for name in ("best", "worst"):
        path = run_dir / "videos" / f"eval_{name}_{TRAIN_STEPS:08d}.gif"
        with Image.open(path) as gif:
            assert gif.size == (IMAGE * 4, IMAGE * 4)
            assert gif.n_frames in [n + 1 for n in lengths]  # the reset frame, then one per step


@pytest.mark.slow  # one eval process (JAX start and compile, ~6 s)
def test_eval_stopped_by_sigterm_says_so_and_keeps_its_episodes(run_dir, tmp_path):
    """SIGTERM mid-eval stops it as Ctrl-C does (cli.main): the command's `finally` closes the env (a
    live game it launched is stopped, as check's test shows) and its metrics file; one line, exit
    status 128 + 15, no traceback, and the episodes finished before are in metrics.jsonl. Before, SIGTERM
    killed it at once, leaving a launched game running."""
    logdir = tmp_path / "run"  # a copy: the other eval test counts run_dir's eval lines
    shutil.copytree(run_dir, logdir, ignore=shutil.ignore_patterns("videos"))
    before = len(metrics.read_lines(logdir / "metrics.jsonl", "eval"))
    proc = subprocess.Popen([sys.executable, "-m", "dreamer_live.eval", "--logdir", str(logdir),
                             "--episodes", "100000", "--max-steps", "40"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for_line(proc, "eval: episode 2/100000")
    finally:
        code = stop_process(proc, signal.SIGTERM)
    err = proc.stderr.read()
    assert code == 128 + signal.SIGTERM, err
    assert err.strip().splitlines()[-1] == "eval: stopped (SIGTERM)", err
    assert "Traceback" not in err, err
    assert len(metrics.read_lines(logdir / "metrics.jsonl", "eval")) >= before + 2  # episodes 1, 2 kept
