"""Hostile files, poisoned numbers and nonsense values, tried on real processes and real files.

A base replay is written once per session by a real actor (debug preset, conftest's `actor_run`);
each test copies it into its own logdir, spoils something, and runs the learner or actor on it.
"""

import contextlib
import json
import os
import pathlib
import shutil
import subprocess
import sys

import numpy as np
import pytest
from conftest import LEARNER_ALONE, stderr_lines
from flax import serialization

REPO = pathlib.Path(__file__).resolve().parent.parent
# Every learner here runs alone (LEARNER_ALONE); the actors ignore its keys.
QUIET = ["--configs", "debug", "--run.quiet", "true", "--run.video_every", "0", *LEARNER_ALONE]


def command(module, logdir, *args, timeout=240):
    """Run `python -m module --logdir logdir QUIET args` to the end; return the CompletedProcess."""
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    return subprocess.run([sys.executable, "-m", module, "--logdir", str(logdir), *QUIET,
                           *map(str, args)], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=timeout)


def error_line(result) -> str:
    """The one stderr line of a command that stopped with exit status 2."""
    lines = stderr_lines(result.stderr)
    assert result.returncode == 2 and len(lines) == 1, (result.returncode, result.stderr)
    return lines[0]


@pytest.fixture(scope="module")
def base(actor_run) -> pathlib.Path:
    """A logdir whose replay a real actor wrote: 200 steps of real-time Catcher in 4 chunks (the
    session's `actor_run`, never changed here: each test copies its replay)."""
    return actor_run


@pytest.fixture(scope="module")
def initial(base):
    """The debug preset's initial agent state (on the host) for the base replay's spaces, as a
    learner starting there would make it."""
    import jax

    from dreamer_live import config as configlib, spaces
    from dreamer_live.agent import Agent

    agent = Agent(configlib.resolve(["debug"]), *spaces.load(base / "replay"))
    return agent, jax.device_get(agent.init(jax.random.PRNGKey(agent.config.seed)))


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


def test_learner_skips_non_finite_updates_then_stops_with_one_line(base, initial, tmp_path):
    import jax

    from dreamer_live.learner.checkpoint import Checkpointer

    copy_replay(base, tmp_path)
    # A run that diverged after 1 update: its parameters blown up to +-1e30 (finite, so the
    # checkpoint loads), as one update at learning rate 1e30 leaves them (LaProp's first step is
    # +-lr per weight); every update from there is NaN. A checkpoint, not `--agent.opt.lr 1e30`:
    # the learning rate is a compile-time constant, so that learner compiled a train step of its
    # own (~30 s cold); this one runs the debug preset's, which the suite compiles anyway.
    _, state = initial
    rng = np.random.default_rng(0)

    def blow_up(x):
        return np.where(rng.random(x.shape) < 0.5, -1e30, 1e30).astype(x.dtype)

    state = {**state, "params": jax.tree.map(blow_up, state["params"])}
    Checkpointer(tmp_path / "checkpoint").save(state, {"updates": 1, "env_steps": 200})
    result = command("dreamer_live.learner", tmp_path, "--run.steps", "40", "--run.train_ratio", "0",
                     "--learner.max_skipped", "5",
                     "--run.checkpoint_every", "0.01", "--run.publish_every", "0.1")
    line = error_line(result)
    assert "5 updates in a row with a non-finite loss" in line and "at 1 updates" in line, line
    files = [*(tmp_path / "params").glob("params-*.msgpack"),
             *(tmp_path / "checkpoint").glob("state_*.msgpack")]
    assert files and all(finite_file(path) for path in files)


def test_a_learner_resumed_with_no_new_data_says_no_update_yet_not_a_nan_loss(base, initial, tmp_path,
                                                                              record_property):
    """A checkpoint at the train ratio of the replay it resumes on (100 updates of 4 x 16 steps at
    ratio 32 on 200 steps): its status line (drawn on a terminal: a pty) says no update yet. Stopped by
    two signals at once (a person pressing Ctrl-C twice; two kinds, so that neither is merged into the
    other), it says the second in one line and still saves and exits 0, no traceback."""
    import pty
    import re
    import select
    import signal

    from conftest import poll

    from dreamer_live.learner.checkpoint import Checkpointer

    copy_replay(base, tmp_path)
    Checkpointer(tmp_path / "checkpoint").save(initial[1], {"updates": 100, "env_steps": 200})
    terminal, child_end = pty.openpty()
    learner = subprocess.Popen(
        [sys.executable, "-m", "dreamer_live.learner", "--logdir", str(tmp_path), *QUIET,
         "--run.quiet", "false", "--run.log_every", "0.5"],
        cwd=REPO, env=dict(os.environ, JAX_PLATFORMS="cpu"), stdout=child_end, stderr=child_end)
    os.close(child_end)
    shown = bytearray()

    def screen() -> str:
        while select.select([terminal], [], [], 0)[0]:
            try:
                shown.extend(os.read(terminal, 1 << 16))
            except OSError:  # the learner has exited and closed its end
                break
        return shown.decode(errors="replace")

    try:
        poll("two status lines while training", lambda: len(re.findall(
            r"learner \| 100 updates \| .*? \| v\d+ \| ", screen())) >= 2, timeout=120)
        learner.send_signal(signal.SIGTERM)
        learner.send_signal(signal.SIGINT)
        assert learner.wait(60) == 0, screen()
    finally:
        learner.kill()
        learner.wait()
        screen()
        os.close(terminal)
    statuses = [s for s in re.split(r"[\r\n]+", shown.decode(errors="replace")) if "updates |" in s]
    assert statuses and all(re.search(r"\| v\d+ \| no update yet\s*$", s) for s in statuses), statuses
    record_property("lines", statuses[-1].strip())  # bench/faults.py's table
    text = shown.decode(errors="replace")
    assert re.search(r"learner: SIG(INT|TERM): already stopping, saving first; a third quits without "
                     r"saving\r?\n", text), text
    assert re.search(r"learner: stopped \(SIG(INT|TERM)\) at 100 updates \(0 this run\)", text), text
    assert "Traceback" not in text and "KeyboardInterrupt" not in text, text


