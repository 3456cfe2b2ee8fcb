"""The Ray transport for real: `dreamer_live.run --ray.address local` starts a private cluster with the
learner and three actors on real-time Catcher (debug preset), and an actor started by hand joins it.
One run goes through every fault (an actor SIGKILLed, then the learner, the hand-joined actor leaving,
an actor SIGKILLed right before Ctrl-C): Ray restarts what dies (an actor as a new replay stream, the
learner from its checkpoint) while the others tick on; trained parameters reach every actor through the
object store; a hang-up of the run's process group (the terminal closed) stops everything cleanly
(replay flushed, checkpoint written, exit 0), and no process of the run is left behind. Also: the Ray
ends in-process, an actor that cannot join, an actor whose env fails, and a run joining a two-node
cluster.
"""

import os
import pathlib
import re
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
from conftest import UNSTARVED_LEARNER, poll
from procfs import alive, descendants

from dreamer_live import metrics as metricslib
from dreamer_live.replay.chunk import list_chunks

REPO = pathlib.Path(__file__).resolve().parents[2]
ACTORS = 3


def ticks(logdir, actor_id=None, since=0.0):
    """The actors' ticks lines (optionally one actor's) written after `since`."""
    return [r for r in metricslib.read_lines(logdir / "metrics.jsonl", "actor")
            if "actor/ticks_per_s" in r and r["time"] >= since
            and (actor_id is None or r["actor/id"] == actor_id)]


def streams(logdir) -> dict[str, set[str]]:
    """Writer id -> the streams of its chunks in DIR/replay."""
    found: dict[str, set[str]] = {}
    for name in list_chunks(logdir / "replay").values():
        found.setdefault(name.stream.rsplit("_", 1)[0], set()).add(name.stream)
    return found


def start(tmp_path, name: str, module: str, *args: str, **env):
    """`python -m dreamer_live.<module> --configs debug ARGS` in its own process group, its output in
    tmp_path/<name>.out; return (the process, its output file, a function reading that output)."""
    path = tmp_path / f"{name}.out"
    out = open(path, "w+")
    proc = subprocess.Popen(
        [sys.executable, "-m", f"dreamer_live.{module}", "--configs", "debug", "--run.quiet", "true",
         *UNSTARVED_LEARNER, *args], cwd=REPO, stdout=out, stderr=subprocess.STDOUT, process_group=0,
        env=dict(os.environ, JAX_PLATFORMS="cpu", **env))

    def text() -> str:
        if not out.closed:
            out.flush()
        return path.read_text()
    return proc, out, text


def stop(proc, out, timeout: float = 90) -> int:
    """Ctrl-C to the process group (as a terminal sends it); its exit status (SIGKILL if it hangs)."""
    try:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGINT)
        return proc.wait(timeout=timeout)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        out.close()


def replay_steps(logdir) -> dict[str, int]:
    """Writer id -> the steps of its chunks in DIR/replay."""
    found: dict[str, int] = {}
    for name in list_chunks(logdir / "replay").values():
        writer = name.stream.rsplit("_", 1)[0]
        found[writer] = found.get(writer, 0) + name.length
    return found


def watching(run, text, seen: set[int]):
    """poll(what, predicate, timeout) for a `run` process: each poll notes its processes in `seen`
    and fails at once, with its output, when it has exited."""
    def running(what, predicate, timeout):
        def check():
            seen.update(descendants(run.pid))
            if run.poll() is not None:
                pytest.fail(f"{what}: the run exited with {run.returncode}:\n{text()[-4000:]}")
            return predicate()
        return poll(what, check, timeout, interval=0.5)
    return running


