"""Replay store figures: chunk writes, refresh over many files, sampling speed, memory, add() latency.

    .venv/bin/python bench/replay_io.py [--images monsterkong,smooth] [--update-rate 0.5]
    .venv/bin/python bench/replay_io.py --smoke      # 20 files, 2 chunks sampled 0.5 s, 1024 adds
    .venv/bin/python bench/replay_io.py --load-steps 100000 1000000 --images monsterkong   # memory at load

Images are 64x64x3 uint8 with realistic structure, never pure noise unless asked for:
  monsterkong  frames of the built-in MonsterKong game (textured platforms, ladders, sprites) under a
               random policy, box-downscaled from 500x465 to 64x64 like a screen capture
  catcher      frames of the built-in Catcher game (flat colours; the easy case)
  smooth       synthetic moving colour blobs: smooth gradients where every pixel changes every step
  noise        uniform random pixels (worst case, incompressible)
Prints: chunk write MB/s; refresh() time with --files chunk files on disk; sampled sequences/s at
--batch x --length against what the learner consumes at --update-rate updates/s (ratio); memory per
stored step against the 12 KB of raw storage (ratio); add() latency p50/p99/max while chunks flush.
With --load-steps N: a store of N steps of the first image kind loaded by a fresh process: its peak
memory while loading and what it holds once loaded (resident set above the process's start), per step,
against the reader's own count of the bytes it holds.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np
from smoke import add_smoke

from dreamer_live.replay import Reader, Writer, write_chunk
from dreamer_live.replay.chunk import ChunkName, timestamp

RAW_STEP = 64 * 64 * 3


def game_frames(name: str, n: int, seed: int = 0) -> np.ndarray:
    """n frames of a built-in game under a random policy, box-resized to 64x64."""
    from PIL import Image

    from dreamer_live.envs.games import GAMES, GameEnv

    env = GameEnv(GAMES[name](seed=seed), clock="lockstep", obs="image")
    rng, actions = np.random.default_rng(seed), env.act_space.n
    frames, obs = [], env.reset()
    while len(frames) < n:
        image = obs["image"]
        if image.shape[:2] != (64, 64):
            image = np.asarray(Image.fromarray(image).resize((64, 64), Image.BOX))
        frames.append(image)
        obs = env.reset() if obs["is_last"] else env.step(np.eye(actions, dtype=np.float32)[
            rng.integers(actions)])
    env.close()
    return np.stack(frames)


def smooth_frames(n: int, seed: int = 0) -> np.ndarray:
    """n frames of six colour blobs drifting over each other (smooth, every pixel changes)."""
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[:64, :64] / 64
    centres, velocity = rng.uniform(0, 1, (6, 2)), rng.normal(0, 0.01, (6, 2))
    colours = rng.uniform(0, 255, (6, 3))
    out = np.empty((n, 64, 64, 3), np.uint8)
    for i in range(n):
        centres = (centres + velocity) % 1
        w = np.stack([np.exp(-((yy - a) ** 2 + (xx - b) ** 2) / 0.03) for a, b in centres])
        mix = np.einsum("kij,kc->ijc", w, colours) / (w.sum(0)[..., None] + 1e-3)
        out[i] = np.clip(mix, 0, 255)
    return out


def make_frames(kind: str, n: int) -> np.ndarray:
    """n 64x64x3 frames of the given kind."""
    if kind == "smooth":
        return smooth_frames(n)
    if kind == "noise":
        return np.random.default_rng(0).integers(0, 256, (n, 64, 64, 3), np.uint8)
    names = {"monsterkong": "MonsterKong", "catcher": "Catcher"}
    if kind not in names:
        sys.exit(f"replay_io: unknown image kind {kind!r} (monsterkong, catcher, smooth, noise)")
    return game_frames(names[kind], n)


def chunk_arrays(frames: np.ndarray, start: int, length: int) -> dict[str, np.ndarray]:
    """A chunk of `length` steps with the step keys of a real actor (images tiled from `frames`)."""
    index = (start + np.arange(length)) % len(frames)
    rng = np.random.default_rng(start)
    return {
        "image": frames[index],
        "action": np.eye(6, dtype=np.float32)[rng.integers(0, 6, length)],
        "reward": rng.normal(0, 1, length).astype(np.float32),
        "is_first": np.arange(length) % 500 == 0,
        "is_last": np.arange(length) % 500 == 499,
        "is_terminal": np.zeros(length, bool),
        "tick_time": time.time() + np.arange(length) / 60.0,
        "tick_late_ms": rng.exponential(0.5, length).astype(np.float32),
    }


def write_store(directory: pathlib.Path, frames: np.ndarray, chunks: int, length: int,
                stream: str = "0_bench0") -> float:
    """Write `chunks` chunk files of `length` steps; return raw MB/s of the writes."""
    directory.mkdir(parents=True, exist_ok=True)
    raw, seconds = 0, 0.0
    for seq in range(chunks):
        arrays = chunk_arrays(frames, seq * length, length)
        name = ChunkName(timestamp(time.time()), stream, seq, length)
        start = time.perf_counter()
        write_chunk(directory / str(name), arrays)
        seconds += time.perf_counter() - start
        raw += sum(a.nbytes for a in arrays.values())
    return raw / seconds / 1e6


def bench_add_latency(directory: pathlib.Path, frames: np.ndarray, steps: int, chunk: int):
    """add() latency in ms while the writer's thread flushes chunks."""
    writer = Writer(directory, "lat", chunk_steps=chunk, chunk_seconds=10.0)
    times = []
    for i in range(steps):
        step = {k: v[0] for k, v in chunk_arrays(frames, i, 1).items()}
        start = time.perf_counter()
        writer.add(step)
        times.append((time.perf_counter() - start) * 1e3)
        time.sleep(0.001)  # a fast actor: ~1 kHz, so many adds overlap every flush
    writer.close()
    return np.percentile(times, [50, 99]), max(times), writer.chunks_written


