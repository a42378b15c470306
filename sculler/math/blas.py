"""GEMM with accumulation: ``out = a @ b + beta * out`` without allocating per call."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import numpy as np

from sculler.backend import get_array_module, is_gpu_array
from sculler.math import cuda_blas, parallel
from sculler.math.cblas import gemm_accumulate
from sculler.math.workspace import constant_array


def gemm(a, b, out, beta: float = 0.0, scratch=None):
    """``out = a @ b + beta * out``: on NumPy's OpenBLAS in one call when ``beta != 0``
    (:func:`sculler.math.cblas.gemm_accumulate`), on the GPU as one cuBLAS call
    (:func:`sculler.math.cuda_blas.gemm`), else ``scratch`` (shape of ``out``) holds ``a @ b``
    so that nothing is allocated on the hot path."""
    if beta == 0.0 and type(out) is np.ndarray:
        return np.matmul(a, b, out=out)
    if type(out) is np.ndarray and gemm_accumulate(a, b, out, beta):
        return out
    xp = get_array_module(out)
    if xp is not np and a.ndim == b.ndim == out.ndim == 2 and cuda_blas.gemm(a, b, out, beta):
        return out  # one cuBLAS call, strided operands too
    if beta == 0.0:
        return xp.matmul(a, b, out=out)
    prod = xp.matmul(a, b, out=scratch)
    if beta != 1.0:
        out *= beta
    out += prod
    return out


def ones_vector(n: int, dtype: np.dtype) -> np.ndarray:
    """A cached read-only ``(n,)`` vector of ones of ``dtype`` (for GEMVs that sum rows or
    columns)."""
    return constant_array(("ones", n, dtype), np.ones, n, dtype)


_gpu_ones: dict[tuple, object] = {}


def _device_ones(n: int, like):
    """A ``(n,)`` vector of ones on ``like``'s GPU, of its dtype (read it only): a view of one
    grow-only vector per device and dtype, so no batch size makes a new one each time."""
    key = (like.device.id, like.dtype.str)
    ones = _gpu_ones.get(key)
    if ones is None or ones.size < n:
        ones = _gpu_ones[key] = get_array_module(like).ones(max(n, 1024), like.dtype)
    return ones[:n]


def col_sum(m, out, beta: float = 1.0):
    """``out = sum of the rows of m + beta * out`` (bias gradient: Paddle's collectBias).

    A C-contiguous 2-D numpy ``m`` is summed as a GEMV with a ones vector: 2-3x faster than
    NumPy's axis-0 reduction at every width measured (equal within float32 rounding)."""
    if type(m) is np.ndarray and m.ndim == 2 and m.flags.c_contiguous and m.shape[0] and \
            type(out) is np.ndarray and out.size == m.shape[1] and out.dtype == m.dtype:
        ones = ones_vector(m.shape[0], m.dtype)
        if beta == 0.0 and out.flags.c_contiguous:
            np.matmul(ones, m, out=out.reshape(m.shape[1]))
            return out
        if beta != 1.0:
            out *= beta
        out += np.matmul(ones, m).reshape(out.shape)
        return out
    if (m.ndim == 2 and out.size == m.shape[1] and out.flags.c_contiguous and is_gpu_array(m)
            and cuda_blas.gemv_t(m, _device_ones(m.shape[0], m), out.reshape(m.shape[1]), beta)):
        return out  # out = m^T 1 + beta * out: one cuBLAS GEMV, not a sum and an add
    if beta == 0.0:
        m.sum(axis=0, out=out.reshape(m.shape[1:]))
        return out
    if beta != 1.0:
        out *= beta
    out += m.sum(axis=0).reshape(out.shape)
    return out


_blas_controllers: list | None = None


def _controllers() -> list:
    global _blas_controllers
    if _blas_controllers is None:
        try:
            from threadpoolctl import ThreadpoolController
        except ImportError:  # a declared dependency; without it the limit is a no-op
            _blas_controllers = []
        else:
            _blas_controllers = ThreadpoolController().select(user_api="blas").lib_controllers
    return _blas_controllers


SMALL_GEMM = 1 << 26  # multiply-adds below which one BLAS thread is used (small_gemms)


@contextlib.contextmanager
def blas_threads(limit: int = 1) -> Iterator[None]:
    """Run the block with at most ``limit`` BLAS threads, then restore the previous count
    (about a microsecond)."""
    saved = [(c, c.num_threads) for c in _controllers() if c.num_threads > limit]
    for c, _ in saved:
        c.set_num_threads(limit)
    try:
        yield
    finally:
        for c, n in saved:
            c.set_num_threads(n)


def small_gemms(multiply_adds: int) -> contextlib.AbstractContextManager:
    """One BLAS thread for a block whose GEMMs each do fewer than ``SMALL_GEMM``
    multiply-adds (e.g. a recurrent layer's per-step products): threading them gains little
    on idle cores, and when the cores are busy each GEMM can stall a scheduler tick waiting
    for a descheduled helper thread. Larger GEMMs keep every thread."""
    return blas_threads(1) if multiply_adds < SMALL_GEMM else contextlib.nullcontext()


def blas_threads_while_busy() -> contextlib.AbstractContextManager:
    """Every BLAS thread while other processes leave a CPU idle, else one
    (:func:`sculler.math.parallel.cpu_to_spare`): on a busy machine a threaded BLAS call
    waits for a descheduled helper thread (a threaded momentum step took 8-18 ms per batch).

    Only for routines whose values do not depend on the thread count (elementwise ``axpy``,
    ``axpby``): OpenBLAS rounds some GEMMs and GEMVs differently on one and two threads, and a
    run's values must not depend on what else runs on the machine."""
    return contextlib.nullcontext() if parallel.cpu_to_spare() else blas_threads(1)
