"""Compiled passes of a two-input sum followed by a relu (a ResNet block's residual sum), for
flat NumPy arrays (``pip install sculler[fast]``): one pass each way where NumPy makes two
forward (the sum, the relu) and three backward (the relu's gradient, a copy or an add into
each input's gradient). They run over ranges of elements on ``sculler.math.parallel``'s
workers.

Each kernel slices its range first and loops from 0 over the slices: indexed as ``a[i]`` for
``i`` in ``range(lo, hi)``, numba cannot tell that ``i`` is not negative, wraps every index,
and LLVM leaves the loop scalar (6.6x slower on a cached 256 KB range)."""

from __future__ import annotations

from numba import njit

from sculler.math.jit import KERNEL_OPTIONS


@njit(**KERNEL_OPTIONS)
def add_relu(lo, hi, a, b, out):
    """``out = max(a + b, 0)`` over ``[lo, hi)``."""
    zero = out.dtype.type(0)
    a, b, out = a[lo:hi], b[lo:hi], out[lo:hi]
    for i in range(out.shape[0]):
        out[i] = max(a[i] + b[i], zero)


@njit(**KERNEL_OPTIONS)
def relu_grad_into(lo, hi, y, dy, g0, add0, g1, add1):
    """``g = dy * (y > 0)`` over ``[lo, hi)``, written to (``add*`` False) or added to ``g0``
    and, when it is not empty, ``g1`` (which may be ``g0`` itself: then it gets ``g`` twice)."""
    zero = dy.dtype.type(0)
    second = g1.size > 0
    y, dy, g0 = y[lo:hi], dy[lo:hi], g0[lo:hi]
    if second:
        g1 = g1[lo:hi]
    for i in range(dy.shape[0]):
        g = dy[i] if y[i] > zero else zero
        g0[i] = g0[i] + g if add0 else g
        if second:
            g1[i] = g1[i] + g if add1 else g