def bench_refresh(directory: pathlib.Path, frames: np.ndarray, files: int, length: int):
    """Initial load and refresh() times with `files` chunk files on disk."""
    write_store(directory, frames, files, length)
    start = time.perf_counter()
    reader = Reader(directory, prefetch=0)
    load = time.perf_counter() - start
    idle = []
    for _ in range(5):
        start = time.perf_counter()
        assert reader.refresh() == 0
        idle.append(time.perf_counter() - start)
    arrays = chunk_arrays(frames, 0, length)
    name = ChunkName(timestamp(time.time()), "0_bench0", files, length)
    write_chunk(directory / str(name), arrays)
    start = time.perf_counter()
    assert reader.refresh() == length
    one_new = time.perf_counter() - start
    return load, float(np.median(idle)), one_new


def bench_store(directory: pathlib.Path, frames: np.ndarray, chunks: int, batch: int, length: int,
                seconds: float):
    """Memory per stored step and sampled sequences/s (direct and through the prefetch queue)."""
    write_store(directory, frames, chunks, 1024)
    reader = Reader(directory, prefetch=0, batch=batch, length=length)
    per_step = reader.nbytes / reader.num_steps  # compressed blocks + raw small arrays
    rates = []
    for prefetch in (0, 4):
        reader = Reader(directory, prefetch=prefetch, batch=batch, length=length)
        reader.sample()  # warm up
        count, start = 0, time.perf_counter()
        while time.perf_counter() - start < seconds:
            reader.sample()
            count += 1
        rates.append(count * batch / (time.perf_counter() - start))
        reader.close()
    return per_step, rates


LOAD_PROBE = """
import json, resource, sys
from dreamer_live.replay import Reader
def rss():  # resident bytes now
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize()
before = rss()
reader = Reader(sys.argv[1], capacity=10 ** 9, prefetch=0, batch=2, length=8)
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux: KiB
print(json.dumps({"steps": reader.num_steps, "before": before, "peak": peak, "held": rss(),
                  "nbytes": reader.nbytes}))
"""


