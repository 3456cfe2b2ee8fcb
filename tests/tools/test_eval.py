"""eval on a real short run (conftest.run_dir): episodes, metrics lines, best and worst videos, and
the plot panel those lines get."""

import re

import numpy as np
import pytest
from conftest import IMAGE_AGENT, TRAIN_STEPS
from PIL import Image

IMAGE = IMAGE_AGENT["env.size"][0]


@pytest.mark.slow  # shares the session's short training run (conftest.run_dir, ~15 s to build)
def test_eval_writes_best_and_worst_videos_and_metrics(run_dir, capsys, tmp_path):
    from dreamer_live import metrics
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
