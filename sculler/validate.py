"""Argument checks shared by every boundary (layer wrappers, configs, parameters, readers,
eager modules): each checks type, range or shape once, on whole arrays, and raises a
``TypeError``/``ValueError`` whose message names the argument (``what``), what was expected,
what was given and, where there is one, the fix. Nothing is coerced silently: a value that
would lose information (6.5 as a size, a transposed array reshaped) is an error.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import numpy as np

__all__ = ["as_array", "boolean", "exact_shape", "integer", "iterate_reader", "number",
           "positive_int", "probability", "require_reader"]


def _given(value: Any) -> str:
    return f"{value!r} ({type(value).__name__})"


def integer(value: Any, what: str, minimum: int | None = None) -> int:
    """``value`` as an int: an int, a numpy integer or an integral float (``4.0``); never a
    bool, a string or a non-integral number. ``minimum``: the smallest allowed value."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise TypeError(f"{what} must be an int, got {_given(value)}")
    if not isinstance(value, numbers.Integral):
        if not np.isfinite(value) or value != int(value):
            raise ValueError(f"{what} must be an int, got {_given(value)}; a division such "
                             "as 13/2 gives a float: use // or round explicitly")
    out = int(value)
    if minimum is not None and out < minimum:
        want = "a positive int" if minimum == 1 else f"an int >= {minimum}"
        raise ValueError(f"{what} must be {want}, got {out}")
    return out


def boolean(value: Any, what: str) -> bool:
    """``value`` when it is a bool (or a numpy bool); ``'no'`` or ``1`` is a TypeError, since a
    truthy string would silently mean True."""
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{what} must be True or False, got {_given(value)}")
    return bool(value)


def positive_int(value: Any, what: str) -> int:
    """``value`` as an int >= 1 (see :func:`integer`)."""
    return integer(value, what, minimum=1)


def number(value: Any, what: str, low: float | None = None, high: float | None = None,
           high_open: bool = False) -> float:
    """``value`` as a finite float within ``[low, high]`` (``[low, high)`` if
    ``high_open``); a string or a bool is a TypeError, not parsed."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise TypeError(f"{what} must be a number, got {_given(value)}")
    out = float(value)
    above = high is not None and (out >= high if high_open else out > high)
    if not np.isfinite(out) or (low is not None and out < low) or above:
        rng = f"[{low}, {high}{')' if high_open else ']'}"
        raise ValueError(f"{what} must be a finite number in {rng}, got {out}")
    return out


def probability(value: Any, what: str) -> float:
    """A probability in ``[0, 1)`` (a dropout rate): a number, not a string."""
    return number(value, what, 0.0, 1.0, high_open=True)


def as_array(value: Any, what: str) -> np.ndarray:
    """``value`` as a numeric (bool, int or float) numpy array; strings, objects and ragged
    lists are a TypeError naming ``what``."""
    try:
        arr = np.asarray(value)
    except ValueError as e:  # ragged nested lists
        raise TypeError(f"{what} must be a numeric array, got a ragged {type(value).__name__} "
                        f"({e})") from e
    if arr.dtype.kind not in "biuf":
        raise TypeError(f"{what} must be a numeric array, got {type(value).__name__} of "
                        f"dtype {arr.dtype}")
    return arr


def exact_shape(arr: np.ndarray, shape: tuple[int, ...], what: str,
                allow_flat: bool = False) -> np.ndarray:
    """``arr`` when its shape is exactly ``shape``; with ``allow_flat`` a 1-D array of the
    same size is reshaped (row-major). Any other shape, including a transposed array of the
    right size, is a ValueError."""
    shape = tuple(shape)
    if arr.shape == shape:
        return arr
    if allow_flat and arr.ndim == 1 and arr.size == int(np.prod(shape)):
        return arr.reshape(shape)
    hint = ""
    if arr.size == int(np.prod(shape)):
        hint = (" (same size, other shape: a transposed array is not reshaped; pass it with "
                f"shape {shape}{' or flat' if allow_flat else ''})")
    raise ValueError(f"{what} has shape {shape}, got an array of shape {arr.shape}{hint}")


def require_reader(reader: Any, what: str) -> Callable[[], Iterable[Any]]:
    """``reader`` when it is callable (a reader: a zero-argument function returning an
    iterable); a generator or list passed instead is a TypeError saying the fix."""
    if callable(reader):
        return reader
    kind = type(reader).__name__
    if isinstance(reader, Iterator):
        raise TypeError(f"{what} must be a reader (a function returning an iterable), got a "
                        f"{kind}: you passed the reader's result; pass the reader itself, "
                        "e.g. reader=r, not reader=r()")
    raise TypeError(f"{what} must be a reader (a function returning an iterable), got a "
                    f"{kind}; wrap data in one: reader=lambda: iter(data)")


def iterate_reader(reader: Callable[[], Iterable[Any]], what: str) -> Iterable[Any]:
    """``reader()``, checked to be iterable, after :func:`require_reader`; a reader creator
    passed where a reader is expected (its call returns a function) is a TypeError saying
    the fix. The iterable itself is returned (a ``len`` it has stays available)."""
    items = require_reader(reader, what)()
    if callable(items) and not isinstance(items, Iterable):
        name = getattr(reader, "__name__", type(reader).__name__)
        raise TypeError(f"{what}: calling {name}() returned a function, not an iterable: "
                        f"{name} is a reader creator; pass the reader it creates, "
                        f"{name}(), instead")
    try:
        iter(items)
    except TypeError:
        raise TypeError(f"{what}: the reader returned a {type(items).__name__}, which is not "
                        "iterable; a reader returns an iterable of samples") from None
    return items
