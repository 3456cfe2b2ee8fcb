"""Actor and learner as real processes on real-time Catcher (debug preset), sharing one logdir.

One module-scoped scenario runs the processes once and the tests below check what it recorded:

  1. actor A (id 0) and learner L1 start; a second actor (id 1) plays a few steps into the same replay;
     run until A has swapped to >= 3 versions L1 published and L1 has checkpointed;
  2. SIGKILL L1; A keeps ticking on its last parameters until it sees the learner silent;
  3. learner L2 starts, resumes from L1's checkpoint and picks up the replay written meanwhile;
     A switches to L2's versions;
  4. SIGINT A and L2: both exit 0 (replay flushed, checkpoint written);
  5. learner L3 resumes from L2's checkpoint with its update count and stops by itself at run.steps.
"""

import contextlib
import json
import os
import pathlib
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
from conftest import UNSTARVED_LEARNER
from procfs import alive, descendants, stopped

from dreamer_live import cli, metrics as metricslib, spaces, steps
from dreamer_live.envs import make_env
from dreamer_live.replay import Reader
from dreamer_live.replay.chunk import list_chunks
from dreamer_live.transport import sync

REPO = pathlib.Path(__file__).resolve().parent.parent
HZ = 20.0
COMMON = ["--configs", "debug", "--run.quiet", "true", "--run.log_every", "1",
          "--run.publish_every", "2", "--run.checkpoint_every", "0.05", "--run.video_every", "0",
          "--actor.hz", str(HZ), "--actor.param_interval", "0.5", *UNSTARVED_LEARNER]
# A swap's tick ends within its tick (so it delays no later one) and the ticks after it are late by less
# than one; a pause on the tick path, such as a recompile (compiles_after_warmup counts those too), costs
# several. Not half a tick: on a CPU made 1.8x slower (bench/slow_cpu.py --share 0.45) and loaded by the
# suite, ordinary ticks' work reached 30 ms and a swap tick's 27.6 ms
# (docs/experiments/2026-11-30-test-suite-time-slow-cpu.md).
SWAP_BOUND_MS = 1000 / HZ


def start(module, logdir, *args, env=None):
    """Start `python -m module --logdir logdir COMMON args`; its output goes to a file beside."""
    out = open(logdir.parent / f"{module.split('.')[-1]}-{time.monotonic_ns()}.out", "w+")
    proc = subprocess.Popen([sys.executable, "-m", module, "--logdir", str(logdir), *COMMON, *args],
                            cwd=REPO, stdout=out, stderr=subprocess.STDOUT,
                            env=dict(os.environ, JAX_PLATFORMS="cpu", **(env or {})))
    proc.out = out
    return proc


def output(proc) -> str:
    proc.out.flush()
    return pathlib.Path(proc.out.name).read_text()


def lines(logdir, source, since=0.0, key=None):
    """metrics.jsonl records of `source` written after `since`, optionally only those with `key`."""
    return [r for r in metricslib.read_lines(logdir / "metrics.jsonl", source)
            if r["time"] >= since and (key is None or key in r)]


def wait_for(what, predicate, timeout, procs=()):
    """Poll `predicate` until true; fail early (with the output) if one of `procs` dies."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        for proc in procs:
            if proc.poll() is not None:
                pytest.fail(f"{what}: {proc.args[2]} exited with {proc.returncode}:\n{output(proc)}")
        time.sleep(0.5)
    pytest.fail(f"timed out after {timeout}s waiting for {what}:\n" +
                "\n".join(output(p)[-3000:] for p in procs))


def checkpoint_updates(logdir) -> int:
    meta = logdir / "checkpoint" / "meta.json"
    return int(json.loads(meta.read_text())["updates"]) if meta.exists() else 0


def kill_all(procs) -> None:
    """Kill what still runs of `start`'s processes and close their output files."""
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.out.close()


