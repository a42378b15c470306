"""Reader creators: turn in-memory arrays and text files into readers."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

__all__ = ["np_array", "text_file"]


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
