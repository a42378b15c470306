"""GEMM and GEMV on device arrays as one cuBLAS call each, through CuPy's thin wrappers of
cuBLAS (``cupy_backends.cuda.libs.cublas``: raw pointers, the current stream).

Why not ``ndarray.dot`` or ``cupy.cublas``: those accept only C- or F-contiguous operands and
copy any other (a column slice of a gate matrix, ``dg[:, 2h:]``, is a copy and then a product
and an add), and they cost more host time a call (``dot`` 19.5 us on an H100,
bench/gpu_overheads.py; ``cupy.cublas.gemm`` builds its scalars and sets the pointer mode
every call). cuBLAS itself reads any matrix whose elements are unit-stride along one axis, with
a leading dimension for the other: all that is needed here is that description.

A row-major ``C = A B`` is the column-major ``C^T = B^T A^T``: a row-major operand read as
column-major is its own transpose, so every product is one call whatever mix of row- and
column-major operands it has.
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

from sculler.backend import cublas_handle, cublas_library

_host_scalars = threading.local()  # per thread and dtype: alpha, beta, read by cuBLAS at the call
# the (alpha, beta) pairs nearly every call uses, as constant host scalars (address, keep-alive)
_CONSTANT_SCALARS: dict[tuple, tuple[int, int, np.ndarray]] = {}


def layout(x: Any) -> tuple[bool, int] | None:
    """``(row_major, leading dimension)`` of 2-D ``x`` as cuBLAS can read it in place, or None.

    Row-major: unit stride along a row, rows ``ld`` elements apart (``ld >= columns``);
    column-major the other way round. An axis of length 1 has no stride to check. Row-major
    is preferred where both hold."""
    rows, cols = x.shape
    size = x.itemsize
    s0, s1 = x.strides
    if cols == 1 or s1 == size:
        ld = s0 // size if rows > 1 else cols
        if rows == 1 or (s0 % size == 0 and ld >= cols):
            return True, max(ld, 1)
    if rows == 1 or s0 == size:
        ld = s1 // size if cols > 1 else rows
        if cols == 1 or (s1 % size == 0 and ld >= rows):
            return False, max(ld, 1)
    return None


def _scalars(char: str, alpha: float, beta: float) -> tuple[int, int]:
    """Host addresses of ``alpha`` and ``beta`` of the dtype ``char`` ('f' or 'd'): constants
    for ``alpha = 1``, ``beta`` 0 or 1; else one buffer per thread and dtype, rewritten each
    call (cuBLAS reads host scalars before the call returns)."""
    known = _CONSTANT_SCALARS.get((char, alpha, beta))
    if known is not None:
        return known[0], known[1]
    cached = getattr(_host_scalars, char, None)
    if cached is None:
        buf = np.zeros(2, char)
        cached = (buf, buf.ctypes.data)
        setattr(_host_scalars, char, cached)
    buf, at = cached
    buf[0], buf[1] = alpha, beta
    return at, at + buf.itemsize


for _char in "fd":
    for _beta in (0.0, 1.0):
        _constant = np.array([1.0, _beta], _char)
        _constant.flags.writeable = False
        _CONSTANT_SCALARS[(_char, 1.0, _beta)] = (
            _constant.ctypes.data, _constant.ctypes.data + _constant.itemsize, _constant)


def _handle(lib: Any) -> int:
    """The current device's cuBLAS handle in host pointer mode (CuPy sets the mode before each
    call of its own, so leaving it on host is safe)."""
    handle = cublas_handle()
    if lib.getPointerMode(handle) != lib.CUBLAS_POINTER_MODE_HOST:
        lib.setPointerMode(handle, lib.CUBLAS_POINTER_MODE_HOST)
    return handle


def gemm(a: Any, b: Any, out: Any, beta: float = 0.0, alpha: float = 1.0) -> bool:
    """``out = alpha a b + beta out`` for 2-D float32 or float64 device arrays, as one call;
    False (nothing done) where an operand cannot be read in place or a dimension is 0."""
    dtype = out.dtype
    if dtype.char not in "fd" or a.dtype != dtype or b.dtype != dtype:
        return False
    m, k = a.shape
    n = b.shape[1]
    if not (m and n and k) or b.shape[0] != k or out.shape != (m, n):
        return False
    la, lb, lc = layout(a), layout(b), layout(out)
    if la is None or lb is None or lc is None:
        return False
    lib = cublas_library()
    n_op, t_op = lib.CUBLAS_OP_N, lib.CUBLAS_OP_T
    alpha_at, beta_at = _scalars(dtype.char, alpha, beta)
    call = lib.sgemm if dtype.char == "f" else lib.dgemm
    if lc[0]:  # row-major out: out^T = b^T a^T, a row-major operand read as its transpose
        call(_handle(lib), n_op if lb[0] else t_op, n_op if la[0] else t_op, n, m, k,
             alpha_at, b.data.ptr, lb[1], a.data.ptr, la[1], beta_at, out.data.ptr, lc[1])
    else:
        call(_handle(lib), t_op if la[0] else n_op, t_op if lb[0] else n_op, m, n, k,
             alpha_at, a.data.ptr, la[1], b.data.ptr, lb[1], beta_at, out.data.ptr, lc[1])
    return True


def gemv_t(m: Any, x: Any, out: Any, beta: float = 0.0, alpha: float = 1.0) -> bool:
    """``out = alpha m^T x + beta out`` (``m`` 2-D, ``x`` and ``out`` 1-D device arrays of its
    dtype), as one call; False (nothing done) where it cannot be."""
    dtype = out.dtype
    if dtype.char not in "fd" or m.dtype != dtype or x.dtype != dtype or x.ndim != 1 \
            or out.ndim != 1:
        return False
    rows, cols = m.shape
    if not (rows and cols) or x.shape != (rows,) or out.shape != (cols,):
        return False
    lm = layout(m)
    incx, incy = x.strides[0] // x.itemsize, out.strides[0] // out.itemsize
    if lm is None or x.strides[0] % x.itemsize or out.strides[0] % out.itemsize \
            or (incx <= 0 and rows > 1) or (incy <= 0 and cols > 1):
        return False
    lib = cublas_library()
    alpha_at, beta_at = _scalars(dtype.char, alpha, beta)
    call = lib.sgemv if dtype.char == "f" else lib.dgemv
    if lm[0]:  # row-major m read as column-major is m^T (cols x rows)
        call(_handle(lib), lib.CUBLAS_OP_N, cols, rows, alpha_at, m.data.ptr, lm[1],
             x.data.ptr, max(incx, 1), beta_at, out.data.ptr, max(incy, 1))
    else:
        call(_handle(lib), lib.CUBLAS_OP_T, rows, cols, alpha_at, m.data.ptr, lm[1],
             x.data.ptr, max(incx, 1), beta_at, out.data.ptr, max(incy, 1))
    return True
