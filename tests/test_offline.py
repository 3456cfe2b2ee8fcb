"""Offline training from another run's replay folder: it trains, resumes, and never touches the source."""

import hashlib
import json
import os
import pathlib
import subprocess
import sys

import pytest

from dreamer_live import metrics as metricslib

REPO = pathlib.Path(__file__).resolve().parent.parent
COMMON = ["--configs", "debug", "--run.quiet", "true"]


def command(module, *args, timeout=240):
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    return subprocess.run([sys.executable, "-m", module, *map(str, args), *COMMON], cwd=REPO,
                          env=env, capture_output=True, text=True, timeout=timeout)


def fingerprint(folder: pathlib.Path) -> dict[str, str]:
    """Every file and folder under `folder` with its content hash and mode."""
    out = {}
    for path in sorted(folder.rglob("*")):
        rel = str(path.relative_to(folder))
        if path.is_dir():
            out[rel] = "dir"
        else:
            digest = hashlib.sha256(path.read_bytes()).hexdigest()
            out[rel] = f"{digest} {oct(path.stat().st_mode)} {path.stat().st_mtime_ns}"
    return out


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    """A replay folder written by an earlier (real-time) actor run."""
    old = tmp_path_factory.mktemp("old") / "run"
    result = command("dreamer_live.actor", "--logdir", old, "--actor.steps", "200",
                     "--actor.hz", "50")
    assert result.returncode == 0, result.stdout + result.stderr
    return old / "replay"


def test_offline_trains_resumes_and_leaves_the_source_untouched(source, tmp_path):
    before = fingerprint(source)
    assert any(name.endswith(".npz") for name in before) and "spaces.json" in before
    new = tmp_path / "new"
    first = command("dreamer_live.learner", "--logdir", new, "--replay", source, "--offline",
                    "--run.steps", "40", "--run.video_every", "0.001", "--run.log_every", "0.2")
    assert first.returncode == 0, first.stdout + first.stderr
    assert "(read-only)" in first.stdout
    assert "stopped (run.steps reached) at 40 updates" in first.stdout
    assert json.loads((new / "params" / "latest.json").read_text())["step"] == 40
    assert json.loads((new / "checkpoint" / "meta.json").read_text())["updates"] == 40
    records = metricslib.read_lines(new / "metrics.jsonl", "learner")
    assert records and records[-1]["step"] == 40 and "train/loss/total" in records[-1]
    assert list((new / "videos").glob("openloop_*.png"))
    assert not (new / "replay").exists()  # nothing copied into the new logdir

    again = command("dreamer_live.learner", "--logdir", new, "--replay", source, "--offline",
                    "--run.steps", "50")
    assert again.returncode == 0, again.stdout + again.stderr
    assert "at 40 updates" in again.stdout and "at 50 updates (10 this run)" in again.stdout
    assert json.loads((new / "checkpoint" / "meta.json").read_text())["updates"] == 50

    assert fingerprint(source) == before  # byte for byte, names, modes and times
