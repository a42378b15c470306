"""The eager Momentum step on BLAS ``axpby``/``axpy`` of the OpenBLAS NumPy itself links.

NumPy has no fused multiply-add, so its heavy ball (``v *= mu; v += g; w -= lr*v``) makes
four passes over each parameter, on one core. OpenBLAS's ``axpby`` (``v = g + mu*v``) and
``axpy`` (``w += -lr*v``) make it two, each split over the threads of the pool NumPy's GEMMs
already use. (SciPy's ``axpy`` was tried first: SciPy ships a second OpenBLAS whose worker
thread keeps spinning after a threaded call and took a core from the next GEMM.)

The routines are looked up once, through threadpoolctl, among the 64-bit-integer symbols
of NumPy's bundled OpenBLAS (``scipy_cblas_saxpy64_``, ``cblas_saxpy64_``, the ``axpby``
and the ``d`` forms); with any other BLAS behind NumPy :func:`heavy_ball` returns False and
the caller uses the NumPy kernel. Whether a parameter takes this path depends only on the
arrays, never on the machine's load, so a run's values do not change with what else runs:
while other processes leave no CPU idle the two calls run on one BLAS thread
(:func:`sculler.math.blas.blas_threads_while_busy`).
"""

from __future__ import annotations

import ctypes
import os
from typing import Any

import numpy as np

from sculler.math.blas import blas_threads_while_busy

# below this many elements the NumPy kernel is as fast (OpenBLAS splits axpy from 10k)
MIN_ELEMENTS = 1 << 16
_SYMBOLS = ("scipy_cblas_{}64_", "cblas_{}64_")
_found: dict[tuple[str, str], Any] = {}


def _numpy_openblas() -> ctypes.CDLL | None:
    """NumPy's own OpenBLAS library (the one its GEMMs run on), or None."""
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return None
    numpy_dir = os.path.dirname(os.path.dirname(os.path.abspath(np.__file__)))
    for info in threadpool_info():
        path = info.get("filepath") or ""
        if info.get("internal_api") == "openblas" and os.path.basename(
                os.path.dirname(path)) in ("numpy.libs", ".dylibs") and path.startswith(
                numpy_dir):
            try:
                return ctypes.CDLL(path)
            except OSError:
                return None
    return None


def routine(name: str, dtype: np.dtype) -> Any:
    """NumPy's OpenBLAS ``cblas_?axpy`` (``name`` 'axpy': ``f(n, a, x, 1, y, 1)`` does
    ``y += a*x``) or ``cblas_?axpby`` ('axpby': ``f(n, a, x, 1, b, y, 1)`` does
    ``y = a*x + b*y``) for float32 ('f') or float64 ('d') vectors at the given addresses;
    None where NumPy's BLAS has no such 64-bit-integer symbol."""
    char = np.dtype(dtype).char
    key = (name, char)
    if key not in _found:
        lib = _numpy_openblas() if char in "fd" else None
        fn = None
        for pattern in _SYMBOLS if lib is not None else ():
            fn = getattr(lib, pattern.format(("s" if char == "f" else "d") + name), None)
            if fn is not None:
                real = ctypes.c_float if char == "f" else ctypes.c_double
                fn.restype = None
                fn.argtypes = ([ctypes.c_int64, real, ctypes.c_void_p, ctypes.c_int64]
                               + ([real] if name == "axpby" else [])
                               + [ctypes.c_void_p, ctypes.c_int64])
                break
        _found[key] = fn
    return _found[key]


def heavy_ball(value: np.ndarray, grad: np.ndarray, velocity: np.ndarray, lr: float,
               momentum: float) -> bool:
    """Paddle 2.x momentum ``v = momentum*v + g;  w -= lr*v`` in two threaded BLAS passes
    (``axpby`` then ``axpy``): the values of :func:`sculler.math.optim.heavy_ball` up to a
    rounding (BLAS may fuse a multiply into the add). False, with nothing changed, unless
    all three are C-contiguous NumPy arrays of one float dtype with at least
    :data:`MIN_ELEMENTS` elements and NumPy's BLAS has the routines (on one thread while
    the machine is busy: the values are the same either way)."""
    n = value.size
    if (n < MIN_ELEMENTS or type(value) is not np.ndarray or type(grad) is not np.ndarray
            or type(velocity) is not np.ndarray
            or not (grad.dtype == value.dtype == velocity.dtype)
            or not (grad.shape == value.shape == velocity.shape)
            or not (value.flags.c_contiguous and grad.flags.c_contiguous
                    and velocity.flags.c_contiguous)):
        return False
    axpby, axpy = routine("axpby", value.dtype), routine("axpy", value.dtype)
    if axpby is None or axpy is None:
        return False
    with blas_threads_while_busy():
        v_at = velocity.ctypes.data
        axpby(n, 1.0, grad.ctypes.data, 1, momentum, v_at, 1)
        axpy(n, -lr, v_at, 1, value.ctypes.data, 1)
    return True
