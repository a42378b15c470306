"""Work arrays for kernels that a caller may want to reuse across batches."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

__all__ = ["Alloc", "work_array"]

Alloc = Callable[[str, tuple, Any], Any]


def work_array(alloc: Alloc | None, key: str, shape: tuple, dtype):
    """An uninitialised array: ``alloc(key, shape, dtype)`` (e.g. a layer's grow-only
    ``scratch``, so steady-state training allocates nothing) or a new one."""
    return np.empty(shape, dtype=dtype) if alloc is None else alloc(key, shape, dtype)
