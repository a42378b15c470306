"""Compiled batch-norm passes for NumPy images (``pip install sculler[fast]``): see
:func:`sculler.math.norm.batch_norm_forward`, which takes them where numba is installed.

NumPy needs four to five passes over the data for each direction of a training batch norm (sums,
centring, sums of squares, two broadcast passes); these kernels make two: the per-channel sums
in one read, then one pass that writes the results (``x - mean`` is recomputed where it is
needed, never stored), both in one call over a range of channels (``x`` viewed as ``(N, C,
H*W)``), which ``sculler.math.parallel.run_ranges`` splits over its workers. Sums are taken per
image row in the data's dtype and added in float64.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from sculler.math.jit import KERNEL_OPTIONS


@njit(**KERNEL_OPTIONS)
def forward(lo, hi, x, scale, bias, epsilon, zero, mean, var, inv_std, y, relu):
    """For each channel ``c`` in ``[lo, hi)``, in one call (a thread's channels need no
    other's): the batch mean and variance (``E[x^2] - mean^2``, sums per image row in the
    data's dtype added in float64), ``inv_std = 1/sqrt(var + epsilon)``, then
    ``y = (x - mean) * scale * inv_std + bias`` (``max(., 0)`` of it with ``relu``). Nothing
    else is written: the backward recomputes ``x - mean`` from ``x``, which costs less than
    storing it (a batch-sized write to memory that is cold by then)."""
    m = x.shape[0] * x.shape[2]
    for c in range(lo, hi):
        s = 0.0
        q = 0.0
        for n in range(x.shape[0]):
            row = x[n, c]
            rs = zero
            rq = zero
            for i in range(row.shape[0]):
                v = row[i]
                rs += v
                rq += v * v
            s += rs
            q += rq
        mc = s / m
        vc = max(q / m - mc * mc, 0.0)
        mean[c], var[c] = mc, vc
        ic = 1.0 / np.sqrt(vc + epsilon)
        inv_std[c] = ic
        mx = x.dtype.type(mc)
        kc = x.dtype.type(scale[c] * ic)
        bc = x.dtype.type(bias[c])
        for n in range(x.shape[0]):
            xr, yr = x[n, c], y[n, c]
            if relu:
                for i in range(xr.shape[0]):
                    yr[i] = max((xr[i] - mx) * kc + bc, zero)
            else:
                for i in range(xr.shape[0]):
                    yr[i] = (xr[i] - mx) * kc + bc


@njit(**KERNEL_OPTIONS)
def backward(lo, hi, dy, x, mean, scale, inv_std, zero, g_bias, g_scale, dx, add, relu_out):
    """For each channel ``c`` in ``[lo, hi)``, in one call, with ``d = x - mean`` (as the
    forward computed it, in the data's dtype): ``g_bias = sum dy``,
    ``g_scale = sum dy * d * inv_std`` (float64), then
    ``dx (+)= k * (dy - g_bias/m - d * g_scale * inv_std / m)``, ``k = scale*inv_std``.
    A ``relu_out`` of the input's shape (an empty one for none) is the output of a relu
    applied in :func:`forward`: ``dy`` counts where it is positive, as relu's gradient."""
    m = dy.shape[0] * dy.shape[2]
    relu = relu_out.size > 0
    for c in range(lo, hi):
        mx = x.dtype.type(mean[c])
        s = 0.0
        p = 0.0
        for n in range(dy.shape[0]):
            dr, xr = dy[n, c], x[n, c]
            rs = zero
            rp = zero
            if relu:
                yr = relu_out[n, c]
                for i in range(dr.shape[0]):
                    g = dr[i] if yr[i] > zero else zero
                    rs += g
                    rp += g * (xr[i] - mx)
            else:
                for i in range(dr.shape[0]):
                    g = dr[i]
                    rs += g
                    rp += g * (xr[i] - mx)
            s += rs
            p += rp
        ic = float(inv_std[c])
        g_bias[c], g_scale[c] = s, p * ic
        kc = dy.dtype.type(scale[c] * ic)
        ac = dy.dtype.type(p * ic * ic / m)
        bc = dy.dtype.type(s / m)
        for n in range(dy.shape[0]):
            dr, xr, gr = dy[n, c], x[n, c], dx[n, c]
            if relu:
                yr = relu_out[n, c]
                for i in range(dr.shape[0]):
                    g = dr[i] if yr[i] > zero else zero
                    v = kc * (g - bc - (xr[i] - mx) * ac)
                    gr[i] = gr[i] + v if add else v
            else:
                for i in range(dr.shape[0]):
                    v = kc * (dr[i] - bc - (xr[i] - mx) * ac)
                    gr[i] = gr[i] + v if add else v
