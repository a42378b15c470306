"""Activation kernels: ``f(x)`` and the input gradient ``dx`` given ``x``, ``y = f(x)``, ``dy``.

Each ``*_grad(x, y, dy)`` returns ``dy * f'(x)``; most use only ``y`` (``x`` may then be
None), the ones listed in ``NEEDS_INPUT`` need the pre-activation input ``x``.
Constants follow PaddlePaddle's engine (brelu clips to [0, 24], softrelu clips its input to
[-40, 40], stanh is ``1.7159 * tanh(2/3 x)``).
"""

from __future__ import annotations

import numpy as np

from sculler.backend import get_array_module, is_gpu_array, to_numpy
from sculler.math import cuda, parallel, segment
from sculler.math.blas import ones_vector
from sculler.math.workspace import constant_array

BRELU_MAX = 24.0
SOFTRELU_CLIP = 40.0
STANH_A = 1.7159
STANH_B = 2.0 / 3.0


def linear(x, out=None):
    if out is not None and out is not x:
        out[...] = x
        return out
    return x


def linear_grad(x, y, dy):
    return dy


def sigmoid(x, out=None):
    """1 / (1 + exp(-x)), computed as (tanh(x/2) + 1) / 2 to avoid overflow."""
    xp = get_array_module(x)
    out = xp.multiply(x, 0.5, out=out)
    xp.tanh(out, out=out)
    out += 1.0
    out *= 0.5
    return out


def sigmoid_grad(x, y, dy):
    return dy * y * (1.0 - y)


def tanh(x, out=None):
    return get_array_module(x).tanh(x, out=out)


def tanh_grad(x, y, dy):
    return dy * (1.0 - y * y)


def relu(x, out=None):
    """``max(x, 0)``; on numpy against a zeros array (see :func:`_zeros_like`)."""
    xp = get_array_module(x)
    return xp.maximum(x, _zeros_like(x) if xp is np else 0, out=out)


_zeros: dict[np.dtype, np.ndarray] = {}


def _zeros_like(x) -> np.ndarray:
    """A read-only zeros array shaped like numpy ``x``, a view of one grow-only buffer per
    dtype. NumPy 2.4's ``maximum`` runs its vector loop for two arrays but a scalar loop
    against the scalar 0: 4x slower (0.19 ms against 0.045 ms on 2 MB of float32)."""
    buf = _zeros.get(x.dtype)
    if buf is None or buf.size < x.size:
        buf = np.zeros(max(x.size, 1), dtype=x.dtype)
        buf.flags.writeable = False
        _zeros[x.dtype] = buf
    return buf[: x.size].reshape(x.shape)


def relu_grad(x, y, dy):
    return dy * (y > 0)


def brelu(x):
    return get_array_module(x).clip(x, 0.0, BRELU_MAX)


def brelu_grad(x, y, dy):
    return dy * ((y > 0) & (y < BRELU_MAX))


def softrelu(x):
    """log(1 + exp(clip(x, -40, 40)))."""
    xp = get_array_module(x)
    return xp.logaddexp(0.0, xp.clip(x, -SOFTRELU_CLIP, SOFTRELU_CLIP))


def softrelu_grad(x, y, dy):
    return dy * -get_array_module(y).expm1(-y)


def stanh(x):
    return STANH_A * get_array_module(x).tanh(STANH_B * x)


def stanh_grad(x, y, dy):
    return dy * (STANH_B / STANH_A) * (STANH_A * STANH_A - y * y)


# widest rows the small-row softmax path takes (above it the reductions are SIMD-fast anyway)
SMALL_ROW = 2048
def row_starts(n: int, k: int) -> np.ndarray:
    """Flat offsets ``[0, k, 2k, ...]`` of the ``n`` rows of a C-contiguous ``(n, k)`` array,
    cached read-only: ``x.ravel().take(row_starts(n, k) + j)`` picks ``x[i, j[i]]``."""
    return constant_array(("row_starts", n, k), np.arange, 0, n * k, k)