def stop(proc, sig=signal.SIGINT, timeout=90) -> int:
    if proc.poll() is None:
        proc.send_signal(sig)
    try:
        return proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        pytest.fail(f"{proc.args[2]} did not stop within {timeout}s after {sig!r}:\n{output(proc)}")


@pytest.fixture(scope="module")
def scenario(tmp_path_factory):
    logdir = tmp_path_factory.mktemp("live") / "run"
    rec = {"logdir": logdir}
    actor = start("dreamer_live.actor", logdir, "--actor.duration", "300")
    procs = [actor]
    try:
        wait_for("actor ticking", lambda: lines(logdir, "actor", key="actor/ticks_per_s"), 60,
                 [actor])
        learner1 = start("dreamer_live.learner", logdir)
        procs.append(learner1)
        other = start("dreamer_live.actor", logdir, "--actor.id", "1", "--actor.steps", "30")
        procs.append(other)
        # 1. L1's first version (its initial params) and two trained ones swapped in; a checkpoint;
        # a tick line with a policy lag: the learner's heartbeat (every log line, 1 s) counted updates
        # beyond the version in use. L1 can reach the rest before any such line, so it is waited for.
        wait_for("three swaps, a checkpoint and a policy lag seen",
                 lambda: len(lines(logdir, "actor", key="actor/swap_version")) >= 3
                 and checkpoint_updates(logdir) > 0
                 and any(r["actor/policy_lag_steps"] > 0
                         for r in lines(logdir, "actor", key="actor/ticks_per_s")),
                 180, [actor, learner1])
        rec["other_exit"] = other.wait(timeout=60)
        rec["other_output"] = output(other)
        # 2. kill the learner; the actor goes on alone
        rec["ckpt_updates"] = checkpoint_updates(logdir)
        learner1.send_signal(signal.SIGKILL)
        learner1.wait()
        rec["kill_time"] = time.time()
        rec["l1_versions"] = max(r["learner/policy_version"]
                                 for r in lines(logdir, "learner", key="learner/policy_version"))
        # A plays on alone until it has logged 3 lines and sees the learner silent for over 3 s
        rec["alone"] = wait_for(
            "the actor alone for 3 lines, the learner silent for over 3 s",
            lambda: (alone := lines(logdir, "actor", since=rec["kill_time"], key="actor/ticks_per_s"))
            and len(alone) >= 3 and alone[-1]["actor/learner_silent_s"] > 3.0 and alone, 60, [actor])
        rec["steps_at_kill"] = rec["alone"][0]["step"] if rec["alone"] else None
        # 3. a new learner resumes and picks up what was written meanwhile
        rec["l2_start"] = time.time()
        learner2 = start("dreamer_live.learner", logdir)
        procs.append(learner2)
        wait_for("the new learner training and the actor on its version",
                 lambda: lines(logdir, "learner", since=rec["l2_start"], key="learner/train_ratio")
                 and any(r["actor/swap_version"] > rec["l1_versions"]
                         for r in lines(logdir, "actor", key="actor/swap_version")),
                 150, [actor, learner2])
        # 4. Ctrl-C both
        rec["actor_exit"] = stop(actor)
        rec["learner2_exit"] = stop(learner2)
        rec["actor_output"], rec["learner2_output"] = output(actor), output(learner2)
        rec["l2_updates"] = checkpoint_updates(logdir)
        # 5. a restarted learner resumes with its count and stops at run.steps by itself
        rec["l3_target"] = rec["l2_updates"] + 3
        rec["l3_start"] = time.time()
        # no train-ratio cap: with the actor gone, L2 may have trained up to it, and L3 would wait
        learner3 = start("dreamer_live.learner", logdir, "--run.steps", str(rec["l3_target"]),
                         "--run.train_ratio", "0")
        procs.append(learner3)
        rec["learner3_exit"] = learner3.wait(timeout=180)
        rec["learner3_output"] = output(learner3)
        rec["learner1_output"] = output(learner1)
        yield rec
    finally:
        kill_all(procs)


