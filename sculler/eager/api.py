"""The eager names exported at the top level (``import sculler as paddle; paddle.randn``)."""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from typing import Any

import numpy as np

from sculler.backend import get_array_module, to_device_of
from sculler.eager import device
from sculler.eager.creation import (
    arange,
    eye,
    full,
    full_like,
    linspace,
    normal,
    ones,
    ones_like,
    rand,
    rand_like,
    randint,
    randn,
    randn_like,
    randperm,
    seed,
    to_tensor,
    uniform,
    zeros,
    zeros_like,
)
from sculler.eager.device import (
    CPUPlace,
    CUDAPinnedPlace,
    CUDAPlace,
    get_device,
    is_compiled_with_cuda,
    set_device,
)
from sculler.eager.engine import is_grad_enabled, no_grad, run_backward, set_grad_enabled
from sculler.eager.ops import (
    abs,
    add,
    argmax,
    argmin,
    assign,
    cast,
    clip,
    clone,
    concat,
    divide,
    equal,
    exp,
    flatten,
    gather,
    greater_equal,
    greater_than,
    less_equal,
    less_than,
    log,
    log_softmax,
    matmul,
    max,
    maximum,
    mean,
    min,
    minimum,
    mm,
    multiply,
    neg,
    not_equal,
    pow,
    reciprocal,
    relu,
    reshape,
    scale,
    sigmoid,
    softmax,
    split,
    sqrt,
    square,
    squeeze,
    stack,
    subtract,
    sum,
    t,
    tanh,
    transpose,
    unsqueeze,
    where,
)
from sculler.eager.tensor import Parameter, Tensor

float16 = np.dtype("float16")
float32 = np.dtype("float32")
float64 = np.dtype("float64")
int32 = np.dtype("int32")
int64 = np.dtype("int64")
int8 = np.dtype("int8")
uint8 = np.dtype("uint8")
bool = np.dtype("bool")  # noqa: A001 - Paddle's dtype name


def _as_list(x: Any) -> list:
    if x is None:
        return []
    return list(x) if isinstance(x, Sequence) else [x]


def grad(outputs: Any, inputs: Any, grad_outputs: Any = None, retain_graph: Any = None,
         create_graph: bool = False, only_inputs: bool = True, allow_unused: bool = False,
         no_grad_vars: Any = None) -> list:
    """Gradients of ``sum(outputs * grad_outputs)`` w.r.t. ``inputs``, leaving ``.grad`` alone.

    Returns one Tensor per input (None for an unused input when ``allow_unused``).
    ``retain_graph`` defaults to ``create_graph``; double backward is not supported.
    """
    if create_graph:
        raise NotImplementedError("sculler.grad(create_graph=True): double backward is not "
                                  "supported by the eager engine")
    outs, ins = _as_list(outputs), _as_list(inputs)
    gos = _as_list(grad_outputs) or [None] * len(outs)
    if len(gos) != len(outs):
        raise ValueError(f"grad_outputs has {len(gos)} entries, expected one per output "
                         f"({len(outs)})")
    for i, x in enumerate(ins):
        if not isinstance(x, Tensor) or x.stop_gradient:
            raise ValueError(f"inputs[{i}] must be a Tensor with stop_gradient=False")
    garrs = []
    for o, g in zip(outs, gos):
        if g is None:
            garrs.append(get_array_module(o._array).ones_like(o._array))
        else:
            garrs.append(g._array if isinstance(g, Tensor)
                         else to_device_of(np.asarray(g), o._array))
    capture = {id(x): [x, None] for x in ins}
    run_backward(outs, garrs, builtins.bool(retain_graph), capture)
    result = []
    for i, x in enumerate(ins):
        g = capture[id(x)][1]
        if g is None:
            if not allow_unused:
                raise ValueError(f"inputs[{i}] ({x.name}) is not reachable from the outputs;"
                                 " pass allow_unused=True to get None for it")
            result.append(None)
        else:
            result.append(Tensor._from_array(g.astype(x.dtype, copy=True).reshape(x._array.shape)))
    return result


__all__ = [
    'CPUPlace', 'CUDAPinnedPlace', 'CUDAPlace', 'Parameter', 'Tensor', 'abs', 'add', 'arange',
    'argmax', 'argmin', 'assign', 'bool', 'cast', 'clip', 'clone', 'concat', 'device',
    'divide', 'equal', 'exp', 'eye', 'flatten', 'float16', 'float32', 'float64', 'full',
    'full_like', 'gather', 'get_device', 'grad', 'greater_equal', 'greater_than', 'int32',
    'int64', 'int8', 'is_compiled_with_cuda', 'is_grad_enabled', 'less_equal', 'less_than',
    'linspace', 'log', 'log_softmax', 'matmul', 'max', 'maximum', 'mean', 'min', 'minimum',
    'mm', 'multiply', 'neg', 'no_grad', 'normal', 'not_equal', 'ones', 'ones_like', 'pow',
    'rand', 'rand_like', 'randint', 'randn', 'randn_like', 'randperm', 'reciprocal', 'relu',
    'reshape', 'scale', 'seed', 'set_device', 'set_grad_enabled', 'sigmoid', 'softmax', 'split',
    'sqrt', 'square', 'squeeze', 'stack', 'subtract', 'sum', 't', 'tanh', 'to_tensor',
    'transpose', 'uint8', 'uniform', 'unsqueeze', 'where', 'zeros', 'zeros_like',
]
