"""Mini-batch readers: :func:`batch` groups a sample reader into lists of samples
(``paddle.v2.minibatch``); :func:`array_batches` cuts in-memory arrays into
:class:`ArrayBatch` column views, which the feeder binds without gathering rows."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import numpy as np

from sculler.backend import to_numpy
from sculler.validate import boolean, integer, iterate_reader, positive_int, require_reader

__all__ = ["ArrayBatch", "array_batches", "batch"]


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


class ArrayBatch(Sequence):
    """A minibatch held by columns: ``columns[j][i]`` is field ``j`` of sample ``i``.

    It is a sequence of sample tuples like the lists :func:`batch` yields (indexing, ``len``,
    iteration and slicing work as on them), so every consumer of minibatches accepts it; the
    :class:`~sculler.data_feeder.DataFeeder` binds a dense or id column of the right dtype to
    its data layer as a read-only view, with its checks run on the whole column.
    """

    __slots__ = ("columns",)

    def __init__(self, *columns: Any):
        if not columns:
            raise ValueError("ArrayBatch needs at least one column")
        lengths = [len(c) for c in columns]
        if len(set(lengths)) != 1:
            raise ValueError(f"ArrayBatch columns must hold one entry per sample; got "
                             f"columns of lengths {lengths}")
        self.columns = columns

    def __len__(self) -> int:
        return len(self.columns[0])

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return ArrayBatch(*(c[index] for c in self.columns))
        return tuple(c[index] for c in self.columns)

    def __reduce__(self) -> tuple:
        return ArrayBatch, self.columns

    def __repr__(self) -> str:
        shapes = ", ".join(str(getattr(c, "shape", (len(c),))) for c in self.columns)
        return f"ArrayBatch({len(self)} samples; columns {shapes})"


class _ArrayBatchIterator:
    """The batches of one pass; ``len`` is their count (the progress bar's total)."""

    def __init__(self, columns: list[np.ndarray], batch_size: int, count: int):
        self._columns, self._batch_size, self._count, self._next = columns, batch_size, count, 0

    def __len__(self) -> int:
        return self._count - self._next

    def __iter__(self) -> _ArrayBatchIterator:
        return self

    def __next__(self) -> ArrayBatch:
        if self._next == self._count:
            raise StopIteration
        start = self._next * self._batch_size
        self._next += 1
        return ArrayBatch(*(c[start:start + self._batch_size] for c in self._columns))


def array_batches(*arrays: Any, batch_size: int, shuffle: bool = False,
                  drop_last: bool = False, seed: int | None = None
                  ) -> Callable[[], Iterator[ArrayBatch]]:
    """Reader of :class:`ArrayBatch` minibatches over in-memory arrays of equal length
    (e.g. ``X`` of shape ``(n, 784)`` and labels ``y`` of shape ``(n,)``): column ``j`` feeds
    sample field ``j``, as in tuples ``(X[i], y[i])``.

    Batches are views, not copies (of a host copy made once for CuPy arrays: the feeder
    converts every batch on the host); with ``shuffle`` every call (every pass) permutes the
    arrays once (one copy of the data per pass) and cuts views from that copy, drawing the
    permutation from ``numpy.random.default_rng(seed)``. ``n`` samples give
    ``ceil(n / batch_size)`` batches (``floor`` with ``drop_last``).

    Example:
        >>> X, y = np.arange(10.0).reshape(5, 2), np.arange(5)
        >>> [len(b) for b in array_batches(X, y, batch_size=2)()]
        [2, 2, 1]
    """
    batch_size = positive_int(batch_size, "array_batches(batch_size=...)")
    shuffle = boolean(shuffle, "array_batches(shuffle=...)")
    drop_last = boolean(drop_last, "array_batches(drop_last=...)")
    if seed is not None:
        seed = integer(seed, "array_batches(seed=...)", minimum=0)
    if not arrays:
        raise ValueError("array_batches needs at least one array")
    columns = [to_numpy(a) for a in arrays]  # a CuPy array is read on the host, once
    for j, c in enumerate(columns):
        if c.ndim == 0:
            raise ValueError(f"array_batches: array {j} is a scalar; each array needs one "
                             "entry per sample along its first axis")
    lengths = [len(c) for c in columns]
    if len(set(lengths)) != 1:
        raise ValueError(f"array_batches: the arrays must have the same length (one entry per "
                         f"sample), got lengths {lengths}")
    n = lengths[0]
    count = n // batch_size if drop_last else -(-n // batch_size)
    rng = np.random.default_rng(seed)

    def reader() -> _ArrayBatchIterator:
        if not shuffle:
            return _ArrayBatchIterator(columns, batch_size, count)
        order = rng.permutation(n)
        return _ArrayBatchIterator([c[order] for c in columns], batch_size, count)

    return reader
