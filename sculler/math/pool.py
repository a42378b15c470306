"""Max and average pooling on NCHW arrays, PaddlePaddle's ``PoolProjection`` semantics.

Window ``(oy, ox)`` covers rows ``oy*sy - py ... oy*sy - py + ky - 1`` (columns alike),
clipped to the image. The output size is :func:`sculler.math.conv.conv_output_size` with
``caffe_mode=not ceil_mode``; Paddle pools in ceil mode, which keeps a last partial window.
The kernels copy the ``ky * kx`` window taps (a strided slice of the whole batch each) into one
contiguous array and reduce over it, never looping over pixels; the max backward is one
scatter to the winners' flat indices, and windows that tile the image (stride >= size, no
frame) are written straight into ``out``.

Max pooling returns, beside the output, the tap (``i * kx + j``) that won each window; the
backward routes the gradient to that one input (the first maximum in row-major order on
ties). A window that lies entirely in the padding (ceil mode with padding can make one) gives
the dtype's lowest value, like Paddle's ``-FLT_MAX``, and no gradient.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from sculler.backend import get_array_module
from sculler.math import cuda
from sculler.math.conv import IntPair, _accumulate, conv_output_size, pair, tap_slices

_NO_DILATION = (1, 1)  # pooling windows are dense: tap (i, j) reads offset (i, j)


def pool_output_shape(
    x_shape: Sequence[int],
    size: IntPair,
    stride: IntPair = 1,
    padding: IntPair = 0,
    ceil_mode: bool = True,
) -> tuple[int, int, int, int]:
    """``(N, C, oh, ow)`` of a pooling with window ``size``.

    ``o = 1 + ceil((img + 2*pad - size) / stride)`` (floor when ``ceil_mode=False``).
    """
    if len(x_shape) != 4:
        raise ValueError(f"pooling expects NCHW input (4 dims), got shape {tuple(x_shape)}")
    k, st, pad = pair(size, "size", 1), pair(stride, "stride", 1), pair(padding, "padding")
    n, c, h, w = x_shape
    return (
        int(n),
        int(c),
        conv_output_size(h, k[0], pad[0], st[0], caffe_mode=not ceil_mode),
        conv_output_size(w, k[1], pad[1], st[1], caffe_mode=not ceil_mode),
    )


def _frame_hw(x_shape, k, st, pad, out_hw):
    """Height and width of the padded frame that holds every window."""
    hp = max(x_shape[2] + 2 * pad[0], (out_hw[0] - 1) * st[0] + k[0])
    wp = max(x_shape[3] + 2 * pad[1], (out_hw[1] - 1) * st[1] + k[1])
    return hp, wp


def _padded(x, k, st, pad, out_hw, fill):
    """x inside a frame big enough for every window, filled with ``fill``."""
    xp = get_array_module(x)
    n, c, h, w = x.shape
    hp, wp = _frame_hw(x.shape, k, st, pad, out_hw)
    if (hp, wp) == (h, w):
        return x
    xpad = xp.full((n, c, hp, wp), fill, dtype=x.dtype)
    xpad[:, :, pad[0] : pad[0] + h, pad[1] : pad[1] + w] = x
    return xpad


def _windows(xpad, k, st, out_hw, first: int = 0):
    """The window taps of a padded frame as one contiguous ``(ky*kx - first, N, C, oh, ow)``
    array.

    ``T[i * kx + j - first] = xpad[:, :, i::sy, j::sx]`` cropped to the output, one strided
    copy per tap from tap ``first`` on (faster than one 6-D transposing copy); the reductions
    that follow stream through contiguous memory.
    """
    xp = get_array_module(xpad)
    n, c = xpad.shape[:2]
    taps = xp.empty((k[0] * k[1] - first, n, c) + tuple(out_hw), dtype=xpad.dtype)
    for t in range(first, k[0] * k[1]):
        sy, sx = tap_slices(t // k[1], t % k[1], _NO_DILATION, st, out_hw)
        taps[t - first] = xpad[:, :, sy, sx]
    return taps


def _scatter_taps(dy_taps, x_shape, k, st, pad, out_hw, out, name):
    """Sum per-tap gradients ``dy_taps(i, j)`` back onto the input grid (+= into out)."""
    n, c, h, w = x_shape
    first = dy_taps(0, 0)
    xp = get_array_module(first)
    hp, wp = _frame_hw(x_shape, k, st, pad, out_hw)
    gpad = xp.zeros((n, c, hp, wp), dtype=first.dtype)
    for i in range(k[0]):
        for j in range(k[1]):
            sy, sx = tap_slices(i, j, _NO_DILATION, st, out_hw)
            gpad[:, :, sy, sx] += first if i == j == 0 else dy_taps(i, j)
    return _crop_into(gpad, x_shape, pad, out, name)


def _crop_into(gpad, x_shape, pad, out, name):
    """The image part of a padded gradient frame, added to ``out`` (or a fresh copy)."""
    h, w = x_shape[2:]
    dx = gpad[:, :, pad[0] : pad[0] + h, pad[1] : pad[1] + w]
    if out is None:
        return gpad if dx.shape == gpad.shape else dx.copy()
    _check_out(out, x_shape, name)
    out += dx
    return out


def _check_out(out, x_shape, name):
    if out.shape != tuple(x_shape):
        raise ValueError(f"{name}: out has shape {out.shape}, expected {tuple(x_shape)}")


def tap_dtype(taps: int):
    """The smallest signed integer type that holds every tap index and -1 (int8 for windows
    of up to 127 taps): the argmax passes then move a quarter of int32's bytes."""
    for dtype in (np.int8, np.int16, np.int32):
        if taps - 1 <= np.iinfo(dtype).max:
            return dtype
    return np.int64