def test_actor_refuses_a_non_finite_version_and_keeps_its_own(base, initial, tmp_path):
    import hashlib
    import json
    import time

    from dreamer_live.replay import Reader
    from dreamer_live.transport import sync

    copy_replay(base, tmp_path)
    # a good version, as the learner publishes its initial parameters (in this process: a learner
    # started for it spent ~12 s on start-up)
    agent, state = initial
    sync.Publisher(tmp_path / "params", sync.model_hash(agent.config)).publish(
        agent.policy_params(state), 0)
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


def arrays_of(path: pathlib.Path) -> dict:
    with np.load(path) as data:
        return {key: data[key] for key in data.files}


def lying_name(replay):
    """A real chunk under a far-future name declaring 10^9 steps."""
    name = "20991231T235959-9_abcdef-000999-1000000000.npz"
    shutil.copy(min(replay.glob("*-0_*.npz")), replay / name)
    return name


def zip_bomb(replay):
    """A few kB of zeros that inflate to 32 MB, named for the 8,000,000 steps they declare."""
    name = "20261122T000001-7_bbbbbb-000000-8000000.npz"
    np.savez_compressed(replay / name, reward=np.zeros(8_000_000, np.float32))
    return name


def foreign(replay):
    """The real keys, 5,000 steps, and a vector 3 wider than the game's."""
    arrays = {k: np.repeat(v[:1], 5000, axis=0) for k, v in arrays_of(min(replay.glob("*-0_*.npz"))).items()}
    arrays["vector"] = np.zeros((5000, arrays["vector"].shape[1] + 3), np.float32)
    name = "20261122T000002-8_cccccc-000000-5000.npz"
    np.savez_compressed(replay / name, **arrays)
    return name


def non_finite(replay):
    """A real chunk with one NaN reward and one infinite observation, as a new stream."""
    arrays = arrays_of(min(replay.glob("*-0_*.npz")))
    arrays["reward"][5], arrays["vector"][7, 1] = np.nan, np.inf
    name = f"20261122T000003-5_eeeeee-000000-{len(arrays['reward'])}.npz"
    np.savez_compressed(replay / name, **arrays)
    return name


def fifo(replay):
    name = "20261122T000004-6_dddddd-000000-32.npz"
    os.mkfifo(replay / name)
    return name


def dev_zero(replay):
    name = "20261122T000005-6_ffffff-000000-32.npz"
    os.symlink("/dev/zero", replay / name)
    return name


HOSTILE_CHUNKS = {"lying name": lying_name, "zip bomb": zip_bomb, "foreign chunk": foreign,
                  "non-finite values": non_finite, "fifo": fifo, "symlink to /dev/zero": dev_zero}
REASONS = {"lying name": "declares 1000000000 steps", "zip bomb": "declares 8000000 steps",
           "foreign chunk": "'vector' is (7,) float32, expected (4,) float32",
           "non-finite values": "non-finite values", "fifo": "not a regular file",
           "symlink to /dev/zero": "not a regular file"}


@pytest.mark.timeout(120)
@pytest.mark.parametrize("case", HOSTILE_CHUNKS)
def test_a_hostile_chunk_is_quarantined_with_its_reason_and_hides_nothing(base, tmp_path, case,
                                                                         caplog):
    import logging

    from dreamer_live.replay import Reader

    replay = copy_replay(base, tmp_path)
    real = sorted(p.name for p in replay.glob("*.npz"))
    name = HOSTILE_CHUNKS[case](replay)
    with caplog.at_level(logging.WARNING, logger="dreamer_live.replay"):
        with Reader(replay, capacity=1_000_000, prefetch=0) as reader:
            assert reader.num_steps == 200 and reader.corrupt == [name]
    assert sorted(p.name for p in replay.glob("*.npz")) == real  # every real chunk stays
    assert os.path.lexists(replay / "corrupt" / name)
    assert any(name in r.getMessage() and REASONS[case] in r.getMessage() for r in caplog.records), \
        [r.getMessage() for r in caplog.records]


