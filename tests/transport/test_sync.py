"""Parameter sync: publisher and client in two processes, broken files, a tick path that never waits."""

import json
import logging
import multiprocessing as mp
import time

import numpy as np
import pytest

from dreamer_live import config
from dreamer_live.atomic import write_atomic
from dreamer_live.replay import Writer
from dreamer_live.transport import sync

SPAWN = mp.get_context("spawn")
HASH = "0123456789abcdef"


def template():
    """A small parameter pytree in the shape of the agent's (nested dicts of arrays)."""
    return {"encoder": {"kernel": np.zeros((32, 16), np.float32), "bias": np.zeros(16, np.float32)},
            "policy": np.zeros((16, 4), np.float32)}


def params_for(k: float):
    """Parameters whose every value is k, so a reader can tell which version it holds."""
    return {"encoder": {"kernel": np.full((32, 16), k, np.float32),
                        "bias": np.full(16, k, np.float32)},
            "policy": np.full((16, 4), k, np.float32)}


def value_of(params) -> float:
    """The one value a params_for() tree holds (NaN if its leaves disagree)."""
    import jax

    values = {float(np.unique(np.asarray(x))[0]) for x in jax.tree_util.tree_leaves(params)}
    return values.pop() if len(values) == 1 else float("nan")


def _client_process(directory, interval, ready, stop, out):
    """Report each version the client swaps in ("seen", version, time, value) and each new error."""
    client = sync.Client(directory, template(), HASH, interval).start()
    ready.set()
    errors, last = [], 0
    while not stop.is_set():
        current = client.current
        if current.version != last:
            out.put(("seen", current.version, time.time(), value_of(current.params)))
            last = current.version
        if client.last_error and client.last_error not in errors:
            errors.append(client.last_error)
            out.put(("error", client.last_error))
        time.sleep(0.005)
    client.close()


