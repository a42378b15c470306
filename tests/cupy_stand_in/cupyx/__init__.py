"""Stand-in for ``cupyx`` (see ``cupy``'s stand-in): ``cupyx.scipy.sparse`` and
``empty_pinned`` (a host array: the stand-in's host and device memory are one)."""

from typing import Any

import numpy as np


def empty_pinned(shape: Any, dtype: Any = float, order: str = "C") -> np.ndarray:
    return np.empty(shape, dtype, order)