def test_learner_trains_on_the_real_chunks_beside_every_hostile_one(base, tmp_path):
    import json

    replay = copy_replay(base, tmp_path)
    names = [make(replay) for make in HOSTILE_CHUNKS.values()]
    result = command("dreamer_live.learner", tmp_path, "--run.steps", "3", "--run.train_ratio", "0",
                     timeout=180)
    assert result.returncode == 0, result.stderr
    assert sorted(p.name for p in (replay / "corrupt").iterdir()) == sorted(names)
    held = [json.loads(line).get("replay/held") for line in
            (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert 200 in held


@pytest.mark.parametrize("field, value, reason", [
    ("act.n", 10**9, "act.n 1000000000 is not 1 to 4096 actions"),
    ("obs.vector.shape", [10**5, 10**5], r"shape \(100000, 100000\) is beyond"),
])
def test_hostile_spaces_json_is_one_line_not_a_hang(base, tmp_path, field, value, reason):
    import json
    import re

    replay = copy_replay(base, tmp_path)
    spaces = json.loads((replay / "spaces.json").read_text())
    node = spaces
    *parents, leaf = field.split(".")
    for part in parents:
        node = node[part]
    node[leaf] = value
    (replay / "spaces.json").write_text(json.dumps(spaces))
    result = command("dreamer_live.learner", tmp_path, "--run.steps", "5", timeout=120)
    assert re.search(r"spaces\.json is unreadable \(.*" + reason, error_line(result))


@pytest.mark.parametrize("pointer", [
    {"version": 10**15, "file": "params-1000000000000000.msgpack"},  # names no file
    {"version": 10**15, "file": "params-000003.msgpack"},  # a real file that is not that version
])
def test_a_lying_latest_json_moves_no_version_and_prunes_nothing(tmp_path, pointer):
    import json

    from dreamer_live.transport import sync

    tree = {"w": np.ones((4, 4), np.float32)}
    publisher = sync.Publisher(tmp_path, "0123456789abcdef", keep=3)
    for step in range(3):
        publisher.publish(tree, step)
    (tmp_path / "params-999999999999999.msgpack").write_bytes(b"not a version")
    (tmp_path / sync.POINTER).write_text(json.dumps({**pointer, "step": 1, "time": 0.0}))
    restarted = sync.Publisher(tmp_path, "0123456789abcdef", keep=3)  # a restarted learner
    assert restarted.version == 3
    assert restarted.publish(tree, 3) == 4
    assert sorted(p.name for p in tmp_path.glob("params-0*.msgpack")) == [
        sync.version_file(v) for v in (2, 3, 4)]


def test_a_second_actor_with_the_same_id_is_refused_and_a_dead_ones_lock_taken_over(tmp_path):
    import json
    import signal

    from conftest import poll

    lock = tmp_path / "actor-0.lock"
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    first = subprocess.Popen([sys.executable, "-m", "dreamer_live.actor", "--logdir", str(tmp_path),
                              *QUIET, "--actor.duration", "300"], cwd=REPO, env=env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        def holder():
            try:
                return json.loads(lock.read_text()).get("pid")
            except (OSError, ValueError):
                return None

        assert poll("the first actor's lock", holder, timeout=60) == first.pid
        line = error_line(command("dreamer_live.actor", tmp_path, "--actor.steps", "5", timeout=60))
        assert f"actor 0 already runs on this logdir (pid {first.pid} on host" in line
        other = command("dreamer_live.actor", tmp_path, "--actor.id", "1", "--actor.steps", "5")
        assert other.returncode == 0, other.stderr  # another id is welcome
        first.send_signal(signal.SIGKILL)
        first.wait(30)
        second = command("dreamer_live.actor", tmp_path, "--actor.steps", "5")
        assert second.returncode == 0, second.stderr
        assert f"took over actor-0.lock from pid {first.pid}" in second.stdout
        assert lock.read_text() == ""  # released on a clean exit
    finally:
        first.kill()
        first.wait()


def test_a_second_learner_on_a_logdir_is_refused_and_a_dead_ones_lock_taken_over(tmp_path, record_property):
    """Learners on a logdir with no spaces.json wait for an actor: they hold the lock, nothing else."""
    import json
    import re
    import signal

    from conftest import poll

    logdir, lock = tmp_path / "run", tmp_path / "run" / "learner.lock"
    (logdir / "replay").mkdir(parents=True)  # empty: no spaces.json, so a learner waits
    env = dict(os.environ, JAX_PLATFORMS="cpu")

    def learner(out: pathlib.Path):
        with out.open("w") as f:
            return subprocess.Popen([sys.executable, "-m", "dreamer_live.learner", "--logdir",
                                     str(logdir), *QUIET], cwd=REPO, env=env, stdout=f,
                                    stderr=subprocess.STDOUT)

    def holder():
        try:
            return json.loads(lock.read_text()).get("pid")
        except (OSError, ValueError):
            return None

    first = learner(tmp_path / "first.txt")
    third = None
    try:
        assert poll("the first learner's lock", holder, timeout=60) == first.pid
        host = json.loads(lock.read_text())["host"]
        line = error_line(command("dreamer_live.learner", logdir, timeout=60))
        assert line == (f"learner: error: a learner already runs on this logdir (pid {first.pid} on "
                        f"host {host}, lock {lock}); stop it first")
        record_property("lines", line)  # bench/faults.py's table
        # an offline learner locks the logdir it writes: it gets past the lock to the empty replay
        offline = tmp_path / "offline"
        line = error_line(command("dreamer_live.learner", offline, "--offline", "--replay",
                                  logdir / "replay", timeout=60))
        assert line == f"learner: error: replay folder {logdir / 'replay'} holds no steps"
        assert (offline / "learner.lock").read_text() == ""
        first.send_signal(signal.SIGKILL)
        first.wait(30)
        out = tmp_path / "third.txt"
        third = learner(out)
        poll("the next learner's lock", lambda: holder() == third.pid, timeout=60)
        took = poll("its line", lambda: re.search(
            rf"learner: took over learner.lock from pid {first.pid} on host {re.escape(host)}, which "
            r"stopped without releasing it.*", out.read_text()), timeout=30)
        record_property("lines", took.group(0))
        third.send_signal(signal.SIGINT)
        assert third.wait(60) == 0, out.read_text()
        assert lock.read_text() == ""  # released on a clean exit
    finally:
        for proc in (first, third):
            if proc is not None:
                proc.kill()
                proc.wait()


def test_a_stopped_actor_cuts_the_episode_at_the_gap_and_a_starved_one_says_too_loaded(tmp_path,
                                                                                     record_property):
    """One actor at 50 Hz. Stopped (SIGSTOP) for 3 s, as a laptop lid or a VM pause stops it: one line
    says so, and the gap is counted as no tick's lateness; the episode ends at the step before the gap (is_last, not is_terminal)
    and the next stored step is a new episode's first. Then a machine that does not give it the CPU
    (SIGSTOP for 60 ms, 4 times a second: 24% of the time) makes it late by more than a tenth of a
    period on over 5% of its ticks: "too loaded", and its count of late ticks is its replay's."""
    import re
    import signal
    import time

    from conftest import poll
    from procfs import stopped

    from dreamer_live.metrics import read_lines
    from dreamer_live.pacer import late_limit_ms
    from dreamer_live.replay import Reader

    out = tmp_path / "stdout.txt"
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    gap = re.compile(r"actor 0: no tick for (\d+\.\d) s: this process was stopped or the machine slept "
                     r"\(not load\); the episode ends at the step before the gap and the env is reset; "
                     r"counted in the status line \(gaps N\)")
    with out.open("w") as f:
        actor = subprocess.Popen([sys.executable, "-m", "dreamer_live.actor", "--logdir",
                                  str(tmp_path / "run"), *QUIET, "--run.quiet", "false",
                                  "--run.log_every", "1", "--actor.hz", "50", "--actor.duration", "60"],
                                 cwd=REPO, env=env, stdout=f, stderr=subprocess.STDOUT)
    try:
        poll("the actor's first status line", lambda: "ticks/s" in out.read_text(), timeout=60)
        with stopped(actor.pid):
            stopped_at = time.time()
            time.sleep(3.0)  # the fault itself: a process stopped this long
        poll("the gap's line and a status line after it", lambda: gap.search(out.read_text())
             and "gaps 1" in out.read_text(), timeout=30)
        record_property("lines", gap.search(out.read_text()).group(0))  # bench/faults.py's table

        def starved():
            with stopped(actor.pid):
                time.sleep(0.06)
            time.sleep(0.19)
            return "too loaded to hold 50 Hz" in out.read_text()

        poll("a status line saying the actor is too loaded", starved, timeout=40, interval=0)
        actor.send_signal(signal.SIGTERM)
        assert actor.wait(60) == 0, out.read_text()
    finally:
        actor.send_signal(signal.SIGCONT)
        actor.kill()
        actor.wait()
    text = out.read_text()
    assert len(gap.findall(text)) == 1 and float(gap.search(text).group(1)) >= 2.9, text[-2000:]
    with Reader(tmp_path / "run" / "replay", prefetch=0) as reader:
        late_ms = np.concatenate(list(reader.read_stream("tick_late_ms").values()))
        ticks = {k: np.concatenate(list(reader.read_stream(k).values()))
                 for k in ("tick_time", "is_first", "is_last", "is_terminal")}
    last = [r for r in read_lines(tmp_path / "run" / "metrics.jsonl", "actor") if "actor/late_ticks" in r][-1]
    assert last["actor/late_ticks"] == int((late_ms > late_limit_ms(50)).sum()) > 0
    assert last["actor/gaps"] == 1 and late_ms.max() < 2000  # the gap is no tick's lateness
    times = ticks["tick_time"]
    before = np.flatnonzero(times < stopped_at)[-1]  # the last step stored before the stop
    after = np.flatnonzero(np.diff(times) > 2.5)
    assert list(after) == [before], (times[before - 2:before + 3] - stopped_at)
    assert ticks["is_last"][before] and not ticks["is_terminal"][before]
    assert ticks["is_first"][before + 1]
    record_property("steps_played", len(times))
    record_property("steps_kept", len(times))


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="X11 (Xvfb): Linux only")
def test_a_profile_from_elsewhere_launches_only_when_told_and_the_command_is_shown(tmp_path):
    """A profile is code: `launch.command: [sh, -c, "id >> file"]` from outside CONFIG_DIR/games/ is
    refused under env.live.launch auto; with true the actor prints the exact command, then runs it
    once, though it opens no window (a launcher script also exits at once, leaving its game starting)."""
    import shlex

    from live_fixtures import start_xvfb

    from dreamer_live.config import CONFIG_DIR, dump_yaml, read_yaml

    proof = tmp_path / "it ran.txt"
    profile = read_yaml(CONFIG_DIR / "games/catcher_window.yaml")
    profile["launch"] = {"command": ["sh", "-c", f"id >> '{proof}'"], "startup_s": 0}
    path = tmp_path / "game.yaml"
    path.write_text(dump_yaml(profile))
    live = ["--env.name", "live", "--env.profile", path, "--env.obs", "vector",
            "--env.live.wait_s", "5"]
    shown = shlex.join(["sh", "-c", f"id >> '{proof}'"])  # pasted into a shell, runs the same
    line = error_line(command("dreamer_live.actor", tmp_path / "auto", *live, timeout=120))
    assert f"{path} is not one of the project's profiles ({CONFIG_DIR / 'games'}/)" in line
    assert shown in line and "--env.live.launch true" in line and not proof.exists()
    if not shutil.which("Xvfb"):
        pytest.skip("Xvfb is not installed (apt-get install xvfb): the refusal was checked, not the run")
    display = start_xvfb()
    try:
        result = command("dreamer_live.actor", tmp_path / "true", *live, "--env.live.launch", "true",
                         "--env.live.display", display.name, timeout=120)
    finally:
        display.proc.kill()
        display.proc.wait()
    assert f"live: starting the game with {path}'s launch.command: {shown}" in result.stdout
    assert proof.read_text().startswith("uid=")  # it ran as shown; the actor waited for it to exit
    assert len(proof.read_text().splitlines()) == 1  # once in the 5 s waited, not every 0.25 s
    assert "no window with title containing" in error_line(result)  # the "game" opened none


@contextlib.contextmanager
def small_disk(path: pathlib.Path, size: str = "16m"):
    """A tmpfs of `size` mounted at `path` (root only: skipped with the reason otherwise)."""
    if not sys.platform.startswith("linux") or os.geteuid() != 0:
        pytest.skip("a full disk needs a small tmpfs, which only root can mount")
    path.mkdir(parents=True, exist_ok=True)
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
                             capture_output=True, text=True)
    if mounted.returncode:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=True)


