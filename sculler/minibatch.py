"""Group a sample reader into a reader of mini-batches (``paddle.v2.minibatch``)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

from sculler.validate import boolean, iterate_reader, require_reader

__all__ = ["batch"]


def batch(
    reader: Callable[[], Iterable[Any]], batch_size: int, drop_last: bool = False
) -> Callable[[], Iterator[list]]:
    """Reader of lists of ``batch_size`` consecutive samples of ``reader``.

    A data set of ``n`` samples gives ``ceil(n / batch_size)`` batches, the last one
    possibly shorter; with ``drop_last=True`` it gives ``floor(n / batch_size)``.

    Example:
        >>> list(batch(lambda: range(5), 2)())
        [[0, 1], [2, 3], [4]]
    """
    if isinstance(batch_size, bool) or not hasattr(batch_size, "__index__"):
        raise TypeError(f"batch_size must be an int, got {batch_size!r}")
    batch_size = int(batch_size)
    if batch_size <= 0:
        raise ValueError(f"batch_size must be a positive int, got {batch_size}")
    require_reader(reader, "paddle.batch(reader)")
    drop_last = boolean(drop_last, "paddle.batch(drop_last=...)")

    def batch_reader() -> Iterator[list]:
        b: list = []
        for sample in iterate_reader(reader, "paddle.batch(reader)"):
            b.append(sample)
            if len(b) == batch_size:
                yield b
                b = []
        if b and not drop_last:
            yield b

    return batch_reader
