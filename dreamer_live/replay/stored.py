"""The reader's in-memory store: chunks kept compressed in blocks, and the index that samples sequences.

Memory: a 64x64x3 uint8 step is 12 KB raw, 12 GB for 1e6 steps. Large arrays (images) are kept as
zstd-compressed blocks of BLOCK_STEPS steps; in integer arrays each step is stored as its difference
from the previous step of the block (mod 2^bits), which makes still backgrounds nearly free. Small
arrays (actions, rewards, flags, vectors) stay raw. A sequence of T steps decodes about T + BLOCK_STEPS
steps. Chosen by measurement (bench/replay_io.py): zstd level 3 with deltas holds smooth synthetic
frames in ~4.5 KB/step and game frames in ~0.3 KB/step, and decodes ~4x faster than zlib level 1
(which took ~5 KB/step); 8-step blocks cost ~10% more memory, 32-step blocks more decoding.
"""

from __future__ import annotations

import threading

import numpy as np
import zstandard

from dreamer_live.replay.chunk import ChunkName
from dreamer_live.steps import STEP_ID, is_trained

BLOCK_STEPS = 16  # steps per compressed block
BLOCK_MIN_BYTES = 1024  # arrays with at least this many bytes per step are block-compressed
ZSTD_LEVEL = 3
_contexts = threading.local()  # zstd contexts are not thread-safe: one pair per thread


def _compress(data) -> bytes:
    if not hasattr(_contexts, "compressor"):
        _contexts.compressor = zstandard.ZstdCompressor(level=ZSTD_LEVEL)
    # compress() allocates its worst-case bound and shrinks it in place, which keeps at least a page
    # (a 16-step block of still frames: 26 bytes held in 4 KB): the store keeps an exact-size copy.
    return bytes(memoryview(_contexts.compressor.compress(data)))


def _decompress(blob: bytes) -> bytes:
    if not hasattr(_contexts, "decompressor"):
        _contexts.decompressor = zstandard.ZstdDecompressor()
    return _contexts.decompressor.decompress(blob)