def test_replay_grows_and_is_flushed_on_exit(scenario):
    logdir = scenario["logdir"]
    chunks = list_chunks(logdir / "replay")
    by_writer = {}
    for fields in chunks.values():
        writer = fields.stream.split("_")[0]
        by_writer[writer] = by_writer.get(writer, 0) + fields.length
    final = lines(logdir, "actor", key="actor/ticks_per_s")[-1]["step"]
    assert scenario["actor_exit"] == 0, scenario["actor_output"]
    # every step actor 0 counted is on disk: its last chunk was flushed on SIGINT
    assert by_writer["0"] == final > 200
    assert scenario["other_exit"] == 0, scenario["other_output"]
    assert by_writer["1"] == 30  # a second actor in the same logdir, with its own writer id
    with Reader(logdir / "replay", readonly=True, prefetch=0, batch=2, length=8) as reader:
        batch = reader.sample()
    assert batch["action"].shape == (2, 8, 3) and "vector" in batch
    assert not set(steps.TICK_KEYS) & set(batch)  # stored, but only training keys are sampled


def test_actor_switches_versions_without_late_ticks(scenario):
    swaps = lines(scenario["logdir"], "actor", key="actor/swap_version")
    versions = [r["actor/swap_version"] for r in swaps]
    assert len(versions) >= 4 and versions == sorted(versions)  # L1's (>= 3), then L2's
    for r in swaps:
        assert r["actor/compiles_after_warmup"] == 0, r  # same shapes: no recompile on the tick
        assert r["actor/swap_work_ms"] < SWAP_BOUND_MS, r
        assert r["actor/swap_late_ms_after"] < SWAP_BOUND_MS, r


def test_actor_metrics_and_event_files(scenario):
    logdir = scenario["logdir"]
    tick = lines(logdir, "actor", key="actor/ticks_per_s")
    for key in ("actor/late_ticks", "actor/late_ms_p50", "actor/late_ms_p99", "actor/late_ms_max",
                "actor/policy_version", "actor/policy_lag_steps", "actor/policy_lag_s"):
        assert key in tick[-1]
    assert np.median([r["actor/ticks_per_s"] for r in tick]) == pytest.approx(HZ, rel=0.1)
    episodes = lines(logdir, "actor", key="episode/return")
    assert episodes and all(r["episode/length"] > 0 for r in episodes)
    learn = lines(logdir, "learner", key="learner/updates_per_s")
    assert any("train/loss/total" in r for r in learn)
    for key in ("learner/train_ratio", "replay/steps"):
        assert key in learn[-1]
    events = {p.parent.name for p in (logdir / "tensorboard").glob("*/events.out.tfevents.*")}
    assert {"actor0", "actor1", "learner"} <= events


def test_actor_keeps_ticking_after_learner_sigkill(scenario):
    alone = scenario["alone"]
    assert len(alone) >= 3, alone
    assert alone[-1]["step"] - alone[0]["step"] >= 0.5 * HZ * 3
    assert len({r["actor/policy_version"] for r in alone}) == 1  # its last parameters
    assert alone[-1]["actor/learner_silent_s"] > 3.0  # and it sees that the learner went quiet
    assert all(r["actor/ticks_per_s"] > 0.8 * HZ for r in alone)


def test_new_learner_resumes_and_reads_replay_written_meanwhile(scenario):
    logdir = scenario["logdir"]
    resumed = logdir / "checkpoint" / f"state_{scenario['ckpt_updates']:08d}.msgpack"
    assert f"resumed from {resumed} at {scenario['ckpt_updates']} updates" \
        in scenario["learner2_output"]
    first = lines(logdir, "learner", since=scenario["l2_start"], key="replay/steps")[0]
    assert first["replay/steps"] > scenario["steps_at_kill"]
    assert first["step"] > scenario["ckpt_updates"]


def test_both_stop_cleanly_on_sigint(scenario):
    assert scenario["actor_exit"] == 0 and "stopped (SIGINT)" in scenario["actor_output"]
    assert scenario["learner2_exit"] == 0 and "stopped (SIGINT)" in scenario["learner2_output"]
    assert scenario["l2_updates"] > scenario["ckpt_updates"]  # the exit checkpoint


