"""Data readers (``paddle.v2.reader``): a reader is a zero-argument callable returning an
iterator over samples; decorators compose readers, creators make them from data."""

from sculler.reader import creator
from sculler.reader.decorator import (
    ComposeNotAligned,
    PipeReader,
    buffered,
    chain,
    compose,
    firstn,
    map_readers,
    pipe_reader,
    shuffle,
    xmap_readers,
)

__all__ = [
    "creator",
    "map_readers",
    "buffered",
    "compose",
    "chain",
    "shuffle",
    "ComposeNotAligned",
    "firstn",
    "xmap_readers",
    "PipeReader",
    "pipe_reader",
]
