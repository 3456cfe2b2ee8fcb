"""Replay store: writer and reader in real processes, real files, kills, corrupt and hostile chunks."""

import hashlib
import logging
import multiprocessing as mp
import os
import pathlib
import shutil
import time

import numpy as np
import pytest
from conftest import poll

from dreamer_live import config
from dreamer_live.errors import UserError
from dreamer_live.replay import ChunkName, Reader, Writer, write_chunk
from dreamer_live.replay.chunk import list_chunks
from dreamer_live.replay.stored import StoredChunk

SPAWN = mp.get_context("spawn")


NOISE = np.random.default_rng(0).integers(0, 256, (16, 64, 64, 3), np.uint8)


def make_step(run: int, counter: int, episode: int = 40, image=(8, 8, 3)) -> dict:
    """A step whose `vector` says which writer run produced it and its position in that run; the
    image is noise (slow to compress, like the worst real frames) with the counter in pixel 0."""
    pixels = NOISE[counter % 16, :image[0], :image[1], :image[2]].copy()
    pixels[0, 0, 0] = counter % 256
    return {
        "image": pixels,
        "vector": np.array([run, counter], np.float32),
        "action": np.eye(3, dtype=np.float32)[counter % 3],
        "reward": np.float32(counter % 7 == 0),
        "is_first": counter % episode == 0,
        "is_last": counter % episode == episode - 1,
        "is_terminal": False,
        "tick_time": np.float64(time.time()),
        "tick_late_ms": np.float32(0.0),
    }


def write_steps(directory, writer_id, run, steps, chunk_steps=16, chunk_seconds=10.0, **kw):
    """Write `steps` steps in-process and return the writer's stream."""
    with Writer(directory, writer_id, chunk_steps, chunk_seconds) as writer:
        for i in range(steps):
            writer.add(make_step(run, i, **kw))
    return writer.stream


def assert_sequences_consistent(batch):
    """Each sequence comes from one writer run and has consecutive counters."""
    run, counter = batch["vector"][..., 0], batch["vector"][..., 1]
    assert (run == run[:, :1]).all(), "a sequence mixes writers"
    assert (np.diff(counter, axis=1) == 1).all(), "a sequence skips or repeats steps"
    assert (batch["image"][:, :, 0, 0, 0] == (counter % 256).astype(np.uint8)).all()


# ---- processes ---------------------------------------------------------------------------------

def _writer_process(directory, writer_id, run, steps, hz, chunk_steps, chunk_seconds, image, out,
                    episode=40):
    writer = Writer(directory, writer_id, chunk_steps, chunk_seconds)
    start = time.monotonic()
    for i in range(steps):
        delay = start + i / hz - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        writer.add(make_step(run, i, episode, image))
    writer.close()
    if out is not None:
        out.put((writer.stream, steps))


def _reader_process(directory, writers_done, out):
    reader = Reader(directory, capacity=100_000, batch=8, length=10, prefetch=2)
    total, samples, refreshes = reader.num_steps, 0, 0  # loaded at construction
    while not writers_done.is_set():
        total += reader.refresh()
        refreshes += 1
        if reader.ready():
            assert_sequences_consistent(reader.sample())
            samples += 1
        time.sleep(0.05)
    total += reader.refresh()
    long = reader.sample(8, 40)  # longer than a chunk: must cross chunk boundaries
    assert_sequences_consistent(long)
    reader.close()
    out.put({"total": total, "samples": samples, "refreshes": refreshes,
             "streams": {s: v.tolist() for s, v in reader.read_stream("vector").items()},
             "corrupt": reader.corrupt})