def fill(disk: pathlib.Path) -> pathlib.Path:
    """Fill `disk` to the last byte with one file; remove that file to free the space again."""
    filler = disk / "filler"
    with open(filler, "wb", buffering=0) as f:
        for block in (1 << 16, 4096, 1):
            try:
                while True:
                    f.write(b"\0" * block)
            except OSError:
                pass
    return filler


def test_learner_skips_checkpoints_a_full_disk_refuses_keeps_the_older_ones_and_goes_on(base, tmp_path):
    import re
    import signal

    from conftest import poll

    with small_disk(tmp_path / "disk") as disk:
        logdir = disk / "run"
        copy_replay(base, logdir)
        out = tmp_path / "stdout.txt"
        env = dict(os.environ, JAX_PLATFORMS="cpu")
        with out.open("w") as f:
            learner = subprocess.Popen(
                [sys.executable, "-m", "dreamer_live.learner", "--logdir", str(logdir), *QUIET,
                 "--run.train_ratio", "0", "--run.checkpoint_every", "0.01",
                 "--run.publish_every", "0.5"], cwd=REPO, env=env, stdout=f, stderr=subprocess.STDOUT)
        folder = logdir / "checkpoint"
        try:
            kept = poll("two checkpoints", lambda: len(list(folder.glob("state_*.msgpack"))) >= 2 and
                        sorted(p.name for p in folder.glob("state_*.msgpack")), timeout=240)
            filler = fill(disk)

            def skipped():
                return re.findall(r"learner: checkpoint at (\d+) updates skipped, cannot write "
                                  r".*\(No space left on device\); keeping \d+ \(latest\)", out.read_text())

            at = poll("two skipped checkpoints", lambda: len(set(skipped())) >= 2 and skipped(), timeout=60)
            assert learner.poll() is None, out.read_text()  # it goes on training
            assert set(kept) <= {p.name for p in folder.glob("state_*.msgpack")}  # the older ones stay
            assert not [p for p in folder.iterdir() if p.name.endswith(".tmp")]
            filler.unlink()
            newer = f"state_{int(max(at, key=int)) + 1:08d}.msgpack"
            poll("a checkpoint once the disk has room", lambda: max(p.name for p in folder.glob(
                "state_*.msgpack")) >= newer, timeout=60)
            fill(disk)  # full again: the save at exit fails, and the exit line says so
            learner.send_signal(signal.SIGTERM)
            assert learner.wait(120) == 0, out.read_text()
        finally:
            learner.kill()
            learner.wait()
        assert all(finite_file(p) for p in folder.glob("state_*.msgpack"))
        text = out.read_text()
        assert "Traceback" not in text
        newest = max(p.name for p in folder.glob("state_*.msgpack"))
        assert re.search(r"learner: stopped \(SIGTERM\) at \d+ updates .*; checkpoint not saved, the "
                         rf"newest kept {re.escape(str(folder / newest))}$", text, re.M), text[-2000:]