def test_restarted_learner_resumes_its_step_count(scenario):
    logdir, target = scenario["logdir"], scenario["l3_target"]
    assert scenario["learner3_exit"] == 0, scenario["learner3_output"]
    assert f"at {scenario['l2_updates']} updates" in scenario["learner3_output"]
    assert f"stopped (run.steps reached) at {target} updates (3 this run)" \
        in scenario["learner3_output"]
    assert checkpoint_updates(logdir) == target


def test_learner_waiting_for_replay_keeps_its_heartbeat(tmp_path):
    """Prefill is a wait, not a silence: the actor must not take a waiting learner for a dead one."""
    logdir = tmp_path / "run"
    config = cli.logdir_config(logdir, ["debug"], {})
    env = make_env(config)  # the spaces an actor would have written, but no replay steps
    spaces.save(logdir / "replay", env.obs_space, env.act_space)
    env.close()
    learner = start("dreamer_live.learner", logdir)
    beat = logdir / "params" / sync.HEARTBEAT
    try:
        first = wait_for("a heartbeat", lambda: beat.exists() and json.loads(beat.read_text()), 120,
                         [learner])
        later = wait_for("a later heartbeat", lambda: (b := json.loads(beat.read_text()))["time"]
                         > first["time"] and b, 10, [learner])
        assert later["step"] == first["step"] == 0
    finally:
        assert stop(learner) == 0, output(learner)
        learner.out.close()


def test_second_actor_start_hits_the_compile_cache(tmp_path):
    """The policy compiled by the first start is loaded from the persistent cache by the second."""
    cache = tmp_path / "cache"
    env = {"DREAMER_LIVE_CACHE": str(cache)}
    runs = []
    for i in range(2):
        # threshold 0: whether a fast compile is cached must not depend on the machine's speed
        proc = start("dreamer_live.actor", tmp_path / "run", "--actor.steps", "5",
                     "--jax.cache_min_compile_s", "0", env=env)
        assert proc.wait(timeout=120) == 0, output(proc)
        runs.append(sorted(p.name for p in (cache / "jax").iterdir()))
        proc.out.close()
    first, second = lines(tmp_path / "run", "actor", key="actor/warmup_s")
    assert runs[0] and runs[1] == runs[0]  # nothing new compiled (and cached) the second time
    assert second["actor/compile_cache_hits"] >= len([n for n in runs[0] if n.endswith("-cache")])
    assert second["actor/compiles"] < first["actor/compiles"]


@contextlib.contextmanager
def training_run(logdir, *args):
    """`python -m dreamer_live.run` (its own status line on) once its learner trains and its actor has
    heard from it: the run and its children's pids by name; whatever of them a failed test left
    running is killed on the way out."""
    run = start("dreamer_live.run", logdir, "--run.quiet", "false", "--learner.nice", "0",
                *args)  # with COMMON's UNSTARVED_LEARNER: a learner that the other load cannot starve
    children: dict[str, int] = {}
    try:
        heard = wait_for("the learner training, heard from by the actor", lambda: lines(
            logdir, "learner", key="learner/updates_per_s") and [
            r for r in lines(logdir, "actor", key="actor/learner_silent_s")
            if r["actor/learner_silent_s"] is not None], 150, [run])
        children.update(learner=heard and lines(logdir, "learner", key="learner/pid")[-1]["learner/pid"],
                        actor=lines(logdir, "actor", key="actor/pid")[-1]["actor/pid"])
        assert set(children.values()) <= descendants(run.pid)
        yield run, children
    finally:
        for pid in [*children.values(), *(descendants(run.pid) if run.poll() is None else ())]:
            if alive(pid):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGCONT)
                    os.kill(pid, signal.SIGKILL)
        if run.poll() is None:
            run.kill()
            run.wait()
        run.out.close()


