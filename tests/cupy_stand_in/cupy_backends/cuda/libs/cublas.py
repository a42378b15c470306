"""Stand-in for CuPy's thin cuBLAS wrappers: ``sgemm``, ``dgemm``, ``sgemv``, ``dgemv`` on raw
addresses, with cuBLAS's own column-major reading of each matrix (its leading dimension), its
argument checks (``CUBLAS_STATUS_INVALID_VALUE``) and its pointer modes, each counted as one
launch. The stand-in's device memory is host memory, so an address is read in place."""

from __future__ import annotations

import ctypes

import numpy as np
from cupy import _shares_memory, _timed, counts

CUBLAS_OP_N, CUBLAS_OP_T, CUBLAS_OP_C = 0, 1, 2
CUBLAS_POINTER_MODE_HOST, CUBLAS_POINTER_MODE_DEVICE = 0, 1
_modes: dict[int, int] = {}


class CUBLASError(RuntimeError):
    pass


def getPointerMode(handle: int) -> int:  # noqa: N802 (cuBLAS's name)
    return _modes.get(handle, CUBLAS_POINTER_MODE_HOST)


def setPointerMode(handle: int, mode: int) -> None:  # noqa: N802
    _modes[handle] = mode


def _matrix(address: int, rows: int, cols: int, ld: int, dtype: np.dtype) -> np.ndarray:
    """The column-major ``rows x cols`` matrix at ``address``, columns ``ld`` elements apart."""
    size = dtype.itemsize
    span = ((cols - 1) * ld + rows) * size
    flat = np.frombuffer((ctypes.c_char * span).from_address(address), dtype)
    return np.lib.stride_tricks.as_strided(flat, (rows, cols), (size, ld * size))


def _vector(address: int, n: int, inc: int, dtype: np.dtype) -> np.ndarray:
    size = dtype.itemsize
    flat = np.frombuffer((ctypes.c_char * (((n - 1) * inc + 1) * size)).from_address(address),
                         dtype)
    return np.lib.stride_tricks.as_strided(flat, (n,), (inc * size,))


def _scalar(handle: int, address: int, dtype: np.dtype) -> float:
    # host or device mode: the stand-in's device memory is host memory
    return float(np.frombuffer((ctypes.c_char * dtype.itemsize).from_address(address),
                               dtype)[0])


def _no_overlap(out: np.ndarray, *operands: np.ndarray | None) -> None:
    """cuBLAS writes its output while it still reads its operands, in tiles: an output that
    shares memory with an operand gives garbage on a GPU (cuBLAS does not check; this
    stand-in, which forms the product first, would hide it). Refused here."""
    for operand in operands:
        if operand is not None and _shares_memory(out, operand):
            raise CUBLASError("the output shares memory with an operand (cuBLAS results "
                              "are undefined there)")


def _op(a: np.ndarray, trans: int) -> np.ndarray:
    if trans not in (CUBLAS_OP_N, CUBLAS_OP_T):
        raise CUBLASError("CUBLAS_STATUS_INVALID_VALUE: trans")
    return a if trans == CUBLAS_OP_N else a.T


def _gemm(dtype: np.dtype):
    @_timed
    def gemm(handle: int, transa: int, transb: int, m: int, n: int, k: int, alpha: int,
             A: int, lda: int, B: int, ldb: int, beta: int, C: int, ldc: int) -> None:  # noqa: N803
        """``C = alpha op(A) op(B) + beta C``, all column-major."""
        a_rows, a_cols = (m, k) if transa == CUBLAS_OP_N else (k, m)
        b_rows, b_cols = (k, n) if transb == CUBLAS_OP_N else (n, k)
        if min(m, n, k) < 0 or lda < max(1, a_rows) or ldb < max(1, b_rows) \
                or ldc < max(1, m):
            raise CUBLASError("CUBLAS_STATUS_INVALID_VALUE: a leading dimension")
        counts["launch"] += 1
        if m == 0 or n == 0:
            return
        c = _matrix(C, m, n, ldc, dtype)
        a = _matrix(A, a_rows, a_cols, lda, dtype) if k else None
        b = _matrix(B, b_rows, b_cols, ldb, dtype) if k else None
        _no_overlap(c, a, b)
        al, be = _scalar(handle, alpha, dtype), _scalar(handle, beta, dtype)
        prod = 0 if k == 0 else _op(a, transa) @ _op(b, transb)
        c[...] = al * prod + (be * c if be else 0)

    return gemm


def _gemv(dtype: np.dtype):
    @_timed
    def gemv(handle: int, trans: int, m: int, n: int, alpha: int, A: int, lda: int, x: int,
             incx: int, beta: int, y: int, incy: int) -> None:  # noqa: N803
        """``y = alpha op(A) x + beta y``, ``A`` column-major ``m x n``."""
        if min(m, n) < 0 or lda < max(1, m) or incx == 0 or incy == 0:
            raise CUBLASError("CUBLAS_STATUS_INVALID_VALUE")
        if incx < 0 or incy < 0:
            raise NotImplementedError("the stand-in takes positive increments")
        counts["launch"] += 1
        xn, yn = (n, m) if trans == CUBLAS_OP_N else (m, n)
        if m == 0 or n == 0:
            return
        out = _vector(y, yn, incy, dtype)
        a, v = _matrix(A, m, n, lda, dtype), _vector(x, xn, incx, dtype)
        _no_overlap(out, a, v)
        al, be = _scalar(handle, alpha, dtype), _scalar(handle, beta, dtype)
        prod = _op(a, trans) @ v
        out[...] = al * prod + (be * out if be else 0)

    return gemv


sgemm, dgemm = _gemm(np.dtype(np.float32)), _gemm(np.dtype(np.float64))
sgemv, dgemv = _gemv(np.dtype(np.float32)), _gemv(np.dtype(np.float64))
