"""Every command: --help works, and bad input is one clear line on stderr with a non-zero exit."""

import os
import pathlib
import re
import subprocess
import sys

import pytest
from conftest import stderr_lines

from dreamer_live import cli, spaces
from dreamer_live.envs import make_env

REPO = pathlib.Path(__file__).resolve().parent.parent
COMMANDS = ("dreamer_live.actor", "dreamer_live.learner", "dreamer_live.run", "dreamer_live.record")


def command(module, *args, timeout=120):
    """Run `python -m module args` in the repo; return the CompletedProcess."""
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    return subprocess.run([sys.executable, "-m", module, *map(str, args)], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=timeout)


def assert_one_line_error(result, pattern) -> str:
    """Assert a non-zero exit and one stderr line matching `pattern`; return that line."""
    lines = stderr_lines(result.stderr)
    assert result.returncode != 0, result
    assert len(lines) == 1, result.stderr
    assert re.search(pattern, lines[0]), lines[0]
    return lines[0]


@pytest.mark.parametrize("module", COMMANDS)
def test_help_names_the_flags(module):
    result = command(module, "--help")
    assert result.returncode == 0, result.stderr
    assert "--logdir" in result.stdout and "--configs" in result.stdout
    if module.endswith("learner"):
        assert "--offline" in result.stdout and "--replay" in result.stdout