def ended(run, timeout=120):
    """The run's exit status and output once it exits, and the processes below it still alive."""
    below = descendants(run.pid)
    code = run.wait(timeout=timeout)
    return code, output(run), [p for p in below if alive(p)]


def stop_twice(run, first, second, children):
    """Send `first` to the run, then `second` while its children are stopped (a save that takes
    long), once it has said each; return ended(run)."""
    with stopped(*children.values()):
        run.send_signal(first)
        wait_for("run saying it stops both", lambda: f"run: {first.name}; stopping" in output(run),
                 10, [run])
        run.send_signal(second)
        wait_for("run saying it is already stopping", lambda: f"run: {second.name}: already stopping"
                 in output(run), 10, [run])
    return ended(run)


STOPPING = "; stopping learner and actor (each saves before it exits)"
ALREADY = (": already stopping; waiting up to N s for learner and actor to exit (each saves first), "
           "then killing what still runs")


def played_and_kept(text: str, logdir: pathlib.Path) -> tuple[int, int]:
    """The steps a run's actor says it played (its stop line) and those in its replay's chunks."""
    import re

    played = re.search(r"^actor 0: stopped \(\w+\) after (\d+) steps", text, re.M)
    assert played, text[-3000:]
    return int(played.group(1)), sum(c.length for c in list_chunks(logdir / "replay").values())


def record_run(record_property, text: str, played: int, kept: int, *lines: str) -> None:
    """A run test's figures for bench/faults.py's table: steps played and kept, and its own lines
    (`lines`, then what run said about the signals it got)."""
    import re

    for name, value in (("steps_played", played), ("steps_kept", kept),
                        *(("lines", line) for line in [*lines, *re.findall(r"^run: SIG\w+.*", text, re.M)])):
        record_property(name, value)


def said_about_signals(text: str) -> list[tuple[str, str]]:
    """run's lines about the signals it got: (signal, the rest with the seconds left as N)."""
    import re

    said = re.findall(r"^run: (SIG\w+)(.*)", text, re.M)
    return [(name, re.sub(r"\d+ s", "N s", rest)) for name, rest in said]


def test_run_says_the_learner_is_silent_then_sighup_and_a_second_signal_are_a_line_each(tmp_path,
                                                                                    record_property):
    """`python -m dreamer_live.run`: both children on one logdir, the actor on the learner's versions.
    The learner stopped (SIGSTOP): run's own line says `learner silent N s` as soon as the actor's rule
    holds (transport.silent_after_s: 5 heartbeats of 0.5 s and a 0.5 s poll), not at its next 30 s
    line. The learner going again, SIGHUP (the terminal that started it closed) is said in one line and
    stops both as Ctrl-C does; a Ctrl-C while they save is one more line, forwarded to no child (no
    traceback from one interrupted while saving). All exit 0, none is left, every step is kept."""
    import re

    from dreamer_live import config as configlib, transport

    logdir = tmp_path / "run"
    args = ["--run.log_every", "0.5", "--actor.param_interval", "0.5"]
    after = transport.silent_after_s(configlib.resolve(["debug"], configlib.parse_overrides(args)))
    assert after == 3.0
    with training_run(logdir, *args) as (run, children):
        wait_for("the actor on a version of the learner's",
                 lambda: lines(logdir, "actor", key="actor/swap_version"), 60, [run])
        seen = len(output(run))
        with stopped(children["learner"]):
            said = wait_for("run's line saying so", lambda: re.search(
                r"[^\r\n]*\| learner silent (\d+) s[^\r\n]*", output(run)[seen:]), 30, [run])
        assert int(said.group(1)) >= after
        code, text, left = stop_twice(run, signal.SIGHUP, signal.SIGINT, children)
    assert code == 0 and "Traceback" not in text, text[-3000:]
    assert said_about_signals(text) == [("SIGHUP", STOPPING), ("SIGINT", ALREADY)], text[-3000:]
    assert "actor 0: stopped (SIGINT)" in text and "learner: stopped (SIGINT)" in text
    assert list((logdir / "checkpoint").glob("state_*.msgpack")) and not left
    # the closing line gives the learner's rate over the run, not its last logging window's
    assert re.search(r"run: done;.* learner \d+ upd [\d.]+/s on average ratio", text), text[-3000:]
    played, kept = played_and_kept(text, logdir)
    record_run(record_property, text, played, kept, said.group(0).strip())
    assert kept == played  # every step the actor played is in the replay


