"""The eager Momentum step on BLAS ``axpy`` (``y += a*x``) of the OpenBLAS NumPy itself links.

NumPy has no fused multiply-add, so its heavy ball (``v *= mu; v += g; w -= lr*v``) makes
four passes over each parameter, on one core. OpenBLAS's ``axpy`` does ``v += g`` and
``w -= lr*v`` in one pass each and splits large vectors over the threads of the pool NumPy's
GEMMs already use. (SciPy's ``axpy`` was tried first: SciPy ships a second OpenBLAS whose
worker thread keeps spinning after a threaded call and took a core from the next GEMM.)

The routine is looked up once, through threadpoolctl, among the 64-bit-integer symbols of
NumPy's bundled OpenBLAS (``scipy_cblas_saxpy64_``, ``cblas_saxpy64_`` and their ``d``
forms); with any other BLAS behind NumPy :func:`heavy_ball` returns False and the caller uses
the NumPy kernel. It is also used only while other processes leave a CPU idle (the policy of
:mod:`sculler.math.parallel`): on a busy machine a threaded BLAS call waits for the second
core and is far slower than the single-threaded NumPy passes. (``_cpu_to_spare`` is that
module's rule; the ``perf4-conv`` branch adds the public alias ``cpu_to_spare``.)
"""

from __future__ import annotations

import ctypes
import os
from typing import Any

import numpy as np

from sculler.math import parallel

# below this many elements the NumPy kernel is as fast (OpenBLAS splits axpy from 10k)
MIN_ELEMENTS = 1 << 16
_SYMBOLS = ("scipy_cblas_{}axpy64_", "cblas_{}axpy64_")
_found: dict[str, Any] = {}


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


def axpy(dtype: np.dtype) -> Any:
    """``f(n, a, x_address, 1, y_address, 1)`` doing ``y[:n] += a*x[:n]`` on contiguous
    float32 (``dtype`` 'f') or float64 ('d') vectors, or None where NumPy's BLAS has none."""
    char = np.dtype(dtype).char
    if char not in _found:
        lib = _numpy_openblas() if char in "fd" else None
        fn = None
        for pattern in _SYMBOLS if lib is not None else ():
            fn = getattr(lib, pattern.format("s" if char == "f" else "d"), None)
            if fn is not None:
                real = ctypes.c_float if char == "f" else ctypes.c_double
                fn.restype = None
                fn.argtypes = [ctypes.c_int64, real, ctypes.c_void_p, ctypes.c_int64,
                               ctypes.c_void_p, ctypes.c_int64]
                break
        _found[char] = fn
    return _found[char]


def heavy_ball(value: np.ndarray, grad: np.ndarray, velocity: np.ndarray, lr: float,
               momentum: float) -> bool:
    """Paddle 2.x momentum ``v = momentum*v + g;  w -= lr*v`` in three passes (``v *= mu``
    in NumPy, the other two BLAS ``axpy``, threaded): the values of
    :func:`sculler.math.optim.heavy_ball` up to one rounding (axpy fuses ``lr*v`` into the
    subtraction). False, with nothing changed, unless all three are C-contiguous NumPy arrays
    of one float dtype with at least :data:`MIN_ELEMENTS` elements, NumPy's BLAS has axpy and
    a CPU is idle."""
    n = value.size
    if (n < MIN_ELEMENTS or type(value) is not np.ndarray or type(grad) is not np.ndarray
            or type(velocity) is not np.ndarray
            or not (grad.dtype == value.dtype == velocity.dtype)
            or not (grad.shape == value.shape == velocity.shape)
            or not (value.flags.c_contiguous and grad.flags.c_contiguous
                    and velocity.flags.c_contiguous)
            or parallel.threads() < 2 or not parallel._cpu_to_spare()):
        return False
    fn = axpy(value.dtype)
    if fn is None:
        return False
    v_at = velocity.ctypes.data
    velocity *= momentum
    fn(n, 1.0, grad.ctypes.data, 1, v_at, 1)
    fn(n, -lr, v_at, 1, value.ctypes.data, 1)
    return True
