"""Offline training from another run's replay folder: it trains, resumes, and never touches the source."""

import hashlib
import json
import os
import pathlib
import shutil
import subprocess
import sys

import pytest
from conftest import LEARNER_ALONE

from dreamer_live import metrics as metricslib

REPO = pathlib.Path(__file__).resolve().parents[2]
COMMON = ["--configs", "debug", "--run.quiet", "true", *LEARNER_ALONE]
KEEP = ["--learner.keep_checkpoints", "2"]


FORCE_FOUR = "--xla_force_host_platform_device_count=4"  # XLA_FLAGS: 4 CPU devices


def cpu_env(xla_flags: str = "") -> dict:
    """This environment on JAX's CPU platform, `xla_flags` added to the suite's XLA_FLAGS."""
    return dict(os.environ, JAX_PLATFORMS="cpu",
                XLA_FLAGS=f"{os.environ.get('XLA_FLAGS', '')} {xla_flags}".strip())


def command(module, *args, timeout=240, xla_flags=""):
    return subprocess.run([sys.executable, "-m", module, *map(str, args), *COMMON], cwd=REPO,
                          env=cpu_env(xla_flags), capture_output=True, text=True, timeout=timeout)


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
def source(actor_run):
    """A replay folder written by an earlier (real-time) actor run (the session's `actor_run`)."""
    return actor_run / "replay"


@pytest.fixture(scope="module")
def trained(source, tmp_path_factory):
    """One offline run of 40 updates from `source` on 2 of 4 forced CPU devices (each batch split
    over them), kept as it left its logdir: open-loop videos, a checkpoint after nearly every update
    with the newest 2 kept. Each test works on a copy."""
    before = fingerprint(source)
    run = tmp_path_factory.mktemp("offline") / "run"
    result = command("dreamer_live.learner", "--logdir", run, "--replay", source, "--offline",
                     "--run.steps", "40", "--run.video_every", "0.001", "--run.log_every", "0.2",
                     "--run.checkpoint_every", "0.0001", "--learner.devices", "2", *KEEP,
                     xla_flags=FORCE_FOUR)
    return run, result, before


def copy_run(trained, tmp_path) -> pathlib.Path:
    run = tmp_path / "run"
    shutil.copytree(trained[0], run)
    return run


def test_offline_trains_resumes_and_leaves_the_source_untouched(source, trained, tmp_path):
    _, first, before = trained
    assert any(name.endswith(".npz") for name in before) and "spaces.json" in before
    assert first.returncode == 0, first.stdout + first.stderr
    new = copy_run(trained, tmp_path)
    assert "(read-only)" in first.stdout and "training on 2 cpu devices" in first.stdout
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
    assert "training on 1 cpu device " in again.stdout  # the 2-device checkpoint resumes on 1
    assert "at 40 updates" in again.stdout and "at 50 updates (10 this run)" in again.stdout
    assert json.loads((new / "checkpoint" / "meta.json").read_text())["updates"] == 50
    # the restored state on the learner's mesh, as the train step's outputs: compiled once, not twice
    assert metricslib.read_lines(new / "metrics.jsonl", "learner")[-1]["learner/train_compiles"] == 1

    assert fingerprint(source) == before  # byte for byte, names, modes and times


@pytest.mark.slow  # a learner run, viz and eval (~30-60 s on 2 cores)
def test_kept_checkpoints_serve_viz_eval_and_a_damaged_newest_is_set_aside(source, trained, tmp_path,
                                                                          capsys):
    from dreamer_live.learner.checkpoint import Checkpointer
    from dreamer_live.tools import eval as evallib, plot, viz as vizlib

    assert trained[1].returncode == 0, trained[1].stdout + trained[1].stderr
    run = copy_run(trained, tmp_path)
    folder = run / "checkpoint"
    kept = Checkpointer(folder).kept()
    assert len(kept) == 2, sorted(p.name for p in folder.iterdir())  # keep 2
    (newest_step, newest), (old, older) = kept
    assert newest_step == 40 and 0 < old < 40

    # viz and eval accept the older kept step; an unknown one names the kept ones
    png = tmp_path / "old.png"
    assert vizlib.main(["--logdir", str(run), "--replay", str(source), "--checkpoint", str(old),
                        "--sequences", "2", "--length", "8", "--out", str(png)]) == 0
    assert f"viz: checkpoint at {old} updates" in capsys.readouterr().out and png.stat().st_size
    assert vizlib.main(["--logdir", str(run), "--replay", str(source), "--checkpoint", "1"]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        f"viz: error: no checkpoint at 1 updates in {folder}; kept: 40 (latest), {old}"]
    assert evallib.main(["--logdir", str(run), "--checkpoint", str(old), "--episodes", "2",
                         "--max-steps", "20"]) == 0
    assert f"with checkpoint at {old} updates" in capsys.readouterr().out
    lines = metricslib.read_lines(run / "metrics.jsonl", "eval")
    assert len(lines) == 3 and "eval/return_mean" in lines[-1]
    assert all(r["step"] == old and r["eval/checkpoint"] == old for r in lines)
    assert metricslib.read_lines(run / "metrics.jsonl", "learner")  # both sources in one file
    assert plot.main([str(run), "--out", str(tmp_path / "curves.png")]) == 0

    # a newest checkpoint cut short: the learner warns once and resumes from the older one
    newest.write_bytes(newest.read_bytes()[: newest.stat().st_size // 2])
    again = command("dreamer_live.learner", "--logdir", run, "--replay", source, "--offline",
                    "--run.steps", "50", *KEEP)
    assert again.returncode == 0, again.stdout + again.stderr
    warnings = [line for line in again.stdout.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1, again.stdout
    assert warnings[0].startswith(f"warning: checkpoint {newest.name} in {folder} unreadable (")
    assert warnings[0].endswith(f"; using {older.name} ({old} updates)")
    assert f"resumed from {older} at {old} updates" in again.stdout
    assert f"at 50 updates ({50 - old} this run)" in again.stdout
    assert [step for step, _ in Checkpointer(folder).kept()] == [50, old]
    assert newest.with_name(newest.name + ".damaged").exists()  # set aside, not deleted