def listening(pids) -> set[str]:
    """The addresses on which the processes `pids` listen for TCP connections (IPv4 and IPv6)."""
    import ipaddress

    inodes = set()
    for pid in pids:
        try:
            inodes.update(os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd"))
        except OSError:
            continue
    found = set()
    for table in ("tcp", "tcp6"):
        for line in pathlib.Path(f"/proc/net/{table}").read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and f"socket:[{fields[9]}]" in inodes:  # LISTEN
                raw = bytes.fromhex(fields[1].split(":")[0])
                raw = b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4))  # host order
                ip = ipaddress.ip_address(raw)
                found.add(str(getattr(ip, "ipv4_mapped", None) or ip))
    return found


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_local_cluster_restarts_killed_actors_and_learner_and_stops_cleanly(tmp_path):
    """One private cluster (`run --ray.address local`, 3 actors, loopback only) and an actor joined
    by hand (its --actor.id 5, the address the run printed) for every fault, one after the other:

    - an actor SIGKILLed: Ray restarts it, it plays on as a new replay stream, the others never notice,
      trained parameters reach every actor through the object store;
    - the learner SIGKILLed: Ray restarts it, it resumes from its checkpoint and publishes on, while
      every actor ticks on without a pause;
    - Ctrl-C to the hand-joined actor: it leaves with every step it played in DIR/replay, the run
      goes on (its --logdir is a folder of its own, as on another machine: its metric lines reach
      the run's metrics.jsonl through the Hub, each once);
    - an actor SIGKILLed right before the run's terminal hangs up (SIGHUP to its process group, the
      private cluster's processes included), then Ctrl-C while it stops: each said in one line, and
      the run still stops cleanly, that actor's restarted process included (replay flushed,
      checkpoint written, every loop's summary printed, exit 0), and no process of the run is left
      behind.
    """
    logdir, outbox, elsewhere = tmp_path / "run", tmp_path / "outbox", tmp_path / "elsewhere"
    run, out, text = start(
        tmp_path, "run", "run", "--logdir", str(logdir), "--run.video_every", "0",
        "--learner.nice", "0", "--run.checkpoint_every", "0.05", "--actor.param_interval", "1",
        "--run.publish_every", "1", "--replay.chunk_seconds", "1", "--ray.address", "local",
        "--ray.actors", str(ACTORS), "--ray.outbox", str(outbox))
    seen: set[int] = set()
    joined = None

    running = watching(run, text, seen)

    def learner(since=0.0):
        return [r for r in metricslib.read_lines(logdir / "metrics.jsonl", "learner")
                if r.get("learner/updates_per_s") and r["time"] >= since]

    try:
        address = running("the run's join hint", lambda: re.search(
            r"More actors join with: RAY_AUTH_MODE=token python -m dreamer_live\.actor .*"
            r"--ray\.address (127\.0\.0\.1:\d+) ", text()), 60).group(1)
        # Ray does not send this machine's token to an address given explicitly unless told to
        joined, joined_out, joined_text = start(
            tmp_path, "joined", "actor", "--logdir", str(elsewhere), "--ray.address", address,
            "--actor.id", "5", "--actor.param_interval", "1", "--replay.chunk_seconds", "1",
            "--ray.outbox", str(outbox), RAY_AUTH_MODE="token")
        running("three actors ticking",
                lambda: {r["actor/id"] for r in ticks(logdir)} >= set(range(ACTORS)), 100)
        running("the learner training", learner, 60)
        running("actor 5 ticking on a trained version", lambda: [
            r for r in ticks(logdir, 5) if r["actor/policy_version"] >= 2], 100)
        assert {r["actor/pid"] for r in ticks(logdir, 5)} == {joined.pid}
        assert "actor 5: joined the Ray cluster at" in joined_text()
        pids = {k: ticks(logdir, k)[-1]["actor/pid"] for k in range(ACTORS)}
        assert len(set(pids.values())) == ACTORS and run.pid not in pids.values()
        cluster = descendants(run.pid)
        assert set(pids.values()) <= cluster  # the Ray actors: in the cluster
        addresses = listening(cluster | {run.pid})
        assert addresses and addresses <= {"127.0.0.1"}, addresses

        # an actor killed
        os.kill(pids[1], signal.SIGKILL)
        killed = time.time()
        restarted = running("actor 1 restarted by Ray in a new process",
                            lambda: [r for r in ticks(logdir, 1, killed)
                                     if r["actor/pid"] != pids[1]], 60)
        running("a chunk of actor 1's new stream in DIR/replay",
                lambda: len(streams(logdir).get("1", ())) >= 2, 30)
        for k in (0, 2):  # the others never noticed: the same process, ticking on
            assert {r["actor/pid"] for r in ticks(logdir, k)} == {pids[k]}
            running(f"actor {k} ticking after the kill",
                    lambda k=k: ticks(logdir, k, restarted[0]["time"]), 10)
        # trained parameters reached every actor, the restarted one included, through the object store
        running("every actor on a trained version", lambda: all(
            ticks(logdir, k, killed) and ticks(logdir, k, killed)[-1]["actor/policy_version"] >= 2
            for k in range(ACTORS)), 30)

        # the learner killed
        pids[1], pids[5] = restarted[0]["actor/pid"], joined.pid
        running("a checkpoint", lambda: list((logdir / "checkpoint").glob("state_*.msgpack")), 30)
        old = learner()[-1]["learner/pid"]
        os.kill(old, signal.SIGKILL)
        killed = time.time()
        version = max(ticks(logdir, k)[-1]["actor/policy_version"] for k in pids)
        back = running("the learner restarted by Ray, training again", lambda: [
            r for r in learner(killed) if r["learner/pid"] != old], 120)[0]
        assert re.search(r"learner: resumed from .* at [1-9]\d* updates", text())
        for k in pids:  # no actor paused while the learner was away, nor was restarted
            running(f"actor {k} ticking past the learner's return",
                    lambda k=k: ticks(logdir, k, back["time"]), 10)
            times = [killed] + [r["time"] for r in ticks(logdir, k, killed)]
            assert max(np.diff(times)) < 3, (k, np.diff(times))  # a ticks line every second
            assert {r["actor/pid"] for r in ticks(logdir, k, restarted[0]["time"] if k == 1
                                                   else 0)} == {pids[k]}
            running(f"actor {k} on a version the restarted learner published", lambda k=k: (
                ticks(logdir, k)[-1]["actor/policy_version"] > version), 30)

        # the hand-joined actor leaves
        code = stop(joined, joined_out)
        assert code == 0, joined_text()[-3000:]
        assert "actor 5: stopped (SIGINT)" in joined_text()
        assert replay_steps(logdir)["5"] == ticks(logdir, 5)[-1]["step"]  # every step it played
        assert ticks(logdir, 5) == ticks(elsewhere, 5)  # every ticks line, once
        assert not list((outbox / "actor5").glob("*.npz"))
        began = time.time()
        running("actor 0 ticking on after actor 5 left", lambda: ticks(logdir, 0, began), 10)
        seen.update(descendants(run.pid))

        # an actor killed right before the terminal hangs up: the run stops while Ray restarts it;
        # a Ctrl-C right behind the hang-up (answered in the same poll) is said, not forwarded
        os.kill(pids[2], signal.SIGKILL)
        os.killpg(run.pid, signal.SIGHUP)
        os.kill(run.pid, signal.SIGINT)
        poll("the hang-up said", lambda: "run: SIGHUP; stopping " in text(), 30)
    finally:
        if joined is not None and joined.poll() is None:
            stop(joined, joined_out)
        code = stop(run, out)
    log = text()
    assert code == 0, log[-4000:]
    assert re.search(r"^run: SIGHUP; stopping (learner|actor \d)( and (learner|actor \d))+ \(each saves "
                     r"before it exits\)$", log, re.M), log[-4000:]
    assert re.search(r"^run: SIGINT: already stopping; waiting up to \d+ s for .* to exit \(each saves "
                     r"first\), then tearing the cluster down$", log, re.M), log[-4000:]
    for k in range(ACTORS):
        assert f"actor {k}: stopped (SIGHUP)" in log and "replay flushed" in log, log[-4000:]
    assert "learner: stopped (SIGHUP)" in log
    # each loop's summary printed by the launcher itself (not "(Worker pid=N) ..." forwarded by Ray,
    # which loses what it has not forwarded when the cluster goes: a restarted actor's, in CI)
    for loop in [f"actor {k}" for k in range(ACTORS)] + ["learner"]:
        assert re.search(rf"^{loop}: stopped \(SIGHUP\)", log, re.M), log[-4000:]
    assert list((logdir / "checkpoint").glob("state_*.msgpack"))
    assert {r["actor/pid"] for r in metricslib.read_lines(logdir / "metrics.jsonl", "actor")
            if r["actor/id"] == 2} - {pids[2]}, "actor 2 was not restarted before it stopped"
    found = streams(logdir)
    assert set(found) == {"0", "1", "2", "5"} and len(found["1"]) == 2, found
    assert not list(outbox.rglob("*.npz")), "chunks left unshipped in the outboxes"
    assert replay_steps(logdir)["0"] == ticks(logdir, 0)[-1]["step"]  # every step it played
    poll("every process of the run gone", lambda: not [p for p in seen if alive(p)], 30)


