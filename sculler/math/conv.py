"""Convolution kernels on NCHW arrays: output sizes, im2col/col2im and conv forward/backward.

A convolution is one GEMM per group on an unfolded input (im2col), as in PaddlePaddle's
``ExpandConvLayer``: ``y[f, (n, p)] = sum_k w[f, k] * cols[k, (n, p)]`` with
``k = (c, i, j)`` running over input channels of the group and the ``kh x kw`` filter taps.
The transposed convolution (Paddle's ``trans=True``, ``ConvTransLayer``) is the
backward-data pass of a convolution and vice versa.

Every stride / padding / dilation argument is an int (both axes) or a ``(y, x)`` pair.
Unfolding loops over the ``kh * kw`` filter taps (each a strided slice of the whole batch),
never over pixels, so the same code runs on numpy and cupy.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from sculler.backend import get_array_module, is_gpu_array
from sculler.math import cuda
from sculler.math.blas import col_sum, gemm, ones_vector

IntPair = int | Sequence[int]


def pair(value: IntPair, name: str, minimum: int = 0) -> tuple[int, int]:
    """Normalise an int or a ``(y, x)`` pair to a tuple of two ints ``>= minimum``."""
    if type(value) is tuple and len(value) == 2 and type(value[0]) is int \
            and type(value[1]) is int and value[0] >= minimum and value[1] >= minimum:
        return value  # already normalised (the layers' geometry, every batch)
    if isinstance(value, int | float) and not isinstance(value, bool):
        if int(value) != value:
            raise TypeError(f"{name} must be an integer or a (y, x) pair, got {value!r}")
        out = (int(value), int(value))
    else:
        try:
            if isinstance(value, str):
                raise TypeError
            out = tuple(int(v) for v in value)
        except (TypeError, ValueError):
            raise TypeError(
                f"{name} must be an integer or a (y, x) pair of integers, got {value!r}"
            ) from None
        if len(out) != 2:
            raise ValueError(f"{name} must be an integer or a (y, x) pair, got {value!r}")
    if min(out) < minimum:
        raise ValueError(f"{name} must be >= {minimum} on both axes, got {value!r}")
    return out


def geometry(stride: IntPair, padding: IntPair, dilation: IntPair = 1):
    """Validated ``(y, x)`` pairs for stride (>= 1), padding (>= 0) and dilation (>= 1)."""
    return pair(stride, "stride", 1), pair(padding, "padding"), pair(dilation, "dilation", 1)


def conv_output_size(
    img: int,
    filter: int,
    padding: int,
    stride: int,
    dilation: int = 1,
    caffe_mode: bool = True,
) -> int:
    """Output length along one axis, Paddle's ``cnn_output_size``.

    ``out = 1 + floor((img + 2*padding - ((filter-1)*dilation + 1)) / stride)``; with
    ``caffe_mode=False`` the floor becomes a ceil (Paddle's pooling convention, which keeps
    a last partial window).

    Example:
        >>> conv_output_size(28, 5, 0, 1), conv_output_size(7, 2, 0, 2, caffe_mode=False)
        (24, 4)
    """
    if stride < 1 or filter < 1 or dilation < 1 or padding < 0:
        raise ValueError(
            f"need filter >= 1, stride >= 1, dilation >= 1, padding >= 0; got filter={filter}, "
            f"stride={stride}, dilation={dilation}, padding={padding}"
        )
    span = img + 2 * padding - ((filter - 1) * dilation + 1)
    steps = span // stride if caffe_mode else -(-span // stride)
    out = 1 + steps
    if out < 1:
        raise ValueError(
            f"image size {img} with padding {padding} is smaller than the dilated filter "
            f"{(filter - 1) * dilation + 1}: no output; pad more or use a smaller filter"
        )
    return out


def conv_image_size(
    output: int, filter: int, padding: int, stride: int, dilation: int = 1, caffe_mode: bool = True
) -> int:
    """Image length a transposed convolution produces, Paddle's ``cnn_image_size``.

    ``img = (output - 1)*stride + (filter-1)*dilation + 1 - 2*padding`` (+1 when not caffe_mode).
    """
    img = (output - 1) * stride + (filter - 1) * dilation + 1 - 2 * padding
    if not caffe_mode:
        img += 1
    if img < 1:
        raise ValueError(
            f"transposed convolution of size {output} with filter {filter}, stride {stride}, "
            f"padding {padding} gives an empty image; reduce the padding"
        )
    return img


def tap_slices(i: int, j: int, dil, stride, out_hw) -> tuple[slice, slice]:
    """The (rows, columns) slices of a padded frame that filter or window tap ``(i, j)``
    reads for every output position: ``frame[sy, sx][oy, ox] = frame[oy*s + i*d, ...]``."""
    y0, x0 = i * dil[0], j * dil[1]
    return (
        slice(y0, y0 + stride[0] * (out_hw[0] - 1) + 1, stride[0]),
        slice(x0, x0 + stride[1] * (out_hw[1] - 1) + 1, stride[1]),
    )


def _tap_view(xp, xpad, axes, kernel, st, dil, out_hw):
    """A read-only view of every filter tap of the padded images ``xpad``: its two image
    ``axes`` become the output grid ``(oh, ow)`` and two axes ``(kh, kw)`` are appended, so
    ``view[..., oy, ox, ..., i, j] = xpad[..., oy*sy + i*dy, ox*sx + j*dx, ...]``.

    The unfolds copy it in one call: faster than one strided copy per tap at every shape
    measured (LeNet's conv2, ``(p, n)`` columns: 0.31 -> 0.26 ms; its conv1, per sample:
    0.27 -> 0.25 ms; padded, strided and dilated inputs 1-17 % faster)."""
    span = ((kernel[0] - 1) * dil[0] + 1, (kernel[1] - 1) * dil[1] + 1)
    view = xp.lib.stride_tricks.sliding_window_view(xpad, span, axis=axes)
    index = [slice(None)] * view.ndim
    for a, axis in enumerate(axes):
        index[axis] = slice(0, st[a] * (out_hw[a] - 1) + 1, st[a])
        index[view.ndim - 2 + a] = slice(None, None, dil[a])
    return view[tuple(index)]


def _out_hw(h, w, k, st, pad, dil, output_size):
    oh = conv_output_size(h, k[0], pad[0], st[0], dil[0])
    ow = conv_output_size(w, k[1], pad[1], st[1], dil[1])
    if output_size is None:
        return oh, ow
    ry, rx = (int(v) for v in output_size)
    if not (1 <= ry <= oh and 1 <= rx <= ow):
        raise ValueError(
            f"output_size {tuple(output_size)} must lie between (1, 1) and the full output "
            f"size {(oh, ow)} of a {h}x{w} image"
        )
    return ry, rx


def im2col(
    x: Any,
    kernel: IntPair,
    stride: IntPair = 1,
    padding: IntPair = 0,
    dilation: IntPair = 1,
    output_size: Sequence[int] | None = None,
    out: Any = None,
) -> Any:
    """Unfold image patches into the columns of a matrix (zero padding).

    ``cols[(c, i, j), (n, oy, ox)] = xpad[n, c, oy*sy + i*dy, ox*sx + j*dx]``; rows are ordered
    like ``w.reshape(F, -1)`` so a convolution is ``w2d @ cols``.

    Args:
        x: ``(N, C, H, W)`` images.
        kernel: filter size ``(kh, kw)`` or an int.
        stride, padding, dilation: ints or ``(y, x)`` pairs.
        output_size: ``(oh, ow)`` to unfold, at most the :func:`conv_output_size` default
            (a transposed convolution in non-caffe mode keeps fewer windows).
        out: optional buffer of ``C*kh*kw * N*oh*ow`` elements to unfold into.

    Returns:
        ``(C*kh*kw, N*oh*ow)`` array (a view of ``out`` when given).

    Example:
        >>> import numpy as np
        >>> im2col(np.arange(9.0).reshape(1, 1, 3, 3), 2).shape
        (4, 4)
    """
    xp = get_array_module(x)
    if x.ndim != 4:
        raise ValueError(f"im2col expects NCHW images (4 dims), got shape {x.shape}")
    kh, kw = pair(kernel, "kernel", 1)
    st, pad, dil = geometry(stride, padding, dilation)
    n, c, h, w = x.shape
    oh, ow = _out_hw(h, w, (kh, kw), st, pad, dil, output_size)
    if pad != (0, 0):
        xpad = xp.zeros((n, c, h + 2 * pad[0], w + 2 * pad[1]), dtype=x.dtype)
        xpad[:, :, pad[0] : pad[0] + h, pad[1] : pad[1] + w] = x
    else:
        xpad = x
    if out is None:
        cols = xp.empty((c, kh, kw, n, oh, ow), dtype=x.dtype)
    else:
        cols = out.reshape(c, kh, kw, n, oh, ow)
    # (n, c, oh, ow, kh, kw) taps -> (c, kh, kw, n, oh, ow)
    cols[...] = _tap_view(xp, xpad, (2, 3), (kh, kw), st, dil, (oh, ow)).transpose(1, 4, 5, 0, 2, 3)
    return cols.reshape(c * kh * kw, n * oh * ow)


def col2im(
    cols: Any,
    x_shape: Sequence[int],
    kernel: IntPair,
    stride: IntPair = 1,
    padding: IntPair = 0,
    dilation: IntPair = 1,
    output_size: Sequence[int] | None = None,
) -> Any:
    """Fold columns back into images, summing overlapping patches (the adjoint of im2col).

    ``x[n, c, y, x] = sum over (i, j, oy, ox) landing on (y, x) of cols[(c, i, j), (n, oy, ox)]``;
    contributions that land in the padding are dropped.

    Args:
        cols: ``(C*kh*kw, N*oh*ow)`` array as made by :func:`im2col`.
        x_shape: ``(N, C, H, W)`` of the images to rebuild.
        kernel, stride, padding, dilation, output_size: as for :func:`im2col`.

    Returns:
        ``(N, C, H, W)`` array, freshly allocated.
    """
    xp = get_array_module(cols)
    n, c, h, w = (int(v) for v in x_shape)
    kh, kw = pair(kernel, "kernel", 1)
    st, pad, dil = geometry(stride, padding, dilation)
    oh, ow = _out_hw(h, w, (kh, kw), st, pad, dil, output_size)
    if cols.shape != (c * kh * kw, n * oh * ow):
        raise ValueError(
            f"col2im: cols has shape {cols.shape}, expected {(c * kh * kw, n * oh * ow)} for "
            f"images {tuple(x_shape)} and kernel {(kh, kw)}"
        )
    c6 = cols.reshape(c, kh, kw, n, oh, ow)
    xpad = xp.zeros((n, c, h + 2 * pad[0], w + 2 * pad[1]), dtype=cols.dtype)
    for i in range(kh):
        for j in range(kw):
            sy, sx = tap_slices(i, j, dil, st, (oh, ow))
            xpad[:, :, sy, sx] += c6[:, i, j].transpose(1, 0, 2, 3)
    if pad == (0, 0):
        return xpad
    return xpad[:, :, pad[0] : pad[0] + h, pad[1] : pad[1] + w].copy()


def _batch_last(out_hw) -> bool:
    """Whether the conv kernels unfold with the batch axis last: faster for small outputs
    (runs of ``ow * N`` values), slower for large ones (the output transpose strides by N)."""
    return out_hw[0] * out_hw[1] <= 256


def _unfold(x, kernel, st, pad, dil, out_hw, out=None):
    """im2col with the batch axis last: ``(C*kh*kw, oh*ow*N)``, columns ordered ``(oy, ox, n)``.

    The convolution kernels use this layout because every tap then copies blocks of
    ``ow * N`` contiguous values (the public :func:`im2col` copies ``ow``-long runs, several
    times slower for the small images of a CNN's later layers).
    """
    xp = get_array_module(x)
    n, c, h, w = x.shape
    (kh, kw), (oh, ow) = kernel, out_hw
    if pad == (0, 0):
        xt = x.transpose(1, 2, 3, 0).copy()
    else:
        xt = xp.zeros((c, h + 2 * pad[0], w + 2 * pad[1], n), dtype=x.dtype)
        xt[:, pad[0] : pad[0] + h, pad[1] : pad[1] + w] = x.transpose(1, 2, 3, 0)
    if out is None:
        cols = xp.empty((c, kh, kw, oh, ow, n), dtype=x.dtype)
    else:
        cols = out.reshape(c, kh, kw, oh, ow, n)
    # (c, oh, ow, n, kh, kw) taps -> (c, kh, kw, oh, ow, n)
    cols[...] = _tap_view(xp, xt, (1, 2), kernel, st, dil, out_hw).transpose(0, 4, 5, 1, 2, 3)
    return cols.reshape(c * kh * kw, oh * ow * n)


def _gemm_fold(w, dy_cols, x_shape, kernel, st, pad, dil, out_hw):
    """Adjoint of :func:`_unfold` applied to ``w2d^T @ dy2d``, one filter row ``i`` at a time.

    Each row's ``(C/groups * kw, oh*ow*N)`` GEMM result stays in cache for its ``kw`` tap adds
    (the whole ``(C*kh*kw, oh*ow*N)`` product would make a round trip through memory).
    Returns the ``(N, C, H, W)`` view of the summed patches."""
    xp = get_array_module(dy_cols)
    n, c, h, width = x_shape
    (kh, kw), (oh, ow) = kernel, out_hw
    groups, fg = dy_cols.shape[0], w.shape[0] // dy_cols.shape[0]
    cg = c // groups
    xt = xp.zeros((c, h + 2 * pad[0], width + 2 * pad[1], n), dtype=xp.result_type(w, dy_cols))
    for g in range(groups):
        wg, xg = w[g * fg : (g + 1) * fg], xt[g * cg : (g + 1) * cg]
        for i in range(kh):
            w_row = wg[:, :, i, :].reshape(fg, cg * kw)  # rows (c, j) of filter row i
            part = (w_row.T @ dy_cols[g]).reshape(cg, kw, oh, ow, n)
            for j in range(kw):
                sy, sx = tap_slices(i, j, dil, st, out_hw)
                xg[:, sy, sx] += part[:, j]
    return xt[:, pad[0] : pad[0] + h, pad[1] : pad[1] + width].transpose(3, 0, 1, 2)


def _gpu_unfold(x, kernel, st, pad, dil, out_hw, out=None, bias_row: bool = False):
    """:func:`_unfold` / :func:`im2col` on CuPy arrays (whichever column order
    :func:`_batch_last` picks) by one gathering kernel, which also writes the row of ones
    of ``bias_row``."""
    n, c = x.shape[:2]
    shape = (c * kernel[0] * kernel[1] + bias_row, n * out_hw[0] * out_hw[1])
    cols = get_array_module(x).empty(shape, dtype=x.dtype) if out is None else out.reshape(
        shape)
    cuda.unfold(x, kernel, st, pad, dil, tuple(out_hw), _batch_last(out_hw), cols)
    return cols


def conv2d_unfold(
    x: Any,
    w_shape: Sequence[int],
    stride: IntPair = 1,
    padding: IntPair = 0,
    dilation: IntPair = 1,
    out: Any = None,
    output_size: Sequence[int] | None = None,
    bias_row: bool = False,
) -> Any:
    """The input unfolded the way the convolution kernels multiply it.

    ``(C*kh*kw, N*oh*ow)``: the rows of :func:`im2col`, the columns ordered ``(oy, ox, n)``
    for small outputs (see :func:`_batch_last`) and ``(n, oy, ox)`` otherwise. A layer keeps
    it from the forward pass and hands it to :func:`conv2d_forward` and
    :func:`conv2d_backward_filter` (``cols=``) so the input is unfolded once per batch.

    Args:
        x: ``(N, C, H, W)`` input; w_shape: ``(F, C/groups, kh, kw)``.
        out: optional buffer of ``C*kh*kw * N*oh*ow`` elements (one row more with
            ``bias_row``).
        output_size: as for :func:`conv2d_forward`.
        bias_row: append a row of ones, so that :func:`conv2d_forward` adds its ``bias``
            inside the GEMM (``[w | b] @ [cols; 1]``) and :func:`conv2d_backward_filter`
            sums ``dy`` for the bias gradient in its GEMM (``bias_grad=``); only where
            :func:`conv2d_bias_in_gemm` says so.
    """
    kh, kw = int(w_shape[2]), int(w_shape[3])
    st, pad, dil = geometry(stride, padding, dilation)
    out_hw = _out_hw(x.shape[2], x.shape[3], (kh, kw), st, pad, dil, output_size)
    if get_array_module(x) is not np:
        return _gpu_unfold(x, (kh, kw), st, pad, dil, out_hw, out, bias_row)
    unfold = _unfold if _batch_last(out_hw) else im2col
    if not bias_row:
        return unfold(x, (kh, kw), st, pad, dil, out_hw, out)
    rows, columns = x.shape[1] * kh * kw, x.shape[0] * out_hw[0] * out_hw[1]
    ext = np.empty((rows + 1, columns), dtype=x.dtype) if out is None else out.reshape(
        rows + 1, columns)
    unfold(x, (kh, kw), st, pad, dil, out_hw, ext[:rows])
    ext[rows] = 1
    return ext


def conv2d_bias_in_gemm(out_hw: Sequence[int], groups: int) -> bool:
    """Whether the GEMMs of an ``(oh, ow)`` output can handle a shared bias through a
    :func:`conv2d_unfold` ``bias_row`` (ungrouped convolutions): the forward GEMM adds it
    (no pass of its own over the output) and the filter-gradient GEMM sums ``dy`` for its
    gradient (``conv2d_backward_filter(bias_grad=)``: no pass of its own over ``dy``)."""
    return groups == 1


def _per_sample_filter_grad(out_hw, groups: int) -> bool:
    return groups == 1 and not _batch_last(out_hw)


def conv2d_dy_columns_needed(out_hw: Sequence[int], groups: int, input_grad: bool,
                             on_gpu: bool = False) -> bool:
    """Whether the backward kernels read :func:`conv2d_dy_columns` for an ``(oh, ow)`` output
    (on the host, the filter gradient of a large ungrouped output multiplies ``dy`` as it
    is)."""
    return input_grad or on_gpu or not _per_sample_filter_grad(tuple(out_hw), groups)


def conv2d_dy_columns(dy: Any, groups: int = 1, out: Any = None, bias_grad: Any = None,
                      bias_beta: float = 1.0) -> Any:
    """``dy`` as ``(groups, F/groups, N*oh*ow)`` in the column order of
    :func:`conv2d_unfold`; computed once, it serves both backward kernels (``dy_cols=``).
    ``out``: an optional C-contiguous buffer of that shape, written (else one is allocated).
    ``bias_grad``: an optional ``F``-element buffer for a shared bias's gradient,
    ``bias_grad = db + bias_beta * bias_grad`` (:func:`channel_sums`); on the GPU the same
    launch writes both."""
    shape = (groups, dy.shape[1] // groups, dy.size // dy.shape[1])
    if (bias_grad is not None and out is not None and is_gpu_array(dy)
            and bias_grad.flags.c_contiguous and out.shape == shape
            and cuda.dy_columns_and_channel_sums(dy, out, _batch_last(dy.shape[2:]),
                                                 bias_grad.reshape(-1), bias_beta)):
        return out
    cols = _dy_matrix(dy, groups, out)
    if bias_grad is not None:
        channel_sums(dy, bias_grad, bias_beta, cols.reshape(dy.shape[1], -1))
    return cols


def _check_cols(cols, rows: int, columns: int, name: str) -> None:
    if cols.shape != (rows, columns):
        raise ValueError(f"{name}: cols has shape {cols.shape}, expected {(rows, columns)}")


def _check_conv(x_shape, w_shape, groups: int) -> None:
    if len(x_shape) != 4 or len(w_shape) != 4:
        raise ValueError(
            f"convolution expects NCHW input and (F, C/groups, kh, kw) weights, got input "
            f"{tuple(x_shape)} and weight {tuple(w_shape)}"
        )
    if groups < 1 or x_shape[1] % groups or w_shape[0] % groups:
        raise ValueError(
            f"groups={groups} must divide both the input channels {x_shape[1]} and the "
            f"filters {w_shape[0]}"
        )
    if w_shape[1] * groups != x_shape[1]:
        raise ValueError(
            f"weight shape {tuple(w_shape)} expects {w_shape[1] * groups} input channels "
            f"(C/groups={w_shape[1]}, groups={groups}), but the input has {x_shape[1]}"
        )


def _accumulate(out, value, name: str, beta: float = 1.0):
    """``out = value + beta * out`` (``value`` itself without ``out``)."""
    if out is None:
        return value
    if out.shape != value.shape:
        raise ValueError(f"{name}: out has shape {out.shape}, expected {value.shape}")
    if beta == 0.0:
        out[...] = value
        return out
    if beta != 1.0:
        out *= beta
    out += value
    return out


def channel_sums(dy: Any, out: Any, beta: float = 1.0, dy_cols: Any = None) -> Any:
    """A shared bias's gradient: ``out = sum over n, y, x of dy[n, c, y, x] + beta * out``.

    A matrix-vector product with a ones vector (on ``dy`` as ``(N*C, H*W)`` rows, or on
    :func:`conv2d_dy_columns` when given), then a sum over the batch: a fifth of the time of
    numpy's reduction over three axes on two BLAS threads, half of it on one.

    Args:
        dy: ``(N, C, H, W)`` output gradient.
        out: ``C`` elements (any shape), written (``beta = 0``) or added to.
        dy_cols: optional :func:`conv2d_dy_columns` of ``dy`` (``C`` rows).
    """
    n, c = dy.shape[:2]
    rows = dy.reshape(n * c, -1) if dy_cols is None else dy_cols.reshape(c, -1)
    ones = ones_vector(rows.shape[1], rows.dtype) if type(rows) is np.ndarray else (
        get_array_module(dy).ones(rows.shape[1], dtype=rows.dtype))
    sums = rows @ ones
    if dy_cols is None:
        sums = sums.reshape(n, c).sum(axis=0)
    _accumulate(out.reshape(-1), sums, "channel_sums", beta)
    return out


def conv2d_forward(
    x: Any,
    w: Any,
    stride: IntPair = 1,
    padding: IntPair = 0,
    dilation: IntPair = 1,
    groups: int = 1,
    out: Any = None,
    output_size: Sequence[int] | None = None,
    cols: Any = None,
    bias: Any = None,
    work: Any = None,
) -> Any:
    """2-D convolution (cross-correlation), one GEMM per group.

    ``y[n, f, oy, ox] = sum_{c in group(f), i, j} w[f, c, i, j] *
    xpad[n, c, oy*sy + i*dy, ox*sx + j*dx] (+ bias[f])``, output size from
    :func:`conv_output_size` (caffe mode).

    Args:
        x: ``(N, C, H, W)`` input.
        w: ``(F, C/groups, kh, kw)`` filters; filter ``f`` sees channel group ``f // (F/groups)``.
        stride, padding, dilation: ints or ``(y, x)`` pairs.
        groups: number of channel groups.
        out: optional ``(N, F, oh, ow)`` buffer, overwritten.
        output_size: optional ``(oh, ow)`` no larger than the default (see :func:`im2col`).
        cols: optional :func:`conv2d_unfold` of ``x`` (then ``x`` is not unfolded again);
            with its ``bias_row`` the GEMM adds ``bias``.
        bias: optional ``F`` values (any shape) added per filter.
        work: optional ``(F, N*oh*ow)`` buffer for the GEMM's result on the GPU (else one is
            allocated).

    Returns:
        ``(N, F, oh, ow)`` output (``out`` when given).

    Example:
        >>> import numpy as np
        >>> conv2d_forward(np.ones((2, 3, 7, 5)), np.ones((4, 3, 3, 3)), padding=1).shape
        (2, 4, 7, 5)
    """
    xp = get_array_module(x, w)
    _check_conv(x.shape, w.shape, groups)
    nf, cg, kh, kw = w.shape
    n = x.shape[0]
    st, pad, dil = geometry(stride, padding, dilation)
    oh, ow = _out_hw(x.shape[2], x.shape[3], (kh, kw), st, pad, dil, output_size)
    last = _batch_last((oh, ow))
    rows = x.shape[1] * kh * kw
    if cols is None:
        cols = (_unfold if last else im2col)(x, (kh, kw), st, pad, dil, (oh, ow))
    elif cols.shape[0] == rows + 1 and bias is not None and conv2d_bias_in_gemm((oh, ow),
                                                                                 groups):
        _check_cols(cols, rows + 1, n * oh * ow, "conv2d_forward")
    else:
        _check_cols(cols, rows, n * oh * ow, "conv2d_forward")
    w2 = w.reshape(groups, nf // groups, cg * kh * kw)
    shape = (n, nf, oh, ow)
    if out is not None and out.shape != shape:
        raise ValueError(f"conv2d_forward: out has shape {out.shape}, expected {shape}")
    if xp is not np and groups == 1:
        # one GEMM of the filters with the columns (less their bias row), then one kernel that
        # writes it in NCHW order with the bias: no [w | b] made a batch, no transposing copy
        prod = xp.empty((nf, cols.shape[1]), dtype=cols.dtype) if work is None else work
        gemm(w.reshape(nf, rows), cols[:rows], prod)
        out = xp.empty(shape, dtype=prod.dtype) if out is None else out
        cuda.columns_to_nchw(prod, bias, last, out)
        return out
    # with the bias row of cols (groups == 1), [w2 | b] @ [cols; 1] adds the bias too
    in_gemm = cols.shape[0] == rows + 1
    if in_gemm:
        w2 = xp.concatenate([w2[0], bias.reshape(nf, 1)], axis=1)[None]
    if not last and groups == 1 and xp is np:
        # columns ordered (n, p): one GEMM per sample writes y[n] = w2 @ cols[:, n] straight
        # into the NCHW output (no transposing copy of the result)
        y = xp.empty(shape, dtype=xp.result_type(w, cols)) if out is None else out
        per_sample = cols.reshape(w2.shape[2], n, oh * ow).transpose(1, 0, 2)
        xp.matmul(w2[0], per_sample, out=y.reshape(n, nf, oh * ow))
        if bias is not None and not in_gemm:
            y += bias.reshape(1, nf, 1, 1)
        return y
    c3 = cols.reshape(groups, w2.shape[2], oh * ow * n)
    y = _grouped_gemm(xp, w2, c3, False, False)  # (groups, F/groups, P*N or N*P)
    if last:
        y = y.reshape(nf, oh, ow, n).transpose(3, 0, 1, 2)
    else:
        y = y.reshape(nf, n, oh, ow).transpose(1, 0, 2, 3)
    if out is None:
        out = xp.ascontiguousarray(y)
    else:
        out[...] = y
    if bias is not None and not in_gemm:
        out += bias.reshape(1, nf, 1, 1)
    return out


def _grouped_gemm(xp, a, b, trans_a: bool, trans_b: bool):
    """``out[g] = op(a[g]) @ op(b[g])``, one 2-D BLAS GEMM per group.

    numpy's batched ``matmul`` does not reach BLAS for every stride pattern (a 25 x 36864
    transposed operand ran ~100x slower), so each group is a plain 2-D product.
    """
    outs = []
    for g in range(a.shape[0]):
        ag = a[g].T if trans_a else a[g]
        bg = b[g].T if trans_b else b[g]
        outs.append(ag @ bg)
    return outs[0][None] if len(outs) == 1 else xp.stack(outs)


def _dy_matrix(dy, groups: int, out=None):
    """``dy`` as ``(groups, F/groups, columns)`` in the column order of the unfolding (written
    into the C-contiguous ``out`` of that shape when given)."""
    nf = dy.shape[1]
    axes = (1, 2, 3, 0) if _batch_last(dy.shape[2:]) else (1, 0, 2, 3)
    if out is None:
        return dy.transpose(axes).reshape(groups, nf // groups, -1)
    shape = (groups, nf // groups, dy.size // nf)
    if out.shape != shape or not out.flags.c_contiguous:
        raise ValueError(f"conv2d_dy_columns: out has shape {out.shape}, expected a "
                         f"C-contiguous {shape}")
    out.reshape(tuple(dy.shape[a] for a in axes))[...] = dy.transpose(axes)
    return out


def conv2d_backward_data(
    dy: Any,
    w: Any,
    x_shape: Sequence[int],
    stride: IntPair = 1,
    padding: IntPair = 0,
    dilation: IntPair = 1,
    groups: int = 1,
    out: Any = None,
    beta: float = 1.0,
    dy_cols: Any = None,
    work: Any = None,
) -> Any:
    """Gradient of :func:`conv2d_forward` with respect to its input.

    ``dx = col2im(w2d^T @ dy2d)`` per group.

    Args:
        dy: ``(N, F, oh, ow)`` output gradient.
        w: ``(F, C/groups, kh, kw)`` filters.
        x_shape: ``(N, C, H, W)`` of the forward input (needed: with stride > 1 several
            image sizes give the same output size).
        out: optional ``(N, C, H, W)`` buffer; the gradient is ADDED to it (``+=``), since an
            input feeding several layers sums their gradients.
        beta: ``out = dx + beta * out``: 1 adds (the default), 0 overwrites.
        dy_cols: optional :func:`conv2d_dy_columns` of ``dy``.
        work: optional ``(C*kh*kw, N*oh*ow)`` buffer for the GEMM's result on the GPU
            (ungrouped; else one is allocated).

    Returns:
        ``dx`` (``out`` when given).
    """
    xp = get_array_module(dy, w)
    _check_conv(x_shape, w.shape, groups)
    nf, cg, kh, kw = w.shape
    w2 = w.reshape(groups, nf // groups, cg * kh * kw)
    if dy_cols is None:
        dy_cols = _dy_matrix(dy, groups)
    st, pad, dil = geometry(stride, padding, dilation)
    x_shape = tuple(int(v) for v in x_shape)
    _out_hw(x_shape[2], x_shape[3], (kh, kw), st, pad, dil, dy.shape[2:])
    batch_last = _batch_last(dy.shape[2:])
    if xp is np and batch_last:
        dx = _gemm_fold(w, dy_cols, x_shape, (kh, kw), st, pad, dil, dy.shape[2:])
    else:  # one GEMM, then the fold (on the GPU one gathering kernel, no per-tap adds)
        if xp is not np and groups == 1:
            dcols = (xp.empty((w2.shape[2], dy_cols.shape[2]), dtype=dy_cols.dtype)
                     if work is None else work)
            gemm(w2[0].T, dy_cols[0], dcols)
        else:
            dcols = _grouped_gemm(xp, w2, dy_cols, True, False).reshape(groups * cg * kh * kw,
                                                                        -1)
        if xp is np:
            dx = col2im(dcols, x_shape, (kh, kw), st, pad, dil, dy.shape[2:])
        elif (out is not None and out.shape == x_shape and out.flags.c_contiguous
              and out.dtype == dcols.dtype):  # the fold adds into out itself
            return cuda.col2im(dcols, x_shape, (kh, kw), st, pad, dil, tuple(dy.shape[2:]),
                               batch_last, out=out, beta=beta)
        else:
            dx = cuda.col2im(dcols, x_shape, (kh, kw), st, pad, dil, tuple(dy.shape[2:]),
                             batch_last)
    if out is None:
        return xp.ascontiguousarray(dx)
    return _accumulate(out, dx, "conv2d_backward_data", beta)


def conv2d_backward_filter(
    x: Any,
    dy: Any,
    w_shape: Sequence[int],
    stride: IntPair = 1,
    padding: IntPair = 0,
    dilation: IntPair = 1,
    groups: int = 1,
    out: Any = None,
    beta: float = 1.0,
    cols: Any = None,
    dy_cols: Any = None,
    bias_grad: Any = None,
    bias_beta: float = 1.0,
) -> Any:
    """Gradient of :func:`conv2d_forward` with respect to its filters (and shared bias).

    ``dw2d = dy2d @ cols^T`` per group, ``cols = im2col(x)``; ``db[f] = sum of dy[:, f]``.

    Args:
        x: ``(N, C, H, W)`` forward input.
        dy: ``(N, F, oh, ow)`` output gradient.
        w_shape: ``(F, C/groups, kh, kw)``.
        out: optional buffer of shape ``w_shape``; the gradient is ADDED to it (``+=``),
            because parameter gradients accumulate over shared uses and batches.
        beta: ``out = dw + beta * out``: 1 adds (the default), 0 overwrites.
        cols, dy_cols: optional :func:`conv2d_unfold` of ``x`` (kept from the forward pass)
            and :func:`conv2d_dy_columns` of ``dy``.
        bias_grad: optional ``F``-element buffer (any shape) for the shared bias's gradient,
            ``bias_grad = db + bias_beta * bias_grad``: summed by the filter GEMM from the
            row of ones of ``cols`` (``conv2d_unfold(bias_row=True)``), else by
            :func:`channel_sums`.

    Returns:
        ``dw`` (``out`` when given).
    """
    xp = get_array_module(x, dy)
    w_shape = tuple(int(v) for v in w_shape)
    _check_conv(x.shape, w_shape, groups)
    nf, cg, kh, kw = w_shape
    st, pad, dil = geometry(stride, padding, dilation)
    out_hw = _out_hw(x.shape[2], x.shape[3], (kh, kw), st, pad, dil, dy.shape[2:])
    n_cols = x.shape[0] * out_hw[0] * out_hw[1]
    rows = x.shape[1] * kh * kw
    if cols is None:
        cols = (_unfold if _batch_last(out_hw) else im2col)(x, (kh, kw), st, pad, dil, out_hw)
    elif cols.shape[0] == rows + 1 and conv2d_bias_in_gemm(out_hw, groups):
        _check_cols(cols, rows + 1, n_cols, "conv2d_backward_filter")
        if bias_grad is None:
            cols = cols[:rows]  # the bias row of conv2d_unfold(bias_row=True)
    else:
        _check_cols(cols, rows, n_cols, "conv2d_backward_filter")
    if bias_grad is not None and cols.shape[0] == rows:  # no row of ones to sum dy with
        channel_sums(dy, bias_grad, bias_beta, dy_cols)
        bias_grad = None
    return _filter_gemms(xp, cols, dy, w_shape, groups, out_hw, out, beta, dy_cols,
                         bias_grad, bias_beta)


def _filter_gemms(xp, cols, dy, w_shape, groups, out_hw, out, beta, dy_cols, bias_grad,
                  bias_beta):
    """The GEMMs of :func:`conv2d_backward_filter` on checked ``cols``: with their bias row
    (``groups == 1``) when ``bias_grad`` is given, the product's last column is the bias
    gradient."""
    nf, cg, kh, kw = w_shape
    n = dy.shape[0]
    k = cg * kh * kw
    if _per_sample_filter_grad(out_hw, groups) and xp is np:
        # columns ordered (n, p): one GEMM per sample on dy's own NCHW layout, then a sum
        # over the samples (OpenBLAS runs the single (F, N*P) x (N*P, C*kh*kw) product with
        # its huge inner dimension about 3x slower, and dy needs no transposing copy)
        per_sample = cols.reshape(cols.shape[0], n, -1).transpose(1, 2, 0)
        prods = xp.matmul(dy.reshape(n, nf, -1), per_sample)
        if bias_grad is not None:
            sums = prods.sum(axis=0)  # (F, C*kh*kw + 1)
            _accumulate(bias_grad.reshape(-1), sums[:, k], "conv2d_backward_filter", bias_beta)
            return _accumulate(out, sums[:, :k].reshape(w_shape), "conv2d_backward_filter",
                               beta)
        if out is not None and beta == 0.0 and out.shape == w_shape:
            prods.sum(axis=0, out=out.reshape(nf, -1))
            return out
        return _accumulate(out, prods.sum(axis=0).reshape(w_shape), "conv2d_backward_filter",
                           beta)
    if dy_cols is None:
        dy_cols = _dy_matrix(dy, groups)
    if (xp is not np and bias_grad is not None and out is not None and out.shape == w_shape
            and out.flags.c_contiguous):
        # on the GPU two cuBLAS calls that accumulate: dW = dy (cols less the bias row)^T and
        # db = dy 1, where the product with the bias row and two adds are three launches
        gemm(dy_cols[0], cols[:k].T, out.reshape(nf, k), beta)
        col_sum(dy_cols[0].T, bias_grad, bias_beta)
        return out
    if bias_grad is not None:  # groups == 1: [cols; 1] @ dy^T, its last row the bias's
        prod = cols @ dy_cols[0].T if cols.shape[0] > nf else (dy_cols[0] @ cols.T).T
        _accumulate(bias_grad.reshape(-1), prod[k], "conv2d_backward_filter", bias_beta)
        if out is not None and out.shape == w_shape and out.flags.c_contiguous:
            _accumulate(out.reshape(nf, k), prod[:k].T, "conv2d_backward_filter", beta)
            return out
        return _accumulate(out, prod[:k].T.reshape(w_shape), "conv2d_backward_filter", beta)
    c3 = cols.reshape(groups, k, -1)
    if groups == 1 and out is not None and out.shape == w_shape and out.flags.c_contiguous:
        if c3.shape[1] > nf and xp is np:
            # cols @ dy^T: OpenBLAS splits the longer row count over its threads better
            # (the (500, 4096) x (4096, 50) product of a LeNet conv ran in 0.8x the time);
            # on the GPU one accumulating cuBLAS call, not a product and an add
            _accumulate(out.reshape(nf, -1), (c3[0] @ dy_cols[0].T).T, "conv2d_backward_filter",
                        beta)
        else:
            gemm(dy_cols[0], c3[0].T, out.reshape(nf, -1), beta)
        return out
    dw = _grouped_gemm(xp, dy_cols, c3, False, True).reshape(w_shape)
    return _accumulate(out, dw, "conv2d_backward_filter", beta)


def conv2d_transpose_output_shape(
    x_shape: Sequence[int],
    w_shape: Sequence[int],
    stride: IntPair = 1,
    padding: IntPair = 0,
    dilation: IntPair = 1,
    groups: int = 1,
    caffe_mode: bool = True,
) -> tuple[int, int, int, int]:
    """``(N, F, H', W')`` of a transposed convolution, sizes from :func:`conv_image_size`."""
    st, pad, dil = geometry(stride, padding, dilation)
    n, _, h, w = x_shape
    kh, kw = w_shape[2], w_shape[3]
    return (
        int(n),
        int(w_shape[1]) * groups,
        conv_image_size(h, kh, pad[0], st[0], dil[0], caffe_mode),
        conv_image_size(w, kw, pad[1], st[1], dil[1], caffe_mode),
    )


def conv2d_transpose_forward(
    x: Any,
    w: Any,
    stride: IntPair = 1,
    padding: IntPair = 0,
    dilation: IntPair = 1,
    groups: int = 1,
    caffe_mode: bool = True,
    out: Any = None,
) -> Any:
    """Transposed convolution ("deconvolution", Paddle's ``trans=True``).

    It is the input-gradient of a convolution that maps ``F`` channels to ``C``:
    ``y = conv2d_backward_data(x, w, y_shape)``, so ``y[n, f, oy*sy + i*dy - py, ...] +=
    w[c, f', i, j] * x[n, c, oy, ox]``.

    Args:
        x: ``(N, C, H, W)`` input.
        w: ``(C, F/groups, kh, kw)`` filters (the same layout as torch's ``conv_transpose2d``).
        caffe_mode: ``False`` adds one row/column, inverting the ceil output size.
        out: optional ``(N, F, H', W')`` buffer, overwritten.

    Returns:
        ``(N, F, H', W')`` with sizes from :func:`conv2d_transpose_output_shape`.
    """
    y_shape = conv2d_transpose_output_shape(x.shape, w.shape, stride, padding, dilation, groups,
                                            caffe_mode)
    y = conv2d_backward_data(x, w, y_shape, stride, padding, dilation, groups)
    if out is None:
        return y
    if out.shape != y.shape:
        raise ValueError(f"conv2d_transpose_forward: out has shape {out.shape}, expected {y.shape}")
    out[...] = y
    return out


def conv2d_transpose_backward_data(
    dy: Any,
    w: Any,
    x_shape: Sequence[int],
    stride: IntPair = 1,
    padding: IntPair = 0,
    dilation: IntPair = 1,
    groups: int = 1,
    out: Any = None,
) -> Any:
    """Input gradient of :func:`conv2d_transpose_forward`: a plain convolution of ``dy``.

    ``x_shape`` is the ``(N, C, H, W)`` forward input; ``out`` (a buffer of that shape) is
    ADDED to when given.
    """
    dx = conv2d_forward(dy, w, stride, padding, dilation, groups, output_size=x_shape[2:])
    return _accumulate(out, dx, "conv2d_transpose_backward_data")


def conv2d_transpose_backward_filter(
    x: Any,
    dy: Any,
    w_shape: Sequence[int],
    stride: IntPair = 1,
    padding: IntPair = 0,
    dilation: IntPair = 1,
    groups: int = 1,
    out: Any = None,
) -> Any:
    """Filter gradient of :func:`conv2d_transpose_forward` (``out`` is ADDED to when given).

    With ``y = conv^T(x; w)``, ``<dy, y> = <conv(dy; w), x>``, so the gradient is the
    convolution filter gradient with ``dy`` as input and ``x`` as output gradient.
    """
    return conv2d_backward_filter(dy, x, w_shape, stride, padding, dilation, groups, out)
