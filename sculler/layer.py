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

import itertools
from collections.abc import Sequence
from typing import Any

import sculler.layers.similarity  # noqa: F401 - registers the cos and rank-cost layers
from sculler import activation as A
from sculler.attr import ExtraLayerAttribute, ParameterAttribute
from sculler.core.layer import get_layer_class
from sculler.core.model_config import EvaluatorConfig, InputConfig, LayerConfig
from sculler.data_type import InputType

__all__ = [
    "LayerOutput", "make_layer", "reset_names", "data", "fc", "embedding", "concat", "addto",
    "dropout", "classification_cost", "cross_entropy_cost", "square_error_cost", "mse_cost",
    "regression_cost", "cos_sim", "rank_cost", "py_layer",
]

_counters: dict[str, int] = {}
_creation = itertools.count()


def reset_names() -> None:
    """Restart the automatic name counters (``__fc_layer_0__`` again); a Sculler extension for
    programs that build several independent models in one process."""
    _counters.clear()


def _auto_name(prefix: str) -> str:
    n = _counters.get(prefix, 0)
    _counters[prefix] = n + 1
    return f"__{prefix}_{n}__"


class LayerOutput:
    """One node of a layer expression: ``name``, ``size``, ``parents`` and what the builder
    needs (a LayerConfig template, weight and bias attributes, attached evaluators)."""

    def __init__(self, config: LayerConfig, parents: list[LayerOutput],
                 weight_attrs: list[dict | None] | None = None, bias_attr: Any = None,
                 data_type: InputType | None = None,
                 initializers: dict[int | str, Any] | None = None):
        self.config = config
        self.parents = parents
        self.weight_attrs = weight_attrs or []
        self.bias_attr = bias_attr
        self.data_type = data_type
        self.initializers = initializers or {}
        self.evaluators: list[EvaluatorConfig] = []
        self.order = next(_creation)

    @property
    def name(self) -> str:
        return self.config.name

    @property
    def size(self) -> int:
        return self.config.size

    @property
    def layer_type(self) -> str:
        return self.config.type

    @property
    def activation(self) -> str:
        return self.config.active_type

    def __repr__(self) -> str:
        return f"LayerOutput({self.name!r}, type={self.layer_type!r}, size={self.size})"


def _as_inputs(input: Any, fn: str) -> list[LayerOutput]:  # noqa: A002
    items = list(input) if isinstance(input, (list, tuple)) else [input]
    for i, item in enumerate(items):
        if not isinstance(item, LayerOutput):
            raise TypeError(f"{fn}: input {i} must be a layer (LayerOutput), got "
                            f"{type(item).__name__}")
    if not items:
        raise ValueError(f"{fn}: needs at least one input layer")
    return items


def _param_dict(attr: Any, what: str) -> tuple[dict | None, Any]:
    if attr is None:
        return None, None
    if isinstance(attr, ParameterAttribute):
        return attr.to_weight_attrs(), attr.initializer
    if isinstance(attr, dict):
        return dict(attr), None
    raise TypeError(f"{what} must be an attr.Param (or a dict of its fields), got {attr!r}")


