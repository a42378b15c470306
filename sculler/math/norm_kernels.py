"""Compiled batch-norm passes for NumPy images (``pip install sculler[fast]``): see
:func:`sculler.math.norm.batch_norm_forward`, which takes them where numba is installed.

NumPy needs four to five passes over the data for each direction of a training batch norm
(sums, centring, sums of squares, two broadcast passes); these kernels make two: the per-channel
sums in one read, then one pass that writes the results. Each runs over a range of channels
(``x`` viewed as ``(N, C, H*W)``), so ``sculler.math.parallel.run_ranges`` splits the
channels over its workers. Sums are taken per image row in the data's dtype and added in float64.
"""

from __future__ import annotations

from numba import njit

OPTS = {"fastmath": True, "boundscheck": False, "nogil": True, "cache": True}


@njit(**OPTS)
def channel_moments(lo, hi, x, zero, sums, squares):
    """``sums[c] = sum x[:, c]``, ``squares[c] = sum x[:, c]**2`` (float64) for ``c`` in
    ``[lo, hi)``."""
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
        sums[c] = s
        squares[c] = q


@njit(**OPTS)
def normalize(lo, hi, x, mean, k, bias, centered, y):
    """``centered = x - mean[c]``, ``y = centered * k[c] + bias[c]`` for ``c`` in
    ``[lo, hi)``."""
    for c in range(lo, hi):
        mc, kc, bc = mean[c], k[c], bias[c]
        for n in range(x.shape[0]):
            xr, cr, yr = x[n, c], centered[n, c], y[n, c]
            for i in range(xr.shape[0]):
                d = xr[i] - mc
                cr[i] = d
                yr[i] = d * kc + bc


@njit(**OPTS)
def grad_sums(lo, hi, dy, centered, zero, g_bias, g_centered):
    """``g_bias[c] = sum dy[:, c]``, ``g_centered[c] = sum dy[:, c] * centered[:, c]``
    (float64) for ``c`` in ``[lo, hi)``."""
    for c in range(lo, hi):
        s = 0.0
        p = 0.0
        for n in range(dy.shape[0]):
            dr, cr = dy[n, c], centered[n, c]
            rs = zero
            rp = zero
            for i in range(dr.shape[0]):
                g = dr[i]
                rs += g
                rp += g * cr[i]
            s += rs
            p += rp
        g_bias[c] = s
        g_centered[c] = p


@njit(**OPTS)
def input_grad(lo, hi, dy, centered, k, a, b, dx, add):
    """``dx (+)= k[c] * (dy - b[c] - centered * a[c])`` for ``c`` in ``[lo, hi)``."""
    for c in range(lo, hi):
        kc, ac, bc = k[c], a[c], b[c]
        for n in range(dy.shape[0]):
            dr, cr, xr = dy[n, c], centered[n, c], dx[n, c]
            if add:
                for i in range(dr.shape[0]):
                    xr[i] += kc * (dr[i] - bc - cr[i] * ac)
            else:
                for i in range(dr.shape[0]):
                    xr[i] = kc * (dr[i] - bc - cr[i] * ac)