def small_rows(x) -> bool:
    """Whether ``x`` is a C-contiguous 2-D numpy array of narrow rows. NumPy reduces a short
    last axis one row at a time (a (128, 10) max costs ~7 us), while ``argmax`` and a GEMV
    with a ones column (the row sums) cost ~1 us each."""
    return (type(x) is np.ndarray and x.ndim == 2 and x.flags.c_contiguous and x.size > 0
            and x.shape[1] <= SMALL_ROW)


def row_max(x):
    """The (n, 1) row maxima of a :func:`small_rows` array (NaN where a row holds one)."""
    idx = x.argmax(axis=1)
    idx += row_starts(*x.shape)
    return x.ravel().take(idx).reshape(-1, 1)


def row_sums(x):
    """The (n, 1) row sums of a :func:`small_rows` array, as a GEMV with a ones column."""
    return np.matmul(x, ones_vector(x.shape[1], x.dtype).reshape(-1, 1))


def softmax(x, out=None):
    """Row-wise softmax, shifted by the row max for stability."""
    if is_gpu_array(x) and x.ndim == 2 and x.shape[1] <= cuda.ROW_SOFTMAX_MAX_WIDTH:
        return cuda.softmax_rows(x, get_array_module(x).empty_like(x) if out is None else out)
    if not small_rows(x):
        xp = get_array_module(x)
        out = xp.subtract(x, x.max(axis=-1, keepdims=True), out=out)
        xp.exp(out, out=out)
        out /= out.sum(axis=-1, keepdims=True)
        return out
    out = np.subtract(x, row_max(x), out=out)
    np.exp(out, out=out)
    out /= row_sums(out)
    return out


def softmax_grad(x, y, dy):
    """dx = y * (dy - sum(dy * y))."""
    return y * (dy - (dy * y).sum(axis=-1, keepdims=True))


def exp(x, out=None):
    return get_array_module(x).exp(x, out=out)


def exp_grad(x, y, dy):
    return dy * y


def log(x):
    return get_array_module(x).log(x)


def log_grad(x, y, dy):
    return dy / x


def abs(x):  # noqa: A001 - the activation's registered name
    return get_array_module(x).abs(x)


def abs_grad(x, y, dy):
    return dy * get_array_module(x).sign(x)


def square(x):
    return x * x


def square_grad(x, y, dy):
    return 2.0 * dy * x


def sqrt(x):
    return get_array_module(x).sqrt(x)


def sqrt_grad(x, y, dy):
    return dy * 0.5 / y


def reciprocal(x):
    return 1.0 / x


def reciprocal_grad(x, y, dy):
    return -dy * y * y


def softsign(x):
    return x / (1.0 + get_array_module(x).abs(x))


def softsign_grad(x, y, dy):
    d = 1.0 + get_array_module(x).abs(x)
    return dy / (d * d)


# PaddlePaddle's spellings of activations that Sculler's kernels name otherwise ("" and
# "identity" are its linear activation; "exponential" is what its ExpActivation writes)
NAME_ALIASES = {"": "linear", None: "linear", "identity": "linear", "exponential": "exp"}
NEEDS_INPUT = frozenset({"log", "abs", "square", "softsign"})


def _work(like):
    """A temporary shaped like ``like``: the calling thread's reusable buffer on numpy."""
    if type(like) is np.ndarray:
        return parallel.scratch(like.size, like.dtype).reshape(like.shape)
    return get_array_module(like).empty_like(like)


def sigmoid_grad_(y, dy) -> None:
    """``dy <- dy * y * (1 - y)`` in place (same operation order as :func:`sigmoid_grad`)."""
    if is_gpu_array(y):
        cuda.activation_grad("sigmoid", y, dy)
        return
    dy *= y
    t = _work(y)
    get_array_module(y).subtract(1.0, y, out=t)
    dy *= t


def tanh_grad_(y, dy) -> None:
    """``dy <- dy * (1 - y*y)`` in place."""
    if is_gpu_array(y):
        cuda.activation_grad("tanh", y, dy)
        return
    xp = get_array_module(y)
    t = _work(y)
    xp.multiply(y, y, out=t)
    xp.subtract(1.0, t, out=t)
    dy *= t


