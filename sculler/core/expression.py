"""The machinery behind every v2 layer function: :class:`LayerOutput` (a node of a layer
expression), :func:`make_layer` (the generic wrapper around a registered layer type) and
PaddlePaddle's automatic layer names.

It lives in the engine because each layer file declares its own v2 function (see
:mod:`sculler.core.faces`) and a layer never imports a front end; ``sculler.layer`` re-exports
it. Imports run one way: layer files -> this module -> the rest of core.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
from collections.abc import Callable, Sequence
from typing import Any

from sculler import activation as A
from sculler.attr import ExtraLayerAttribute, ParameterAttribute
from sculler.core.faces import running_prefix
from sculler.core.layer import get_layer_class
from sculler.core.model_config import EvaluatorConfig, InputConfig, LayerConfig
from sculler.data_type import InputType
from sculler.validate import integer

__all__ = ["LayerOutput", "make_layer", "reset_names", "auto_name", "as_inputs", "no_support",
           "record_layers"]

_counters: dict[str, int] = {}
_creation = itertools.count()
# recurrent_group records the layers its step function creates (innermost group last)
_recorders: list[list] = []


@contextlib.contextmanager
def record_layers():
    """Collect every LayerOutput created inside the ``with`` block (a recurrent group's step)."""
    created: list = []
    _recorders.append(created)
    try:
        yield created
    finally:
        _recorders.pop()


def recording() -> bool:
    """Whether a recurrent group's step function is running (its layers are being recorded)."""
    return bool(_recorders)


def reset_names() -> None:
    """Restart the automatic name counters (``__fc_layer_0__`` again); a Sculler extension for
    programs that build several independent models in one process."""
    _counters.clear()


def auto_name(prefix: str) -> str:
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
        if _recorders:
            _recorders[-1].append(self)

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


def as_inputs(input: Any, fn: str) -> list[LayerOutput]:  # noqa: A002
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
        name: the layer name; default ``__<prefix>_<n>__`` (PaddlePaddle's scheme), where the
            prefix is the one the running ``@layer_function`` declares
            (:func:`sculler.core.faces.running_prefix`), else ``name_prefix``, else the type.
        size: output width (0: the layer type infers it).
        act: an activation instance (default ``default_act()``).
        param_attr: one ``attr.Param`` for every weighted input, or a list, one per input.
        bias_attr: False (no bias), True/None (the type's default), or an ``attr.Param``.
        layer_attr: ``attr.Extra`` (``drop_rate``).
        parameter_name: shorthand for ``param_attr=attr.Param(name=parameter_name)``.
        attrs: engine LayerConfig attrs (e.g. ``coeff``); input_attrs: per-input attrs.
    """
    fn = running_prefix() or name_prefix or layer_type
    cls = get_layer_class(layer_type)
    act = default_act() if act is None else act
    if not isinstance(act, A.BaseActivation):
        raise TypeError(f"{fn}: act must be an activation instance such as "
                        f"paddle.activation.Tanh(), got {act!r}")
    if name is None:
        name = auto_name(fn)
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
        if layer_attr.error_clipping_threshold:
            attrs = {**(attrs or {}),
                     "error_clipping_threshold": layer_attr.error_clipping_threshold}
    in_attrs = list(input_attrs or [{}] * len(inputs))
    size = 0 if size is None else integer(size, f"layer {name!r} ({layer_type}): size", minimum=0)
    config = LayerConfig(
        name=name, type=layer_type, size=size, active_type=act.name,
        inputs=[InputConfig(p.name, None, dict(a)) for p, a in zip(inputs, in_attrs)],
        drop_rate=drop_rate, attrs=dict(attrs or {}),
    )
    config.size = cls.resolve_size(config, [p.config for p in inputs])
    return LayerOutput(config, list(inputs), weight_attrs, bias, initializers=inits)


def no_support(fn: str, **values: Any) -> None:
    """NotImplementedError for arguments this layer cannot honour (never ignored silently)."""
    for key, val in values.items():
        if val is not None and val is not False:
            raise NotImplementedError(f"{fn}: argument {key}={val!r} is not supported by this "
                                      "layer")


def simple_layer(layer_type: str, prefix: str, inputs: list, name: Any, layer_attr: Any = None,
            **kw: Any) -> LayerOutput:
    return make_layer(layer_type, as_inputs(inputs, prefix), name=name, name_prefix=prefix,
                      layer_attr=layer_attr, bias_attr=kw.pop("bias_attr", False), **kw)


def one_input(input: Any, fn: str) -> LayerOutput:  # noqa: A002
    items = as_inputs(input, fn)
    if len(items) != 1:
        raise ValueError(f"{fn}: takes one input layer, got {len(items)}")
    return items[0]


class Projection:
    """One term of a mixed layer: engine ``proj`` kind, its input layer(s), per-input attrs,
    parameter attribute and the output width it implies (0: the mixed layer's size)."""

    def __init__(self, kind: str, inputs: list[LayerOutput], attrs: dict | None = None,
                 param_attr: Any = None, size: int = 0):
        self.kind = kind
        self.inputs = as_inputs(inputs, kind + "_projection")
        self.attrs = dict(attrs or {})
        self.param_attr = param_attr
        self.size = int(size or 0)

    def input_attrs(self) -> list[dict]:
        if self.kind in ("dotmul_operator", "conv_operator"):
            return [{"proj": self.kind, **self.attrs}, {"proj": "operand"}]
        return [{"proj": self.kind, **self.attrs}]

    def __repr__(self) -> str:
        return f"Projection({self.kind!r}, {[i.name for i in self.inputs]})"


ERROR_CLIPPING, DROPOUT, DEVICE = "error_clipping_threshold", "drop_rate", "device"


def layer_support(*supported: str) -> Callable[[Callable], Callable]:
    """PaddlePaddle's decorator for a layer function: which ``ExtraLayerAttribute`` fields
    (``ERROR_CLIPPING``, ``DROPOUT``; ``DEVICE`` always) it honours. A ``layer_attr`` that sets
    another raises NotImplementedError naming the field, instead of being ignored."""
    allowed = set(supported) | {DEVICE}

    def deco(function: Callable) -> Callable:
        @functools.wraps(function)
        def checked(*args: Any, **kwargs: Any) -> Any:
            for value in (*args, *kwargs.values()):
                if isinstance(value, ExtraLayerAttribute):
                    used = {ERROR_CLIPPING} if value.error_clipping_threshold else set()
                    used |= {DROPOUT} if value.drop_rate else set()
                    if used - allowed:
                        raise NotImplementedError(
                            f"{function.__name__}: layer_attr {sorted(used - allowed)} is not "
                            f"supported by this layer (it honours {sorted(allowed)})")
            return function(*args, **kwargs)

        return checked

    return deco