def test_a_params_folder_deleted_during_a_run_comes_back_and_the_exit_line_claims_no_lost_version(
        base, tmp_path, record_property):
    """DIR/params deleted mid-run is made again at the next publish; a learner whose last publish
    fails (a file where the folder was) does not say it published."""
    import re
    import signal
    import time

    from conftest import poll

    from dreamer_live.transport import sync

    logdir = tmp_path / "run"
    copy_replay(base, logdir)
    params, out = logdir / "params", tmp_path / "stdout.txt"
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    with out.open("w") as f:
        learner = subprocess.Popen(
            [sys.executable, "-m", "dreamer_live.learner", "--logdir", str(logdir), *QUIET,
             "--run.train_ratio", "0", "--run.publish_every", "0.5"],
            cwd=REPO, env=env, stdout=f, stderr=subprocess.STDOUT)

    def pointed() -> int:  # the version latest.json names (written after its file)
        try:
            return json.loads((params / sync.POINTER).read_text())["version"]
        except (OSError, ValueError):
            return 0

    try:
        trained = poll("a trained version", lambda: pointed() >= 2 and pointed(), timeout=120)
        params.rename(tmp_path / "gone")  # as `rm -rf` ends: the folder is gone at once, whole
        again = poll("a newer version in the folder made again", lambda: pointed() > trained and
                     pointed(), timeout=30)
        assert (params / sync.version_file(again)).exists()
        def file_in_the_way():  # the learner may make the folder again between the two steps
            try:
                params.rename(tmp_path / f"gone-{time.monotonic_ns()}")
                params.write_text("a file where the folder was: no version can be written")
                return True
            except OSError:
                return False

        poll("a file where the folder was", file_in_the_way)
        learner.send_signal(signal.SIGTERM)
        assert learner.wait(120) == 0, out.read_text()
    finally:
        learner.kill()
        learner.wait()
    text = out.read_text()
    # the learner meets the file at its mkdir (File exists) or, its mkdir done just before, at the write
    refused = re.search(r"learner: cannot write parameters \((File exists|Not a directory)\).*", text)
    assert refused, text[-2000:]
    stopped = re.search(r"learner: stopped \(SIGTERM\) at \d+ updates \(\d+ this run\); parameters not "
                        r"published; checkpoint .*", text)
    assert stopped, text[-2000:]
    for line in (refused, stopped):  # bench/faults.py's table
        record_property("lines", line.group(0))


# replay.hold_s of the full-disk actor: the disk is freed as soon as the first outage is reported, and the
# second outage lasts this long before the actor stops (or is stopped sooner); less than
# metrics.PLAIN_STATUS_S, so the status line that shows it is the one a new warning prints at once
HOLD_S = 6


