"""Every command: --help works, and bad input is one clear line on stderr with a non-zero exit."""

import os
import pathlib
import re
import subprocess
import sys

import pytest

from dreamer_live import cli, spaces
from dreamer_live.envs import make_env

REPO = pathlib.Path(__file__).resolve().parent.parent
COMMANDS = ("dreamer_live.actor", "dreamer_live.learner", "dreamer_live.run")


def command(module, *args, timeout=120):
    """Run `python -m module args` in the repo; return the CompletedProcess."""
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    return subprocess.run([sys.executable, "-m", module, *map(str, args)], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=timeout)


def assert_one_line_error(result, pattern):
    lines = result.stderr.strip().splitlines()
    assert result.returncode != 0, result
    assert len(lines) == 1, result.stderr
    assert re.search(pattern, lines[0]), lines[0]


@pytest.mark.parametrize("module", COMMANDS)
def test_help_names_the_flags(module):
    result = command(module, "--help")
    assert result.returncode == 0, result.stderr
    assert "--logdir" in result.stdout and "--configs" in result.stdout
    if module.endswith("learner"):
        assert "--offline" in result.stdout and "--replay" in result.stdout


@pytest.mark.parametrize("module", COMMANDS)
def test_unknown_preset(module, tmp_path):
    result = command(module, "--logdir", tmp_path / "run", "--configs", "debgu")
    assert_one_line_error(result, r"unknown preset 'debgu'.*did you mean 'debug'")


@pytest.mark.parametrize("module", COMMANDS)
def test_conflicting_logdir(module, tmp_path):
    cli.logdir_config(tmp_path, ["debug"], {})
    result = command(module, "--logdir", tmp_path, "--configs", "debug",
                     "--env.name", "dreamer_live/Pong-v0")
    assert_one_line_error(result, r"was configured with env\.name=.*use the same --configs")


def test_offline_missing_replay(tmp_path):
    result = command("dreamer_live.learner", "--logdir", tmp_path / "new", "--configs", "debug",
                     "--offline", "--replay", tmp_path / "nowhere" / "replay")
    assert_one_line_error(result, r"replay folder .*nowhere/replay does not exist")


def test_offline_empty_replay(tmp_path):
    (tmp_path / "old" / "replay").mkdir(parents=True)
    result = command("dreamer_live.learner", "--logdir", tmp_path / "new", "--configs", "debug",
                     "--offline", "--replay", tmp_path / "old" / "replay")
    assert_one_line_error(result, r"replay folder .*old/replay holds no steps")


def test_unknown_override_key(tmp_path):
    result = command("dreamer_live.actor", "--logdir", tmp_path, "--configs", "debug",
                     "--actor.hzz", "10")
    assert_one_line_error(result, r"unknown config key 'actor\.hzz'.*did you mean 'actor\.hz'")


def test_unreadable_checkpoint(tmp_path):
    config = cli.logdir_config(tmp_path, ["debug"], {})
    env = make_env(config)  # the learner reads the game's spaces from the replay folder
    spaces.save(tmp_path / "replay", env.obs_space, env.act_space)
    env.close()
    (tmp_path / "checkpoint").mkdir()
    (tmp_path / "checkpoint" / "state_00000100.msgpack").write_bytes(b"\x93not a checkpoint")
    result = command("dreamer_live.learner", "--logdir", tmp_path, "--configs", "debug",
                     "--run.quiet", "true")
    assert_one_line_error(result, r"checkpoint .*state_00000100\.msgpack is unreadable")


def test_run_reports_the_failing_child(tmp_path):
    """A child that fails is named with its exit status; the other is stopped; the run fails."""
    result = command("dreamer_live.run", "--logdir", tmp_path, "--configs", "debug",
                     "--run.quiet", "true", "--actor.hz", "-1")
    assert result.returncode == 2, result
    assert re.search(r"actor.*hz must be", result.stderr), result.stderr
    assert re.search(r"run: actor failed \(exit code 2\); stopping learner", result.stderr)
