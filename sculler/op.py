"""Math on layers: ``paddle.v2.op`` and v1's ``trainer_config_helpers.layer_math``.

Unary functions (``exp``, ``log``, ``abs``, ``sigmoid``, ``tanh``, ``square``, ``relu``,
``sqrt``, ``reciprocal``) are a ``mixed`` layer of one identity projection with that
activation, named ``__exp_0__`` and so on, as PaddlePaddle names them. Importing this module
gives :class:`LayerOutput` the operators PaddlePaddle's ``layer_math`` gave it:

- ``x + c`` / ``c + x``: ``slope_intercept(x, intercept=c)``; ``x - c``: intercept ``-c``;
  ``c - x``: ``slope_intercept(x, slope=-1)`` then ``+ c``; ``x * c`` / ``c * x``: slope ``c``.
- ``x + y`` of one width: a ``mixed`` layer of two identity projections; a width-1 side is
  first repeated to the other's width (``repeat``) and comes second; ``x - y`` is
  ``x + (-1 * y)``.
- ``x * y`` where one side has width 1: ``scaling`` of the other by it.

One deliberate difference: PaddlePaddle wrote ``x - c`` as intercept ``+c`` (a bug in its
layer_math); Sculler computes ``x - c``. In a v1 config every layer these make joins the
config being parsed, in creation order.

Example:
    >>> import sculler as paddle
    >>> x = paddle.layer.data(name="x", type=paddle.data_type.dense_vector(4))
    >>> y = paddle.op.exp(x) * 2 + 1
    >>> y.layer_type, y.size
    ('slope_intercept', 4)
"""

from __future__ import annotations

import numbers
from typing import Any

from sculler import activation as A
from sculler import layer as L
from sculler.config.config_parser import adopt_if_parsing
from sculler.core.expression import LayerOutput, auto_name

__all__ = ["exp", "log", "abs", "sigmoid", "tanh", "square", "relu", "sqrt", "reciprocal"]


def _unary(op_name: str, act: type[A.BaseActivation]) -> Any:
    def op(input: LayerOutput, name: str | None = None) -> LayerOutput:  # noqa: A002
        out = L.mixed(input=[L.identity_projection(input=_layer(input, op_name))],
                      name=name or auto_name(op_name), act=act(), bias_attr=False)
        return adopt_if_parsing(out)

    op.__name__ = op.__qualname__ = op_name
    op.__doc__ = f"``y = {op_name}(x)`` elementwise (a mixed layer with {act.__name__})."
    return op


exp = _unary("exp", A.Exp)
log = _unary("log", A.Log)
abs = _unary("abs", A.Abs)  # noqa: A001 - PaddlePaddle's name
sigmoid = _unary("sigmoid", A.Sigmoid)
tanh = _unary("tanh", A.Tanh)
square = _unary("square", A.Square)
relu = _unary("relu", A.Relu)
sqrt = _unary("sqrt", A.Sqrt)
reciprocal = _unary("reciprocal", A.Reciprocal)


def _layer(value: Any, op: str) -> LayerOutput:
    if not isinstance(value, LayerOutput):
        raise TypeError(f"{op}: expected a layer (LayerOutput), got {type(value).__name__}")
    return value


def _is_number(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _affine(x: LayerOutput, slope: float = 1.0, intercept: float = 0.0) -> LayerOutput:
    return adopt_if_parsing(L.slope_intercept(input=x, slope=float(slope),
                                              intercept=float(intercept)))


def _add(x: LayerOutput, other: Any) -> LayerOutput:
    if _is_number(other):
        return _affine(x, intercept=other)
    y = _layer(other, "+")
    if x.size != y.size:
        if x.size != 1 and y.size != 1:
            raise ValueError(f"{x.name} + {y.name}: widths {x.size} and {y.size} differ; "
                             "they must be equal, or one of them 1")
        if x.size == 1:  # the wide side comes first, the width-1 side is repeated
            x, y = y, x
        y = adopt_if_parsing(L.repeat(input=y, num_repeats=x.size))
    return adopt_if_parsing(L.mixed(input=[L.identity_projection(input=x),
                                           L.identity_projection(input=y)],
                                    name=auto_name("mixed"), bias_attr=False))


def _sub(x: LayerOutput, other: Any) -> LayerOutput:
    if _is_number(other):
        return _affine(x, intercept=-other)
    return _add(x, _affine(_layer(other, "-"), slope=-1.0))


def _rsub(x: LayerOutput, other: Any) -> LayerOutput:
    if not _is_number(other):
        raise TypeError(f"{other!r} - {x.name}: expected a number or a layer")
    return _add(_affine(x, slope=-1.0), other)


def _mul(x: LayerOutput, other: Any) -> LayerOutput:
    if _is_number(other):
        return _affine(x, slope=other)
    y = _layer(other, "*")
    if x.size == 1:
        return adopt_if_parsing(L.scaling(input=y, weight=x))
    if y.size == 1:
        return adopt_if_parsing(L.scaling(input=x, weight=y))
    raise ValueError(f"{x.name} * {y.name}: one side must have width 1 (a per-sample scale), "
                     f"got widths {x.size} and {y.size}")


LayerOutput.__add__ = LayerOutput.__radd__ = _add
LayerOutput.__sub__ = _sub
LayerOutput.__rsub__ = _rsub
LayerOutput.__mul__ = LayerOutput.__rmul__ = _mul