def make_layer(layer_type: str, inputs: Sequence[LayerOutput], *, name: str | None = None,
               name_prefix: str | None = None, size: int = 0, act: Any = None,
               default_act: type[A.BaseActivation] = A.Linear, param_attr: Any = None,
               bias_attr: Any = None, layer_attr: Any = None, parameter_name: str | None = None,
               attrs: dict[str, Any] | None = None,
               input_attrs: Sequence[dict] | None = None) -> LayerOutput:
    """The generic v2 wrapper: a :class:`LayerOutput` of engine type ``layer_type``.

    Args:
        layer_type: a registered layer type (``sculler.core.layer.register_layer``).
        inputs: parent layers, in the engine layer's input order.
        name: the layer name; default ``__<name_prefix>_<n>__`` (PaddlePaddle's scheme).
        size: output width (0: the layer type infers it).
        act: an activation instance (default ``default_act()``).
        param_attr: one ``attr.Param`` for every weighted input, or a list, one per input.
        bias_attr: False (no bias), True/None (the type's default), or an ``attr.Param``.
        layer_attr: ``attr.Extra`` (``drop_rate``).
        parameter_name: shorthand for ``param_attr=attr.Param(name=parameter_name)``.
        attrs: engine LayerConfig attrs (e.g. ``coeff``); input_attrs: per-input attrs.
    """
    fn = name_prefix or layer_type
    cls = get_layer_class(layer_type)
    act = default_act() if act is None else act
    if not isinstance(act, A.BaseActivation):
        raise TypeError(f"{fn}: act must be an activation instance such as "
                        f"paddle.activation.Tanh(), got {act!r}")
    if name is None:
        name = _auto_name(fn)
    elif not isinstance(name, str) or not name:
        raise TypeError(f"{fn}: name must be a non-empty str, got {name!r}")
    if parameter_name is not None:
        if param_attr is not None:
            raise ValueError(f"layer {name!r}: give param_attr or parameter_name, not both")
        param_attr = ParameterAttribute(name=parameter_name)
    pattrs = param_attr if isinstance(param_attr, (list, tuple)) else [param_attr] * len(inputs)
    if len(pattrs) != len(inputs):
        raise ValueError(f"layer {name!r}: {len(pattrs)} param_attr for {len(inputs)} inputs")
    weight_attrs, inits = [], {}
    for i, pa in enumerate(pattrs):
        d, init = _param_dict(pa, f"layer {name!r} param_attr")
        weight_attrs.append(d)
        if init is not None:
            inits[i] = init
    if bias_attr is None or isinstance(bias_attr, bool):
        bias = bias_attr
    else:
        bias, binit = _param_dict(bias_attr, f"layer {name!r} bias_attr")
        if binit is not None:
            inits["bias"] = binit
    drop_rate = 0.0
    if layer_attr is not None:
        if not isinstance(layer_attr, ExtraLayerAttribute):
            raise TypeError(f"layer {name!r}: layer_attr must be attr.Extra, got {layer_attr!r}")
        drop_rate = layer_attr.drop_rate
    in_attrs = list(input_attrs or [{}] * len(inputs))
    config = LayerConfig(
        name=name, type=layer_type, size=int(size or 0), active_type=act.name,
        inputs=[InputConfig(p.name, None, dict(a)) for p, a in zip(inputs, in_attrs)],
        drop_rate=drop_rate, attrs=dict(attrs or {}),
    )
    config.size = int(cls.infer_size(config, [p.config for p in inputs]))
    return LayerOutput(config, list(inputs), weight_attrs, bias, initializers=inits)


def _no(fn: str, **values: Any) -> None:
    """NotImplementedError for arguments this layer cannot honour (never ignored silently)."""
    for key, val in values.items():
        if val is not None and val is not False:
            raise NotImplementedError(f"{fn}: argument {key}={val!r} is not supported by this "
                                      "layer")


def data(name: str, type: InputType, height: int | None = None,  # noqa: A002
         width: int | None = None, depth: int | None = None, layer_attr: Any = None,
         **kw: Any) -> LayerOutput:
    """A data layer: where field ``name`` of each sample enters (width ``type.dim``)."""
    if not isinstance(type, InputType):
        raise TypeError(f"data layer {name!r}: type must be a paddle.data_type input type such "
                        f"as dense_vector(784), got {type!r}")
    _no("data", layer_attr=layer_attr, **kw)
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
    return make_layer("fc", _as_inputs(input, "fc"), name=name, name_prefix="fc_layer",
                      size=size, act=act, default_act=A.Tanh, param_attr=param_attr,
                      bias_attr=bias_attr, layer_attr=layer_attr, parameter_name=parameter_name)


def embedding(input: LayerOutput, size: int, name: str | None = None,  # noqa: A002
              param_attr: Any = None, layer_attr: Any = None, act: Any = None,
              bias_attr: Any = None, parameter_name: str | None = None) -> LayerOutput:
    """Look up row ``id`` of a (dictionary x size) table for each id: ``y_t = W[id_t]``."""
    _no("embedding", bias_attr=bias_attr)
    return make_layer("embedding", _as_inputs(input, "embedding"), name=name, size=size,
                      act=act, param_attr=param_attr, bias_attr=False, layer_attr=layer_attr,
                      parameter_name=parameter_name)


