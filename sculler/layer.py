"""Layers of the v2 API (``paddle.v2.layer``): functions that build a layer expression.

Each function returns a :class:`LayerOutput` naming its parents; nothing runs until a
:class:`~sculler.topology.Topology` turns the expression into a ModelConfig. Unnamed layers get
PaddlePaddle's names (the first unnamed fc is ``__fc_layer_0__``, its parameters
``___fc_layer_0__.w0`` and ``___fc_layer_0__.wbias``), so tars saved by Paddle load by name.
A new registered layer type needs only a short wrapper around :func:`make_layer`.

Example:
    >>> import sculler as paddle
    >>> x = paddle.layer.data(name="x", type=paddle.data_type.dense_vector(13))
    >>> y = paddle.layer.fc(input=x, size=1, act=paddle.activation.Linear())
    >>> y.size
    1
"""

from __future__ import annotations

from typing import Any

import sculler.layers.similarity  # noqa: F401 - registers the cos and rank-cost layers
from sculler import activation as A
from sculler.attr import ExtraLayerAttribute
from sculler.core.model_config import LayerConfig
from sculler.data_type import InputType
from sculler.v2.dense_layers import Projection
from sculler.v2.layer_base import (
    LayerOutput,
    as_inputs,
    make_layer,
    no_support,
    reset_names,
)

__all__ = [
    "LayerOutput", "make_layer", "reset_names", "data", "fc", "embedding", "concat", "addto",
    "dropout", "classification_cost", "cross_entropy_cost", "square_error_cost", "mse_cost",
    "regression_cost", "cos_sim", "rank_cost", "py_layer",
]


def data(name: str, type: InputType, height: int | None = None,  # noqa: A002
         width: int | None = None, depth: int | None = None, layer_attr: Any = None,
         **kw: Any) -> LayerOutput:
    """A data layer: where field ``name`` of each sample enters (width ``type.dim``)."""
    if not isinstance(name, str) or not name:
        raise TypeError(f"data layer: name must be a non-empty str, got {name!r}")
    if not isinstance(type, InputType):
        raise TypeError(f"data layer {name!r}: type must be a paddle.data_type input type such "
                        f"as dense_vector(784), got {type!r}")
    no_support("data", layer_attr=layer_attr, **kw)
    attrs: dict[str, Any] = {"kind": type.kind, "seq_type": type.seq_type}
    for key, val in (("height", height), ("width", width), ("depth", depth)):
        if val is not None:
            attrs[key] = int(val)
    config = LayerConfig(name=name, type="data", size=type.dim, attrs=attrs)
    return LayerOutput(config, [], data_type=type)


def fc(input: Any, size: int, act: Any = None, name: str | None = None,  # noqa: A002
       param_attr: Any = None, bias_attr: Any = None, layer_attr: Any = None,
       parameter_name: str | None = None) -> LayerOutput:
    """Fully connected: ``y = act(sum_i x_i W_i + b)``; default act Tanh, with bias."""
    return make_layer("fc", as_inputs(input, "fc"), name=name, name_prefix="fc_layer",
                      size=size, act=act, default_act=A.Tanh, param_attr=param_attr,
                      bias_attr=bias_attr, layer_attr=layer_attr, parameter_name=parameter_name)


def embedding(input: LayerOutput, size: int, name: str | None = None,  # noqa: A002
              param_attr: Any = None, layer_attr: Any = None, act: Any = None,
              bias_attr: Any = None, parameter_name: str | None = None) -> LayerOutput:
    """Look up row ``id`` of a (dictionary x size) table for each id: ``y_t = W[id_t]``."""
    no_support("embedding", bias_attr=bias_attr)
    return make_layer("embedding", as_inputs(input, "embedding"), name=name, size=size,
                      act=act, param_attr=param_attr, bias_attr=False, layer_attr=layer_attr,
                      parameter_name=parameter_name)