def relu_grad_(y, dy) -> None:
    """``dy <- dy * (y > 0)`` in place."""
    if is_gpu_array(y):
        cuda.activation_grad("relu", y, dy)
        return
    xp = get_array_module(y)
    mask = _work(y)
    xp.greater(y, 0, out=mask)
    dy *= mask


def exp_grad_(y, dy) -> None:
    """``dy <- dy * y`` in place."""
    dy *= y


def softmax_grad_(y, dy) -> None:
    """``dy <- y * (dy - sum(dy * y))`` row-wise, in place (rows are not split)."""
    t = _work(y)
    get_array_module(y).multiply(dy, y, out=t)
    dy -= t.sum(axis=-1, keepdims=True)
    dy *= y


def _sigmoid_(x) -> None:
    if is_gpu_array(x):
        cuda.activate(x, "sigmoid")
        return
    sigmoid(x, out=x)


def _tanh_(x) -> None:
    get_array_module(x).tanh(x, out=x)


def _relu_(x) -> None:
    relu(x, out=x)


def _exp_(x) -> None:
    get_array_module(x).exp(x, out=x)


# elementwise in-place forms, safe to run on pieces of an array in several threads
FORWARD_INPLACE = {"sigmoid": _sigmoid_, "tanh": _tanh_, "relu": _relu_, "exp": _exp_}
GRAD_INPLACE = {"sigmoid": sigmoid_grad_, "tanh": tanh_grad_, "relu": relu_grad_,
                "exp": exp_grad_}


def segment_softmax(x, seq_starts):
    """Softmax over each sequence of a (T, 1) column; ``seq_starts`` has T at its end. Empty
    sequences hold no rows and are skipped."""
    xp = get_array_module(x)
    if xp is not np:
        out = xp.empty(x.shape, dtype=x.dtype)
        cuda.segment_softmax(x.reshape(-1), seq_starts, out.reshape(-1))
        return out
    col = x.reshape(-1, 1)
    lens = xp.asarray(segment.lengths(seq_starts))
    seg_max = xp.empty((lens.size, 1), dtype=x.dtype)
    full = np.flatnonzero(segment.lengths(seq_starts))
    seg_max[...] = 0
    if full.size:
        seg_max[xp.asarray(full)] = xp.asarray(
            np.maximum.reduceat(to_numpy(col), np.asarray(seq_starts[:-1])[full], axis=0))
    e = xp.exp(col - xp.repeat(seg_max, lens, axis=0))
    sums = segment.segment_sum(e, seq_starts, xp.empty_like(seg_max))
    return (e / xp.repeat(sums, lens, axis=0)).reshape(x.shape)


def segment_softmax_(x, seq_starts) -> None:
    """:func:`segment_softmax` in place (on the GPU one kernel, nothing allocated)."""
    if is_gpu_array(x):
        flat = x.reshape(-1)
        cuda.segment_softmax(flat, seq_starts, flat)
        return
    x[...] = segment_softmax(x, seq_starts)


def segment_softmax_grad_(y, dy, seq_starts) -> None:
    """``dy <- dL/dx`` of :func:`segment_softmax` in place (:func:`segment_softmax_grad`)."""
    if is_gpu_array(dy):
        flat = dy.reshape(-1)
        cuda.segment_softmax_grad(y.reshape(-1), flat, seq_starts, flat)
        return
    dy[...] = segment_softmax_grad(y, dy, seq_starts)


def segment_softmax_grad(y, dy, seq_starts):
    """Per sequence: dx = y * (dy - sum(dy * y))."""
    xp = get_array_module(y)
    if xp is not np:
        out = xp.empty(y.shape, dtype=y.dtype)
        cuda.segment_softmax_grad(y.reshape(-1), dy.reshape(-1), seq_starts, out.reshape(-1))
        return out
    lens = xp.asarray(segment.lengths(seq_starts))
    yc, dyc = y.reshape(-1, 1), dy.reshape(-1, 1)
    dots = segment.segment_sum(dyc * yc, seq_starts, xp.empty((lens.size, 1), dtype=y.dtype))
    return (yc * (dyc - xp.repeat(dots, lens, axis=0))).reshape(y.shape)
