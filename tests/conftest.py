"""Test-session set-up: in-process tests use JAX's persistent compilation cache, as the commands do,
so a step compiled by one test (or by an earlier run) is loaded, not compiled again, by the next."""

import os
import pathlib
import subprocess
import sys

import pytest

from dreamer_live import cli
from dreamer_live.config import resolve

REPO = pathlib.Path(__file__).resolve().parent.parent


def pytest_configure(config):
    """Turn on the compilation cache under the user's dreamer_live cache folder."""
    cli.setup_jax(resolve())


@pytest.fixture(scope="session")
def actor_run(tmp_path_factory) -> pathlib.Path:
    """A logdir whose replay a real actor wrote: 200 steps of real-time Catcher (debug preset, 50 Hz)
    in 4 chunks. Shared by the modules that copy it (hostile files) or only read it (offline
    training): none may change it."""
    logdir = tmp_path_factory.mktemp("actor_run") / "run"
    result = subprocess.run(
        [sys.executable, "-m", "dreamer_live.actor", "--logdir", str(logdir), "--configs", "debug",
         "--run.quiet", "true", "--actor.hz", "50", "--actor.steps", "200"],
        cwd=REPO, env=dict(os.environ, JAX_PLATFORMS="cpu"), capture_output=True, text=True,
        timeout=240)
    assert result.returncode == 0, result.stdout + result.stderr
    return logdir


def poll(what: str, predicate, timeout: float = 10.0, interval: float = 0.01):
    """Call `predicate` until it returns something true and return that; fail after `timeout` s."""
    import time

    import pytest

    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


def stderr_lines(text: str) -> list[str]:
    """A command's stderr lines without XLA's slow-compile alarm, which XLA itself prints (in a
    banner of asterisks after a glog line) when a compile takes long on a loaded machine."""
    import re

    lines, inside = [], False
    for line in text.strip().splitlines():
        if re.match(r"^\*{8,}$", line.strip()):
            inside = not inside
        elif not inside and not re.match(r"^[IWEF]\d{4} \d\d:\d\d:\d\d\.\d+ .*\] ?", line):
            lines.append(line)
    return lines