def concat(input: Any, act: Any = None, name: str | None = None,  # noqa: A002
           layer_attr: Any = None, bias_attr: Any = None, param_attr: Any = None,
           parameter_name: str | None = None) -> LayerOutput:
    """Inputs side by side: ``y = act([x_1, x_2, ...])``; width is the sum of widths. Given
    projections (``concat(input=[table_projection(w1, size=32), ...])``) it is
    PaddlePaddle's concat2: each projection fills its own block of columns."""
    no_support("concat", param_attr=param_attr, parameter_name=parameter_name)
    items = list(input) if isinstance(input, (list, tuple)) else [input]
    if any(isinstance(p, Projection) for p in items):
        return _concat_projections(items, act, name, layer_attr, bias_attr)
    return make_layer("concat", as_inputs(input, "concat"), name=name, act=act,
                      bias_attr=bias_attr, layer_attr=layer_attr)


def _concat_projections(items: list, act: Any, name: Any, layer_attr: Any,
                        bias_attr: Any) -> LayerOutput:
    if not all(isinstance(p, Projection) for p in items):
        raise TypeError("concat: input must be all layers or all projections, got "
                        f"{[type(p).__name__ for p in items]}")
    in_attrs = [dict(p.input_attrs()[0], **({"size": p.size} if p.size else {})) for p in items]
    return make_layer("concat2", [p.inputs[0] for p in items], name=name, name_prefix="concat",
                      act=act, param_attr=[p.param_attr for p in items], bias_attr=bias_attr,
                      layer_attr=layer_attr, input_attrs=in_attrs)


def addto(input: Any, act: Any = None, name: str | None = None,  # noqa: A002
          bias_attr: Any = None, layer_attr: Any = None, param_attr: Any = None,
          parameter_name: str | None = None) -> LayerOutput:
    """Elementwise sum ``y = act(sum_i x_i + b)``; no bias unless ``bias_attr`` asks."""
    no_support("addto", param_attr=param_attr, parameter_name=parameter_name)
    return make_layer("addto", as_inputs(input, "addto"), name=name, act=act,
                      bias_attr=bias_attr, layer_attr=layer_attr)


def dropout(input: LayerOutput, dropout_rate: float, name: str | None = None,  # noqa: A002
            **kw: Any) -> LayerOutput:
    """Dropout as PaddlePaddle builds it: an ``addto`` whose ``drop_rate`` is
    ``dropout_rate`` (units zeroed with that probability in training, scaled by
    ``1 - dropout_rate`` in testing)."""
    no_support("dropout", **kw)
    return make_layer("addto", as_inputs(input, "dropout"), name=name,
                      name_prefix="dropout", bias_attr=False,
                      layer_attr=ExtraLayerAttribute(drop_rate=dropout_rate))


def py_layer(py_layer: type, input: Any, size: int, name: str | None = None,  # noqa: A002
             act: Any = None, layer_attr: Any = None, **kwargs: Any) -> LayerOutput:
    """Use an eager ``autograd.PyLayer`` (defined at module level) as a layer:
    ``y = act(MyPyLayer.apply(x_1, ..., x_n, **kwargs))`` with output width ``size``; its own
    ``backward`` gives the input gradients. ``kwargs`` must be JSON values."""
    from sculler.eager.layer_bridge import py_layer_path

    return make_layer("py_layer", as_inputs(input, "py_layer"), name=name, size=size, act=act,
                      layer_attr=layer_attr, bias_attr=False,
                      attrs={"py_layer": py_layer_path(py_layer), "kwargs": dict(kwargs)})


def _cost(layer_type: str, prefix: str, inputs: list, weight: Any, name: Any, coeff: float,
          layer_attr: Any, fn: str, **unsupported: Any) -> LayerOutput:
    no_support(fn, **unsupported)
    if weight is not None:
        inputs = inputs + [weight]
    return make_layer(layer_type, as_inputs(inputs, fn), name=name, name_prefix=prefix,
                      layer_attr=layer_attr, attrs={"coeff": float(coeff)})


