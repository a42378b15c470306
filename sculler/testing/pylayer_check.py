"""Numerical gradient checks for PyLayers and eager functions (float64, central differences).

The scalar checked is ``L = sum_k sum(w_k * y_k)`` over the float output tensors ``y_k``
with fixed random weights ``w_k`` (so every output element matters and errors cannot
cancel); ``dL/dx[i] ~ (L(x + eps e_i) - L(x - eps e_i)) / (2 eps)``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from sculler.autograd import PyLayer
from sculler.eager import ops
from sculler.eager.engine import no_grad
from sculler.eager.tensor import Tensor
from sculler.testing.grad_check import GradCheckReport, GradientCheckError
from sculler.testing.numeric import numeric_grad

__all__ = ["check_grad", "check_pylayer_grad"]


def _float_outputs(out: Any) -> list[Tensor]:
    items = out if isinstance(out, list | tuple) else [out]
    found = []
    for v in items:
        if isinstance(v, list | tuple):
            found.extend(_float_outputs(v))
        elif isinstance(v, Tensor) and v.dtype.kind == "f":
            found.append(v)
    return found


def _to_float64(v: Any) -> Any:
    if isinstance(v, Tensor):
        arr = v.numpy()
        t = Tensor(arr.astype(np.float64) if arr.dtype.kind == "f" else arr.copy())
        t.stop_gradient = v.stop_gradient
        return t
    if isinstance(v, list | tuple):
        return type(v)(_to_float64(e) for e in v)
    return v


def _leaves(args: tuple, kwargs: dict) -> list[Tensor]:
    found = []
    for v in list(args) + list(kwargs.values()):
        for e in (v if isinstance(v, list | tuple) else [v]):
            if isinstance(e, Tensor):
                found.append(e)
    return found


def check_grad(fn: Callable[..., Any], *inputs: Any, eps: float = 1e-6, rtol: float = 1e-6,
               label: str | None = None, seed: int = 0, **kwargs: Any) -> GradCheckReport:
    """Compare the autograd gradient of ``fn(*inputs, **kwargs)`` with finite differences.

    Every Tensor input with ``stop_gradient=False`` (also inside lists) is checked after a
    float64 copy. An element passes when ``|analytic - numeric| <= rtol * max(1, |numeric|)``
    (absolute near zero, relative for large values). Returns a :class:`GradCheckReport`
    (``errors["input i"]``: the worst error of input ``i``); raises
    :class:`GradientCheckError` (an AssertionError) naming ``label``, the input index, the
    worst element index and both values.
    """
    label = label or getattr(fn, "__qualname__", repr(fn))
    args = tuple(_to_float64(a) for a in inputs)
    kw = {k: _to_float64(v) for k, v in kwargs.items()}
    leaves = _leaves(args, kw)
    rng = np.random.default_rng(seed)
    outs = _float_outputs(fn(*args, **kw))
    if not outs:
        raise ValueError(f"{label} returned no float Tensor to differentiate")
    weights = [rng.uniform(0.5, 1.5, o._array.shape) for o in outs]

    def loss_value() -> float:
        with no_grad():
            return float(sum((w * o._array).sum()
                             for w, o in zip(weights, _float_outputs(fn(*args, **kw)))))

    for x in leaves:
        x.grad = None
    total = None
    for w, o in zip(weights, outs):
        if o.stop_gradient:
            continue
        term = (o * Tensor(w)).sum()
        total = term if total is None else total + term
    if total is not None:
        total.backward()
    errors = {}
    for idx, x in enumerate(leaves):
        if x.stop_gradient:
            continue
        analytic = np.zeros(x.shape) if x.grad is None else x.grad.numpy()
        numeric = numeric_grad(loss_value, x._array, eps)
        err = np.abs(analytic - numeric) / np.maximum(1.0, np.abs(numeric))
        errors[f"input {idx}"] = float(err.max()) if err.size else 0.0
        if err.size and err.max() > rtol:
            worst = np.unravel_index(int(err.argmax()), err.shape)
            raise GradientCheckError(
                f"{label}: gradient of input {idx} differs from finite differences at "
                f"index {tuple(int(i) for i in worst)}: analytic {analytic[worst]!r}, "
                f"numeric {numeric[worst]!r} (eps={eps}, rtol={rtol})")
    if not errors:
        raise ValueError(f"{label}: no input has stop_gradient=False, so there is no gradient "
                         "to check; set x.stop_gradient = False on the inputs to check")
    return GradCheckReport(label, errors)


def check_pylayer_grad(layer_cls: type, *inputs: Any, eps: float = 1e-6, rtol: float = 1e-6,
                       **kwargs: Any) -> GradCheckReport:
    """Check ``layer_cls.backward`` against central finite differences of its forward; the
    report holds the worst relative error per checked input, as ``check_layer_grad``'s does.

    Example: ``check_pylayer_grad(CusTanh, sculler.randn([2, 3], 'float64')).max_error``
    after setting ``stop_gradient=False`` on the inputs to check.
    """
    return check_grad(layer_cls.apply, *inputs, eps=eps, rtol=rtol, label=layer_cls.__name__,
               **kwargs)


class TanhPyLayer(PyLayer):
    """The PyLayer doc page's ``cus_tanh``: ``y = tanh(x)``, ``dx = dy (1 - y^2)``; a reference
    PyLayer for tests, examples and benchmarks."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        y = ops.tanh(x)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx: Any, dy: Tensor) -> Tensor:
        (y,) = ctx.saved_tensor()
        return dy * (1 - ops.square(y))