class StoredChunk:
    """One chunk's steps in memory: small arrays raw, large arrays as compressed delta blocks."""

    __slots__ = ("name", "stream", "seq", "length", "arrival", "raw", "blocks", "spec", "nbytes")

    def __init__(self, name: ChunkName, arrays: dict[str, np.ndarray], arrival: int):
        self.name, self.stream = str(name), name.stream
        self.seq, self.length = name.seq, name.length
        self.arrival = arrival  # steps loaded before this chunk (for the recency mix)
        self.spec = {k: (a.shape[1:], a.dtype) for k, a in arrays.items()}
        self.raw: dict[str, np.ndarray] = {}
        self.blocks: dict[str, list[bytes]] = {}
        for key, array in arrays.items():
            step_bytes = array.nbytes // max(1, len(array))
            if step_bytes >= BLOCK_MIN_BYTES:
                self.blocks[key] = _encode_blocks(array)
            else:
                self.raw[key] = np.ascontiguousarray(array)
        self.nbytes = (sum(a.nbytes for a in self.raw.values())
                       + sum(len(b) for blocks in self.blocks.values() for b in blocks))

    def fill(self, out: dict[str, np.ndarray], row: int, col: int, start: int, stop: int) -> None:
        """Copy steps [start, stop) of this chunk into out[key][row, col:col + stop - start]."""
        end = col + stop - start
        for key, array in self.raw.items():
            if key in out:
                out[key][row, col:end] = array[start:stop]
        for key, blocks in self.blocks.items():
            if key not in out:
                continue
            shape, dtype = self.spec[key]
            delta = dtype.kind in "iu"
            pos = col
            for b in range(start // BLOCK_STEPS, (stop - 1) // BLOCK_STEPS + 1):
                base = b * BLOCK_STEPS
                lo, hi = max(start, base) - base, min(stop, base + BLOCK_STEPS) - base
                steps = _decode_block(blocks[b], shape, dtype, hi, delta)
                out[key][row, pos:pos + hi - lo] = steps[lo:hi]
                pos += hi - lo

    def read(self, key: str) -> np.ndarray:
        """All steps of one key, decoded."""
        if key in self.raw:
            return self.raw[key].copy()
        shape, dtype = self.spec[key]
        return np.concatenate([_decode_block(b, shape, dtype, BLOCK_STEPS, dtype.kind in "iu")
                               for b in self.blocks[key]])


def _encode_blocks(array: np.ndarray) -> list[bytes]:
    if array.dtype.kind in "iu":  # step minus previous step within each block, wrapping around
        coded = array.copy()
        coded[1:] -= array[:-1]
        coded[::BLOCK_STEPS] = array[::BLOCK_STEPS]
    else:
        coded = np.ascontiguousarray(array)
    return [_compress(memoryview(coded[i:i + BLOCK_STEPS]))
            for i in range(0, len(coded), BLOCK_STEPS)]


def _decode_block(blob: bytes, shape, dtype, stop: int, delta: bool) -> np.ndarray:
    """The first `stop` steps of a block (fewer if the block is shorter)."""
    steps = np.frombuffer(_decompress(blob), dtype).reshape(-1, *shape)[:stop]
    if not delta:
        return steps
    steps = steps.copy()
    for i in range(1, len(steps)):
        steps[i] += steps[i - 1]
    return steps


class Table:
    """An immutable index over stored chunks: which sequence starts are valid, and sampling them.

    Chunks are ordered by stream, then sequence number; a run is a stretch of one stream with
    consecutive sequence numbers. A sequence may cross chunks within a run, never between runs, so it
    never mixes writers and never bridges a missing chunk.
    """

    def __init__(self, chunks: list[StoredChunk], total_arrived: int):
        self.chunks = sorted(chunks, key=lambda c: (c.stream, c.seq))
        self.total_arrived = total_arrived
        self.lengths = np.array([c.length for c in self.chunks], np.int64)
        self.arrival_end = np.array([c.arrival + c.length for c in self.chunks], np.int64)
        n = len(self.chunks)
        streams = np.array([c.stream for c in self.chunks], object)
        seqs = np.array([c.seq for c in self.chunks], np.int64)
        self.starts_run = starts_run = np.ones(n, bool)
        starts_run[1:] = (streams[1:] != streams[:-1]) | (seqs[1:] != seqs[:-1] + 1)
        run_starts = np.flatnonzero(starts_run)
        run_last = (np.append(run_starts[1:], n) - 1)[np.cumsum(starts_run) - 1]
        suffix = np.append(np.cumsum(self.lengths[::-1])[::-1], 0)
        # steps from each chunk's start to the end of its run
        self.remaining = suffix[:n] - suffix[run_last + 1]
        self._counts: dict[int, np.ndarray] = {}

    @property
    def num_steps(self) -> int:
        """Steps held."""
        return int(self.lengths.sum())

    def counts(self, length: int) -> np.ndarray:
        """Valid start positions in each chunk for sequences of `length` steps."""
        if length not in self._counts:
            self._counts[length] = np.clip(self.remaining - length + 1, 0, self.lengths)
        return self._counts[length]

    def can_sample(self, length: int) -> bool:
        """True if at least one sequence of `length` steps exists."""
        return bool(len(self.chunks)) and bool(self.counts(length).sum() > 0)

    def sample(self, rng: np.random.Generator, batch: int, length: int, recency: float = 0.0,
               window: int = 0, step_ids: bool = False) -> dict[str, np.ndarray]:
        """Draw `batch` sequences uniformly over valid starts (training keys only, see steps.py); a
        `recency` share of them starts in chunks overlapping the newest `window` steps loaded. With
        step_ids, also each step's id (replay/latents.py)."""
        counts = self.counts(length)
        n_recent = int(round(recency * batch)) if recency > 0 else 0
        picks = []
        if n_recent:
            recent = counts * (self.arrival_end > self.total_arrived - window)
            if recent.sum() > 0:
                picks.append(_draw(rng, recent, n_recent))
            else:
                n_recent = 0
        picks.append(_draw(rng, counts, batch - n_recent))
        chunk_index = np.concatenate([p[0] for p in picks])
        offsets = np.concatenate([p[1] for p in picks])
        return self.gather(chunk_index, offsets, length, step_ids)

    def gather(self, chunk_index: np.ndarray, offsets: np.ndarray, length: int,
               step_ids: bool = False):
        """Sequences of `length` steps starting at (chunk, offset) pairs, following each run; with
        step_ids, out[STEP_ID] holds each step's id: steps loaded before it (unique in this reader)."""
        spec = self.chunks[0].spec
        out = {k: np.empty((len(chunk_index), length, *shape), dtype)
               for k, (shape, dtype) in spec.items() if is_trained(k)}
        ids = np.empty((len(chunk_index), length), np.int64) if step_ids else None
        for row, (index, offset) in enumerate(zip(chunk_index, offsets)):
            col, index, offset = 0, int(index), int(offset)
            while col < length:
                chunk = self.chunks[index]
                n = min(chunk.length - offset, length - col)
                chunk.fill(out, row, col, offset, offset + n)
                if ids is not None:
                    first = chunk.arrival + offset
                    ids[row, col:col + n] = np.arange(first, first + n)
                col, index, offset = col + n, index + 1, 0
        if ids is not None:
            out[STEP_ID] = ids
        return out


def _draw(rng: np.random.Generator, weights: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """n uniform draws over all (chunk, offset) positions, `weights[i]` positions in chunk i."""
    cumulative = np.cumsum(weights)
    flat = rng.integers(0, cumulative[-1], n)
    index = np.searchsorted(cumulative, flat, side="right")
    return index, flat - (cumulative[index] - weights[index])
