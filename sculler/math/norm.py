"""Normalisation kernels: batch norm, cross-map response norm (LRN) and maxout.

Semantics follow PaddlePaddle's engine:

- ``BatchNormalizationLayer``: statistics per channel over ``N*H*W`` (or over ``N`` for
  ``(N, C)`` input), biased variance, ``epsilon = 1e-5``, moving statistics updated as
  ``moving = moving * fraction + batch * (1 - fraction)`` (``moving_average_fraction``,
  default 0.9) with the biased batch variance.
- ``CrossMapNormal`` (``img_cmrnorm_layer``, ``cmrnorm-projection``):
  ``y = x * (1 + scale/size * sum of x^2 over `size` neighbouring channels)^(-power)``; the
  user's ``scale`` is divided by ``size`` (``parse_norm``), and the window of channel ``c``
  is ``[c - (size-1)//2, c - (size-1)//2 + size)`` clipped to the channels.
- ``MaxOutLayer``: output channel ``o`` is the max of input channels
  ``o*groups ... o*groups + groups - 1``.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from sculler.backend import get_array_module
from sculler.math.blas import ones_vector
from sculler.math.jit import absent, compilable
from sculler.math.parallel import run_ranges
from sculler.math.workspace import Alloc, work_array

BN_EPSILON = 1e-5


def _check_bn_input(x) -> None:
    if x.ndim not in (2, 4):
        raise ValueError(f"batch norm expects (N, C) or (N, C, H, W) input, got shape {x.shape}")


def _samples(a):
    """``a`` viewed as ``(N, C*H*W)``: one row per sample."""
    return a.reshape(a.shape[0], -1)


def _channel_row(v, x):
    """The ``(C,)`` vector ``v`` repeated over each channel's positions: a ``(1, C*H*W)`` row
    that broadcasts over :func:`_samples` of ``x``. NumPy 2.4 runs a binary ufunc with such a
    row up to 1.6x faster than with a ``(1, C, 1, 1)`` operand (0.069 against 0.110 ms on
    2 MB of float32; equal on small images), and repeating ``v`` costs about 2 us."""
    positions = math.prod(x.shape[2:])
    return (get_array_module(v).repeat(v, positions) if positions > 1 else v).reshape(1, -1)


def _channel_dots(a, b=None):
    """``sum over n and positions of a * b`` per channel (of ``a`` when ``b`` is None).

    An image is read as ``(N*C, H*W)`` rows, one dot product each (NumPy's batched matmul:
    single-threaded BLAS dots, twice as fast as ``einsum`` or a product and a reduction; a
    GEMV with a ones vector is faster alone, but its BLAS threads then spin against the
    workers that run the convolutions), then summed over the batch."""
    xp = get_array_module(a)
    n, c = a.shape[:2]
    if a.ndim == 2:
        return a.sum(axis=0) if b is None else xp.einsum("nc,nc->c", a, b)
    rows = a.reshape(n * c, 1, -1)
    if b is None:  # a vector operand: matmul broadcasts it over the rows
        col = (ones_vector(rows.shape[2], a.dtype) if xp is np
               else xp.ones(rows.shape[2], dtype=a.dtype))
    else:
        col = b.reshape(n * c, -1, 1)
    return xp.matmul(rows, col).reshape(n, c).sum(axis=0)


def compiled_images(*arrays: Any) -> bool:
    """Whether batch norm of these arrays runs on the compiled kernels (which can apply a
    relu in the same pass: ``batch_norm_forward(relu=True)``)."""
    return _compiled(*arrays) is not None


def _compiled(*arrays: Any):
    """The compiled kernels (:mod:`sculler.math.norm_kernels`) when every array is a NumPy
    float image ``(N, C, H, W)`` and numba is installed, else None (the NumPy passes)."""
    if not compilable(*arrays) or any(a.ndim != 4 for a in arrays):
        return None
    from sculler.math import norm_kernels  # noqa: PLC0415

    return norm_kernels


def _images(a):
    """``a`` viewed as ``(N, C, H*W)``."""
    return a.reshape(a.shape[0], a.shape[1], -1)


def batch_norm_forward(
    x: Any,
    scale: Any,
    bias: Any,
    moving_mean: Any,
    moving_var: Any,
    use_global_stats: bool = False,
    moving_average_fraction: float = 0.9,
    epsilon: float = BN_EPSILON,
    out: Any = None,
    alloc: Alloc | None = None,
    relu: bool = False,
) -> tuple[Any, Any, Any]:
    """Batch normalisation: ``y = scale * (x - mean) / sqrt(var + eps) + bias`` per channel.

    In training (``use_global_stats=False``) ``mean``/``var`` are the batch statistics over
    every axis but the channel one, and ``moving_mean``/``moving_var`` are UPDATED IN PLACE:
    ``m = m * f + batch * (1 - f)``. With ``use_global_stats=True`` (inference, or Paddle's
    ``use_global_stats``) the moving statistics are used and left untouched.

    Four passes over the data: the channel sums, ``x - mean`` (into a work buffer), the sums
    of its squares (batched dot products) and ``y = (x - mean) * (scale * inv_std) + bias``
    (two broadcast passes); nothing batch-sized is allocated when ``out`` and ``alloc`` are
    given. With numba (``sculler[fast]``) a training batch of NumPy images takes two compiled
    passes instead (:mod:`sculler.math.norm_kernels`: the mean and the mean square per
    channel, then ``y``), the variance being ``E[x^2] - mean^2`` summed in float64. ``x -
    mean`` is not kept for the backward, which recomputes it from ``x``: one batch-sized
    write fewer, to memory that is cold by then.

    Args:
        x: ``(N, C, H, W)`` or ``(N, C)`` input.
        scale, bias: ``(C,)`` gamma and beta (``bias`` may be None).
        moving_mean, moving_var: ``(C,)`` running statistics.
        use_global_stats: normalise with the moving statistics.
        moving_average_fraction: ``f`` above.
        epsilon: added to the variance.
        out: optional buffer shaped like ``x`` that ``y`` is written to.
        alloc: optional allocator of the ``x - mean`` work buffer (key ``"bn_centered"``,
            see :func:`sculler.math.workspace.work_array`), e.g. a layer's ``scratch``.
        relu: write ``max(y, 0)`` in the same pass; only where :func:`compiled_images` says
            the kernels run, with batch statistics (ValueError otherwise).

    Returns:
        ``(y, mean, inv_std)``: the output, the mean it subtracted and
        ``1/sqrt(var + eps)`` (both ``(C,)``); keep the last two, and ``x`` unchanged, for
        :func:`batch_norm_backward`.

    Example:
        >>> import numpy as np
        >>> x = np.arange(8.0).reshape(2, 2, 2)[:, :, :, None]
        >>> mm, mv = np.zeros(2), np.ones(2)
        >>> y, _, _ = batch_norm_forward(x, np.ones(2), np.zeros(2), mm, mv)
        >>> round(float(y.mean()), 6), np.round(mm, 6).tolist()
        (0.0, [0.25, 0.45])
    """
    xp = get_array_module(x)
    _check_bn_input(x)
    c = x.shape[1]
    for name, v in (("scale", scale), ("moving_mean", moving_mean), ("moving_var", moving_var)):
        if v.shape != (c,):
            raise ValueError(f"batch norm: {name} has shape {v.shape}, expected ({c},)")
    if out is not None and out.shape != x.shape:
        raise ValueError(f"batch_norm_forward: out has shape {out.shape}, expected {x.shape}")
    kernels = None if use_global_stats else _compiled(x)
    if relu and kernels is None:
        raise ValueError("batch_norm_forward: relu=True needs the compiled kernels "
                         "(compiled_images(x)) and batch statistics")
    if kernels is not None:  # two passes in one call: the moments, then y
        mean, var, inv_std = np.empty(c), np.empty(c), np.empty(c, x.dtype)
        if out is None:
            out = np.empty_like(x)
        shift = np.zeros(c) if bias is None else bias.astype(np.float64)
        run_ranges(kernels.forward, c, _images(x), scale.astype(np.float64), shift,
                   float(epsilon), x.dtype.type(0), mean, var, inv_std, _images(out), relu)
        _update_moving(moving_mean, moving_var, mean, var, moving_average_fraction)
        return out, mean, inv_std
    x_centered = work_array(alloc, "bn_centered", x.shape, x.dtype)
    if use_global_stats:
        mean = moving_mean.astype(x.dtype)  # a copy: the moving mean may change before backward
        var = xp.maximum(moving_var, 0)
        _center(x, mean, x_centered)
    else:
        m = x.size // c
        mean = _channel_dots(x) / m
        _center(x, mean, x_centered)
        var = _channel_dots(x_centered, x_centered) / m
        _update_moving(moving_mean, moving_var, mean, var, moving_average_fraction)
    inv_std = (1.0 / xp.sqrt(var + epsilon)).astype(x.dtype)
    if out is None:
        out = xp.empty_like(x)
    y = _samples(out)
    xp.multiply(_samples(x_centered), _channel_row((scale * inv_std).astype(x.dtype), x), out=y)
    if bias is not None:
        y += _channel_row(bias, x)
    return out, mean, inv_std


def _center(x, mean, out):
    """``out = x - mean`` per channel (``mean`` as :func:`batch_norm_forward` returns it, so
    that the backward's recomputation equals the forward's values)."""
    get_array_module(x).subtract(_samples(x), _channel_row(mean, x), out=_samples(out))
    return out


def _update_moving(moving_mean, moving_var, mean, var, f: float) -> None:
    """``m = m * f + batch * (1 - f)`` for the moving mean and variance, in place."""
    moving_mean *= f
    moving_mean += (1 - f) * mean
    moving_var *= f
    moving_var += (1 - f) * var


def batch_norm_backward(
    dy: Any,
    x: Any,
    mean: Any,
    inv_std: Any,
    scale: Any,
    use_global_stats: bool = False,
    dx: Any = None,
    dscale: Any = None,
    dbias: Any = None,
    betas: tuple[float, float, float] = (1.0, 1.0, 1.0),
    alloc: Alloc | None = None,
    relu_output: Any = None,
) -> tuple[Any, Any, Any]:
    """Gradients of :func:`batch_norm_forward`.

    With ``x_hat = (x - mean) * inv_std``: ``dbias = sum(dy)``, ``dscale = sum(dy * x_hat)``;
    with batch statistics ``dx = scale * inv_std * (dy - mean(dy) - x_hat * mean(dy *
    x_hat))``, with global statistics (constants) ``dx = scale * inv_std * dy``. Sums and
    means run over all axes but the channel one. ``x_hat`` is never formed: its factor
    ``inv_std`` goes into the per-channel coefficients. Six passes over the data with batch
    statistics: ``x - mean``, the two sums, then ``dx`` in three broadcast passes and a
    subtraction (one more to add into a ``dx`` that keeps its contents); two compiled ones.

    Args:
        dy: output gradient, shaped like the input.
        x: the forward's input, unchanged since.
        mean, inv_std: as returned by the forward.
        scale: ``(C,)`` gamma.
        use_global_stats: must match the forward.
        dx, dscale, dbias: optional buffers the gradients are written to.
        betas: for ``dx``, ``dscale`` and ``dbias``: ``1.0`` adds the gradient to the
            buffer's contents, ``0.0`` overwrites them (a first write).
        alloc: optional allocator of the work buffers (keys ``"bn_centered"``, and
            ``"bn_dx"`` used when ``dx`` is added to).
        relu_output: the output of a forward with ``relu=True``: ``dy`` is the gradient of
            that output and counts where it is positive (compiled kernels only).

    Returns:
        ``(dx, dscale, dbias)`` (the given buffers where given).
    """
    xp = get_array_module(dy)
    _check_bn_input(dy)
    c = dy.shape[1]
    for buf, shape, name in ((dx, dy.shape, "dx"), (x, dy.shape, "x"), (dscale, (c,), "dscale"),
                             (dbias, (c,), "dbias")):
        if buf is not None and buf.shape != shape:
            raise ValueError(f"batch_norm_backward: {name} has shape {buf.shape}, "
                             f"expected {shape}")
    if any(beta not in (0.0, 1.0) for beta in betas) or len(betas) != 3:
        raise ValueError(f"batch_norm_backward: betas must be three of 0.0 (overwrite) or 1.0 "
                         f"(add), got {betas!r}")
    dx_beta = betas[0] if dx is not None else 0.0
    if dx is None:
        dx = xp.empty_like(dy)
    kernels = None if use_global_stats else _compiled(dy, x, dx)
    if relu_output is not None and kernels is None:
        raise ValueError("batch_norm_backward: relu_output needs the compiled kernels")
    if kernels is not None:  # two passes in one call: the sums, then dx
        g_bias, g_scale = np.empty(c), np.empty(c)
        run_ranges(kernels.backward, c, _images(dy), _images(x), mean.astype(np.float64),
                   scale.astype(np.float64), inv_std, dy.dtype.type(0), g_bias, g_scale,
                   _images(dx), dx_beta != 0.0,
                   _images(relu_output) if relu_output is not None else absent(dy.dtype, 3))
        return (dx, *_write_param_grads(dscale, dbias, g_scale.astype(dy.dtype),
                                        g_bias.astype(dy.dtype), betas))
    x_centered = _center(x, mean, work_array(alloc, "bn_centered", x.shape, x.dtype))
    g_bias = _channel_dots(dy)
    g_scale = _channel_dots(dy, x_centered) * inv_std
    k = _channel_row(scale * inv_std, dy)
    g_x = _samples(dx if dx_beta == 0.0 else work_array(alloc, "bn_dx", dy.shape, dy.dtype))
    dy_rows = _samples(dy)
    if use_global_stats:
        xp.multiply(dy_rows, k, out=g_x)
    else:
        m = dy.size // c
        xp.multiply(_samples(x_centered), _channel_row(g_scale * inv_std / m, dy), out=g_x)
        xp.subtract(dy_rows, g_x, out=g_x)
        g_x -= _channel_row(g_bias / m, dy)
        g_x *= k
    if dx_beta != 0.0:
        _samples(dx)[...] += g_x
    return (dx, *_write_param_grads(dscale, dbias, g_scale, g_bias, betas))


def _write_param_grads(dscale, dbias, g_scale, g_bias, betas) -> list:
    """``[dscale, dbias]``: each value written to (beta 0) or added to (beta 1) its buffer
    where one is given, else the value itself."""
    results = []
    for buf, val, beta in ((dscale, g_scale, betas[1]), (dbias, g_bias, betas[2])):
        if buf is None:
            results.append(val)
        elif beta == 0.0:
            buf[...] = val
            results.append(buf)
        else:
            buf += val
            results.append(buf)
    return results


def _channel_window_sum(a, lo: int, hi: int):
    """``s[:, c] = sum of a[:, c-lo ... c+hi]`` (clipped to the channels), one add per offset."""
    c = a.shape[1]
    s = a.copy()
    for d in range(1, lo + 1):
        s[:, d:] += a[:, : c - d]
    for d in range(1, hi + 1):
        s[:, : c - d] += a[:, d:]
    return s


def _check_cmr(x, size: int):
    if x.ndim != 4:
        raise ValueError(f"cross-map norm expects NCHW input (4 dims), got shape {x.shape}")
    if int(size) != size or size < 1:
        raise ValueError(f"cross-map norm size must be a positive integer, got {size!r}")


def cross_map_norm_forward(x: Any, size: int, scale: float, power: float) -> tuple[Any, Any]:
    """Local response normalisation across channels (Paddle's ``img_cmrnorm_layer``).

    ``denom[c] = 1 + scale/size * sum_{c' in window(c)} x[c']^2``, ``y = x * denom^(-power)``,
    ``window(c) = [c - (size-1)//2, c - (size-1)//2 + size)`` clipped to the channels.

    Args:
        x: ``(N, C, H, W)`` input.
        size: number of channels in the window.
        scale: the ``scale`` (alpha) given to ``img_cmrnorm_layer``; divided by ``size`` here,
            as Paddle's ``parse_norm`` does. A config that already stores ``alpha/size``
            (Paddle's ``NormConfig.scale``) must pass ``stored * size``.
        power: the exponent (beta).

    Returns:
        ``(y, denom)``; keep ``denom`` for :func:`cross_map_norm_backward`.

    Example:
        >>> import numpy as np
        >>> y, d = cross_map_norm_forward(np.ones((1, 3, 1, 1)), 3, 3.0, 1.0)
        >>> y.ravel().tolist()
        [0.3333333333333333, 0.25, 0.3333333333333333]
    """
    _check_cmr(x, size)
    lo = (size - 1) // 2
    denom = _channel_window_sum(x * x, lo, size - 1 - lo)
    denom *= scale / size
    denom += 1.0
    return x * denom ** (-power), denom


def cross_map_norm_backward(
    dy: Any,
    x: Any,
    y: Any,
    denom: Any,
    size: int,
    scale: float,
    power: float,
    out: Any = None,
) -> Any:
    """Input gradient of :func:`cross_map_norm_forward`.

    ``dx[c] = dy[c] * denom[c]^(-power) - 2 * scale/size * power * x[c] *
    sum_{c' : c in window(c')} dy[c'] * y[c'] / denom[c']``.

    Args:
        dy: output gradient; x, y, denom: forward input, output and saved denominator;
            size, scale, power: as in the forward.
        out: optional buffer the gradient is ADDED to.

    Returns:
        ``dx`` (``out`` when given).
    """
    _check_cmr(x, size)
    lo = (size - 1) // 2
    t = _channel_window_sum(dy * y / denom, size - 1 - lo, lo)
    dx = dy * denom ** (-power) - (2.0 * scale / size * power) * x * t
    if out is None:
        return dx
    if out.shape != dx.shape:
        raise ValueError(f"cross_map_norm_backward: out has shape {out.shape}, "
                         f"expected {dx.shape}")
    out += dx
    return out


def _check_maxout(x, groups: int):
    if x.ndim != 4:
        raise ValueError(f"maxout expects NCHW input (4 dims), got shape {x.shape}")
    if groups < 1 or x.shape[1] % groups:
        raise ValueError(
            f"maxout groups={groups} must be a positive divisor of the channels {x.shape[1]}"
        )


def maxout_forward(x: Any, groups: int) -> tuple[Any, Any]:
    """Maxout over consecutive channel groups: ``y[:, o] = max_k x[:, o*groups + k]``.

    Args:
        x: ``(N, C, H, W)``, ``C`` divisible by ``groups``.
        groups: channels pooled into one output channel.

    Returns:
        ``(y, idx)``: ``y`` is ``(N, C/groups, H, W)``; ``idx`` (int32, same shape) the
        winning ``k`` (first on ties), for :func:`maxout_backward`.

    Example:
        >>> import numpy as np
        >>> y, idx = maxout_forward(np.array([1.0, 3, 2, 0]).reshape(1, 4, 1, 1), 2)
        >>> y.ravel().tolist(), idx.ravel().tolist()
        ([3.0, 2.0], [1, 0])
    """
    _check_maxout(x, groups)
    xp = get_array_module(x)
    n, c, h, w = x.shape
    x5 = x.reshape(n, c // groups, groups, h, w)
    idx = x5.argmax(axis=2).astype(xp.int32)
    return x5.max(axis=2), idx


def maxout_backward(dy: Any, idx: Any, groups: int, out: Any = None) -> Any:
    """Input gradient of maxout: ``dx[:, o*groups + idx] += dy[:, o]``, zero elsewhere.

    Args:
        dy: ``(N, C/groups, H, W)`` output gradient; idx: from :func:`maxout_forward`.
        out: optional ``(N, C, H, W)`` buffer the gradient is ADDED to.

    Returns:
        ``dx`` (``out`` when given).
    """
    xp = get_array_module(dy)
    n, co, h, w = dy.shape
    dx5 = xp.zeros((n, co, groups, h, w), dtype=dy.dtype)
    for k in range(groups):
        dx5[:, :, k] = xp.where(idx == k, dy, 0)
    dx = dx5.reshape(n, co * groups, h, w)
    if out is None:
        return dx
    if out.shape != dx.shape:
        raise ValueError(f"maxout_backward: out has shape {out.shape}, expected {dx.shape}")
    out += dx
    return out