def classification_cost(input: LayerOutput, label: LayerOutput, weight: Any = None,  # noqa: A002
                        name: str | None = None, evaluator: Any = "default",
                        layer_attr: Any = None, coeff: float = 1.0, act: Any = None,
                        param_attr: Any = None, bias_attr: Any = None,
                        parameter_name: str | None = None) -> LayerOutput:
    """Cross entropy ``-coeff * log p[label]`` of a softmax output; attaches a
    ``classification_error`` evaluator named ``classification_error_evaluator``."""
    out = _cost("multi-class-cross-entropy", "cost", [input, label], weight, name, coeff,
                layer_attr, "classification_cost", act=act, param_attr=param_attr,
                bias_attr=bias_attr, parameter_name=parameter_name)
    if evaluator == "default":
        from sculler.evaluator import classification_error

        evaluator = classification_error
    for ev in (evaluator if isinstance(evaluator, (list, tuple)) else [evaluator]):
        if ev is None:
            continue
        if not callable(ev):
            raise TypeError(f"classification_cost: evaluator must be an evaluator function, "
                            f"got {ev!r}")
        ev_name = getattr(ev, "evaluator_name", None) or f"{ev.__name__}_evaluator"
        ev(input=input, label=label, name=ev_name, weight=weight)
    return out


def cross_entropy_cost(input: LayerOutput, label: LayerOutput, name: str | None = None,  # noqa: A002
                       coeff: float = 1.0, weight: Any = None, layer_attr: Any = None,
                       **kw: Any) -> LayerOutput:
    """``-coeff * log p[label]`` without an attached evaluator."""
    return _cost("multi-class-cross-entropy", "cross_entropy", [input, label], weight, name,
                 coeff, layer_attr, "cross_entropy_cost", **kw)


def square_error_cost(input: LayerOutput, label: LayerOutput, weight: Any = None,  # noqa: A002
                      name: str | None = None, coeff: float = 1.0, layer_attr: Any = None,
                      **kw: Any) -> LayerOutput:
    """``coeff * sum_j (x_j - y_j)^2`` per sample (PaddlePaddle's, no 1/2)."""
    return _cost("square_error", "square_error_cost", [input, label], weight, name, coeff,
                 layer_attr, "square_error_cost", **kw)


mse_cost = regression_cost = square_error_cost


def cos_sim(a: LayerOutput, b: LayerOutput, scale: float = 1, size: int = 1,
            name: str | None = None, layer_attr: Any = None, **kw: Any) -> LayerOutput:
    """``y = scale * a.b / (|a| |b|)`` per sample; ``a`` and ``b`` have one width."""
    no_support("cos_sim", **kw)
    if size != 1:
        raise NotImplementedError(f"cos_sim(size={size}): the vector-matrix form (cos_vm) is "
                                  "not supported; use size=1")
    return make_layer("cos", as_inputs([a, b], "cos_sim"), name=name, name_prefix="cos_sim",
                      size=1, layer_attr=layer_attr, attrs={"scale": float(scale)})


def rank_cost(left: LayerOutput, right: LayerOutput, label: LayerOutput, weight: Any = None,
              name: str | None = None, coeff: float = 1.0, layer_attr: Any = None,
              **kw: Any) -> LayerOutput:
    """Pairwise ranking cost ``-label*o + log(1 + exp(o))`` with ``o = left - right``."""
    no_support("rank_cost", **kw)
    inputs = [left, right, label] + ([weight] if weight is not None else [])
    return make_layer("rank-cost", as_inputs(inputs, "rank_cost"), name=name,
                      name_prefix="rank_cost", layer_attr=layer_attr,
                      attrs={"coeff": float(coeff)})
from sculler.v2.cost_layers import *  # noqa: E402,F401,F403
from sculler.v2.dense_layers import *  # noqa: E402,F401,F403
from sculler.v2.group_layers import *  # noqa: E402,F401,F403
from sculler.v2.image_layers import *  # noqa: E402,F401,F403
from sculler.v2.recurrent_layers import *  # noqa: E402,F401,F403
from sculler.v2.sequence_layers import *  # noqa: E402,F401,F403
from sculler.v2.structured_costs import *  # noqa: E402,F401,F403
