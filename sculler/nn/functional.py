"""Functional forms of the nn ops: activations, linear, embedding, dropout and losses.

``cross_entropy`` follows Paddle 2.x: softmax over ``axis`` then the negative log-likelihood
of hard int labels, ``loss_i = -log softmax(x_i)[label_i]``, averaged over the non-ignored
rows (reduction='mean'). Its gradient is fused: ``dx_i = (softmax(x_i) - onehot_i) * dloss_i``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from sculler.backend import get_array_module
from sculler.core.layer import ids_out_of_range
from sculler.eager import ops
from sculler.eager.creation import get_rng
from sculler.eager.device import check_same_device
from sculler.eager.engine import STATE, Node, spare_grad
from sculler.eager.ops import (  # noqa: F401 - re-exported under nn.functional
    log_softmax,
    relu,
    sigmoid,
    softmax,
    softsign,
    tanh,
)
from sculler.eager.tensor import Tensor
from sculler.math.activation import row_max, row_starts, row_sums, small_rows
from sculler.math.blas import col_sum
from sculler.math.sparse import add_rows
from sculler.validate import number

_REDUCTIONS = ("mean", "sum", "none")
_OWNED_ONE = (True,)  # the op's one input gradient is a new array


def _check_reduction(reduction: str) -> None:
    if reduction not in _REDUCTIONS:
        raise ValueError(f"reduction must be one of {_REDUCTIONS}, got {reduction!r}")


def linear(x: Tensor, weight: Tensor, bias: Tensor | None = None,
           name: str | None = None) -> Tensor:
    """``x @ weight + bias`` with weight of shape [in, out] (Paddle's layout).

    One op: x [..., in] is multiplied as a [rows, in] matrix and the bias is added in place
    into the product; backward gives dx = dy W^T, dW = x^T dy, db = column sums of dy, each
    a new array (so leaves keep them as ``.grad`` without a copy) or, for dW and db, the
    gradient array the parameter's last ``clear_grad()`` dropped (``engine.spare_grad``).
    """
    if not (isinstance(x, Tensor) and isinstance(weight, Tensor)
            and (bias is None or isinstance(bias, Tensor))):
        return _matmul_add(x, weight, bias)  # array operands: the general ops convert them
    a, w = x._array, weight._array
    b = None if bias is None else bias._array
    if type(a) is not type(w) or (b is not None and type(b) is not type(w)):
        check_same_device("linear", a, w, *(() if b is None else (b,)))
    if w.ndim != 2 or a.ndim < 1 or (b is not None and b.shape != (w.shape[1],)):
        return _matmul_add(x, weight, bias)
    if a.shape[-1] != w.shape[0]:
        raise ValueError(f"linear: x has shape {list(a.shape)} but weight has shape "
                         f"{list(w.shape)}; x's last dim must equal weight's first")
    a2 = a if a.ndim == 2 else a.reshape(-1, a.shape[-1])
    out = a2 @ w
    if b is not None:
        if b.dtype == out.dtype:
            out += b
        else:
            out = out + b  # the promoted dtype, as matmul then add
    if a.ndim != 2:
        out = out.reshape(a.shape[:-1] + (w.shape[1],))
    t = Tensor._from_array(out)
    need_x, need_w = not x.stop_gradient, not weight.stop_gradient
    need_b = bias is not None and not bias.stop_gradient
    if not (STATE.enabled and (need_x or need_w or need_b)):
        return t

    def fn(g):
        g2 = g if g.ndim == 2 else g.reshape(-1, g.shape[-1])
        gx = gw = gb = None
        if need_x:
            gx = g2 @ w.T
            if a.ndim != 2:
                gx = gx.reshape(a.shape)
        # the parameters' spare gradients (their dtype) are written only where the product
        # has that dtype anyway, so the values are those of a new array
        if need_w:
            spare = spare_grad(weight, w) if g2.dtype == a2.dtype == w.dtype else None
            gw = a2.T @ g2 if spare is None else np.matmul(a2.T, g2, out=spare)
        if need_b:  # the engine's bias-gradient kernel (a GEMV with ones on NumPy)
            spare = spare_grad(bias, b) if g2.dtype == b.dtype else None
            gb = col_sum(g2, get_array_module(g2).empty(g2.shape[1], g2.dtype)
                         if spare is None else spare, 0.0)
        return gx, gw, gb

    t.stop_gradient = False
    t._node = Node(fn, (x if need_x else None, weight if need_w else None)
                   + ((bias if need_b else None,) if bias is not None else ()),
                   1, _LINEAR_OWNED)
    return t


_LINEAR_OWNED = (True, True, True)  # linear's gradients are new arrays


def _matmul_add(x: Any, weight: Any, bias: Any) -> Tensor:
    """``linear`` as the general ops (broadcast bias shapes, array operands)."""
    out = ops.matmul(x, weight)
    return out if bias is None else ops.add(out, bias)


def embedding(x: Tensor, weight: Tensor, padding_idx: int | None = None,
              sparse: bool = False, name: str | None = None) -> Tensor:
    """Rows ``weight[x]``; rows equal to ``padding_idx`` output zeros and get no gradient."""
    ids = x._array if isinstance(x, Tensor) else get_array_module(weight._array).asarray(x)
    w = weight._array
    if type(ids) is not type(w):
        check_same_device("embedding", ids, w)
    if ids.dtype.kind not in "iu":
        raise TypeError(f"embedding ids must be integers, got dtype {ids.dtype}")
    if ids.size and (ids.min() < 0 or ids.max() >= w.shape[0]):
        raise ValueError(f"embedding ids must lie in [0, {w.shape[0]}), got values in "
                         f"[{int(ids.min())}, {int(ids.max())}]")
    xp = get_array_module(w)
    out = w[ids]
    pad = None
    if padding_idx is not None:
        pad = padding_idx % w.shape[0]
        out[ids == pad] = 0

    def fn(g):
        gw = xp.zeros_like(w)
        if pad is not None:
            g = g * (ids != pad)[..., None]
        add_rows(gw, ids.reshape(-1), g.reshape(-1, w.shape[1]))
        return (gw,)

    return ops._make(out, (weight,), fn, _OWNED_ONE)


def dropout(x: Tensor, p: float = 0.5, axis: Any = None, training: bool = True,
            mode: str = "upscale_in_train", name: str | None = None) -> Tensor:
    """Zero each element with probability ``p``; survivors scale by 1/(1-p) in training."""
    p = number(p, "dropout probability p", 0.0, 1.0)
    if mode not in ("upscale_in_train", "downscale_in_infer"):
        raise ValueError(f"dropout mode must be 'upscale_in_train' or "
                         f"'downscale_in_infer', got {mode!r}")
    if not training:
        return x if mode == "upscale_in_train" else ops.scale(x, 1.0 - p)
    if p == 1.0:
        return ops.multiply(x, 0.0)
    keep = get_rng().random(x._array.shape) >= p
    xp = get_array_module(x._array)
    mask = xp.asarray(keep).astype(x._array.dtype)
    if mode == "upscale_in_train":
        mask /= 1.0 - p
    return ops.multiply(x, Tensor._from_array(mask))


def _reduce(loss: Tensor, reduction: str) -> Tensor:
    if reduction == "mean":
        return ops.mean(loss)
    if reduction == "sum":
        return ops.sum(loss)
    return loss


def mse_loss(input: Tensor, label: Tensor, reduction: str = "mean",  # noqa: A002
             name: str | None = None) -> Tensor:
    """Squared error ``(input - label)^2``, reduced by mean (default), sum or none."""
    _check_reduction(reduction)
    if input.shape != label.shape:
        raise ValueError(f"mse_loss: input shape {input.shape} and label shape "
                         f"{label.shape} differ")
    return _reduce(ops.square(ops.subtract(input, label)), reduction)


def l1_loss(input: Tensor, label: Tensor, reduction: str = "mean",  # noqa: A002
            name: str | None = None) -> Tensor:
    """Absolute error ``|input - label|``."""
    _check_reduction(reduction)
    return _reduce(ops.abs(ops.subtract(input, label)), reduction)


def cross_entropy(input: Tensor, label: Tensor, weight: Tensor | None = None,  # noqa: A002
                  ignore_index: int = -100, reduction: str = "mean",
                  soft_label: bool = False, axis: int = -1, use_softmax: bool = True,
                  name: str | None = None) -> Tensor:
    """Softmax cross entropy with hard int labels of shape [N] or [N, 1] (Paddle 2.x).

    ``loss_i = -log(softmax(input_i)[label_i])``; 'mean' averages over rows whose label is
    not ``ignore_index``; 'none' returns the label's shape ([N] or [N, 1]).
    """
    _check_reduction(reduction)
    if soft_label or weight is not None or not use_softmax:
        raise NotImplementedError("cross_entropy supports hard labels with use_softmax=True "
                                  "and no class weights")
    a = input._array
    if axis not in (-1, a.ndim - 1):
        raise NotImplementedError("cross_entropy supports axis=-1 only")
    xp = get_array_module(a)
    lab = label._array if isinstance(label, Tensor) else xp.asarray(label)
    if type(lab) is not type(a):
        check_same_device("cross_entropy", a, lab)
    if lab.dtype.kind not in "iu":
        raise TypeError(f"cross_entropy labels must be integers (hard labels), got dtype "
                        f"{lab.dtype}")
    label_shape = lab.shape
    if lab.ndim == a.ndim:
        if lab.shape[-1] != 1:
            raise ValueError(f"cross_entropy label shape {list(lab.shape)} does not fit input"
                             f" shape {list(a.shape)}; expected {list(a.shape[:-1])} or "
                             f"{list(a.shape[:-1]) + [1]}")
        lab = lab[..., 0]
    if lab.shape != a.shape[:-1]:
        raise ValueError(f"cross_entropy label shape {list(lab.shape)} does not fit input "
                         f"shape {list(a.shape)}")
    n_cls = a.shape[-1]
    a2 = a.reshape(-1, n_cls)
    lab = lab.reshape(-1)
    masked = False
    safe = lab
    if lab.size and (0 <= ignore_index < n_cls or ids_out_of_range(lab, n_cls)):
        # (otherwise no label can equal ignore_index and all are in range)
        ignored = lab == ignore_index
        masked = bool(ignored.any())
        if masked:
            safe = xp.where(ignored, 0, lab)
        if safe.min() < 0 or safe.max() >= n_cls:
            raise ValueError(f"cross_entropy labels must lie in [0, {n_cls}), got values "
                             f"in [{int(safe.min())}, {int(safe.max())}]")
    rows = picks = None
    if small_rows(a2) and safe.dtype == np.int64:
        # NumPy reduces a short last axis row by row (~7 us for a (128, 10) max): the row
        # max by argmax + take, the row sums as a GEMV, the labels' entries by flat offsets
        picks = row_starts(*a2.shape) + safe
        shifted = a2 - row_max(a2)
        e = np.exp(shifted)
        total = row_sums(e)
        picked = shifted.reshape(-1).take(picks)
    else:
        rows = xp.arange(a2.shape[0])
        shifted = a2 - xp.max(a2, axis=-1, keepdims=True)
        e = xp.exp(shifted)
        total = xp.sum(e, axis=-1, keepdims=True)
        picked = shifted[rows, safe]
    loss = xp.log(total)[:, 0]
    loss -= picked
    if masked:
        loss[ignored] = 0
    count = max(lab.size - int(ignored.sum()), 1) if masked else max(lab.size, 1)
    if reduction == "mean":
        out = xp.asarray(xp.add.reduce(loss) / count, dtype=a.dtype)
    elif reduction == "sum":
        out = xp.asarray(xp.add.reduce(loss), dtype=a.dtype)
    else:
        out = loss.reshape(label_shape).astype(a.dtype, copy=False)

    def fn(g):
        probs = e / total  # softmax from the forward's exponentials, a new array
        if picks is None:
            probs[rows, safe] -= 1.0
        else:
            probs.reshape(-1)[picks] -= 1.0  # one entry per row: no repeated offset
        if reduction == "none":
            scale = g.reshape(-1, 1)
            probs *= scale
        elif reduction == "mean":
            probs *= g / count
        elif not (type(g) is np.ndarray and g.shape == () and g.item() == 1.0):
            probs *= g  # (a summed loss's backward() from ones: nothing to scale)
        if masked:
            probs[ignored] = 0
        return (probs.reshape(a.shape),)

    return ops._make(out, (input,), fn, _OWNED_ONE)
from sculler.nn.conv import avg_pool2d, conv2d, max_pool2d  # noqa: E402,F401
