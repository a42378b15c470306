"""Find where NaN/Inf entered a network, only once something is already non-finite.

The trainer checks the batch cost (free: it is summed anyway) and one BLAS dot per parameter
gradient after backward (O(parameters), no allocation: a memory-bound read of every gradient,
a few percent of a small batch); only when either is
non-finite does it call :func:`locate_forward` / :func:`locate_backward`, which walk the
layers in topological order (backward: in the order backward runs, re-running it one layer
at a time) and name the first layer whose output (forward) or input/parameter gradient
(backward) is non-finite, and whether the input data itself already was.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from sculler import backend

__all__ = ["NonFiniteError", "gradients_finite", "locate_backward", "locate_forward"]


class NonFiniteError(FloatingPointError):
    """NaN or Inf appeared in training; the message names the first layer where it did."""


def _finite(array: Any) -> bool:
    return array is None or bool(np.isfinite(backend.to_numpy(array)).all())


def _bad_data(network: Any) -> list[str]:
    return [d.name for d in network.data_layers if not _finite(d.output.value)]


def _where(pass_id: int, batch_id: int) -> str:
    return f"pass {pass_id}, batch {batch_id}"


def _data_note(network: Any) -> str:
    bad = _bad_data(network)
    if bad:
        return (f"the input data itself is non-finite in data layer(s) {bad}: check the "
                "reader")
    return "the input data is finite"


def locate_forward(network: Any, pass_id: int, batch_id: int) -> str:
    """Message naming the first layer (topological order) whose forward output is
    non-finite, its inputs and parameters that are, and whether the data already was."""
    for layer in network.order:
        if _finite(layer.output.value):
            continue
        if layer.type_name == "data":
            return (f"non-finite values in {_where(pass_id, batch_id)}, forward: data layer "
                    f"{layer.name!r} received NaN/Inf; {_data_note(network)}")
        bad_params = [p.name for p in layer.parameters if not _finite(p.value)]
        cause = (f"its parameter(s) {bad_params} hold NaN/Inf (an earlier update diverged: "
                 "lower the learning rate or clip gradients)" if bad_params else
                 f"its inputs {[i.name for i in layer.inputs]} and parameters are finite, so "
                 "the layer's own computation overflowed or divided by zero")
        return (f"non-finite values in {_where(pass_id, batch_id)}, forward: the first layer "
                f"with a NaN/Inf output is {layer.name!r} ({layer.type_name}); {cause}; "
                f"{_data_note(network)}")
    return f"the cost is non-finite in {_where(pass_id, batch_id)} but no layer output is"


_ONES: dict[tuple, Any] = {}


def _ones(xp: Any, dtype: Any, n: int) -> Any:
    """A cached ones vector of at least ``n`` elements (grown, never shrunk)."""
    key = (xp.__name__, str(dtype))
    ones = _ONES.get(key)
    if ones is None or ones.size < n:
        ones = _ONES[key] = xp.ones(max(n, 1024), dtype=dtype)
    return ones[:n]


def gradients_finite(network: Any) -> bool:
    """Whether every parameter gradient of the last backward sums to a finite number: one
    BLAS dot with a cached ones vector per gradient (touched rows only for sparse-update
    parameters). A finite-valued gradient whose sum overflows reads as non-finite; the
    caller's localisation then finds nothing and training goes on."""
    for p in network.used_parameters:
        g = p.grad
        if g is None:
            continue
        if p.config.sparse_update:
            g = g[p.touched_rows_array()]
        flat = g.reshape(-1)
        xp = backend.get_array_module(flat)
        if not math.isfinite(float(flat @ _ones(xp, flat.dtype, flat.size))):
            return False
    return True


def _gradients_of(layer: Any) -> list[tuple[str, Any]]:
    out = [(f"input {i.name!r}", i.output.grad) for i in layer.inputs]
    out += [(f"parameter {p.name!r}", p.grad) for p in layer.parameters]
    return out


def locate_backward(network: Any, pass_id: int, batch_id: int) -> str | None:
    """Re-run backward one layer at a time (gradients zeroed first, no parameter callbacks)
    and name the first layer after whose backward a gradient it writes (an input's or a
    parameter's) is non-finite. None when no gradient is (a float64 sum overflowed)."""
    for layer in network.order:
        if layer.output.grad is not None:
            layer.output.grad[...] = 0
    for p, users in network._used.values():
        p.grad[...] = 0
        p.expect_users(users)
    for layer in network.cost_layers():
        if layer.output.grad is not None:
            layer.output.grad[...] = 1.0
    for layer in reversed(network.order):
        if not layer.need_gradient:
            continue
        layer.backward(None)
        bad = [name for name, g in _gradients_of(layer) if not _finite(g)]
        if bad:
            return (f"non-finite values in {_where(pass_id, batch_id)}, backward: the first "
                    f"layer whose backward gives NaN/Inf is {layer.name!r} "
                    f"({layer.type_name}), in the gradient of {bad}, while the gradient "
                    f"reaching it is finite; {_data_note(network)}")
    return None