@pytest.mark.parametrize("end", ["hold_s", "SIGINT"])
def test_actor_holds_what_a_full_disk_refuses_keeps_playing_then_stops_with_one_line(tmp_path, end,
                                                                                     record_property):
    """A full disk: chunks held in memory while the actor plays on, all written once there is room;
    full again, the actor stops after replay.hold_s (or at a SIGINT before), its last lines naming
    how long the disk refused the chunks, the steps lost and those written (never "replay flushed")."""
    import re
    import signal
    import time

    from conftest import poll

    from dreamer_live.metrics import PLAIN_STATUS_S
    from dreamer_live.replay.chunk import list_chunks

    assert HOLD_S < PLAIN_STATUS_S
    with small_disk(tmp_path / "disk") as disk:
        logdir = disk / "run"
        out, err = tmp_path / "stdout.txt", tmp_path / "stderr.txt"
        env = dict(os.environ, JAX_PLATFORMS="cpu")
        with out.open("w") as f, err.open("w") as g:
            actor = subprocess.Popen(
                [sys.executable, "-m", "dreamer_live.actor", "--logdir", str(logdir), *QUIET,
                 "--run.quiet", "false", "--actor.hz", "50", "--actor.duration", "300",
                 "--replay.chunk_seconds", "0.5", "--replay.hold_s", str(HOLD_S)],
                cwd=REPO, env=env, stdout=f, stderr=g)
        try:
            poll("the first status line", lambda: "ticks/s" in out.read_text(), timeout=120)
            filler = fill(disk)
            poll("the actor saying it holds chunks", lambda: re.search(
                r"actor 0: replay: \d+ steps held in memory .*No space left on device",
                out.read_text()), timeout=30)
            filler.unlink()
            poll("the held chunks written", lambda: "the disk takes chunks again" in out.read_text(),
                 timeout=30)
            seen = len(out.read_text())
            fill(disk)
            full = time.monotonic()
            line = poll("a status line that says so", lambda: re.search(
                r"actor 0 \| step \d+ \| (\d+\.\d) ticks/s .* \| replay: \d+ steps held in memory for "
                r"\d+ s, cannot write them \(OSError: No space left on device\); retrying, stopping "
                rf"after {HOLD_S} s", out.read_text()[seen:]), timeout=HOLD_S)
            assert float(line.group(1)) > 40  # the game is played at its rate meanwhile
            if end == "SIGINT":
                actor.send_signal(signal.SIGINT)
            assert actor.wait(60) == 2, out.read_text() + err.read_text()
            ended = time.monotonic()
        finally:
            actor.kill()
            actor.wait()
        lines = err.read_text().strip().splitlines()
        why = "replay.hold_s" if end == "hold_s" else "then stopped, before replay.hold_s"
        said = re.fullmatch(
            rf"actor: error: replay: could not write to {logdir / 'replay'} for (\d+) s "
            rf"\({why}\): OSError: No space left on device; (\d+) steps held in memory are lost, "
            r"(\d+) steps were written", lines[-1])
        assert len(lines) == 1 and said, lines
        refused, lost, written = map(int, said.groups())
        for name, value in (("steps_played", written + lost), ("steps_kept", written), ("lines", lines[-1])):
            record_property(name, value)  # bench/faults.py's table
        assert refused <= ended - full + 0.5  # the true time, from its first failure after the fill
        assert refused >= HOLD_S if end == "hold_s" else refused < HOLD_S
        chunks = list_chunks(logdir / "replay").values()
        assert written == sum(c.length for c in chunks) and lost > 0
        seqs = sorted(c.seq for c in chunks)
        assert seqs == list(range(len(seqs))) and len(seqs) >= 3  # nothing lost while held: no gap
        text = out.read_text()
        assert "replay flushed" not in text, text[-2000:]
        if end == "SIGINT":  # the actor's last line: what it played, every step of it written or lost
            played = re.findall(r"^actor 0: stopped \(SIGINT\) after (\d+) steps, \d+ episodes, "
                                r"\d+ late ticks$", text, re.M)
            assert played == [str(written + lost)], text[-2000:]


@contextlib.contextmanager
def freezable_disk(path: pathlib.Path):
    """An ext4 file system in a 64 MiB loop file, mounted at `path`, whose writes block while it is
    frozen (`fsfreeze -f`), as a stalled share's do (root with loop devices only: skipped otherwise)."""
    if (not sys.platform.startswith("linux") or os.geteuid() != 0
            or not (shutil.which("fsfreeze") and shutil.which("mkfs.ext4"))):
        pytest.skip("a stalled share needs fsfreeze on a loop-mounted ext4, which only root can mount")
    path.mkdir(parents=True, exist_ok=True)
    image = path.with_name(path.name + ".img")
    with open(image, "wb") as f:
        f.truncate(64 << 20)
    made = subprocess.run(["mkfs.ext4", "-q", "-F", str(image)], capture_output=True, text=True)
    mounted = made.returncode or subprocess.run(["mount", "-o", "loop", str(image), str(path)],
                                                capture_output=True, text=True).returncode
    if mounted:
        pytest.skip(f"cannot make and loop-mount an ext4 file system here: {made.stderr.strip()}")
    try:
        yield path
    finally:
        subprocess.run(["fsfreeze", "-u", str(path)], capture_output=True)
        subprocess.run(["umount", "-l", str(path)], check=True)


def test_a_share_whose_writes_block_is_said_and_the_status_line_goes_on(tmp_path, record_property):
    """The actor's logdir on a file system whose writes block for ~15 s (fsfreeze, as a stalled share):
    play holds its rate; one line says how long a chunk write has blocked and how many steps wait,
    status lines keep coming while it lasts; once writes go through, every step played is written."""
    import re
    import signal

    from conftest import poll

    from dreamer_live.replay.chunk import list_chunks

    with freezable_disk(tmp_path / "share") as share:
        logdir, out = share / "run", tmp_path / "stdout.txt"
        env = dict(os.environ, JAX_PLATFORMS="cpu")
        with out.open("w") as f:
            actor = subprocess.Popen(
                [sys.executable, "-m", "dreamer_live.actor", "--logdir", str(logdir), *QUIET,
                 "--run.quiet", "false", "--run.log_every", "1", "--actor.hz", "50",
                 "--actor.duration", "300", "--replay.chunk_seconds", "0.5"],
                cwd=REPO, env=env, stdout=f, stderr=subprocess.STDOUT)
        stall = re.compile(r"actor 0: replay: a chunk write has blocked for (\d+) s \(the disk or share "
                           r"stalls\); (\d+) steps wait in memory, play goes on")
        try:
            poll("the first status line", lambda: "ticks/s" in out.read_text(), timeout=120)
            subprocess.run(["fsfreeze", "-f", str(share)], check=True)
            try:
                said = poll("the stall said", lambda: stall.search(out.read_text()), timeout=30)
                seen = len(out.read_text())
                status = poll("a status line while the writes block", lambda: re.search(
                    r"actor 0 \| step \d+ \| (\d+\.\d) ticks/s .*a chunk write has blocked",
                    out.read_text()[seen:]), timeout=15)
            finally:
                subprocess.run(["fsfreeze", "-u", str(share)], check=True)
            poll("writes going through again", lambda: "the disk takes chunks again" in out.read_text(),
                 timeout=30)
            actor.send_signal(signal.SIGINT)
            assert actor.wait(60) == 0, out.read_text()[-2000:]
        finally:
            subprocess.run(["fsfreeze", "-u", str(share)], capture_output=True)
            actor.kill()
            actor.wait()
        text = out.read_text()
        assert len(stall.findall(text)) == 1 and int(said.group(2)) > 0, text[-3000:]
        assert float(status.group(1)) > 40  # played at its rate meanwhile
        played = re.findall(r"^actor 0: stopped \(SIGINT\) after (\d+) steps", text, re.M)
        chunks = list_chunks(logdir / "replay").values()
        seqs = sorted(c.seq for c in chunks)
        assert played and int(played[0]) == sum(c.length for c in chunks), text[-2000:]
        assert seqs == list(range(len(seqs)))
        for name, value in (("steps_played", played[0]), ("steps_kept", sum(c.length for c in chunks)),
                            ("lines", said.group(0))):
            record_property(name, value)  # bench/faults.py's table