def test_two_writers_at_60hz_and_a_reader_process(tmp_path):
    out, done = SPAWN.Queue(), SPAWN.Event()
    reader = SPAWN.Process(target=_reader_process, args=(tmp_path, done, out))
    reader.start()
    writers = [SPAWN.Process(target=_writer_process,
                             args=(tmp_path, f"w{k}", k, 150, 60.0, 16, 0.25, (8, 8, 3), out))
               for k in range(2)]
    for w in writers:
        w.start()
    written = dict(out.get(timeout=60) for _ in writers)
    for w in writers:
        w.join(timeout=30)
    done.set()
    result = out.get(timeout=60)
    reader.join(timeout=30)
    assert reader.exitcode == 0 and all(w.exitcode == 0 for w in writers)
    assert result["samples"] > 5 and result["refreshes"] > 5  # it really sampled while writing
    assert result["corrupt"] == []
    assert set(result["streams"]) == set(written)
    assert result["total"] == sum(written.values())  # every step loaded exactly once ...
    for stream, steps in written.items():
        values = np.array(result["streams"][stream])
        run = int(stream[1])
        assert (values[:, 0] == run).all()
        assert values[:, 1].tolist() == list(range(steps))  # ... and in order
    # chunks closed by size, by time and at episode ends, by time and at episode ends
    lengths = {ChunkName.parse(p.name).length for p in tmp_path.glob("*.npz")}
    assert 16 in lengths and len(lengths) > 2


def test_sigkill_writer_loses_nothing_flushed_and_restart_uses_new_ids(tmp_path):
    image = (64, 64, 3)  # chunks of 64 noisy 12 KB frames take a while to write: kill mid-write
    proc = SPAWN.Process(target=_writer_process,
                         args=(tmp_path, "w0", 0, 100_000, 400.0, 64, 1.0, image, None, 10**6))
    proc.start()
    # Kill the moment a new file appears (a chunk being written) once three chunks are complete:
    # a writer that wrote in place would leave a partial chunk under its final name.
    deadline, flushed, before = time.monotonic() + 30, [], set()
    while time.monotonic() < deadline:
        names = set(os.listdir(tmp_path))
        flushed = [n for n in before if ChunkName.parse(n)]
        if len(flushed) >= 3 and names - before:
            break
        before = names
    proc.kill()
    proc.join()
    assert proc.exitcode == -9 and len(flushed) >= 3
    reader = Reader(tmp_path, prefetch=0, batch=4, length=20)
    assert reader.corrupt == []
    assert not (tmp_path / "corrupt").exists()
    held = {c.name for c in reader._table.chunks}
    assert set(flushed) <= held  # every chunk renamed into place before the kill is intact
    (stream, values), = reader.read_stream("vector").items()
    assert values[:, 1].tolist() == list(range(len(values)))
    assert stream.startswith("w0_")

    restarted = SPAWN.Process(target=_writer_process,
                              args=(tmp_path, "w0", 1, 50, 1000.0, 32, 1.0, image, None, 10**6))
    restarted.start()
    restarted.join(timeout=60)
    assert restarted.exitcode == 0
    assert reader.refresh() == 50 and reader.corrupt == []
    streams = reader.read_stream("vector")
    assert len(streams) == 2 and all(s.startswith("w0_") for s in streams)
    new = next(s for s in streams if s != stream)
    assert streams[new][:, 1].tolist() == list(range(50))
    names = [ChunkName.parse(p.name) for p in tmp_path.glob("*.npz")]
    assert sorted(n.seq for n in names if n.stream == new) == [0, 1]
    for _ in range(20):
        assert_sequences_consistent(reader.sample(8, 20))


# ---- bad files ---------------------------------------------------------------------------------

class Hostile:
    """Unpickling this creates a file: proof that a chunk was loaded with pickle."""

    marker = ""

    def __reduce__(self):
        return open, (self.marker, "w")