def test_client_process_sees_each_version_within_its_interval(tmp_path):
    interval = 0.5
    ready, stop, out = SPAWN.Event(), SPAWN.Event(), SPAWN.Queue()
    proc = SPAWN.Process(target=_client_process, args=(tmp_path, interval, ready, stop, out))
    proc.start()
    assert ready.wait(60)
    publisher, published, seen = sync.Publisher(tmp_path, HASH, keep=3), {}, []
    for k in (1, 2, 3):
        published[k] = time.time()
        assert publisher.publish(params_for(k), step=100 * k) == k
        seen.append(out.get(timeout=30))  # the client reports version k before k + 1 is published
    # a truncated version 4, renamed into place with the pointer naming it
    good = (tmp_path / sync.version_file(3)).read_bytes()
    write_atomic(tmp_path / sync.version_file(4), good[: len(good) // 2])
    write_atomic(tmp_path / sync.POINTER, json.dumps(
        {"version": 4, "file": sync.version_file(4), "step": 400, "time": time.time()}).encode())
    error = out.get(timeout=30)
    # a restarted learner continues after the newest valid version: a whole 4 replaces the broken one
    publisher = sync.Publisher(tmp_path, HASH, keep=3)
    published[4] = time.time()
    assert publisher.publish(params_for(4), step=500) == 4
    seen.append(out.get(timeout=30))
    stop.set()
    proc.join(timeout=30)
    assert [v for _, v, _, _ in seen] == [1, 2, 3, 4]  # the broken 4 never replaced good params
    for _, version, seen_at, value in seen:
        assert value == version
        assert seen_at - published[version] < interval + 1.5  # generous: 2 shared cores
    assert error[0] == "error" and "params-000004" in error[1]
    assert out.empty()  # no other version or error was reported
    assert sorted(p.name for p in tmp_path.glob("params-*")) == [
        sync.version_file(v) for v in (2, 3, 4)]


def test_on_update_sees_each_version_before_it_is_used_and_can_refuse_it(tmp_path):
    publisher, seen = sync.Publisher(tmp_path, HASH), []

    def warm(params):  # the actor compiles its policy here; version 2 fails to
        seen.append(value_of(params))
        if value_of(params) == 2:
            raise RuntimeError("cannot compile")

    client = sync.Client(tmp_path, template(), HASH, device_put=False, on_update=warm)
    publisher.publish(params_for(1), step=10)
    assert client.poll() and client.current.version == 1 and seen == [1]
    publisher.publish(params_for(2), step=20)
    assert client.poll() is False and client.current.version == 1 and "refused" in client.last_error
    assert client.poll() is False and seen == [1, 2]  # a refused version is not tried again
    publisher.publish(params_for(3), step=30)
    assert client.poll() and value_of(client.current.params) == 3 and seen == [1, 2, 3]


def test_broken_or_mismatched_versions_keep_current_params_and_report_once(tmp_path, caplog):
    publisher = sync.Publisher(tmp_path, HASH)
    client = sync.Client(tmp_path, template(), HASH, device_put=False)
    assert client.poll() is False and client.current.version == 0 and client.lag() == (0, 0.0)
    publisher.publish(params_for(1), step=100)
    assert client.poll() and client.current.version == 1 and value_of(client.current.params) == 1
    bad_trees = {
        "model hash": (sync.Publisher(tmp_path, "another-model"), params_for(2)),
        "template": (publisher, {**params_for(2), "extra": np.zeros(2, np.float32)}),
        "shape": (publisher, {**params_for(2), "policy": np.zeros((16, 5), np.float32)}),
        "dtype": (publisher, {**params_for(2), "policy": np.zeros((16, 4), np.float64)}),
    }
    for reason, (pub, tree) in bad_trees.items():
        pub.version = max(publisher.version, pub.version)
        version = pub.publish(tree, step=250)
        publisher.version = version
        with caplog.at_level(logging.WARNING, logger="dreamer_live.transport.sync"):
            caplog.clear()
            for _ in range(3):
                assert client.poll() is False
        assert client.current.version == 1 and value_of(client.current.params) == 1, reason
        warnings = [r for r in caplog.records if sync.version_file(version) in r.getMessage()]
        assert len(warnings) == 1, reason
    assert client.lag()[0] == 150  # newest seen: step 250; in use: step 100
    # a flipped byte inside the payload: the checksum catches it
    version = publisher.publish(params_for(3), step=300)
    path = tmp_path / sync.version_file(version)
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    assert client.poll() is False and client.current.version == 1
    assert "checksum" in client.last_error or "unreadable" in client.last_error
    # a good version later is taken; without the pointer the newest file is found by listing
    version = publisher.publish(params_for(4), step=400)
    (tmp_path / sync.POINTER).unlink()
    assert client.poll() and client.current.version == version and value_of(client.current.params) == 4
    assert client.last_error == ""
    assert len(list(tmp_path.glob("params-*"))) == 3  # keep=3


def test_lag_counts_learner_updates_since_the_version_in_use(tmp_path):
    publisher = sync.Publisher(tmp_path, HASH)
    client = sync.Client(tmp_path, template(), HASH)
    publisher.publish(params_for(1), step=100)
    assert client.poll() and client.lag()[0] == 0
    publisher.heartbeat(130)  # the learner trains on between publications
    assert client.poll() is False and client.lag()[0] == 30
    (tmp_path / sync.HEARTBEAT).write_text("{not json")  # damaged: the last step seen stands
    assert client.poll() is False and client.lag()[0] == 30
    publisher.heartbeat(180)
    time.sleep(0.01)
    # a learner restarted from an older checkpoint publishes a lower step, newer than the heartbeat
    publisher.publish(params_for(2), step=120)
    assert client.poll() and client.lag()[0] == 0
    publisher.heartbeat(125)
    assert client.poll() is False and client.lag()[0] == 5


def test_a_learner_whose_wall_clock_jumps_back_is_heard_all_the_same(tmp_path, monkeypatch):
    """The learner's wall clock goes an hour ahead and back (NTP, a resumed VM): each heartbeat it
    writes afterwards, stamped an hour earlier than the last, is still news (not "learner silent"),
    and the lag counts from its step."""
    publisher = sync.Publisher(tmp_path, HASH)
    client = sync.Client(tmp_path, template(), HASH)
    publisher.publish(params_for(1), step=10)
    assert client.poll()
    real = time.time
    monkeypatch.setattr(time, "time", lambda: real() + 3600)
    publisher.heartbeat(20)
    client.poll()
    assert client.lag()[0] == 10
    monkeypatch.setattr(time, "time", real)
    for step in (30, 40):
        time.sleep(0.2)
        publisher.heartbeat(step)
        client.poll()
        assert client.learner_silence() < 0.1 and client.lag()[0] == step - 10
    time.sleep(0.2)
    client.poll()  # nothing new: the silence grows
    assert client.learner_silence() >= 0.2


def _other_value(value):
    """A value of the same type as a config leaf, different from it."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, (int, float)):
        return value + 1
    if isinstance(value, str):
        return value + "x"
    if isinstance(value, list):
        return value + value[-1:] if value else [1]
    return {"other": 1}  # a free-form mapping (env.kwargs)


def test_model_hash_changes_with_every_identity_key_and_no_other():
    base = config.resolve(["debug"])
    assert sync.model_hash(base) == sync.model_hash(config.resolve(["debug"]))
    flat = base.flat()
    assert any(config.is_identity(k) for k in flat) and not all(config.is_identity(k) for k in flat)
    for key, value in flat.items():
        changed = sync.model_hash(base.update({key: _other_value(value)}))
        assert (changed != sync.model_hash(base)) == config.is_identity(key), key
    # the keys that say how to attach to the game are outside it (an actor with a window must accept
    # the learner's parameters)
    assert not config.is_identity("env.window") and not config.is_identity("env.live.display")


def _publisher_process(directory, size, stop):
    publisher = sync.Publisher(directory, HASH, keep=2)
    k = 0
    while not stop.is_set():
        k += 1
        publisher.publish({"w": np.full(size, k, np.float32)}, step=k)
        time.sleep(0.1)


def test_tick_path_does_not_wait_for_chunk_writes_or_param_loads(tmp_path):
    size = 1_000_000  # 4 MB of parameters per version
    stop = SPAWN.Event()
    proc = SPAWN.Process(target=_publisher_process, args=(tmp_path / "params", size, stop))
    proc.start()
    # noise: the slowest frames to compress, so the writer thread is busy longest
    frames = np.random.default_rng(0).integers(0, 256, (16, 64, 64, 3), np.uint8)
    writer = Writer(tmp_path / "replay", 0, chunk_steps=32, chunk_seconds=10.0)
    client = sync.Client(tmp_path / "params", {"w": np.zeros(size, np.float32)}, HASH,
                         interval=0.05).start()
    deadline = time.monotonic() + 60
    while client.current.version == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    first_version = client.current.version
    add_ms, params_ms = [], []
    start = time.perf_counter()
    for i in range(300):  # 3 s at 100 Hz
        step = {"image": frames[i % 16], "action": np.zeros(4, np.float32),
                "reward": np.float32(0), "is_first": i == 0, "is_last": False,
                "is_terminal": False, "tick_time": time.time(), "tick_late_ms": np.float32(0)}
        t0 = time.perf_counter()
        writer.add(step)
        t1 = time.perf_counter()
        params = client.current.params
        assert params["w"].shape == (size,)
        t2 = time.perf_counter()
        add_ms.append((t1 - t0) * 1e3)
        params_ms.append((t2 - t1) * 1e3)
        time.sleep(max(0.0, start + (i + 1) / 100 - time.perf_counter()))
    stop.set()
    proc.join(timeout=30)
    loaded = client.current.version - first_version
    client.close()
    writer.close()
    assert writer.chunks_written >= 9 and loaded >= 3  # flushing and loading really overlapped
    assert np.percentile(add_ms, 99) < 20, np.percentile(add_ms, [50, 99, 100])
    assert np.percentile(params_ms, 99) < 20, np.percentile(params_ms, [50, 99, 100])


@pytest.mark.parametrize("keep", [1, 2])
def test_publisher_keeps_the_newest_versions(tmp_path, keep):
    publisher = sync.Publisher(tmp_path, HASH, keep=keep)
    for k in range(4):
        publisher.publish(params_for(k), step=k)
    assert sorted(p.name for p in tmp_path.glob("params-*")) == [
        sync.version_file(v) for v in range(5 - keep, 5)]
    assert json.loads((tmp_path / sync.POINTER).read_text())["version"] == 4


def write_version(directory, tree, version, step, model_hash=HASH):
    """A parameter file as a hostile or buggy learner could write it: valid format, any values."""
    import hashlib

    from flax import serialization

    payload = serialization.to_bytes(tree)
    meta = {"format": sync.FORMAT, "version": version, "step": step, "time": time.time(),
            "model_hash": model_hash, "sha256": hashlib.sha256(payload).hexdigest()}
    name = sync.version_file(version)
    write_atomic(directory / name, serialization.msgpack_serialize({"meta": meta, "params": payload}))
    pointer = {"version": version, "step": step, "time": meta["time"], "model_hash": model_hash,
               "file": name}
    write_atomic(directory / sync.POINTER, json.dumps(pointer).encode())


@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_non_finite_parameters_are_neither_published_nor_loaded(tmp_path, bad):
    publisher = sync.Publisher(tmp_path, HASH)
    client = sync.Client(tmp_path, template(), HASH, device_put=False)
    publisher.publish(params_for(1), step=10)
    assert client.poll() and client.current.version == 1
    poisoned = params_for(2)
    poisoned["encoder"]["bias"][3] = bad
    with pytest.raises(ValueError, match="NaN or infinity"):
        publisher.publish(poisoned, step=20)
    assert publisher.version == 1 and sorted(p.name for p in tmp_path.glob("params-*")) == [
        sync.version_file(1)]
    write_version(tmp_path, poisoned, 2, 20)  # written around the publisher's check
    assert client.poll() is False and client.current.version == 1 and value_of(client.current.params) == 1
    assert "NaN or infinity" in client.last_error
    publisher.version = 2
    publisher.publish(params_for(3), step=30)  # the next good version is taken
    assert client.poll() and client.current.version == 3 and value_of(client.current.params) == 3