def outbox_steps(outbox, writer_id) -> int:
    """The steps of the chunks waiting in one actor's outbox."""
    return sum(name.length for name in list_chunks(outbox / f"actor{writer_id}").values())


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_the_clusters_head_killed_ends_the_run_in_one_line_with_every_step_kept(tmp_path,
                                                                              record_property):
    """SIGKILL of the private cluster's head (its GCS process) under a run with one Ray actor and one
    joined by hand: after ray.head_lost_s (Ray's own processes would wait 60 s and then exit unsaved)
    the run says so in one line, every loop stops and saves as on Ctrl-C (each actor's steps all in
    DIR/replay or its outbox, a checkpoint), a last line says what was kept and how to resume, both
    commands exit 1, and no process of the run is left (Ray's agents, which outlive a dead head,
    included)."""
    logdir, outbox, elsewhere = tmp_path / "run", tmp_path / "outbox", tmp_path / "elsewhere"
    common = ("--actor.param_interval", "1", "--replay.chunk_seconds", "1", "--ray.outbox",
              str(outbox), "--ray.head_lost_s", "2")
    run, out, text = start(tmp_path, "run", "run", "--logdir", str(logdir), "--run.video_every", "0",
                           "--learner.nice", "0", "--ray.address", "local", "--ray.actors", "1",
                           *common)
    joined, seen = None, set()

    running = watching(run, text, seen)

    try:
        address = running("the run's join hint", lambda: re.search(
            r"--ray\.address (127\.0\.0\.1:\d+) ", text()), 60).group(1)
        joined, joined_out, joined_text = start(
            tmp_path, "joined", "actor", "--logdir", str(elsewhere), "--ray.address", address,
            "--actor.id", "5", *common, RAY_AUTH_MODE="token")
        running("both actors ticking", lambda: {r["actor/id"] for r in ticks(logdir)} >= {0, 5}, 100)
        running("the learner training", lambda: [
            r for r in metricslib.read_lines(logdir / "metrics.jsonl", "learner")
            if r.get("learner/updates_per_s")], 60)
        gcs = [pid for pid in descendants(run.pid)
               if b"gcs_server" in pathlib.Path(f"/proc/{pid}/cmdline").read_bytes()]
        assert len(gcs) == 1, gcs
        os.kill(gcs[0], signal.SIGKILL)
        code, joined_code = run.wait(timeout=50), joined.wait(timeout=30)
    finally:
        if joined is not None:
            stop(joined, joined_out)
        stop(run, out)
    log, joined_log = text(), joined_text()
    assert (code, joined_code) == (1, 1), log[-4000:] + joined_log[-2000:]
    said = re.search(rf"^run: the Ray cluster's head \(its GCS at {address}\) has not answered for "
                     r"2 s; stopping (learner|actor 0) and (learner|actor 0) \(each saves before it "
                     r"exits\)$", log, re.M)
    assert said, log[-4000:]
    assert "learner: stopped (the Ray cluster's head is gone) at" in log
    assert list((logdir / "checkpoint").glob("state_*.msgpack"))
    kept, played = replay_steps(logdir), {}
    for writer, out_log in (("0", log), ("5", joined_log)):
        summary = re.search(rf"^actor {writer}: stopped \(the Ray cluster's head is gone\) after "
                            r"(\d+) steps, .*; replay flushed", out_log, re.M)
        assert summary, out_log[-3000:]
        played[writer] = int(summary.group(1))
        assert kept.get(writer, 0) + outbox_steps(outbox, writer) == played[writer] > 0
    resume = re.search(rf"^run: the Ray cluster's head is gone: {re.escape(str(logdir / 'replay'))} "
                     rf"keeps {sum(kept.values())} steps, {outbox_steps(outbox, 0)} more wait in the "
                     r"actors' outboxes on this machine \(shipped when the run goes on\)\. To resume "
                     r"\(the learner from its checkpoint\): run the same command again$", log, re.M)
    assert resume, log[-4000:]
    record_property("steps_played", sum(played.values()))  # bench/faults.py's table
    record_property("steps_kept", sum(kept.values()) + outbox_steps(outbox, 0) + outbox_steps(outbox, 5))
    record_property("lines", said.group(0).strip())
    record_property("lines", resume.group(0).strip())
    assert re.search(rf"^actor 5: the Ray cluster's head is gone: {outbox_steps(outbox, 5)} steps "
                     r"wait in .*; start this actor again \(the same --actor\.id\) once the run "
                     r"is back", joined_log, re.M), joined_log[-3000:]
    poll("every process of the run gone", lambda: not [p for p in seen if alive(p)], 30)


