"""Momentum updates and decaying averages on BLAS ``axpby``/``axpy`` of the OpenBLAS NumPy
itself links.

NumPy has no fused multiply-add, so a momentum step (v1's ``m = mu*m - lr*g;  w += m`` or
2.x's ``v = mu*v + g;  w -= lr*v``) makes four passes over each parameter, on one core.
OpenBLAS's ``axpby`` and ``axpy`` make it two, each split over the threads of the pool NumPy's
GEMMs already use: on a 1.86M-element float32 run 0.43 ms against NumPy's 1.18-1.67 ms. (SciPy's
``axpy`` was tried first: SciPy ships a second OpenBLAS whose worker thread keeps spinning
after a threaded call and took a core from the next GEMM.)

The routines are looked up once by :func:`sculler.math.cblas.routine`; with any other BLAS
behind NumPy the functions here return False and the caller uses the NumPy kernels of
:mod:`sculler.math.optim`. Whether an update takes this path depends only on the arrays, never
on the machine's load, so a run's values do not change with what else runs: while other
processes leave no CPU idle the calls run on one BLAS thread
(:func:`sculler.math.blas.blas_threads_while_busy`). The values equal the NumPy kernels' up to a
rounding (BLAS may fuse a multiply into the add).
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from sculler.math.blas import blas_threads_while_busy
from sculler.math.cblas import numpy_openblas, routine

# below this many elements the NumPy kernel is as fast (OpenBLAS splits axpy from 10k)
MIN_ELEMENTS = 1 << 16


def _vectors(*arrays: Any) -> tuple[Any, Any] | None:
    """``(axpby, axpy)`` for the arrays' dtype when they are all C-contiguous NumPy arrays of
    one float dtype and shape, of at least :data:`MIN_ELEMENTS` elements, and NumPy's BLAS has
    both routines; else None."""
    first = arrays[0]
    if type(first) is not np.ndarray or first.size < MIN_ELEMENTS:
        return None
    for a in arrays:
        if (type(a) is not np.ndarray or a.dtype != first.dtype or a.shape != first.shape
                or not a.flags.c_contiguous):
            return None
    axpby, axpy = routine("axpby", first.dtype), routine("axpy", first.dtype)
    return None if axpby is None or axpy is None else (axpby, axpy)


def axpby(a: float, x: np.ndarray, b: float, y: np.ndarray) -> bool:
    """``y = a*x + b*y`` in one BLAS pass (NumPy makes three: ``y *= b``, ``t = a*x``,
    ``y += t``): the decaying averages of the adaptive optimizers. False, with nothing
    changed, where :func:`_vectors` refuses."""
    found = _vectors(y, x)
    if found is None:
        return False
    with blas_threads_while_busy():
        found[0](y.size, a, x.ctypes.data, 1, b, y.ctypes.data, 1)
    return True


def momentum_step(value: np.ndarray, grad: np.ndarray, mom: np.ndarray | None, lr: float,
                  momentum: float, decay: float) -> bool:
    """Paddle v1's ``m = momentum*m - lr*(g + decay*w);  w += m`` (``w -= lr*(g + decay*w)``
    without a momentum buffer): the values of :func:`sculler.math.optim.momentum_step` in
    one to three BLAS passes. False, with nothing changed, where :func:`_vectors` refuses."""
    found = _vectors(value, grad, *(() if mom is None else (mom,)))
    if found is None:
        return False
    axpby, axpy = found
    n, w_at, g_at = value.size, value.ctypes.data, grad.ctypes.data
    with blas_threads_while_busy():
        if mom is None:
            axpby(n, -lr, g_at, 1, 1.0 - lr * decay, w_at, 1)
            return True
        m_at = mom.ctypes.data
        axpby(n, -lr, g_at, 1, momentum, m_at, 1)
        if decay:
            axpy(n, -lr * decay, w_at, 1, m_at, 1)
        axpy(n, 1.0, m_at, 1, w_at, 1)
    return True


def heavy_ball(value: np.ndarray, grad: np.ndarray, velocity: np.ndarray, lr: float,
               momentum: float) -> bool:
    """Paddle 2.x momentum ``v = momentum*v + g;  w -= lr*v``: the values of
    :func:`sculler.math.optim.heavy_ball` in two BLAS passes (``axpby`` then ``axpy``).
    False, with nothing changed, where :func:`_vectors` refuses."""
    found = _vectors(value, grad, velocity)
    if found is None:
        return False
    axpby, axpy = found
    n, v_at = value.size, velocity.ctypes.data
    with blas_threads_while_busy():
        axpby(n, 1.0, grad.ctypes.data, 1, momentum, v_at, 1)
        axpy(n, -lr, v_at, 1, value.ctypes.data, 1)
    return True


# log2 of the cycles an idle OpenBLAS thread spins before it sleeps, once compiled kernels
# share the CPUs with it (OpenBLAS's default is 28: about 0.08 s at 3.5 GHz)
SHARED_CPU_SPIN_LOG2 = 10
_spin = {"set": False}


def shorten_thread_spin() -> bool:
    """Make NumPy's OpenBLAS threads sleep after ``2**SHARED_CPU_SPIN_LOG2`` cycles of waiting
    for work instead of spinning for up to ``2**28`` cycles after each threaded call.

    Why: a thread spinning after a GEMM holds a core that Sculler's own workers need for the
    compiled convolution kernels that follow; ResNet-20's training step ran 1.45x faster on 2
    cores with the short spin (small GEMMs back to back lose a little, so this is only done
    once such kernels run). OpenBLAS reads the setting when it starts its threads: this sets
    ``OPENBLAS_THREAD_TIMEOUT`` for the call, has OpenBLAS read its environment again and
    stops its threads, which the next threaded call starts anew. Once per process, from the
    thread that runs the kernels, between BLAS calls; a user's own ``OPENBLAS_THREAD_TIMEOUT``
    is left alone. False where nothing was changed."""
    if _spin["set"] or "OPENBLAS_THREAD_TIMEOUT" in os.environ:
        return False
    _spin["set"] = True
    lib = numpy_openblas()
    read_env = getattr(lib, "openblas_read_env", None)
    shutdown = getattr(lib, "blas_thread_shutdown_", None)
    if read_env is None or shutdown is None:
        return False
    os.environ["OPENBLAS_THREAD_TIMEOUT"] = str(SHARED_CPU_SPIN_LOG2)
    try:
        read_env()
        shutdown()
    finally:
        del os.environ["OPENBLAS_THREAD_TIMEOUT"]
    return True