def test_usage_names_the_way_the_command_was_started():
    """`dreamer-live-actor --help` says so in its usage line, `python -m dreamer_live.actor` likewise;
    memscan's --help names its filters as its prompt takes them."""
    script = pathlib.Path(sys.executable).parent / "dreamer-live-actor"
    if not script.exists():
        pytest.skip("the console scripts are not installed beside this Python")
    result = subprocess.run([str(script), "--help"], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0 and result.stdout.startswith("usage: dreamer-live-actor "), result
    result = command("dreamer_live.actor", "--help")
    assert result.stdout.startswith("usage: python -m dreamer_live.actor "), result.stdout
    result = command("dreamer_live.memscan", "--help")
    assert result.stdout.startswith("usage: python -m dreamer_live.memscan ")
    assert "/equal)" in " ".join(result.stdout.split()) and "equals" not in result.stdout


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


@pytest.mark.parametrize("cap_mb", [500, 1500])
def test_a_learner_under_a_memory_cap_says_so_in_one_line(tmp_path, cap_mb, record_property):
    """An address-space cap (prlimit --as) below what JAX needs: one line naming memory and the cap,
    exit status 1, before JAX fails to import (500 MB) or XLA aborts natively starting threads (1.5 GB);
    the error text of a memory failure inside the learner is recognised as one."""
    import shutil

    from dreamer_live.learner.__main__ import out_of_memory

    if shutil.which("prlimit") is None:
        pytest.skip("prlimit (util-linux) is not installed")
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    result = subprocess.run(["prlimit", f"--as={cap_mb << 20}", sys.executable, "-m", "dreamer_live.learner",
                             "--logdir", str(tmp_path / "run"), "--configs", "debug"],
                            cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 1, result
    line = assert_one_line_error(result, r"^learner: error: not enough memory under the address-space "
                                         rf"cap of {cap_mb / 1024:.2f} GiB .*raise the cap")
    record_property("lines", line)  # bench/faults.py's table
    assert out_of_memory(ImportError("libjax_common.so: failed to map segment from shared object"))
    assert out_of_memory(MemoryError()) and out_of_memory(RuntimeError("RESOURCE_EXHAUSTED: Out of memory"))
    assert not out_of_memory(ValueError("a shape mismatch"))


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
                     "--run.quiet", "true", "--env.name", "dreamer_live/NoSuch-v0")
    assert result.returncode == 2, result
    assert re.search(r"actor: error: unknown built-in game", result.stderr), result.stderr
    assert re.search(r"run: actor failed \(exit code 2\); stopping learner", result.stderr)


NONSENSE = [  # issue 17: tracebacks (exit 1) or silently accepted before
    ("--actor.hz", "1e999", r"'actor\.hz' must be a finite number, got inf"),
    ("--actor.hz", ".nan", r"'actor\.hz' must be a finite number, got nan"),
    ("--actor.id", "-1", r"'actor\.id' must be in \[0, 999999\], got -1"),
    ("--actor.mode", "bogus", r"'actor\.mode' must be one of \{train, eval\}, got 'bogus'"),
    ("--jax.platform", "tpu", r"'jax\.platform' must be one of .*got 'tpu'"),
    ("--agent.rssm.deter", "0", r"'agent\.rssm\.deter' must be in \[1, 65536\], got 0"),
    ("--agent.act", "bogus", r"'agent\.act' must be one of \{silu, gelu, relu, tanh\}"),
    ("--agent.horizon", "0", r"'agent\.horizon' must be in \[1, inf\), got 0"),
    ("--agent.opt.name", "bogus", r"'agent\.opt\.name' must be one of \{laprop, adam\}"),
    ("--batch_size", "100000000", r"'batch_size' must be in \[1, 4096\], got 100000000"),
    ("--agent.opt.lr", "-1", r"'agent\.opt\.lr' must be in \(0, inf\), got -1\.0"),
    ("--run.train_ratio", "-1", r"'run\.train_ratio' must be in \[0, inf\), got -1\.0"),
    ("--actor.steps", "-3", r"'actor\.steps' must be in \[0, inf\), got -3"),
    ("--actor.duration", "-1", r"'actor\.duration' must be in \[0, inf\), got -1\.0"),
    ("--learner.threads", "-5", r"'learner\.threads' must be in \[-1, 4096\], got -5"),
    ("--env.size", "0,0", r"'env\.size' must be in \[4, 1024\], got \[0, 0\]"),
]


@pytest.mark.parametrize("flag, value, message", NONSENSE, ids=[f"{f} {v}" for f, v, _ in NONSENSE])
def test_nonsense_values_are_one_line_and_exit_2(tmp_path, flag, value, message):
    result = command("dreamer_live.actor", "--logdir", tmp_path / "run", "--configs", "debug",
                     flag, value)
    assert_one_line_error(result, r"^actor: error: config key " + message)
    assert result.returncode == 2 and not (tmp_path / "run").exists()


def test_logdir_that_is_a_file(tmp_path):
    (tmp_path / "file").write_text("not a folder")
    result = command("dreamer_live.learner", "--logdir", tmp_path / "file", "--configs", "debug")
    assert_one_line_error(result, r"--logdir .*file is a file, not a folder")
    assert result.returncode == 2 and (tmp_path / "file").read_text() == "not a folder"


def test_platform_this_machine_lacks(tmp_path):
    import jax

    if any(d.platform == "gpu" for d in jax.devices()):
        pytest.skip("this machine has a GPU")
    env = {k: v for k, v in os.environ.items() if k != "JAX_PLATFORMS"}
    result = subprocess.run([sys.executable, "-m", "dreamer_live.actor", "--logdir",
                             str(tmp_path / "run"), "--configs", "debug", "--jax.platform", "gpu"],
                            cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert_one_line_error(result, r"JAX cannot use platform 'gpu' here \(jax\.platform\)")
    assert result.returncode == 2


@pytest.fixture
def read_only_folder(tmp_path):
    """A read-only tmpfs (as root: chmod does not stop root), else the test is skipped."""
    folder = tmp_path / "ro"
    folder.mkdir()
    if os.geteuid() != 0:
        os.chmod(folder, 0o555)
        yield folder
        os.chmod(folder, 0o755)
        return
    mount = subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=1m", "tmpfs", str(folder)],
                           capture_output=True, text=True)
    if mount.returncode != 0:
        pytest.skip(f"cannot mount a read-only tmpfs: {mount.stderr.strip()}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", str(folder)], check=True)