@pytest.mark.parametrize("address, error", [
    ("local", r"actor: error: an actor joins a running learner's cluster: --ray\.address auto or "
              r"HOST:PORT \(local starts a private one, for python -m dreamer_live\.run\)"),
    ("127.0.0.1:1", r"actor: error: cannot join the Ray cluster at 127\.0\.0\.1:1: nothing answers "
                    r"there \(Connection refused\)")])
def test_an_actor_that_cannot_join_says_so_in_one_line(tmp_path, address, error):
    from test_cli_errors import assert_one_line_error, command

    result = command("dreamer_live.actor", "--logdir", tmp_path, "--configs", "debug",
                     "--ray.address", address)
    assert result.returncode == 2
    assert_one_line_error(result, error)


def free_ports(count: int) -> list[int]:
    """`count` distinct TCP ports free on the loopback address now (the kernel's picks)."""
    import socket

    socks = [socket.socket() for _ in range(count)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def raylet(tmp: pathlib.Path, out: pathlib.Path, ip: str, cpus: int, head: str = ""):
    """`ray start --block` for one node at loopback address `ip` (127.0.0.2, ...: nodes with addresses
    of their own, as on two machines), every port given (none of Ray's defaults, which other clusters
    on this machine may hold), in its own process group; a head when `head` is "", else a node joining
    the head at that address (Ray's files in `tmp`, its output in `out`). Returns (the process, its
    GCS port for a head)."""
    ports = free_ports(15)
    args = ["--node-ip-address", ip, "--num-cpus", str(cpus), "--block",
            "--object-store-memory", str(100 * 2 ** 20), "--disable-usage-stats", "--node-manager-port", str(ports[0]),
            "--object-manager-port", str(ports[1]), "--metrics-export-port", str(ports[2]),
            "--dashboard-agent-listen-port", str(ports[3]),
            "--dashboard-agent-grpc-port", str(ports[4]), "--runtime-env-agent-port", str(ports[5]),
            "--worker-port-list", ",".join(map(str, ports[6:13]))]
    if head:
        args += ["--address", head]
    else:
        args += ["--head", "--port", str(ports[13]), "--include-dashboard", "false",
                 "--dashboard-port", str(ports[14]),
                 "--temp-dir", str(tmp)]
    out = open(out, "w")
    proc = subprocess.Popen(
        [str(pathlib.Path(sys.executable).parent / "ray"), "start", *args], cwd=REPO, stdout=out,
        stderr=subprocess.STDOUT, process_group=0,
        env=dict(os.environ, JAX_PLATFORMS="cpu", RAY_AUTH_MODE="token", RAY_USAGE_STATS_ENABLED="0",
                 PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])))
    out.close()
    return proc, ports[13]