def _lowest(xp, dtype):
    return xp.finfo(dtype).min if dtype.kind == "f" else xp.iinfo(dtype).min


def max_pool2d_forward(
    x: Any,
    size: IntPair,
    stride: IntPair = 1,
    padding: IntPair = 0,
    ceil_mode: bool = True,
    out: Any = None,
    argmax_out: Any = None,
) -> tuple[Any, Any]:
    """Max pooling: ``y[n, c, oy, ox] = max over the clipped window of x``.

    Args:
        x: ``(N, C, H, W)`` input.
        size: window ``(ky, kx)`` or an int; stride, padding: ints or ``(y, x)`` pairs.
        ceil_mode: Paddle's default ``True`` (see :func:`pool_output_shape`).
        out: optional ``(N, C, oh, ow)`` buffer for ``y``, overwritten.
        argmax_out: optional buffer for ``argmax`` (same shape, dtype ``tap_dtype(ky * kx +
            1)``), overwritten: a layer keeps one instead of a new array a batch.

    Returns:
        ``(y, argmax)``: ``y`` of shape ``(N, C, oh, ow)`` and ``argmax`` of the same shape,
        the winning tap ``i * kx + j`` of each window (``-1`` for an empty window), in the
        smallest integer type that holds ``ky * kx`` taps (:func:`tap_dtype`: int8 up to 127).
        Keep ``argmax`` for :func:`max_pool2d_backward`.

    Example:
        >>> import numpy as np
        >>> y, idx = max_pool2d_forward(np.arange(16.0).reshape(1, 1, 4, 4), 2, 2)
        >>> y[0, 0].tolist(), idx[0, 0].tolist()
        ([[5.0, 7.0], [13.0, 15.0]], [[3, 3], [3, 3]])
    """
    xp = get_array_module(x)
    shape = pool_output_shape(x.shape, size, stride, padding, ceil_mode)
    k, st, pad = pair(size, "size", 1), pair(stride, "stride", 1), pair(padding, "padding")
    if out is None:
        y = xp.empty(shape, dtype=x.dtype)
    else:
        _check_out(out, shape, "max_pool2d_forward")
        y = out
    taps = tap_dtype(k[0] * k[1] + 1)
    if argmax_out is None:
        argmax = xp.empty(shape, dtype=taps)
    else:
        _check_out(argmax_out, shape, "max_pool2d_forward")
        if argmax_out.dtype != taps:
            raise ValueError(f"max_pool2d_forward: argmax_out is {argmax_out.dtype}, expected "
                             f"{np.dtype(taps)} for {k[0]}x{k[1]} windows")
        argmax = argmax_out
    if xp is not np and x.dtype.kind == "f":
        cuda.max_pool2d_forward(x, k, st, pad, y, argmax)
        return y, argmax
    low = _lowest(xp, x.dtype)
    start = -xp.inf if x.dtype.kind == "f" else low
    xpad = _padded(x, k, st, pad, shape[2:], start)
    taps = _windows(xpad, k, st, shape[2:], first=1)  # tap 0 is copied straight into y
    better = xp.empty(shape, dtype=bool)
    step = xp.empty(shape, dtype=argmax.dtype)
    # while the taps run, argmax holds the winning tap + 1 (0: none yet). Tap 0 against the
    # start value (-inf): y = max(start, tap 0) = tap 0 (NaN included), and argmax + 1 = 1
    # where tap 0 beats the start, else 0
    y[...] = xpad[(slice(None), slice(None)) + tap_slices(0, 0, _NO_DILATION, st, shape[2:])]
    xp.greater(y, start, out=better)
    argmax[...] = better
    for t in range(1, k[0] * k[1]):
        # argmax + 1 = t + 1 where tap t beats y: the taps so far are all below t + 1, so a
        # maximum with (t + 1) * better sets it; integer arithmetic, no (branchy) masked writes
        tap = taps[t - 1]
        xp.greater(tap, y, out=better)
        xp.multiply(better, t + 1, out=step, dtype=step.dtype)
        xp.maximum(argmax, step, out=argmax)
        xp.maximum(y, tap, out=y)
    argmax -= 1
    if x.dtype.kind == "f" and int(argmax.min()) < 0:
        y[argmax < 0] = low
    return y, argmax


