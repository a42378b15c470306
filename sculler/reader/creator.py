"""Reader creators: turn in-memory arrays, text files and RecordIO files into readers."""

from __future__ import annotations

import glob
import os
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

__all__ = ["np_array", "text_file", "recordio"]


def np_array(x: Any) -> Callable[[], Iterator[Any]]:
    """Reader of the sub-arrays of ``x`` along its first axis (elements of a vector, rows
    of a matrix); a 0-d array yields itself once.

    Example:
        >>> [r.tolist() for r in np_array(np.arange(4).reshape(2, 2))()]
        [[0, 1], [2, 3]]
    """
    arr = np.asarray(x)

    def reader() -> Iterator[Any]:
        if arr.ndim == 0:
            yield arr
            return
        yield from arr

    return reader


def text_file(path: str | os.PathLike) -> Callable[[], Iterator[str]]:
    """Reader of the lines of a UTF-8 text file, without their trailing newline."""
    path = os.fspath(path)

    def reader() -> Iterator[str]:
        with open(path, encoding="utf-8") as f:
            for line in f:
                yield line.rstrip("\n")

    return reader


def _recordio_paths(paths: Any) -> list[str]:
    """PaddlePaddle's path argument: a string of comma-separated paths or glob patterns, or a
    list of them; each pattern must match a file."""
    if isinstance(paths, (str, os.PathLike)):
        patterns = os.fspath(paths).split(",")
    elif isinstance(paths, (list, tuple)) and all(isinstance(p, (str, os.PathLike))
                                                  for p in paths):
        patterns = [os.fspath(p) for p in paths]
    else:
        raise TypeError(f"recordio: paths must be a path, a comma-separated string of paths "
                        f"or glob patterns, or a list of them; got {paths!r}")
    files = []
    for pattern in patterns:
        found = sorted(glob.glob(pattern)) if glob.has_magic(pattern) else (
            [pattern] if os.path.isfile(pattern) else [])
        if not found:
            raise FileNotFoundError(f"recordio: no file matches {pattern!r}")
        files += found
    return files


def recordio(paths: Any, buf_size: int = 100) -> Callable[[], Iterator[Any]]:
    """Reader of the samples in PaddlePaddle RecordIO files (``paths``: a path, a string of
    comma-separated paths or glob patterns, or a list), each record a pickled sample as
    ``paddle.v2.dataset.common.convert`` wrote it; read ahead ``buf_size`` samples in a thread.
    Only built-in data is unpickled (see :mod:`sculler.reader.recordio`)."""
    from sculler.reader import recordio as rio
    from sculler.reader.decorator import buffered

    files = _recordio_paths(paths)

    def reader() -> Iterator[Any]:
        for path in files:
            for i, record in enumerate(rio.read_records(path)):
                try:
                    yield rio.load_sample(record)
                except rio.FileFormatError as e:
                    raise rio.FileFormatError(f"recordio file {path!r}, record {i}: {e}") from e

    return buffered(reader, buf_size)
