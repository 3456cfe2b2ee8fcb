"""Hostile files, poisoned numbers and nonsense values, tried on real processes and real files.

A module-scoped base replay is written once by a real actor (debug preset); each test copies it into
its own logdir, spoils something, and runs the learner or actor on it.
"""

import os
import pathlib
import shutil
import subprocess
import sys

import numpy as np
import pytest
from flax import serialization

REPO = pathlib.Path(__file__).resolve().parent.parent
QUIET = ["--configs", "debug", "--run.quiet", "true", "--run.video_every", "0"]


def command(module, logdir, *args, timeout=240):
    """Run `python -m module --logdir logdir QUIET args` to the end; return the CompletedProcess."""
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    return subprocess.run([sys.executable, "-m", module, "--logdir", str(logdir), *QUIET,
                           *map(str, args)], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=timeout)


def error_line(result) -> str:
    """The one stderr line of a command that stopped with exit status 2."""
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1, (result.returncode, result.stderr)
    return lines[0]


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> pathlib.Path:
    """A logdir whose replay a real actor wrote: 200 steps of real-time Catcher in 4 chunks."""
    logdir = tmp_path_factory.mktemp("hostile") / "base"
    result = command("dreamer_live.actor", logdir, "--actor.hz", "50", "--actor.steps", "200")
    assert result.returncode == 0, result.stderr
    return logdir


def copy_replay(base: pathlib.Path, logdir: pathlib.Path) -> pathlib.Path:
    """A new logdir holding a copy of the base replay (and no config, params or checkpoint)."""
    shutil.copytree(base / "replay", logdir / "replay")
    return logdir / "replay"


def finite_file(path: pathlib.Path) -> bool:
    """True when every float array in a msgpack file (params or checkpoint) is finite."""
    def leaves(tree):
        if isinstance(tree, dict):
            for value in tree.values():
                yield from leaves(value)
        elif isinstance(tree, bytes):
            try:
                yield from leaves(serialization.msgpack_restore(tree))
            except Exception:
                pass
        elif isinstance(tree, np.ndarray) and tree.dtype.kind == "f":
            yield tree

    return all(np.isfinite(x).all() for x in leaves(serialization.msgpack_restore(path.read_bytes())))


def test_learner_skips_non_finite_updates_then_stops_with_one_line(base, tmp_path):
    copy_replay(base, tmp_path)
    # lr 1e30: the first update blows the parameters up, every later one is NaN
    result = command("dreamer_live.learner", tmp_path, "--run.steps", "40", "--run.train_ratio", "0",
                     "--agent.opt.lr", "1e30", "--learner.max_skipped", "5",
                     "--run.checkpoint_every", "0.01", "--run.publish_every", "0.1")
    assert "5 updates in a row with a non-finite loss" in error_line(result)
    files = [*(tmp_path / "params").glob("params-*.msgpack"),
             *(tmp_path / "checkpoint").glob("state_*.msgpack")]
    assert files and all(finite_file(path) for path in files)


def test_actor_refuses_a_non_finite_version_and_keeps_its_own(base, tmp_path):
    import hashlib
    import json
    import time

    from dreamer_live import sync
    from dreamer_live.replay import Reader

    copy_replay(base, tmp_path)
    result = command("dreamer_live.learner", tmp_path, "--run.steps", "1", "--run.train_ratio", "0")
    assert result.returncode == 0, result.stderr
    good = max((tmp_path / "params").glob("params-*.msgpack"))
    blob = serialization.msgpack_restore(good.read_bytes())
    tree = serialization.msgpack_restore(blob["params"])

    def poison(node):
        return {k: poison(v) for k, v in node.items()} if isinstance(node, dict) \
            else np.full_like(node, np.nan)

    payload = serialization.msgpack_serialize(poison(tree))
    meta = {**blob["meta"], "version": 999, "time": time.time(),
            "sha256": hashlib.sha256(payload).hexdigest()}
    name = sync.version_file(999)
    (tmp_path / "params" / name).write_bytes(
        serialization.msgpack_serialize({"meta": meta, "params": payload}))
    (tmp_path / "params" / sync.POINTER).write_text(json.dumps({**meta, "file": name}))
    result = command("dreamer_live.actor", tmp_path, "--actor.hz", "50", "--actor.steps", "150",
                     "--actor.param_interval", "0.2")
    assert result.returncode == 0, result.stderr
    assert "NaN or infinity" in result.stderr + result.stdout
    with Reader(tmp_path / "replay", prefetch=0) as reader:
        actions = np.concatenate(list(reader.read_stream("action").values()))
    assert len(actions) >= 350 and np.isfinite(actions).all()
