"""Work arrays for kernels that a caller may want to reuse across batches."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from sculler.backend import is_gpu_array
from sculler.math import cuda

__all__ = ["Alloc", "clear_together", "constant_array", "work_array"]

Alloc = Callable[[str, tuple, Any], Any]


def work_array(alloc: Alloc | None, key: str, shape: tuple, dtype):
    """An uninitialised array: ``alloc(key, shape, dtype)`` (e.g. a layer's grow-only
    ``scratch``, so steady-state training allocates nothing) or a new one."""
    return np.empty(shape, dtype=dtype) if alloc is None else alloc(key, shape, dtype)


_constants: dict[tuple, np.ndarray] = {}


def constant_array(key: tuple, make: Callable[..., np.ndarray], *args: Any) -> np.ndarray:
    """``make(*args)``, made once per ``key`` and read-only: a constant that kernels use every
    batch (a ones vector for a GEMV, row offsets, a row of zeros) without allocating it again.
    ``key`` starts with the constant's kind; the cache is emptied past 256 entries."""
    a = _constants.get(key)
    if a is None:
        if len(_constants) > 256:
            _constants.clear()
        a = _constants[key] = make(*args)
        a.flags.writeable = False
    return a


def clear_together(arrays: list) -> None:
    """Set every array of ``arrays`` to zero: host arrays one by one, device arrays in a few
    launches (:func:`sculler.math.cuda.zero_together`), as a launch costs more than the
    clearing of a small buffer."""
    on_device = [a for a in arrays if is_gpu_array(a)]
    for a in arrays:
        if not is_gpu_array(a):
            a[...] = 0
    if on_device:
        cuda.zero_together(on_device)
