"""Compiled passes of a two-input sum followed by a relu (a ResNet block's residual sum), for
flat NumPy arrays (``pip install sculler[fast]``): one pass each way where NumPy makes two
forward (the sum, the relu) and three backward (the relu's gradient, a copy or an add into
each input's gradient). They run over ranges of elements on ``sculler.math.parallel``'s
workers."""

from __future__ import annotations

from numba import njit

from sculler.math.jit import KERNEL_OPTIONS


@njit(**KERNEL_OPTIONS)
def add_relu(lo, hi, a, b, out):
    """``out = max(a + b, 0)`` over ``[lo, hi)``."""
    zero = out.dtype.type(0)
    for i in range(lo, hi):
        out[i] = max(a[i] + b[i], zero)


@njit(**KERNEL_OPTIONS)
def relu_grad_into(lo, hi, y, dy, g0, add0, g1, add1):
    """``g = dy * (y > 0)`` over ``[lo, hi)``, written to (``add*`` False) or added to ``g0``
    and, when it is not empty, ``g1`` (which may be ``g0`` itself: then it gets ``g`` twice)."""
    zero = dy.dtype.type(0)
    second = g1.size > 0
    for i in range(lo, hi):
        g = dy[i] if y[i] > zero else zero
        g0[i] = g0[i] + g if add0 else g
        if second:
            g1[i] = g1[i] + g if add1 else g