def stop_raylet(proc) -> None:
    """Stop a `ray start --block` by its pid (SIGTERM), then whatever of its group is left."""
    tree = descendants(proc.pid)
    proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        pass
    for pid in [proc.pid, *tree]:
        if alive(pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
    proc.wait()


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_a_run_joins_a_two_node_cluster_and_data_crosses_nodes(tmp_path):
    """Two raylets on this machine (`ray start --head` and `ray start --address`, every port given),
    the head with 1 CPU, the other with 2: `run --ray.address HOST:PORT --ray.actors 2` joins them, the
    Hub and the learner on the run's node and an actor on the other one, so chunks and parameters
    cross nodes; a second run on the same cluster is refused in one line; Ctrl-C stops the run's
    processes and leaves the cluster's running."""
    import shutil
    import socket
    import tempfile

    logdir, outbox = tmp_path / "run", tmp_path / "outbox"
    temp = pathlib.Path(tempfile.mkdtemp(prefix="dlr", dir="/tmp"))  # Ray's socket paths are short
    nodes, run = [], None
    try:
        head, port = raylet(temp / "ray", tmp_path / "head.out", "127.0.0.2", 1)
        nodes.append(head)
        address = f"127.0.0.2:{port}"

        def up():
            for node, name in zip(nodes, ("head", "node2")):
                if node.poll() is not None:
                    pytest.fail(f"{name} exited:\n{(tmp_path / f'{name}.out').read_text()[-3000:]}")
            return True

        def listens():
            up()
            with socket.socket() as probe:
                return probe.connect_ex(("127.0.0.2", port)) == 0
        poll("the head's GCS", listens, 60, interval=0.2)
        nodes.append(raylet(temp / "ray", tmp_path / "node2.out", "127.0.0.3", 2,
                            head=address)[0])
        run, run_out, run_text = start(
            tmp_path, "run", "run", "--logdir", str(logdir), "--run.video_every", "0",
            "--learner.nice", "0", "--actor.param_interval", "1", "--run.publish_every", "1",
            "--replay.chunk_seconds", "1", "--ray.address", address, "--ray.actors", "2",
            "--ray.outbox", str(outbox), RAY_AUTH_MODE="token")
        poll("both actors on a trained version", lambda: up() and all(
            ticks(logdir, k) and ticks(logdir, k)[-1]["actor/policy_version"] >= 2 for k in (0, 1)),
            150, interval=0.5)
        poll("chunks of both actors in DIR/replay", lambda: len(replay_steps(logdir)) == 2, 30)
        trees = [descendants(node.pid) for node in nodes]

        def node_of(pid):
            return [i for i, tree in enumerate(trees) if pid in tree]

        learner = metricslib.read_lines(logdir / "metrics.jsonl", "learner")[-1]["learner/pid"]
        actors = {ticks(logdir, k)[-1]["actor/pid"] for k in (0, 1)}
        assert len(node_of(learner)) == 1 and all(len(node_of(p)) == 1 for p in actors)
        assert {node_of(p)[0] for p in actors} - set(node_of(learner)), "no actor on the other node"
        assert "on the Ray cluster joined at" in run_text()

        second = subprocess.run(
            [sys.executable, "-m", "dreamer_live.run", "--logdir", str(tmp_path / "second"),
             "--configs", "debug", "--ray.address", address], cwd=REPO, capture_output=True,
            text=True, timeout=60, env=dict(os.environ, RAY_AUTH_MODE="token"))
        assert second.returncode == 2, second.stderr
        assert "already runs a dreamer_live learner" in second.stderr.strip().splitlines()[-1]

        code = stop(run, run_out)
        assert code == 0, run_text()[-4000:]
        poll("the run's learner and actors gone", lambda: not [
            p for p in actors | {learner} if alive(p)], 30)
        assert all(node.poll() is None for node in nodes), "the cluster went with the run"
        assert replay_steps(logdir) == {str(k): ticks(logdir, k)[-1]["step"] for k in (0, 1)}
        # both nodes share this machine's disk: the actor on the other node finds the Hub's mark in
        # its logdir and leaves its lines to its own logger, so each is there once, in order
        for k in (0, 1):
            times = [r["time"] for r in ticks(logdir, k)]
            assert times == sorted(set(times)), (k, times)
    finally:
        try:
            if run is not None and run.poll() is None:
                stop(run, run_out)
        finally:
            everything = set().union(*(descendants(node.pid) | {node.pid} for node in nodes))
            for node in reversed(nodes):
                stop_raylet(node)
            shutil.rmtree(temp, ignore_errors=True)
    poll("every process of the cluster gone", lambda: not [p for p in everything if alive(p)], 30)


@pytest.fixture(scope="module")
def cluster():
    """A private local cluster in this process, as the launcher starts it, shared by the tests below
    (last in this module: the others start their clusters in processes of their own)."""
    from dreamer_live.transport import raycluster

    saved = dict(os.environ)
    ray = raycluster.local_cluster(num_cpus=2)
    yield ray
    ray.shutdown()
    # connect() sets Ray's one-machine variables in this process's environment; a `ray start` for
    # two nodes, started later by this process, must not inherit them
    os.environ.clear()
    os.environ.update(saved)


@pytest.mark.filterwarnings("ignore:os.fork:RuntimeWarning")  # ray.init's fork is followed by exec
def test_ray_ends_carry_chunks_and_parameters_and_wait_out_a_gone_learner_side(cluster, tmp_path):
    """The Ray ends have every member of their interfaces; a version reaches the actor's source; chunks
    reach DIR/replay; while no Hub answers, add() goes on at once and chunks wait in the outbox on local
    disk, then a Hub started anew under the same name gets them and the next version."""
    from test_transport import members

    from dreamer_live import config, transport
    from dreamer_live.transport import raylink

    # the source polls the Hub every 0.5 s (at the default 5 s each version waited up to 5 s)
    cfg = config.resolve(["debug"], {"replay.chunk_steps": 4, "ray.inflight": 2,
                                     "actor.param_interval": 0.5,
                                     "ray.outbox": str(tmp_path / "outbox")})
    logdir, outbox = tmp_path / "run", tmp_path / "outbox" / "actor5"

    def hub():
        return cluster.remote(raylink.Hub).options(name="test_hub").remote(str(logdir))

    def chunks(folder):
        return len(list_chunks(folder))

    def add(count):  # the longest add() in seconds
        longest = 0.0
        for i in range(count):
            began = time.perf_counter()
            sink.add({"x": np.full(2, i, np.float32), "is_last": np.bool_(False)})
            longest = max(longest, time.perf_counter() - began)
        return longest

    first = hub()
    transport.use_ray(raylink.Link(logdir, hub_name="test_hub"))
    sink = transport.replay_sink(cfg, logdir, 5)
    publisher = transport.variable_publisher(cfg, logdir)
    source = transport.variable_source(cfg, logdir, {"w": np.zeros(3, np.float32)})
    try:
        for end, protocol in ((sink, transport.ReplaySink), (source, transport.VariableSource),
                              (publisher, transport.VariablePublisher)):
            missing = {name for name in members(protocol) if not hasattr(end, name)}
            assert not missing, f"{type(end).__name__} lacks {sorted(missing)} of {protocol.__name__}"
        publisher.publish({"w": np.full(3, 2.0, np.float32)}, step=7)
        loaded = poll("version 1 at the actor", lambda: source.current.version == 1 and source.current,
                      30)
        assert loaded.step == 7 and np.all(np.asarray(loaded.params["w"]) == 2.0)
        assert (logdir / "params" / "params-000001.msgpack").exists()  # eval reads DIR/params
        add(8)
        poll("two chunks in DIR/replay", lambda: chunks(logdir / "replay") == 2, 30)
        poll("the outbox emptied", lambda: chunks(outbox) == 0, 10)

        cluster.kill(first)
        assert add(8) < 0.05
        poll("two chunks waiting in the outbox", lambda: chunks(outbox) == 2, 30)
        assert chunks(logdir / "replay") == 2
        assert sink.metrics()["ray/chunks_shipped"] == 2

        second = hub()
        poll("the waiting chunks in DIR/replay", lambda: chunks(logdir / "replay") == 4, 30)
        poll("the outbox emptied", lambda: chunks(outbox) == 0, 10)
        publisher.publish({"w": np.full(3, 3.0, np.float32)}, step=9)
        poll("version 2 at the actor, through the new Hub",
             lambda: publisher.heartbeat(9) or source.current.version == 2, 30, interval=0.5)
        assert sink.metrics()["ray/steps_shipped"] == 16
        cluster.kill(second)
    finally:
        transport.use_ray(None)
        sink.close()
        source.close()


@pytest.mark.filterwarnings("ignore:os.fork:RuntimeWarning")  # ray.init's fork is followed by exec
def test_a_loop_whose_process_dies_while_it_stops_is_asked_again(cluster, tmp_path, monkeypatch,
                                                                  capsys):
    """Ctrl-C reaches a loop, whose process then dies before its stop is done: Ray runs the loop again
    in a new process, never asked to stop; the launcher asks it again, so the run still stops, exit
    0, with that loop's summary printed by the launcher itself."""
    import threading

    from dreamer_live import config
    from dreamer_live.launch import rayrun

    monkeypatch.setattr(rayrun, "STOP_GRACE_S", 30.0)  # a stop never asked again: exit 1 in 30 s

    class Loop(rayrun.Worker):
        """The launcher's Worker (stop flag, last words) around a loop that, once asked to stop,
        marks it on disk and, the first time, hangs in its stop until killed."""

        def _loop(self) -> int:
            self.flag.event.wait()
            first = not list(self.logdir.glob("stopping-*"))
            (self.logdir / f"stopping-{os.getpid()}").touch()
            if first:
                threading.Event().wait()
            print(f"loop: stopped ({self.flag.reason})")
            return 0

    cfg = config.resolve(["debug"], {"run.quiet": True})
    run = rayrun.RayRun(cfg, tmp_path)
    run.workers["loop"] = cluster.remote(Loop).options(
        max_restarts=1, max_task_retries=1, max_concurrency=2).remote("actor", cfg.to_dict(),
                                                                      str(tmp_path))
    run._on_signal(signal.SIGINT, None)  # Ctrl-C as the watch begins

    def kill():
        stopping = poll("the loop stopping", lambda: list(tmp_path.glob("stopping-*")), 60)
        os.kill(int(stopping[0].name.split("-")[1]), signal.SIGKILL)
    killer = threading.Thread(target=kill)
    killer.start()
    assert run.watch() == 0
    killer.join()
    assert len(list(tmp_path.glob("stopping-*"))) == 2  # two processes asked to stop
    assert re.search(r"^loop: stopped \(SIGINT\)$", capsys.readouterr().out, re.M)


@pytest.mark.filterwarnings("ignore:os.fork:RuntimeWarning")  # ray.init's fork is followed by exec
def test_an_actor_elsewhere_gives_the_hub_its_spaces_and_metric_lines(cluster, tmp_path):
    """An actor whose logdir is not the Hub's (another machine's copy of the path, here another
    folder) ships, beside its chunks, its spaces.json (the first actor's is kept: a learner whose
    actors are all elsewhere builds its agent from it) and its metric lines into the Hub's
    DIR/metrics.jsonl, each once; an actor sharing the Hub's logdir sends no line (they are there).
    The run's replay folder deleted, the Hub makes it again with the run's spaces.json."""
    import gymnasium

    from dreamer_live import config, spaces, transport
    from dreamer_live.metrics import Logger
    from dreamer_live.transport import raylink

    cfg = config.resolve(["debug"], {"replay.chunk_steps": 4,
                                     "ray.outbox": str(tmp_path / "outbox")})
    run, elsewhere = tmp_path / "run", tmp_path / "elsewhere"
    hub = cluster.remote(raylink.Hub).options(name="far_hub").remote(str(run))
    box = gymnasium.spaces.Box(0, 255, (4, 4, 3), np.uint8)
    spaces.save(elsewhere / "replay", {"image": box}, gymnasium.spaces.Discrete(3))
    logs, sinks = [], []
    try:
        for where, actor_id in ((elsewhere, 7), (run, 8)):
            logs.append(Logger(where, "actor", quiet=True, tensorboard=False,
                               fields={"actor/id": actor_id, "actor/pid": os.getpid()}))
            transport.use_ray(raylink.Link(where, hub_name="far_hub"))
            sinks.append(transport.replay_sink(cfg, where, actor_id))
        found = poll("the actor's spaces.json in the run's replay",
                     lambda: spaces.load(run / "replay"), 30)
        assert found[0]["image"] == box and found[1] == gymnasium.spaces.Discrete(3)
        other = spaces.to_json({"image": gymnasium.spaces.Box(0, 255, (8, 8, 3), np.uint8)},
                               gymnasium.spaces.Discrete(3))
        assert "differ" in cluster.get(hub.put_spaces.remote(other))  # the first actor's stays
        for step in range(3):
            for log in logs:
                log.write(step, {"actor/ticks_per_s": 15.0})
        for step in range(8):
            sinks[0].add({"x": np.full(2, step, np.float32), "is_last": np.bool_(False)})

        def lines(actor_id):
            return [r["step"] for r in metricslib.read_lines(run / "metrics.jsonl", "actor")
                    if r["actor/id"] == actor_id]
        poll("actor 7's three lines in the run's metrics.jsonl", lambda: len(lines(7)) >= 3, 30)
        poll("actor 7's two chunks in the run's replay",
             lambda: replay_steps(run).get("7") == 8, 30)
        written = (run / "replay" / spaces.FILE).read_bytes()
        (run / "replay").rename(tmp_path / "gone")
        for step in range(8, 12):
            sinks[0].add({"x": np.full(2, step, np.float32), "is_last": np.bool_(False)})
        poll("the next chunk in the run's replay made again", lambda: replay_steps(run).get("7") == 4, 30)
        assert (run / "replay" / spaces.FILE).read_bytes() == written
        for sink in sinks:
            sink.close()
        assert lines(7) == [0, 1, 2] and lines(8) == [0, 1, 2]  # each line once
    finally:
        transport.use_ray(None)
        for log in logs:
            log.close()
        for sink in sinks:
            sink.close()
        cluster.kill(hub)


@pytest.mark.filterwarnings("ignore:os.fork:RuntimeWarning")  # ray.init's fork is followed by exec
def test_an_actor_whose_env_fails_on_ray_stops_the_run_with_its_line(cluster, tmp_path, capsys):
    """An actor on Ray whose env raises at step 30 (tests/misbehaving_envs.py): the launcher prints the
    actor's one line (env, step, error, replay flushed, traceback file), says it failed, asks the other
    loop to stop, and exits 1; the 29 steps before the failure are in DIR/replay."""
    from dreamer_live import config
    from dreamer_live.launch import rayrun
    from dreamer_live.transport import raylink

    class Waiting(rayrun.Worker):
        """Stands in for the learner: waits to be asked to stop, then says so."""

        def _loop(self) -> int:
            self.flag.event.wait()
            print(f"waiting: stopped ({self.flag.reason})")
            return 0

    cfg = config.resolve(["debug"], {
        "run.quiet": True, "env.name": "misbehaving_envs:Misbehaving-v0", "env.obs": "vector",
        "env.kwargs": {"fault": "raise", "at": 30}, "ray.outbox": str(tmp_path / "outbox")})
    hub = cluster.remote(raylink.Hub).options(name=raylink.HUB_NAME).remote(str(tmp_path))
    run = rayrun.RayRun(cfg, tmp_path)
    tests = {"env_vars": {"PYTHONPATH": str(REPO / "tests")}}  # the env's module, in Ray's workers
    run.workers["actor 0"] = cluster.remote(rayrun.Worker).options(
        max_restarts=0, max_concurrency=2, runtime_env=tests).remote("actor", cfg.to_dict(), str(tmp_path))
    run.workers["waiting"] = cluster.remote(Waiting).options(max_concurrency=2).remote(
        "learner", cfg.to_dict(), str(tmp_path))
    try:
        assert run.watch() == 1
    finally:
        cluster.kill(hub)
    err, out = (lambda c: (c.err, c.out))(capsys.readouterr())
    log = tmp_path / "actor-0-error.log"
    assert re.search(rf"^run: actor 0: error: env misbehaving_envs:Misbehaving-v0 failed at step 30 of "
                     rf"episode 1: RuntimeError: the game crashed at step 30; replay flushed to .*; "
                     rf"traceback in {re.escape(str(log))}$", err, re.M), err
    assert re.search(r"^run: actor 0 failed; stopping the others$", err, re.M), err
    assert re.search(r"^waiting: stopped \(actor 0 failed\)$", out, re.M), out
    assert "RuntimeError: the game crashed at step 30" in log.read_text()
    assert replay_steps(tmp_path) == {"0": 30}  # the reset's step and steps 1-29