def make_bad_chunks(directory: pathlib.Path, marker: pathlib.Path) -> list[str]:
    """A good stream plus five bad chunk files (truncated, garbage, empty, wrong shape, pickled)."""
    write_steps(directory, "good", 0, 48)
    good = sorted(directory.glob("*.npz"))[0]
    names = [f"20260101T000000-bad{k}_000000-000000-16.npz" for k in range(5)]
    data = good.read_bytes()
    (directory / names[0]).write_bytes(data[:len(data) // 2])
    (directory / names[1]).write_bytes(os.urandom(2000))
    (directory / names[2]).write_bytes(b"")
    small = {k: np.repeat(np.asarray(v)[None], 16, 0)
             for k, v in make_step(0, 0, image=(4, 4, 3)).items()}
    write_chunk(directory / names[3], small)
    Hostile.marker = str(marker)
    with open(directory / names[4], "wb") as f:
        np.savez(f, **{**small, "image": np.array([Hostile()] * 16, dtype=object)})
    return names


def test_corrupt_truncated_and_hostile_chunks_are_moved_aside(tmp_path, caplog):
    replay, marker = tmp_path / "replay", tmp_path / "pwned"
    replay.mkdir()
    bad = make_bad_chunks(replay, marker)
    with caplog.at_level(logging.WARNING, logger="dreamer_live.replay"):
        reader = Reader(replay, prefetch=0, batch=2, length=8)
        assert reader.refresh() == 0  # bad files are not retried or reported again
    assert not marker.exists()
    assert sorted(reader.corrupt) == sorted(bad)
    assert sorted(p.name for p in (replay / "corrupt").iterdir()) == sorted(bad)
    for name in bad:
        assert not (replay / name).exists()
        assert sum(name in r.getMessage() for r in caplog.records) == 1
    assert reader.num_steps == 48  # the reader goes on with the good data
    assert_sequences_consistent(reader.sample())
    write_steps(replay, "good", 0, 16)
    assert reader.refresh() == 16


def test_readonly_reader_leaves_the_folder_byte_for_byte(tmp_path, caplog):
    replay = tmp_path / "replay"
    replay.mkdir()
    bad = make_bad_chunks(replay, tmp_path / "pwned")
    (replay / ".20260101T000000-x_1-000000-1.npz.deadbeef.tmp").write_bytes(b"partial")

    def snapshot():
        return {p.relative_to(replay): hashlib.sha256(p.read_bytes()).hexdigest()
                for p in sorted(replay.rglob("*")) if p.is_file()}

    before = snapshot()
    with caplog.at_level(logging.WARNING, logger="dreamer_live.replay"):
        reader = Reader(replay, readonly=True, prefetch=2, batch=2, length=8)
        assert_sequences_consistent(reader.sample())
        reader.refresh()
        reader.close()
    assert sorted(reader.corrupt) == sorted(bad) and reader.num_steps == 48
    assert all(sum(n in r.getMessage() for r in caplog.records) == 1 for n in bad)
    assert snapshot() == before and not (replay / "corrupt").exists()
    with pytest.raises(UserError, match="not found"):
        Reader(tmp_path / "missing", readonly=True)


# ---- index and sampling ------------------------------------------------------------------------

def test_capacity_keeps_the_newest_and_refresh_skips_known_files(tmp_path):
    stream = write_steps(tmp_path, "w", 0, 160)  # 10 chunks of 16
    reader = Reader(tmp_path, capacity=50, prefetch=0, batch=2, length=8)
    assert reader.num_steps == 48  # the newest three chunks; older ones never loaded
    assert reader.steps_written() == 160  # what the actors wrote in all (the train ratio's count)
    assert reader.read_stream("vector")[stream][:, 1].tolist() == list(range(112, 160))
    # known files are not read again: deleting one changes nothing in memory
    newest = max(tmp_path.glob("*.npz"), key=lambda p: ChunkName.parse(p.name).seq)
    newest.unlink()
    assert reader.refresh() == 0 and reader.num_steps == 48
    other = write_steps(tmp_path, "v", 1, 32)
    assert reader.refresh() == 32
    assert reader.num_steps <= 50  # the oldest chunks were dropped
    assert reader.read_stream("vector")[other][:, 1].tolist() == list(range(32))
    assert sorted(reader.streams) == sorted([stream, other])


def test_a_load_holds_the_raw_arrays_of_one_chunk_at_a_time(tmp_path):
    """Each chunk is compressed as it is read: the load's peak of allocations stays near what the store
    holds plus one chunk, not the raw size of the whole replay (40 chunks of 64 still 64x64x3 frames:
    31 MB raw)."""
    import tracemalloc

    chunks, steps = 40, 64
    with Writer(tmp_path, "w", steps, 60.0) as writer:
        for i in range(chunks * steps):
            step = make_step(0, i)
            step["image"] = np.zeros((64, 64, 3), np.uint8)
            step["image"][0, 0, 0] = i % 256
            writer.add(step)
    raw = chunks * steps * 64 * 64 * 3
    tracemalloc.start()
    try:
        reader = Reader(tmp_path, capacity=100_000, prefetch=0, batch=2, length=8)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert reader.num_steps == chunks * steps and reader.nbytes < raw / 20
    assert peak < raw / 5, (peak, raw)  # before: every raw chunk until the last was read
    assert reader.sample()["image"].shape == (2, 8, 64, 64, 3)


def test_sequences_never_bridge_a_missing_chunk(tmp_path):
    write_steps(tmp_path, "w", 0, 80, episode=1000)  # five chunks of 16
    middle = sorted(tmp_path.glob("*.npz"), key=lambda p: ChunkName.parse(p.name).seq)[2]
    middle.unlink()  # counters 32..47 missing
    reader = Reader(tmp_path, prefetch=0, batch=64, length=20)
    starts = set()
    for _ in range(10):
        batch = reader.sample()
        assert_sequences_consistent(batch)
        starts |= set(batch["vector"][:, 0, 1].astype(int).tolist())
    assert starts <= set(range(0, 13)) | set(range(48, 61))  # only within each side of the gap
    assert {0, 12, 48, 60} <= starts  # uniform over every valid start, both ends included
    assert not reader.ready(40)
    with pytest.raises(ValueError, match="no sequence of 40 steps"):
        reader.sample(2, 40)


def test_sequences_never_mix_streams_with_consecutive_numbers(tmp_path):
    first = write_steps(tmp_path, "a", 0, 48, episode=1000)  # seq 0..2
    second = write_steps(tmp_path, "b", 1, 80, episode=1000)  # seq 0..4
    for path in tmp_path.glob(f"*-{second}-00000[012]-*.npz"):
        path.unlink()  # "b" now starts at seq 3, right after "a" ends at seq 2
    reader = Reader(tmp_path, prefetch=0, batch=256, length=20)
    assert sorted(reader.streams) == [first, second]
    for _ in range(5):
        assert_sequences_consistent(reader.sample())


def test_recency_mix_draws_from_the_newest_steps(tmp_path):
    write_steps(tmp_path, "w", 0, 160, episode=1000)  # ten chunks of 16
    reader = Reader(tmp_path, prefetch=0, batch=32, length=4, recency=1.0, recency_window=16)
    starts = reader.sample()["vector"][:, 0, 1]
    assert (starts >= 144).all()  # all from the newest chunk
    uniform = Reader(tmp_path, prefetch=0, batch=64, length=4)
    assert (uniform.sample()["vector"][:, 0, 1] < 144).mean() > 0.7


def test_a_wall_clock_that_jumps_reorders_no_chunk(tmp_path, monkeypatch):
    """The writer's wall clock jumps an hour ahead and back mid-run (NTP, a resumed VM): its chunk
    names still run in the order written. Chunks already named with a jump (a writer restarted while the
    clock was an hour ahead, then behind) still load in sequence order: recency draws from the newest
    written, capacity keeps them."""
    from dreamer_live.replay.chunk import written_order
    real = time.time
    with Writer(tmp_path / "a", "w", 16, 10.0) as writer:
        for i in range(48):
            if i in (16, 32):  # an hour ahead for the second chunk, back for the third
                monkeypatch.setattr(time, "time", (lambda: real() + 3600) if i == 16 else real)
            writer.add(make_step(0, i, episode=1000))
    names = sorted((ChunkName.parse(p.name) for p in (tmp_path / "a").glob("*.npz")), key=lambda c: c.seq)
    assert [c.seq for c in names] == [0, 1, 2] and names[0].time <= names[1].time <= names[2].time
    assert names[2].time <= time.strftime("%Y%m%dT%H%M%S", time.gmtime(real() + 60))

    stream = write_steps(tmp_path / "b", "w", 0, 160, episode=1000)  # ten chunks of 16
    jumped = {1: "20990101T000000", 2: "20990101T000001", 5: "20000101T000000"}
    for path in (tmp_path / "b").glob("*.npz"):
        fields = ChunkName.parse(path.name)
        if fields.seq in jumped:
            path.rename(path.with_name(str(ChunkName(jumped[fields.seq], fields.stream, fields.seq,
                                                     fields.length))))
    other = write_steps(tmp_path / "b", "v", 1, 16, episode=1000)
    order = written_order(list_chunks(tmp_path / "b"))
    assert [f.seq for f, _ in order if f.stream == stream] == list(range(10))
    reader = Reader(tmp_path / "b", prefetch=0, batch=32, length=4, recency=1.0, recency_window=16,
                    capacity=64)
    assert reader.read_stream("vector")[stream][:, 1].tolist() == list(range(96, 160))  # 4 chunks
    assert other not in reader.streams  # named before the jumped chunks' 2099: older in its order
    assert (reader.sample()["vector"][:, 0, 1] >= 144).all()  # the newest written chunk


def test_prefetch_and_empty_replay(tmp_path):
    reader = Reader(tmp_path / "replay", prefetch=2, batch=4, length=8)
    assert not reader.ready() and reader.num_steps == 0
    with pytest.raises(ValueError, match="refresh"):
        reader.sample()
    write_steps(tmp_path / "replay", "w", 0, 40)
    assert reader.refresh() == 40
    poll("the prefetch queue to fill", lambda: reader._queue.full())
    start = time.perf_counter()
    batch = reader.sample()
    assert time.perf_counter() - start < 0.2  # ready in the queue (generous: 2 shared cores)
    assert batch["image"].shape == (4, 8, 8, 8, 3) and "tick_time" not in batch
    assert_sequences_consistent(batch)
    reader.close()


@pytest.mark.parametrize("dtype", [np.uint8, np.int16, np.float32])
def test_compressed_blocks_return_exactly_the_stored_steps(dtype):
    rng = np.random.default_rng(0)
    length = 37  # not a multiple of the block size
    arrays = {"image": (rng.normal(0, 50, (length, 24, 24, 3))).astype(dtype),  # >= 1 KB: blocks
              "reward": rng.normal(size=length).astype(np.float32)}  # small: kept raw
    chunk = StoredChunk(ChunkName("20260101T000000", "w_0", 0, length), arrays, 0)
    assert "image" in chunk.blocks and "reward" in chunk.raw
    assert chunk.nbytes < arrays["image"].nbytes + arrays["reward"].nbytes + 1024
    np.testing.assert_array_equal(chunk.read("image"), arrays["image"])
    for start, stop in [(0, 1), (0, 37), (15, 17), (16, 32), (5, 36), (36, 37)]:
        out = {k: np.zeros((2, 40, *a.shape[1:]), a.dtype) for k, a in arrays.items()}
        chunk.fill(out, 1, 3, start, stop)
        for key, array in arrays.items():
            np.testing.assert_array_equal(out[key][1, 3:3 + stop - start], array[start:stop])
            assert not out[key][0].any() and not out[key][1, :3].any()


def test_writer_flushes_on_time_without_further_adds(tmp_path):
    writer = Writer(tmp_path, 3, chunk_steps=1000, chunk_seconds=0.3)
    for i in range(5):
        writer.add(make_step(0, i))
    deadline = time.monotonic() + 10  # due within 2 x chunk_seconds; generous for a loaded machine
    while not list(tmp_path.glob("*.npz")) and time.monotonic() < deadline:
        time.sleep(0.05)
    files = list(tmp_path.glob("*.npz"))
    assert len(files) == 1 and ChunkName.parse(files[0].name).length == 5
    with pytest.raises(ValueError, match="shape"):
        writer.add({**make_step(0, 5), "vector": np.zeros(3, np.float32)})
    with pytest.raises(ValueError, match="keys"):
        writer.add({k: v for k, v in make_step(0, 5).items() if k != "reward"})
    writer.close()
    with pytest.raises(ValueError, match="closed"):
        writer.add(make_step(0, 5))
    with pytest.raises(UserError):
        Writer(tmp_path, "bad-id")
    with Writer(tmp_path / "other", 0) as other, pytest.raises(ValueError, match="numeric"):
        other.add({**make_step(0, 0), "note": "text"})


def test_a_replay_folder_replaced_under_the_writer_is_said_with_the_steps_left_in_the_old(tmp_path,
                                                                                          caplog):
    """A logdir renamed mid-run and moved back over the one made meanwhile, in the writer's terms: the
    folder it wrote to goes away, then another stands at its path. One line each time, naming the steps
    that stayed in the folder before; every step is in one of the two folders."""
    replay, old, older = tmp_path / "replay", tmp_path / "old", tmp_path / "older"
    with caplog.at_level(logging.WARNING, logger="dreamer_live.replay"):
        with Writer(replay, 0, chunk_steps=16) as writer:
            for i in range(32):
                writer.add(make_step(0, i))
            writer.flush(wait=True)
            replay.rename(old)  # gone: made again at the next write
            for i in range(32, 48):
                writer.add(make_step(0, i))
            writer.flush(wait=True)
            replay.rename(older)
            replay.mkdir()  # another folder in its place
            for i in range(48, 64):
                writer.add(make_step(0, i))
    said = [r.getMessage() for r in caplog.records]
    assert said == [
        f"replay: {replay} was gone (deleted, or its logdir renamed or moved); the 32 steps written "
        f"before are in the old folder, wherever it went; making it again, writing on from chunk "
        f"{sorted(list_chunks(older))[0]}",
        f"replay: {replay} is another folder than the one written so far (moved or replaced); the 48 "
        f"steps written before are in the old folder, wherever it went; writing on in it from chunk "
        f"{sorted(list_chunks(replay))[0]}"], said
    lengths = [sum(c.length for c in list_chunks(d).values()) for d in (old, older, replay)]
    assert lengths == [32, 16, 16]


def test_from_config_and_chunk_file_names(tmp_path):
    cfg = config.resolve(["debug"])
    writer = Writer.from_config(cfg, tmp_path)
    assert writer.chunk_steps == cfg.replay.chunk_steps and writer.stream.startswith("0_")
    writer.add(make_step(0, 0))
    writer.close()
    (path,) = tmp_path.glob("*.npz")
    name = ChunkName.parse(path.name)
    assert (name.stream, name.seq, name.length) == (writer.stream, 0, 1)
    assert ChunkName.parse("." + path.name + ".abcd1234.tmp") is None
    reader = Reader.from_config(cfg, tmp_path)
    assert (reader.batch, reader.length, reader.capacity) == (4, 16, cfg.replay.capacity)
    assert reader.num_steps == 1
    reader.close()
    shutil.rmtree(tmp_path)


def test_demonstrations_are_mixed_into_batches_at_demo_fraction(tmp_path):
    """replay.demo_fraction of each batch comes from DIR/demos (recorded play), the rest from DIR/replay;
    with no demonstrations to mix in, or demonstrations of other observations, one line says so."""
    from dreamer_live import transport
    from dreamer_live.errors import UserError
    cfg = config.resolve(["debug"], {"replay.demo_fraction": 0.25, "batch_size": 8})
    write_steps(tmp_path / "replay", 0, run=0, steps=200)
    with pytest.raises(UserError, match=r"replay.demo_fraction 0.25 needs demonstrations in .*demos"):
        transport.replay_source(cfg, tmp_path / "replay")
    write_steps(tmp_path / "demos", "demo0", run=1, steps=200)
    source = transport.replay_source(cfg, tmp_path / "replay")
    try:
        for _ in range(3):
            batch = source.sample()
            assert batch["vector"].shape[:2] == (8, cfg.batch_length)
            assert (batch["vector"][:6, :, 0] == 0).all() and (batch["vector"][6:, :, 0] == 1).all()
        assert source.num_steps == source.steps_written() == 200  # the actors' steps, not the demos'
    finally:
        source.close()
    alone = transport.replay_source(cfg, tmp_path / "demos", readonly=True)  # offline on demos alone
    try:
        assert (alone.sample()["vector"][:, :, 0] == 1).all()
    finally:
        alone.close()
    write_steps(tmp_path / "small" / "demos", "demo0", run=1, steps=200, image=(4, 4, 3))
    write_steps(tmp_path / "small" / "replay", 0, run=0, steps=200)
    other = transport.replay_source(cfg, tmp_path / "small" / "replay")  # demos of another env.size
    try:
        with pytest.raises(UserError, match=r"^the demonstrations in .*small/demos do not hold what the "
                                            r"replay holds: image \(8, 8, 3\) against \(4, 4, 3\) "):
            other.sample()
    finally:
        other.close()


def test_replay_context_latents_by_step_id(tmp_path):
    """With agent.replay_context the reader samples K + batch_length steps with ids (one per step, the
    same step always the same id); the store gives the latent stored for the last context step,
    zeros for a step never stored or before an episode's first step, and forgets the oldest ids."""
    from dreamer_live.replay.latents import BLOCK, LatentStore
    from dreamer_live.steps import STEP_ID
    cfg = config.resolve(["debug"], {"agent.replay_context": 1, "batch_size": 256,
                                     "agent.rssm.stoch": 2, "agent.rssm.classes": 4})
    for run in (0, 1):
        write_steps(tmp_path, run, run=run, steps=100, episode=5)
    reader = Reader.from_config(cfg, tmp_path)
    store = LatentStore.from_config(cfg)
    deter_size = cfg.agent.rssm.deter

    def truth(batch):  # what a step's latent is stored as below: from its writer run and counter
        run, counter = batch["vector"][..., 0], batch["vector"][..., 1]
        deter = np.repeat((run * 1000 + counter)[..., None], deter_size, -1)
        stoch = np.eye(4, dtype=np.float32)[(counter % 4).astype(int)][..., None, :]
        return deter, stoch.repeat(2, -2)

    try:
        first = reader.sample()
        assert first["vector"].shape[:2] == first[STEP_ID].shape == (256, cfg.batch_length + 1)
        assert_sequences_consistent(first)
        second = reader.sample()
        step_of = {}
        for batch in (first, second):
            for i, step in zip(batch[STEP_ID].ravel(), batch["vector"].reshape(-1, 2)):
                assert step_of.setdefault(int(i), tuple(step)) == tuple(step)
        stored = first[STEP_ID][::2, 1:]  # every other sequence's trained steps
        store.update(stored, *(x[::2, 1:] for x in truth(first)))
        inputs = store.inputs(second)
        deter, stoch = truth(second)
        known = np.isin(second[STEP_ID][:, 0], stored) & ~second["is_first"][:, 1]
        unknown = ~np.isin(second[STEP_ID][:, 0], stored)
        assert known.any() and unknown.any() and (second["is_first"][:, 1] & ~unknown).any()
        k = known[:, None]
        np.testing.assert_array_equal(inputs["context/deter"], np.where(k, deter[:, 0], 0))
        np.testing.assert_array_equal(inputs["context/stoch"],
                                      np.where(k[..., None], stoch[:, 0], 0))
        np.testing.assert_array_equal(inputs["context/action"],
                                      np.where(k, second["action"][:, 0], 0))
    finally:
        reader.close()
    small = LatentStore(1, 2, 1, 2, capacity=BLOCK)
    small.update(np.arange(3), np.ones((3, 2)), np.eye(2)[[0, 1, 1], None])
    assert small.lookup(np.arange(4))[2].tolist() == [True, True, True, False]
    small.update([2 * BLOCK], np.ones((1, 2)), np.eye(2)[[0], None])
    assert small.lookup([0, 1, 2, 2 * BLOCK])[2].tolist() == [False, False, False, True]


def test_a_long_load_says_how_far_it_got_on_a_commands_stderr(tmp_path):
    """A command (cli.main) prints the package's INFO lines: a Reader's load of many new chunks says
    every replay PROGRESS_S how many it has loaded (here every chunk: PROGRESS_S -1)."""
    import subprocess
    import sys

    write_steps(tmp_path, 0, 0, 64)
    chunks = len(list_chunks(tmp_path))
    code = ("import sys; from dreamer_live import cli; from dreamer_live.replay import reader\n"
            "reader.PROGRESS_S = -1\n"
            "@cli.main\n"
            "def main(argv):\n"
            f"    reader.Reader({str(tmp_path)!r}, capacity=1000).refresh()\n"
            "sys.exit(main([]))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert [line.split(" chunks")[0] for line in out.stderr.splitlines()] == [
        f"replay: loaded {i}/{chunks}" for i in range(1, chunks + 1)], out.stderr