def misbehaving_actor(logdir: pathlib.Path, fault: str, at: int, *args):
    """The actor on tests/misbehaving_envs.py's env (a user's gymnasium env, given as module:id),
    whose step `at` of each episode and on has `fault`; run to the end."""
    env = dict(os.environ, JAX_PLATFORMS="cpu",
               PYTHONPATH=os.pathsep.join([str(REPO / "tests"), os.environ.get("PYTHONPATH", "")]))
    return subprocess.run(
        [sys.executable, "-m", "dreamer_live.actor", "--logdir", str(logdir), *QUIET,
         "--env.name", "misbehaving_envs:Misbehaving-v0", "--env.obs", "vector",
         "--env.kwargs.fault", fault, "--env.kwargs.at", str(at), "--actor.hz", "250", *args],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=240)


def stored_steps(replay: pathlib.Path) -> dict:
    """Every chunk of a one-actor replay, each loaded as the learner loads it (its spec from
    spaces.json: a chunk the learner would refuse fails here), concatenated in sequence order."""
    from dreamer_live import spaces
    from dreamer_live.replay.chunk import list_chunks, load_chunk, read_regular

    spec = spaces.replay_spec(*spaces.load(replay))
    chunks = sorted(list_chunks(replay).items(), key=lambda item: item[1].seq)
    assert [c.seq for _, c in chunks] == list(range(len(chunks)))
    loaded = [load_chunk(read_regular(replay / name), c.length, spec) for name, c in chunks]
    return {key: np.concatenate([chunk[key] for chunk in loaded]) for key in spec}


def test_non_finite_observations_end_the_episode_at_the_actor_and_are_never_stored(tmp_path,
                                                                                  record_property):
    """An env whose observation holds NaN from step 50 of each episode: the actor says so in one
    line, counts the rest, stores none of them, and ends each episode at step 49 (marked is_last, not
    is_terminal); the learner's own check accepts every chunk. (Infinity, another shape or dtype:
    test_spaces.)"""
    import re

    result = misbehaving_actor(tmp_path, "nan", 50, "--actor.steps", "320", "--run.quiet", "false")
    assert result.returncode == 0, result.stdout + result.stderr
    said = re.findall(r".*gave a bad observation.*", result.stdout)
    assert said == [
        "actor 0: env misbehaving_envs:Misbehaving-v0 gave a bad observation at step 50 of an "
        "episode ('vector' holds 4 non-finite values (NaN or infinity)); the episode ends at the step "
        "before it and the env is reset; bad observations are never stored, counted in the status "
        "line (bad obs N)"], result.stdout
    stopped = re.search(r"actor 0: stopped \(step limit\) after (\d+) steps, (\d+) episodes, \d+ late "
                        r"ticks, (\d+) bad observations \(not stored\)", result.stdout)
    assert stopped, result.stdout
    played, episodes, bad = map(int, stopped.groups())
    steps = stored_steps(tmp_path / "replay")
    for name, value in (("steps_played", f"{played} + {bad} bad observations"),
                        ("steps_kept", len(steps["is_first"])), ("lines", said[0])):
        record_property(name, value)  # bench/faults.py's table
    assert len(steps["is_first"]) == played == 320
    assert all(np.isfinite(steps[k]).all() for k in steps if steps[k].dtype.kind == "f")
    # episodes of 50 stored steps (the reset's observation and steps 1-49), each cut at its end
    firsts, lasts = np.flatnonzero(steps["is_first"]), np.flatnonzero(steps["is_last"])
    assert list(firsts) == list(range(0, 320, 50))
    assert list(lasts) == list(range(49, 320, 50)) and not steps["is_terminal"].any()
    assert bad == episodes == len(lasts) == 6
    metrics = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [m["actor/bad_obs"] for m in metrics if "actor/bad_obs" in m][-1] == 6
    assert re.search(r"actor 0 \| step \d+ \|.* \| bad obs \d+", result.stdout), result.stdout


def test_a_paced_env_that_fails_names_its_own_error(tmp_path):
    """With --env.pace_hz the env steps on its own clock thread: its failure is still one line naming
    the env's error (RuntimeError: the game crashed ...), not the clock wrapper."""
    result = misbehaving_actor(tmp_path, "raise", 50, "--actor.steps", "300",
                               "--env.pace_hz", "250")
    lines = stderr_lines(result.stderr)
    assert result.returncode == 1 and len(lines) == 1, result.stderr
    assert "RuntimeError: the game crashed at step 50" in lines[0] and "clock" not in lines[0], lines[0]


