"""On-disk replay store shared by the actor (Writer) and the learner (Reader) through a folder."""

from dreamer_live.replay.chunk import ChunkError, ChunkName, load_chunk, write_chunk
from dreamer_live.replay.reader import Reader
from dreamer_live.replay.writer import Writer

__all__ = ["ChunkError", "ChunkName", "Reader", "Writer", "load_chunk", "write_chunk"]
