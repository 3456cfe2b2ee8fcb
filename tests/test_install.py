"""The package's wheel in a fresh venv outside the checkout: presets ship with it, a run trains."""

import json
import os
import pathlib
import shutil
import subprocess
import sys
import sysconfig

import pytest
from conftest import UNSTARVED_LEARNER

from dreamer_live.config import read_yaml

REPO = pathlib.Path(__file__).resolve().parent.parent


def python(fresh: pathlib.Path, *args, script: str = "python", cwd: pathlib.Path,
           timeout: float = 60) -> subprocess.CompletedProcess:
    """Run the fresh venv's `script` with `args` in `cwd`; fail with its output unless it exits 0."""
    env = dict(os.environ, JAX_PLATFORMS="cpu", SDL_VIDEODRIVER="dummy")
    env.pop("PYTHONPATH", None)
    result = subprocess.run([str(fresh / "bin" / script), *map(str, args)], cwd=cwd, env=env,
                            capture_output=True, text=True, timeout=timeout)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return result


@pytest.fixture(scope="module")
def fresh(tmp_path_factory) -> pathlib.Path:
    """A venv outside the checkout with the wheel; its dependencies are the test venv's (a .pth line)."""
    tmp = tmp_path_factory.mktemp("install")
    # Built from a copy: setuptools' build/ and egg-info stay out of the checkout, and a module
    # deleted since an earlier build cannot ride along from a stale build/lib.
    src = tmp / "src"
    src.mkdir()
    shutil.copy(REPO / "pyproject.toml", src)
    shutil.copy(REPO / "README.md", src)
    shutil.copytree(REPO / "dreamer_live", src / "dreamer_live",
                    ignore=shutil.ignore_patterns("__pycache__"))
    subprocess.run([sys.executable, "-m", "pip", "wheel", src, "--no-deps", "-q", "-w", tmp / "dist"],
                   check=True, timeout=300)
    venv = tmp / "fresh"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", venv], check=True, timeout=60)
    subprocess.run([sys.executable, "-m", "pip", "--python", venv / "bin" / "python", "install",
                    "--no-deps", "-q", *(tmp / "dist").glob("*.whl")], check=True, timeout=300)
    site = python(venv, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])", cwd=tmp)
    # A .pth line adds a folder but runs none of that folder's .pth files: the checkout's editable
    # install (a hook in one of them) stays off, and the wheel's copy is the one imported.
    deps = pathlib.Path(site.stdout.strip()) / "test_venv_deps.pth"
    deps.write_text(sysconfig.get_paths()["purelib"] + "\n")
    (tmp / "work").mkdir()
    return venv


def test_the_wheel_is_what_imports(fresh):
    """From another folder, `import dreamer_live` finds the wheel's copy in the fresh venv."""
    cwd = fresh.parent / "work"
    out = python(fresh, "-c", "import dreamer_live; print(dreamer_live.__file__)", cwd=cwd)
    assert pathlib.Path(out.stdout.strip()).is_relative_to(fresh)


@pytest.mark.slow  # ~9 s: the run ends when its learner has done the file's 2 updates
def test_a_run_trains_from_another_folder_with_a_preset_file_of_its_own(fresh):
    """`run --configs debug mine.yaml` elsewhere: the learner updates, publishes and checkpoints."""
    cwd = fresh.parent / "work"
    (cwd / "mine.yaml").write_text("run: {steps: 2}\n")
    out = python(fresh, "-m", "dreamer_live.run", "--logdir", "RUN", "--configs", "debug", "mine.yaml",
                 "--run.quiet", "true", *UNSTARVED_LEARNER, cwd=cwd, timeout=180)
    assert "Traceback" not in out.stdout + out.stderr and "run: done" in out.stdout
    logdir = cwd / "RUN"
    assert read_yaml(logdir / "config.yaml")["run"]["steps"] == 2
    assert list((logdir / "params").glob("params-*.msgpack"))
    assert json.loads((logdir / "checkpoint" / "meta.json").read_text())["updates"] == 2


def test_help_lists_the_presets_and_the_console_script_runs(fresh):
    """`python -m dreamer_live.run --help` and `dreamer-live-run --help` name the shipped presets."""
    for command in (["-m", "dreamer_live.run", "--help"], ["--help"]):
        script = "python" if command[0] == "-m" else "dreamer-live-run"
        out = python(fresh, *command, script=script, cwd=fresh.parent / "work").stdout
        assert "catcher_pixels" in out and "supertux" in out and "--configs" in out
