"""3-D convolution kernels on NCDHW arrays: vol2col/col2vol and the forward/backward passes of
PaddlePaddle's ``Conv3DLayer`` and ``DeConv3DLayer``.

Every stride / padding argument is a ``(z, y, x)`` triple. ``vol2col`` unfolds a volume to
``(N, C * kd*kh*kw, oD*oH*oW)`` columns, rows ordered ``(c, kz, ky, kx)`` as Paddle's
``vol2Col``; it loops over the ``kd * kh * kw`` filter taps (each a strided slice of the whole
batch), never over voxels. A convolution is then one batched GEMM per group and its input
gradient a ``col2vol`` of ``W^T dy``; the transposed convolution swaps the two.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import product
from typing import Any

from sculler.backend import get_array_module

Triple = Sequence[int]


def _tap(k: Sequence[int], st: Triple, out_dhw: Sequence[int]) -> tuple[slice, ...]:
    """The slices of a padded volume that filter tap ``k = (kz, ky, kx)`` reads for every
    output position: ``frame[o*s + k]``."""
    return tuple(slice(k[a], k[a] + (out_dhw[a] - 1) * st[a] + 1, st[a]) for a in range(3))


def vol2col(x: Any, kernel: Triple, stride: Triple, padding: Triple,
            out_dhw: Triple) -> Any:
    """``(N, C, D, H, W)`` to ``(N, C * kd*kh*kw, oD*oH*oW)`` columns:
    ``cols[n, (c, kz, ky, kx), (oz, oy, ox)] = xpad[n, c, oz*sz + kz, oy*sy + ky, ox*sx + kx]``
    (zero outside the volume)."""
    xp = get_array_module(x)
    n, c = x.shape[:2]
    pd, ph, pw = padding
    xpad = xp.pad(x, ((0, 0), (0, 0), (pd, pd), (ph, ph), (pw, pw))) if any(padding) else x
    cols = xp.empty((n, c) + tuple(kernel) + tuple(out_dhw), dtype=x.dtype)
    for k in product(*(range(s) for s in kernel)):
        cols[(slice(None), slice(None)) + k] = xpad[(slice(None), slice(None))
                                                    + _tap(k, stride, out_dhw)]
    return cols.reshape(n, c * kernel[0] * kernel[1] * kernel[2], -1)


def col2vol(cols: Any, x_shape: Sequence[int], kernel: Triple, stride: Triple,
            padding: Triple, out_dhw: Triple) -> Any:
    """The adjoint of :func:`vol2col`: every column entry added back to the voxel it was read
    from; returns an ``x_shape`` array."""
    xp = get_array_module(cols)
    n, c, d, h, w = x_shape
    pd, ph, pw = padding
    gpad = xp.zeros((n, c, d + 2 * pd, h + 2 * ph, w + 2 * pw), dtype=cols.dtype)
    taps = cols.reshape((n, c) + tuple(kernel) + tuple(out_dhw))
    for k in product(*(range(s) for s in kernel)):
        gpad[(slice(None), slice(None)) + _tap(k, stride, out_dhw)] += taps[
            (slice(None), slice(None)) + k]
    return gpad[:, :, pd:pd + d, ph:ph + h, pw:pw + w]


def _grouped(a: Any, groups: int) -> Any:
    """``(N, R, P)`` as ``(N, groups, R/groups, P)``."""
    return a.reshape(a.shape[0], groups, a.shape[1] // groups, a.shape[2])


def conv3d_forward(x: Any, w: Any, stride: Triple, padding: Triple, groups: int,
                   out_dhw: Triple) -> Any:
    """``y[n, f] = sum_{c, k} W[f, c, k] * xpad[n, c, o*s + k]`` per group; ``w`` is
    ``(F, C/groups, kd, kh, kw)`` (Paddle's layout); returns ``(N, F, oD, oH, oW)``."""
    f = w.shape[0]
    cols = _grouped(vol2col(x, w.shape[2:], stride, padding, out_dhw), groups)
    y = w.reshape(groups, f // groups, -1)[None] @ cols
    return y.reshape((x.shape[0], f) + tuple(out_dhw))


def conv3d_backward_filter(x: Any, dy: Any, w_shape: Sequence[int], stride: Triple,
                           padding: Triple, groups: int) -> Any:
    """``dW[f, c, k] = sum_{n, o} dy[n, f, o] * xpad[n, c, o*s + k]``, shape ``w_shape``."""
    out_dhw = dy.shape[2:]
    cols = _grouped(vol2col(x, w_shape[2:], stride, padding, out_dhw), groups)
    dyg = _grouped(dy.reshape(dy.shape[0], dy.shape[1], -1), groups)
    return (dyg @ cols.transpose(0, 1, 3, 2)).sum(axis=0).reshape(w_shape)


def conv3d_backward_data(dy: Any, w: Any, x_shape: Sequence[int], stride: Triple,
                         padding: Triple, groups: int) -> Any:
    """``dx = col2vol(W^T dy)`` per group, shape ``x_shape``."""
    f = w.shape[0]
    dyg = _grouped(dy.reshape(dy.shape[0], f, -1), groups)
    wt = w.reshape(groups, f // groups, -1).transpose(0, 2, 1)[None]
    dcols = (wt @ dyg).reshape(dy.shape[0], -1, dyg.shape[-1])
    return col2vol(dcols, x_shape, w.shape[2:], stride, padding, dy.shape[2:])


def deconv3d_forward(x: Any, w: Any, y_shape: Sequence[int], kernel: Triple, stride: Triple,
                     padding: Triple, groups: int) -> Any:
    """Transposed convolution: ``y = col2vol(W x)`` per group, ``W`` the
    ``(F * kd*kh*kw, C/groups)`` matrix of Paddle's ``DeConv3DLayer`` (rows ``(f, kz, ky, kx)``
    within a group's block); ``x`` is ``(N, C, d, h, w)``, ``y_shape`` ``(N, F, D, H, W)``."""
    n, c = x.shape[:2]
    xg = _grouped(x.reshape(n, c, -1), groups)
    cols = (w.reshape(groups, -1, c // groups)[None] @ xg).reshape(n, -1, xg.shape[-1])
    return col2vol(cols, y_shape, kernel, stride, padding, x.shape[2:])


def _deconv_cols(dy: Any, x: Any, kernel: Triple, stride: Triple, padding: Triple,
                 groups: int) -> Any:
    return _grouped(vol2col(dy, kernel, stride, padding, x.shape[2:]), groups)


def deconv3d_backward_filter(x: Any, dy: Any, w_shape: Sequence[int], kernel: Triple,
                             stride: Triple, padding: Triple, groups: int) -> Any:
    """``dW = sum_n vol2col(dy) x^T`` per group, shape ``w_shape``."""
    n, c = x.shape[:2]
    xg = _grouped(x.reshape(n, c, -1), groups)
    dcols = _deconv_cols(dy, x, kernel, stride, padding, groups)
    return (dcols @ xg.transpose(0, 1, 3, 2)).sum(axis=0).reshape(w_shape)


def deconv3d_backward_data(dy: Any, w: Any, x: Any, kernel: Triple, stride: Triple,
                           padding: Triple, groups: int) -> Any:
    """``dx = W^T vol2col(dy)`` per group, shape of ``x``."""
    c = x.shape[1]
    dcols = _deconv_cols(dy, x, kernel, stride, padding, groups)
    wt = w.reshape(groups, -1, c // groups).transpose(0, 2, 1)[None]
    return (wt @ dcols).reshape(x.shape)


def pool3d_windows(x: Any, kernel: Triple, stride: Triple, padding: Triple,
                   out_dhw: Triple, fill: float) -> Any:
    """The window taps of a 3-D pooling, ``(kd*kh*kw, N, C, oD, oH, oW)``:
    ``taps[k][..., o] = x[..., o*s - p + k]`` with ``fill`` outside the volume (the far side
    padded further where a ceil-mode window runs past it)."""
    xp = get_array_module(x)
    far = [max(0, (o - 1) * s + k - (n + 2 * p))
           for o, s, k, n, p in zip(out_dhw, stride, kernel, x.shape[2:], padding)]
    widths = ((0, 0), (0, 0)) + tuple((p, p + e) for p, e in zip(padding, far))
    xpad = xp.pad(x, widths, constant_values=fill)
    return xp.stack([xpad[(slice(None), slice(None)) + _tap(k, stride, out_dhw)]
                     for k in product(*(range(s) for s in kernel))])


def pool3d_scatter(dtaps: Any, x_shape: Sequence[int], kernel: Triple, stride: Triple,
                   padding: Triple) -> Any:
    """The adjoint of :func:`pool3d_windows`: each tap's gradient added back to the voxel it
    read; returns an ``x_shape`` array (what fell in the padding dropped)."""
    xp = get_array_module(dtaps)
    out_dhw = dtaps.shape[3:]
    far = [max(0, (o - 1) * s + k - (n + 2 * p))
           for o, s, k, n, p in zip(out_dhw, stride, kernel, x_shape[2:], padding)]
    gpad = xp.zeros(tuple(x_shape[:2]) + tuple(n + 2 * p + e for n, p, e in
                                               zip(x_shape[2:], padding, far)), dtype=dtaps.dtype)
    for t, k in enumerate(product(*(range(s) for s in kernel))):
        gpad[(slice(None), slice(None)) + _tap(k, stride, out_dhw)] += dtaps[t]
    d, h, w = x_shape[2:]
    pd, ph, pw = padding
    return gpad[:, :, pd:pd + d, ph:ph + h, pw:pw + w]
