"""NumPy's own OpenBLAS through ctypes: its 64-bit-integer CBLAS routines, looked up once
(through threadpoolctl, among ``scipy_cblas_saxpy64_``, ``cblas_saxpy64_`` and their ``d``
forms), and a GEMM that adds into its output in one call.

Why: NumPy exposes neither ``axpy``/``axpby`` (the one- and two-pass momentum updates of
:mod:`sculler.math.openblas`) nor GEMM's ``beta`` (``matmul`` cannot accumulate), and these run
on the library, hence the thread pool, that NumPy's own GEMMs already use.
"""

from __future__ import annotations

import ctypes
import os
from typing import Any

import numpy as np

_SYMBOLS = ("scipy_cblas_{}64_", "cblas_{}64_")
# outputs below this many elements accumulate faster in two NumPy passes: the add saved is
# smaller than the ctypes call's ~5 us (a (256, 32) x (32, 128) product: 22 -> 18 us in one
# call; (32, 128) x (128, 384): 24 -> 26 us)
ACCUMULATE_MIN_ELEMENTS = 1 << 15
_found: dict[tuple[str, str], Any] = {}


def numpy_openblas() -> ctypes.CDLL | None:
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


def _argtypes(name: str, real: Any) -> list:
    """The ctypes signature of ``cblas_?<name>`` with 64-bit integers (``real``: the scalar)."""
    i64, ptr = ctypes.c_int64, ctypes.c_void_p
    if name == "gemm":  # order, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc
        return [ctypes.c_int] * 3 + [i64] * 3 + [real, ptr, i64, ptr, i64, real, ptr, i64]
    return [i64, real, ptr, i64] + ([real] if name == "axpby" else []) + [ptr, i64]


def routine(name: str, dtype: np.dtype) -> Any:
    """NumPy's OpenBLAS ``cblas_?axpy`` (``name`` 'axpy': ``f(n, a, x, 1, y, 1)`` does
    ``y += a*x``), ``cblas_?axpby`` ('axpby': ``f(n, a, x, 1, b, y, 1)`` does
    ``y = a*x + b*y``) or ``cblas_?gemm`` ('gemm', see :func:`gemm_accumulate`) for float32
    ('f') or float64 ('d') arrays at the given addresses; None where NumPy's BLAS has no such
    64-bit-integer symbol."""
    char = np.dtype(dtype).char
    key = (name, char)
    if key not in _found:
        lib = numpy_openblas() if char in "fd" else None
        fn = None
        for pattern in _SYMBOLS if lib is not None else ():
            fn = getattr(lib, pattern.format(("s" if char == "f" else "d") + name), None)
            if fn is not None:
                fn.restype = None
                fn.argtypes = _argtypes(name, ctypes.c_float if char == "f" else ctypes.c_double)
                break
        _found[key] = fn
    return _found[key]


_ROW_MAJOR, _NO_TRANS, _TRANS = 101, 111, 112


def _gemm_operand(x: np.ndarray) -> tuple[int, int] | None:
    """(transpose flag, leading dimension) that describe the 2-D ``x`` to a row-major GEMM:
    rows contiguous (``x`` itself) or columns contiguous (``x`` is a transposed matrix);
    None for any other layout."""
    item = x.itemsize
    (s0, s1), (rows, cols) = x.strides, x.shape
    if s1 == item and s0 % item == 0 and s0 >= cols * item:
        return _NO_TRANS, s0 // item
    if s0 == item and s1 % item == 0 and s1 >= rows * item:
        return _TRANS, s1 // item
    return None


def gemm_accumulate(a: np.ndarray, b: np.ndarray, out: np.ndarray, beta: float) -> bool:
    """``out = a @ b + beta*out`` in one BLAS call (NumPy's ``matmul`` cannot add into its
    output: a product into a scratch then ``out += prod`` reads and writes ``out`` once more,
    as long as the GEMM itself for a thin product such as a recurrent step's
    ``dW += x^T dz``). ``a`` and ``b`` may be transposed views; equal to the two-pass result
    up to float32 rounding (BLAS adds the product into ``out`` block by block). False, with
    nothing changed, for anything else: outputs under :data:`ACCUMULATE_MIN_ELEMENTS`, other
    types, dtypes, layouts, overlapping arrays, or no such BLAS routine."""
    if out.size < ACCUMULATE_MIN_ELEMENTS:
        return False
    if not (type(a) is np.ndarray and type(b) is np.ndarray and a.ndim == 2 and b.ndim == 2
            and out.ndim == 2 and a.dtype == b.dtype == out.dtype and out.flags.c_contiguous):
        return False
    (m, k), n = a.shape, b.shape[1]
    if b.shape[0] != k or out.shape != (m, n) or 0 in (m, n, k):
        return False
    op_a, op_b = _gemm_operand(a), _gemm_operand(b)
    if op_a is None or op_b is None or np.may_share_memory(out, a) or \
            np.may_share_memory(out, b):
        return False
    fn = routine("gemm", out.dtype)
    if fn is None:
        return False
    fn(_ROW_MAJOR, op_a[0], op_b[0], m, n, k, 1.0, a.ctypes.data, op_a[1], b.ctypes.data,
       op_b[1], beta, out.ctypes.data, max(n, 1))
    return True