def test_a_replay_folder_deleted_mid_run_comes_back_and_keeps_every_later_step(tmp_path, record_property):
    """`rm -rf DIR/replay` while both play and train: the actor's next chunk makes the folder and its
    spaces.json again, and every step not in a deleted chunk is kept; the learner says so in one
    line and trains on (its count of steps written never falls)."""
    import re
    import shutil

    logdir = tmp_path / "run"
    replay, gone = logdir / "replay", tmp_path / "gone"
    actor = start("dreamer_live.actor", logdir, "--actor.duration", "300",
                  "--replay.chunk_seconds", "0.5")
    learner = start("dreamer_live.learner", logdir, "--run.train_ratio", "8")  # soon at the ratio
    procs = [actor, learner]
    try:
        # at the train ratio: a count of steps written that fell would stop its updates
        wait_for("the learner training up to the train ratio", lambda: [
            r for r in lines(logdir, "learner", key="learner/ratio_wait_frac")
            if r["step"] and r["learner/ratio_wait_frac"] > 0], 120, procs)
        before = lines(logdir, "learner", key="replay/steps")[-1]
        replay.rename(gone)  # as `rm -rf` ends: the folder is gone at once, whole
        deleted = time.time()
        wait_for("the folder made again with spaces.json and new chunks",
                 lambda: (replay / spaces.FILE).exists() and len(list_chunks(replay)) >= 2, 30, procs)
        back = time.time()
        # a line from after the learner's next refresh (1 s) has seen the new folder
        wait_for("the learner updating on", lambda: [
            r for r in lines(logdir, "learner", since=back + 1.5, key="replay/steps")
            if r["step"] >= before["step"] + 5], 60, procs)
        after = lines(logdir, "learner", since=deleted, key="replay/steps")
        assert stop(actor) == 0 and stop(learner) == 0
        said = {"actor": output(actor), "learner": output(learner)}
    finally:
        kill_all(procs)
    assert (replay / spaces.FILE).read_text() == (gone / spaces.FILE).read_text()
    assert all(r["replay/steps"] >= before["replay/steps"] for r in after)  # no stall at the ratio
    old, new = list_chunks(gone).values(), list_chunks(replay).values()
    shutil.rmtree(gone)
    seqs = sorted(c.seq for c in new)
    assert seqs == list(range(max(c.seq for c in old) + 1, seqs[-1] + 1))  # no gap after the deletion
    played = int(re.search(r"actor 0: stopped \(SIGINT\) after (\d+) steps", said["actor"]).group(1))
    kept = sum(c.length for c in old) + sum(c.length for c in new)
    actor_said = re.findall(rf".*replay: {re.escape(str(replay))} was gone \(deleted, or its logdir "
                            rf"renamed or moved\); the {sum(c.length for c in old)} steps written before "
                            r"are in the old folder, wherever it went; making it again with spaces.json, "
                            r"writing on from chunk .*", said["actor"])
    learner_said = re.findall(rf".*replay: {re.escape(str(replay))} (?:shrank|is gone): \d+ chunks "
                              r"\(\d+ steps\) loaded from it are no longer on disk; training goes on with "
                              r"the \d+ steps held in memory and new chunks.*", said["learner"])
    # bench/faults.py's table (steps kept: in the folder before the deletion and after)
    for name, value in (("steps_played", played), ("steps_kept", kept),
                        *(("lines", line) for line in actor_said + learner_said)):
        record_property(name, value)
    assert kept == played  # every step kept
    assert len(actor_said) == 1, said["actor"]
    assert len(learner_said) == 1, said["learner"]