def _flat_winners(argmax, x_shape, k, st, frame_hw):
    """Flat index into the ``(N, C, hp, wp)`` frame of each window's winning input."""
    xp = get_array_module(argmax)
    n, c = x_shape[:2]
    oh, ow = argmax.shape[2:]
    hp, wp = frame_hw
    corner = (xp.arange(oh) * (st[0] * wp))[:, None] + xp.arange(ow) * st[1]
    tap = (xp.arange(k[0]) * wp)[:, None] + xp.arange(k[1])
    plane = xp.arange(n * c) * (hp * wp)
    idx = tap.reshape(-1).take(argmax.reshape(n * c, oh, ow))
    idx += corner
    idx += plane[:, None, None]
    return idx.reshape(-1)


def max_pool2d_backward(
    dy: Any,
    argmax: Any,
    x_shape: Sequence[int],
    size: IntPair,
    stride: IntPair = 1,
    padding: IntPair = 0,
    out: Any = None,
    beta: float = 1.0,
) -> Any:
    """Input gradient of max pooling: ``dx[winner of window] += dy[window]``.

    Windows that tile the input exactly (stride = size, no padding, no partial window): one
    pass per tap, ``dx[tap t] = dy * (argmax == t)``. Otherwise one scatter of ``dy`` to the
    flat indices of the winners (a plain indexed add where windows cannot overlap, ``add.at``
    where they can).

    Args:
        dy: ``(N, C, oh, ow)`` output gradient.
        argmax: the tap indices :func:`max_pool2d_forward` returned.
        x_shape: ``(N, C, H, W)`` of the forward input; size/stride/padding as in forward.
        out: optional ``x_shape`` buffer the gradient is ADDED to.
        beta: ``out = dx + beta * out``: 1 adds (the default), 0 overwrites.

    Returns:
        ``dx`` (``out`` when given).
    """
    if beta not in (0.0, 1.0):
        raise ValueError(f"max_pool2d_backward: beta must be 0 or 1, got {beta}")
    if argmax.shape != dy.shape:
        raise ValueError(f"argmax shape {argmax.shape} does not match dy shape {dy.shape}")
    xp = get_array_module(dy)
    x_shape = tuple(int(v) for v in x_shape)
    k, st, pad = pair(size, "size", 1), pair(stride, "stride", 1), pair(padding, "padding")
    frame_hw = _frame_hw(x_shape, k, st, pad, dy.shape[2:])
    name = "max_pool2d_backward"
    if out is not None:
        _check_out(out, x_shape, name)
    if xp is not np and dy.dtype.kind == "f":
        if out is None:
            out, beta = xp.empty(x_shape, dtype=dy.dtype), 0.0
        target = out if out.flags.c_contiguous else xp.empty(x_shape, dtype=dy.dtype)
        cuda.max_pool2d_backward(dy, argmax, x_shape, k, st, pad, target,
                                 beta if target is out else 0.0)
        if target is not out:
            _accumulate(out, target, name, beta)
        return out
    tiles = (dy.shape[2] * k[0], dy.shape[3] * k[1]) == x_shape[2:] == frame_hw
    if st == k and pad == (0, 0) and tiles:
        return _tiled_max_backward(dy, argmax, x_shape, k, out, beta)
    if out is not None and beta == 0.0:
        out[...] = 0
    g = dy.reshape(-1)
    if int(argmax.min()) < 0:
        g = xp.where(argmax.reshape(-1) < 0, dy.dtype.type(0), g)
        argmax = xp.maximum(argmax, 0)
    idx = _flat_winners(argmax, x_shape, k, st, frame_hw)
    direct = frame_hw == x_shape[2:] and (
        out is None or (out.flags.c_contiguous and out.dtype == dy.dtype))
    if direct:
        target = xp.zeros(x_shape, dtype=dy.dtype) if out is None else out
    else:
        target = xp.zeros(x_shape[:2] + frame_hw, dtype=dy.dtype)
    flat = target.reshape(-1)
    if st[0] >= k[0] and st[1] >= k[1]:
        flat[idx] += g
    else:
        xp.add.at(flat, idx, g)
    if direct:
        return target
    return _crop_into(target, x_shape, pad, out, name)


