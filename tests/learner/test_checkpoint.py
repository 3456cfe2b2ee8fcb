"""Checkpoints: the newest K kept and loadable by step, a damaged newest one set aside for the previous,
and SIGKILL at any moment of a save leaves a complete checkpoint to resume from."""

import os
import pathlib
import random
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

from dreamer_live.atomic import is_temporary
from dreamer_live.errors import UserError
from dreamer_live.learner.checkpoint import Checkpointer

REPO = pathlib.Path(__file__).resolve().parents[2]
TEMPLATE = {"w": np.zeros((64, 64), np.float32), "count": np.zeros((), np.int32)}


def state_at(step: int) -> dict:
    """A state whose every value tells the step it was saved at."""
    return {"w": np.full((64, 64), step, np.float32), "count": np.asarray(step, np.int32)}


def assert_state_is(state, step):
    assert float(np.asarray(state["w"]).min()) == float(np.asarray(state["w"]).max()) == step
    assert int(state["count"]) == step


def test_keeps_the_newest_k_and_loads_each_by_step(tmp_path):
    checkpointer = Checkpointer(tmp_path / "checkpoint", keep=3)
    for step in (10, 20, 30, 40, 50):
        checkpointer.save(state_at(step), {"updates": step})
    names = sorted(p.name for p in (tmp_path / "checkpoint").iterdir())
    assert names == ["meta.json", "state_00000030.msgpack", "state_00000040.msgpack",
                     "state_00000050.msgpack"]
    reader = Checkpointer(tmp_path / "checkpoint")  # another process: viz, eval, a new learner
    assert [step for step, _ in reader.kept()] == [50, 40, 30]
    state, meta = reader.load(TEMPLATE)
    assert_state_is(state, 50) and meta["updates"] == 50
    assert reader.path == tmp_path / "checkpoint" / "state_00000050.msgpack"
    for step in (40, 30):
        state, meta = reader.load(TEMPLATE, step=step)
        assert_state_is(state, step)
    with pytest.raises(UserError) as error:
        reader.load(TEMPLATE, step=20)  # pruned
    assert str(error.value) == (f"no checkpoint at 20 updates in {tmp_path / 'checkpoint'}; "
                                "kept: 50 (latest), 40, 30")
    # the same step saved twice (a timer checkpoint, then the exit one) is kept once
    checkpointer.save(state_at(50), {"updates": 50})
    assert [step for step, _ in reader.kept()] == [50, 40, 30]
    one = Checkpointer(tmp_path / "one", keep=1)
    for step in (1, 2, 3):
        one.save(state_at(step), {"updates": step})
    assert sorted(p.name for p in (tmp_path / "one").iterdir()) == ["meta.json",
                                                                     "state_00000003.msgpack"]
    with pytest.raises(UserError, match="keep_checkpoints must be >= 1"):
        Checkpointer(tmp_path / "none", keep=0)


def test_a_loaded_state_is_placed_where_the_template_is(tmp_path):
    """A learner's state lives on its mesh; restored elsewhere, its types differed from the train
    step's outputs and a resumed learner traced and compiled its train step twice."""
    import jax

    from dreamer_live.agent import devices

    rep = devices.replicated(jax.sharding.Mesh(np.array(jax.devices()[:1]), (devices.AXIS,)))
    checkpointer = Checkpointer(tmp_path / "checkpoint")
    checkpointer.save(state_at(7), {"updates": 7})
    state, _ = checkpointer.load(jax.device_put(TEMPLATE, rep))
    assert_state_is(state, 7)
    assert all(leaf.sharding == rep for leaf in jax.tree.leaves(state))
    assert state["count"].dtype == np.int32