def concat(input: Any, act: Any = None, name: str | None = None,  # noqa: A002
           layer_attr: Any = None, bias_attr: Any = None, param_attr: Any = None,
           parameter_name: str | None = None) -> LayerOutput:
    """Inputs side by side: ``y = act([x_1, x_2, ...])``; width is the sum of widths."""
    _no("concat", param_attr=param_attr, parameter_name=parameter_name)
    return make_layer("concat", _as_inputs(input, "concat"), name=name, act=act,
                      bias_attr=bias_attr, layer_attr=layer_attr)


def addto(input: Any, act: Any = None, name: str | None = None,  # noqa: A002
          bias_attr: Any = None, layer_attr: Any = None, param_attr: Any = None,
          parameter_name: str | None = None) -> LayerOutput:
    """Elementwise sum ``y = act(sum_i x_i + b)``; no bias unless ``bias_attr`` asks."""
    _no("addto", param_attr=param_attr, parameter_name=parameter_name)
    return make_layer("addto", _as_inputs(input, "addto"), name=name, act=act,
                      bias_attr=bias_attr, layer_attr=layer_attr)


def dropout(input: LayerOutput, dropout_rate: float, name: str | None = None,  # noqa: A002
            **kw: Any) -> LayerOutput:
    """Dropout as PaddlePaddle builds it: an ``addto`` whose ``drop_rate`` is
    ``dropout_rate`` (units zeroed with that probability in training, scaled by
    ``1 - dropout_rate`` in testing)."""
    _no("dropout", **kw)
    return make_layer("addto", _as_inputs(input, "dropout"), name=name,
                      name_prefix="dropout", bias_attr=False,
                      layer_attr=ExtraLayerAttribute(drop_rate=dropout_rate))


def py_layer(py_layer: type, input: Any, size: int, name: str | None = None,  # noqa: A002
             act: Any = None, layer_attr: Any = None, **kwargs: Any) -> LayerOutput:
    """Use an eager ``autograd.PyLayer`` (defined at module level) as a layer:
    ``y = act(MyPyLayer.apply(x_1, ..., x_n, **kwargs))`` with output width ``size``; its own
    ``backward`` gives the input gradients. ``kwargs`` must be JSON values."""
    from sculler.eager.layer_bridge import py_layer_path

    return make_layer("py_layer", _as_inputs(input, "py_layer"), name=name, size=size, act=act,
                      layer_attr=layer_attr, bias_attr=False,
                      attrs={"py_layer": py_layer_path(py_layer), "kwargs": dict(kwargs)})


def _cost(layer_type: str, prefix: str, inputs: list, weight: Any, name: Any, coeff: float,
          layer_attr: Any, fn: str, **unsupported: Any) -> LayerOutput:
    _no(fn, **unsupported)
    if weight is not None:
        inputs = inputs + [weight]
    return make_layer(layer_type, _as_inputs(inputs, fn), name=name, name_prefix=prefix,
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
    _no("cos_sim", **kw)
    if size != 1:
        raise NotImplementedError(f"cos_sim(size={size}): the vector-matrix form (cos_vm) is "
                                  "not supported; use size=1")
    return make_layer("cos", _as_inputs([a, b], "cos_sim"), name=name, name_prefix="cos_sim",
                      size=1, layer_attr=layer_attr, attrs={"scale": float(scale)})


def rank_cost(left: LayerOutput, right: LayerOutput, label: LayerOutput, weight: Any = None,
              name: str | None = None, coeff: float = 1.0, layer_attr: Any = None,
              **kw: Any) -> LayerOutput:
    """Pairwise ranking cost ``-label*o + log(1 + exp(o))`` with ``o = left - right``."""
    _no("rank_cost", **kw)
    inputs = [left, right, label] + ([weight] if weight is not None else [])
    return make_layer("rank-cost", _as_inputs(inputs, "rank_cost"), name=name,
                      name_prefix="rank_cost", layer_attr=layer_attr,
                      attrs={"coeff": float(coeff)})
from sculler.v2.cost_layers import *  # noqa: E402,F401,F403
from sculler.v2.dense_layers import *  # noqa: E402,F401,F403
from sculler.v2.image_layers import *  # noqa: E402,F401,F403
