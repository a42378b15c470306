"""Whether the compiled (numba) CPU kernels can run: numba is the optional extra ``fast``
(``pip install sculler[fast]``), imported at the first kernel call, not with sculler.
``SCULLER_JIT=0`` in the environment turns every compiled kernel off (the NumPy code runs)."""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from sculler.math.workspace import constant_array

# how every compiled kernel is compiled: fast float math, no bounds checks (the callers pass
# checked shapes), the GIL released (the kernels run on sculler.math.parallel's workers) and
# the machine code cached on disk (numba compiles once per machine)
KERNEL_OPTIONS = {"fastmath": True, "boundscheck": False, "nogil": True, "cache": True}

_state: dict[str, bool] = {}


def numba_available() -> bool:
    """numba is importable and ``SCULLER_JIT`` is not ``0``."""
    if os.environ.get("SCULLER_JIT", "1") == "0":
        return False
    if "numba" not in _state:
        try:
            import numba  # noqa: F401, PLC0415
        except ImportError:
            _state["numba"] = False
        else:
            _state["numba"] = True
    return _state["numba"]


def compilable(*arrays: Any) -> bool:
    """Whether the compiled kernels take these arrays: numba is available and each one is a
    NumPy float32 or float64 array (CuPy arrays and other dtypes keep the ``xp`` code)."""
    for a in arrays:
        if type(a) is not np.ndarray or a.dtype not in (np.float32, np.float64):
            return False
    return numba_available()


def absent(dtype: Any, ndim: int) -> np.ndarray:
    """An empty read-only array standing for "none" in a compiled call (numba compiles one
    signature for an array argument that may be missing): made once per dtype and rank."""
    return constant_array(("absent", np.dtype(dtype).str, ndim), np.zeros, (0,) * ndim, dtype)