@pytest.mark.parametrize("where", ["inside", "itself"])
def test_read_only_logdir(read_only_folder, where):
    logdir = read_only_folder / "run" if where == "inside" else read_only_folder
    result = command("dreamer_live.learner", "--logdir", logdir, "--configs", "debug")
    assert_one_line_error(result, r"cannot write to --logdir .*: (Read-only file system|Permission)")
    assert result.returncode == 2


def test_ray_without_the_extra_is_one_line(tmp_path):
    """Where Ray is not installed (a `ray` that cannot be imported stands first on the path), the file
    transport's modules still import, and asking for Ray is one line naming the extra, exit 2."""
    (tmp_path / "ray").mkdir()
    (tmp_path / "ray" / "__init__.py").write_text("raise ImportError('No module named ray')\n")
    env = dict(os.environ, JAX_PLATFORMS="cpu", PYTHONPATH=str(tmp_path))
    imports = subprocess.run(
        [sys.executable, "-c", "import sys, dreamer_live.run, dreamer_live.actor, "
         "dreamer_live.learner, dreamer_live.transport, dreamer_live.launch.rayrun, "
         "dreamer_live.actor.__main__, dreamer_live.transport.raycluster; "
         "assert 'ray' not in sys.modules, 'ray imported'"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert imports.returncode == 0, imports.stderr
    result = subprocess.run(
        [sys.executable, "-m", "dreamer_live.run", "--logdir", str(tmp_path / "run"), "--configs",
         "debug", "--ray.address", "local"], cwd=REPO, env=env, capture_output=True, text=True,
        timeout=120)
    assert result.returncode == 2
    assert_one_line_error(result, r"run: error: --ray\.address needs Ray, which is not installed: "
                                  r"pip install -e '\.\[ray\]'")


def test_ray_address_not_an_address_is_one_line(tmp_path):
    result = command("dreamer_live.run", "--logdir", tmp_path, "--configs", "debug",
                     "--ray.address", "nowhere")
    assert result.returncode == 2
    assert_one_line_error(result, r"ray\.address 'nowhere' is none of local .*, auto .* or HOST:PORT")


WRONG_SHAPES = [  # issue 33: a traceback, or an unknown key without the file, before
    ("- debug\n- catcher\n", r"expected a mapping of config sections, got a list"),
    ("agent: 5\n", r"'agent' must be a mapping of keys, got 5"),
    ("agent:\n  enc: [4, 4]\n", r"'agent\.enc' must be a mapping of keys, got a list"),
    ("env:\n  name: dreamer_live/Catcher-v0\n  sizee: 4\n",
     r"unknown config key 'env\.sizee' \(did you mean 'env\.size'\?\)"),
    ("actor:\n  hz: -5\n", r"config key 'actor\.hz' must be .*got -5"),
]


@pytest.mark.parametrize("text, message", WRONG_SHAPES, ids=["list", "scalar", "nested", "typo", "range"])
@pytest.mark.parametrize("where", ["logdir", "preset"])
def test_wrong_shaped_config_file_is_one_line_naming_it(tmp_path, where, text, message, record_property):
    """A logdir's config.yaml on restart, and a preset file named with --configs, are read by one
    reader: a wrong shape is one line naming the file and the key, exit status 2."""
    if where == "logdir":
        path = tmp_path / "run" / "config.yaml"
        path.parent.mkdir()
        args = ["--logdir", path.parent]
    else:
        path = tmp_path / "mine.yaml"
        args = ["--logdir", tmp_path / "run", "--configs", "debug", path]
    path.write_text(text)
    result = command("dreamer_live.learner", *args)
    line = assert_one_line_error(result, r"^learner: error: " + re.escape(str(path)) + ": " + message)
    assert result.returncode == 2
    record_property("lines", line)  # bench/faults.py's table