def _tiled_max_backward(dy, argmax, x_shape, k, out, beta):
    """Max-pool input gradient for windows that tile the input: each input pixel is tap
    ``t = i * kx + j`` of exactly one window, so ``dx[:, :, i::ky, j::kx] = dy * (argmax == t)``
    (an empty window's ``-1`` matches no tap)."""
    xp = get_array_module(dy)
    if out is None:
        out, beta = xp.empty(x_shape, dtype=dy.dtype), 0.0
    won = xp.empty(dy.shape, dtype=bool)
    part = None if beta == 0.0 else xp.empty(dy.shape, dtype=dy.dtype)
    for i in range(k[0]):
        for j in range(k[1]):
            xp.equal(argmax, i * k[1] + j, out=won)
            tap = out[:, :, i :: k[0], j :: k[1]]
            if part is None:  # straight into the strided taps of out: no temporary
                xp.multiply(dy, won, out=tap)
            else:
                xp.multiply(dy, won, out=part)
                tap += part
    return out


def _avg_divisor(xp, img, k, st, pad, n_out, exclude_mode, dtype):
    """Per-output-position window length along one axis (Paddle's poolSize factor)."""
    start = xp.arange(n_out) * st - pad
    end = xp.minimum(start + k, img + pad)
    if exclude_mode:
        return (xp.minimum(end, img) - xp.maximum(start, 0)).clip(0).astype(dtype)
    return (end - start).astype(dtype)


