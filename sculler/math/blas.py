"""GEMM with accumulation: ``out = a @ b + beta * out`` without allocating per call."""

from __future__ import annotations

from sculler.backend import get_array_module


def gemm(a, b, out, beta: float = 0.0, scratch=None):
    """``out = a @ b + beta * out``; ``scratch`` (shape of ``out``) holds ``a @ b`` when
    ``beta != 0`` so that nothing is allocated on the hot path."""
    xp = get_array_module(out)
    if beta == 0.0:
        return xp.matmul(a, b, out=out)
    prod = xp.matmul(a, b, out=scratch)
    if beta != 1.0:
        out *= beta
    out += prod
    return out


def col_sum(m, out, beta: float = 1.0):
    """``out = sum of the rows of m + beta * out`` (bias gradient: Paddle's collectBias)."""
    if beta == 0.0:
        m.sum(axis=0, out=out.reshape(m.shape[1:]))
        return out
    if beta != 1.0:
        out *= beta
    out += m.sum(axis=0).reshape(out.shape)
    return out