def test_eval_and_viz_episodes_end_at_a_bad_observation_as_the_actor_does():
    """actor.core.play_episode (eval, viz, the synchronous trainer) checks each observation as the
    actor does: NaN at step 5 ends the episode at step 4, marked is_last, said in its result, and
    neither the policy nor the returned steps see it."""
    import jax

    from dreamer_live import config as configlib
    from dreamer_live.actor.core import ActorCore, play_episode
    from dreamer_live.agent import Agent
    from dreamer_live.envs import make_env

    config = configlib.resolve(["debug"], {"env.name": "misbehaving_envs:Misbehaving-v0", "env.obs": "vector",
                                           "env.clock": "lockstep", "env.kwargs": {"fault": "nan", "at": 5}})
    env = make_env(config)
    try:
        agent = Agent(config, env.obs_space, env.act_space)
        core = ActorCore(agent, "eval", agent.init_policy(jax.random.PRNGKey(0)), jax.random.PRNGKey(1))
        episode = play_episode(env, core, 100)
    finally:
        env.close()
    assert "non-finite" in episode["bad_obs"] and episode["length"] == 4
    steps = episode["steps"]
    assert len(steps["is_last"]) == 5 and steps["is_last"][-1] and not steps["is_terminal"].any()
    assert np.isfinite(steps["vector"]).all()


@pytest.mark.parametrize("fault, error", [
    ("raise", "RuntimeError: the game crashed at step 50"),
    ("reshape", r"its observation does not match its declared space: 'vector' is \(5,\) float32, "
                r"expected \(4,\) float32")], ids=["raise", "reshape"])
def test_an_env_that_fails_mid_episode_is_one_line_and_its_traceback_a_file(tmp_path, fault, error,
                                                                            record_property):
    """An env that raises at step 50, or whose observation grows from 4 values to 5 there (before the
    policy sees it): one line naming the env, the step and the error, exit status 1; the traceback in
    DIR/actor-0-error.log; every step before it stored, in chunks that load."""
    import re

    result = misbehaving_actor(tmp_path, fault, 50, "--actor.steps", "300")
    log = tmp_path / "actor-0-error.log"
    lines = stderr_lines(result.stderr)
    assert result.returncode == 1 and len(lines) == 1, result.stderr
    assert re.fullmatch(rf"actor: error: env misbehaving_envs:Misbehaving-v0 failed at step 50 of "
                        rf"episode 1: {error}; replay flushed to {re.escape(str(tmp_path / 'replay'))}; "
                        rf"traceback in {re.escape(str(log))}", lines[0]), lines[0]
    trace = log.read_text()
    assert "Traceback (most recent call last):" in trace
    assert re.search(error.replace("its observation does not match its declared space: ", ""),
                     trace.strip().splitlines()[-1]), trace
    steps = stored_steps(tmp_path / "replay")
    # bench/faults.py's table: played, the steps before the one that failed (the reset's is step 0)
    played = int(re.search(r"failed at step (\d+) ", lines[0]).group(1))
    for name, value in (("steps_played", played), ("steps_kept", len(steps["is_first"])),
                        ("lines", lines[0])):
        record_property(name, value)
    assert len(steps["is_first"]) == 50 and steps["is_first"][0]  # the reset's and steps 1-49


SLOW_FSYNC = '''
import os, time
_fsync, _under, _delay = os.fsync, os.environ["SLOW_FSYNC_UNDER"], float(os.environ["SLOW_FSYNC_S"])
def fsync(fd):
    try:
        path = os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        path = ""
    if path.startswith(_under):
        time.sleep(_delay)
    return _fsync(fd)
os.fsync = fsync
'''


def test_a_learner_on_a_disk_whose_fsyncs_take_a_second_trains_on_and_says_so(base, tmp_path, record_property):
    """Every fsync under the logdir takes 1 s (a slow share, a USB disk; Python's os.fsync slowed in the
    learner by a sitecustomize): publishes, checkpoints and heartbeats are written beside training, a
    publish due while the last is still going is skipped, one line says which write took how long,
    and the run ends with its final version and checkpoint at the updates asked."""
    import re

    copy_replay(base, tmp_path)
    shim = tmp_path / "shim"
    shim.mkdir()
    (shim / "sitecustomize.py").write_text(SLOW_FSYNC)
    env = dict(os.environ, JAX_PLATFORMS="cpu", SLOW_FSYNC_UNDER=str(tmp_path.resolve()), SLOW_FSYNC_S="1",
               PYTHONPATH=os.pathsep.join([str(shim), *filter(None, [os.environ.get("PYTHONPATH")])]))
    result = subprocess.run(
        [sys.executable, "-m", "dreamer_live.learner", "--logdir", str(tmp_path), *QUIET, "--run.steps", "300",
         "--run.train_ratio", "0", "--run.publish_every", "0.2", "--run.checkpoint_every", "0.02",
         "--run.log_every", "0.5"], cwd=REPO, env=env, capture_output=True, text=True, timeout=240)
    assert result.returncode == 0, result.stderr[-3000:]
    said = [line for line in result.stdout.splitlines() if "(a slow disk?)" in line]
    record_property("lines", said[0] if said else "")  # bench/faults.py's table
    assert len(said) == 1 and re.fullmatch(r"learner: writing \w+ to .* took [0-9.]+ s \(a slow disk\?\); "
                                           r"training goes on, and a write due while the last is going is "
                                           r"skipped", said[0]), result.stdout
    lines = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    last = [r for r in lines if "learner/writes_skipped" in r][-1]
    assert last["learner/writes_skipped"] > 0 and last["learner/slowest_write_s"] >= 1.9, last
    meta = json.loads((tmp_path / "checkpoint" / "meta.json").read_text())
    pointer = json.loads((tmp_path / "params" / "latest.json").read_text())
    assert meta["updates"] == 300 and pointer["step"] == 300 and meta["version"] == pointer["version"]
    assert "stopped (run.steps reached) at 300 updates" in result.stdout + result.stderr