def avg_pool2d_forward(
    x: Any,
    size: IntPair,
    stride: IntPair = 1,
    padding: IntPair = 0,
    ceil_mode: bool = True,
    exclude_mode: bool = True,
    out: Any = None,
) -> Any:
    """Average pooling: ``y = (sum of x over the clipped window) / count``.

    ``count`` is the number of image cells in the window when ``exclude_mode`` (Paddle's
    default), else the window clipped to the padded image ``[-pad, img + pad)`` (Paddle's
    older behaviour, padded cells count as zeros). An empty window gives 0.

    Args:
        x: ``(N, C, H, W)`` input; size/stride/padding/ceil_mode as in max pooling.
        exclude_mode: whether padded cells are left out of the divisor.
        out: optional ``(N, C, oh, ow)`` buffer for the output, overwritten.

    Returns:
        ``(N, C, oh, ow)`` output.

    Example:
        >>> import numpy as np
        >>> avg_pool2d_forward(np.arange(9.0).reshape(1, 1, 3, 3), 2, 2)[0, 0].tolist()
        [[2.0, 3.5], [6.5, 8.0]]
    """
    xp = get_array_module(x)
    shape = pool_output_shape(x.shape, size, stride, padding, ceil_mode)
    k, st, pad = pair(size, "size", 1), pair(stride, "stride", 1), pair(padding, "padding")
    taps = _windows(_padded(x, k, st, pad, shape[2:], 0), k, st, shape[2:])
    if out is None:
        y = xp.empty(shape, dtype=x.dtype)
    else:
        _check_out(out, shape, "avg_pool2d_forward")
        y = out
    taps.sum(axis=0, out=y)
    y /= _divisor(xp, x.shape, k, st, pad, shape[2:], exclude_mode, x.dtype)
    return y


def _divisor(xp, x_shape, k, st, pad, out_hw, exclude_mode, dtype):
    dh = _avg_divisor(xp, x_shape[2], k[0], st[0], pad[0], out_hw[0], exclude_mode, dtype)
    dw = _avg_divisor(xp, x_shape[3], k[1], st[1], pad[1], out_hw[1], exclude_mode, dtype)
    return xp.maximum(dh[:, None] * dw[None, :], 1)


def avg_pool2d_backward(
    dy: Any,
    x_shape: Sequence[int],
    size: IntPair,
    stride: IntPair = 1,
    padding: IntPair = 0,
    exclude_mode: bool = True,
    out: Any = None,
) -> Any:
    """Input gradient of average pooling: each window cell gets ``dy / count``.

    Args:
        dy: ``(N, C, oh, ow)`` output gradient.
        x_shape: ``(N, C, H, W)`` of the forward input; the rest as in forward.
        out: optional ``x_shape`` buffer the gradient is ADDED to.

    Returns:
        ``dx`` (``out`` when given).
    """
    xp = get_array_module(dy)
    k, st, pad = pair(size, "size", 1), pair(stride, "stride", 1), pair(padding, "padding")
    out_hw = dy.shape[2:]
    g = dy / _divisor(xp, tuple(x_shape), k, st, pad, out_hw, exclude_mode, dy.dtype)
    x_shape = tuple(int(v) for v in x_shape)
    direct = (
        _frame_hw(x_shape, k, st, pad, out_hw) == x_shape[2:] and st[0] >= k[0]
        and st[1] >= k[1] and out is not None and out.flags.c_contiguous
    )
    if not direct:
        return _scatter_taps(lambda i, j: g, x_shape, k, st, pad, out_hw, out,
                             "avg_pool2d_backward")
    _check_out(out, x_shape, "avg_pool2d_backward")
    for i in range(k[0]):
        for j in range(k[1]):
            sy, sx = tap_slices(i, j, _NO_DILATION, st, out_hw)
            out[:, :, sy, sx] += g
    return out