def test_damaged_newest_is_set_aside_and_the_previous_loaded_with_one_warning(tmp_path):
    folder = tmp_path / "checkpoint"
    checkpointer = Checkpointer(folder, keep=3)
    for step in (10, 20, 30):
        checkpointer.save(state_at(step), {"updates": step})
    newest = folder / "state_00000030.msgpack"
    data = newest.read_bytes()
    newest.write_bytes(data[:5000])  # cut short
    # asked for by step, the damaged one is an error, not a silent substitute
    with pytest.raises(UserError, match=r"state_00000030\.msgpack is unreadable"):
        Checkpointer(folder).load(TEMPLATE, step=30)
    warnings = []
    resumed = Checkpointer(folder, keep=3)
    state, meta = resumed.load(TEMPLATE, warn=warnings.append)
    assert_state_is(state, 20) and resumed.path == folder / "state_00000020.msgpack"
    assert len(warnings) == 1 and "\n" not in warnings[0]
    assert warnings[0].startswith(f"warning: checkpoint state_00000030.msgpack in {folder} unreadable (")
    assert warnings[0].endswith("; renamed to *.damaged; using state_00000020.msgpack (20 updates)")
    assert (folder / "state_00000030.msgpack.damaged").read_bytes() == data[:5000]  # nothing deleted
    # training on from 20: the next save is the newest, and no warning comes again
    resumed.save(state_at(25), {"updates": 25})
    assert [step for step, _ in Checkpointer(folder).kept()] == [25, 20, 10]
    state, _ = Checkpointer(folder).load(TEMPLATE, warn=warnings.append)
    assert_state_is(state, 25) and len(warnings) == 1
    for path in folder.glob("state*.msgpack"):
        path.write_bytes(b"\x93garbage")
    with pytest.raises(UserError, match=r"state_00000025\.msgpack is unreadable .*\(and the 2 older"):
        Checkpointer(folder).load(TEMPLATE, warn=warnings.append)
    assert len(list(folder.glob("state*.msgpack"))) == 3  # none readable: all left where they were


@pytest.mark.parametrize("damage", ["flipped bytes", "NaN"])
def test_flipped_bytes_or_nan_inside_a_checkpoint_set_it_aside_like_a_truncated_one(tmp_path, damage):
    folder = tmp_path / "checkpoint"
    checkpointer = Checkpointer(folder, keep=3)
    checkpointer.save(state_at(10), {"updates": 10})
    checkpointer.save(state_at(20) if damage != "NaN" else {**state_at(20), "w": np.full(
        (64, 64), np.nan, np.float32)}, {"updates": 20})
    newest = folder / "state_00000020.msgpack"
    if damage == "flipped bytes":  # 64 bytes in the middle of the weights: still valid msgpack
        data = bytearray(newest.read_bytes())
        middle = len(data) // 2
        data[middle:middle + 64] = bytes(b ^ 0x01 for b in data[middle:middle + 64])
        newest.write_bytes(bytes(data))
    warnings = []
    state, meta = Checkpointer(folder).load(TEMPLATE, warn=warnings.append)
    assert_state_is(state, 10) and meta["updates"] == 10
    reason = "checksum mismatch" if damage == "flipped bytes" else "holds NaN or infinity"
    assert len(warnings) == 1 and f"unreadable ({reason})" in warnings[0]
    assert (folder / "state_00000020.msgpack.damaged").exists()


CHILD = textwrap.dedent("""
    import sys
    import numpy as np
    from dreamer_live.learner.checkpoint import Checkpointer

    checkpointer = Checkpointer(sys.argv[1], keep=2)
    step = 0
    if checkpointer.exists():
        state, meta = checkpointer.load({"w": np.zeros(1 << 20, np.float32)})
        step = int(meta["updates"])
        assert float(state["w"].min()) == float(state["w"].max()) == step, "inconsistent state"
    print("resumed", step, flush=True)
    while True:
        step += 1
        checkpointer.save({"w": np.full(1 << 20, step, np.float32)}, {"updates": step})
""")


def test_sigkill_during_saves_always_leaves_a_complete_checkpoint(tmp_path):
    """A saver killed at random moments (4 MB states, saved back to back), restarted each time: it
    always resumes from a complete checkpoint, never one step back more than the kill can explain."""
    folder = tmp_path / "checkpoint"
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    rng = random.Random(0)
    last = 0
    for kill in range(8):
        child = subprocess.Popen([sys.executable, "-c", CHILD, str(folder)], cwd=REPO, env=env,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            line = child.stdout.readline()
            assert line.startswith("resumed "), line + child.stderr.read()
            resumed = int(line.split()[1])
            assert resumed == last  # the newest complete save before the kill
            deadline = time.monotonic() + 30
            while [k for k, _ in Checkpointer(folder).kept()][:1] in ([], [resumed]) and time.monotonic() < deadline:
                time.sleep(0.01)  # at least one new save done
            time.sleep(rng.uniform(0.0, 0.3))
        finally:
            child.send_signal(signal.SIGKILL)
            child.wait()
            child.stdout.close()
            child.stderr.close()
        warnings = []
        state, meta = Checkpointer(folder).load({"w": np.zeros(1 << 20, np.float32)},
                                                warn=warnings.append)
        assert not warnings, warnings  # every file in place is whole
        assert float(state["w"].min()) == float(state["w"].max()) == meta["updates"] > resumed
        assert len(Checkpointer(folder).kept()) <= 3  # keep=2, plus one not yet pruned at most
        # a temporary file cut short by the kill may remain; the next save clears it
        assert len([p for p in folder.iterdir() if is_temporary(p)]) <= 2
        last = int(meta["updates"])