def bench_load_memory(directory: pathlib.Path, frames: np.ndarray, steps: int) -> dict:
    """Write a store of `steps` steps, load it in a fresh process: its memory figures (bytes)."""
    write_store(directory, frames, max(1, steps // 1024), 1024)
    out = subprocess.run([sys.executable, "-c", LOAD_PROBE, str(directory)], capture_output=True,
                         text=True, check=True)
    shutil.rmtree(directory, ignore_errors=True)
    return json.loads(out.stdout.splitlines()[-1])


def main(argv=None) -> int:
    """Run every figure and print it with its comparison."""
    p = argparse.ArgumentParser(prog="replay_io", description=__doc__.split("\n")[0])
    p.add_argument("--images", default="monsterkong,smooth",
                   help="comma list of image kinds: monsterkong, catcher, smooth, noise")
    p.add_argument("--update-rate", type=float, default=0.5,
                   help="learner updates/s to compare sampling with (size1m on CPU: ~0.5)")
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--length", type=int, default=64)
    p.add_argument("--files", type=int, default=1000, help="chunk files for the refresh() figure")
    p.add_argument("--store-chunks", type=int, default=32,
                   help="1024-step chunks in the sampled store")
    p.add_argument("--seconds", type=float, default=5.0, help="sampling time per measurement")
    p.add_argument("--adds", type=int, default=4096, help="add() calls for the latency figure")
    p.add_argument("--load-steps", type=int, nargs="*", default=[], metavar="N",
                   help="only the memory of loading stores of N steps (first image kind), e.g. 100000 1000000")
    p.add_argument("--dir", type=pathlib.Path, default=None,
                   help="scratch folder (default: a temp dir)")
    add_smoke(p)
    args = p.parse_args(argv)
    if args.smoke:
        args.files, args.store_chunks, args.seconds, args.adds = 20, 2, 0.5, 1024
    root = pathlib.Path(tempfile.mkdtemp(prefix="replay_io_", dir=args.dir))
    print(f"replay_io: scratch files in {root} (removed at the end)")
    consumed = args.update_rate * args.batch
    if args.smoke:
        args.load_steps = args.load_steps or [4096]
    try:
        kind = args.images.split(",")[0]
        for steps in args.load_steps:
            m = bench_load_memory(root / f"load-{steps}", make_frames(kind, 1024), steps)
            n = m["steps"]
            print(f"load of {n} {kind} steps: peak {(m['peak'] - m['before']) / n:.0f} B/step while "
                  f"loading, {(m['held'] - m['before']) / n:.0f} B/step held once loaded (the reader "
                  f"counts {m['nbytes'] / n:.0f}); peak {(m['peak'] - m['before']) / 2**20:.0f} MiB, "
                  f"held {(m['held'] - m['before']) / 2**20:.0f} MiB", flush=True)
        if args.load_steps and not args.smoke:
            return 0
        for n, kind in enumerate(args.images.split(",")):
            print(f"\n== {kind} 64x64x3 frames ==", flush=True)
            frames = make_frames(kind, 1024)
            mbs = write_store(root / f"write-{kind}", frames, 4, 1024)
            disk = sum(f.stat().st_size for f in (root / f"write-{kind}").iterdir()) / 4096
            print(f"chunk write (1024 steps, deflate-1 .npz + fsync + rename): {mbs:.1f} MB/s raw, "
                  f"{disk:.0f} B/step on disk")
            per_step, (direct, prefetched) = bench_store(
                root / f"store-{kind}", frames, args.store_chunks, args.batch, args.length,
                args.seconds)
            print(f"memory per stored step: {per_step:.0f} B held (compressed image blocks + raw "
                  f"small arrays) vs {RAW_STEP} B raw image: {RAW_STEP / per_step:.1f}x smaller; "
                  f"1e6 steps: {per_step * 1e6 / 2**30:.2f} GiB")
            print(f"sampling {args.batch}x{args.length}: {direct:.0f} seq/s direct, "
                  f"{prefetched:.0f} seq/s via sample() with prefetch; learner at "
                  f"{args.update_rate} updates/s consumes {consumed:.0f} seq/s: "
                  f"{min(direct, prefetched) / consumed:.1f}x")
            (p50, p99), worst, flushes = bench_add_latency(root / f"latency-{kind}", frames,
                                                           args.adds, 256)
            print(f"add() latency while flushing ({flushes} chunks of 256 steps): "
                  f"p50 {p50:.3f} ms, p99 {p99:.3f} ms, max {worst:.3f} ms "
                  f"(target p99 < 1 ms: {1.0 / p99:.1f}x margin)")
            if n == 0:
                load, idle, one_new = bench_refresh(root / "refresh", frames, args.files, 16)
                print(f"refresh() with {args.files} chunk files on disk: {idle * 1e3:.2f} ms when "
                      f"nothing is new, {one_new * 1e3:.2f} ms with one new 16-step chunk; "
                      f"first load of all {args.files}: {load:.2f} s "
                      f"({load / args.files * 1e3:.2f} ms/file)")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
