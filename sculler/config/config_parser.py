"""The v1 configuration front end: ``Layer(...)``, ``Input(...)``, ``@config_layer`` and
``parse_config``.

A v1 config is a Python file run top to bottom; each ``Layer(name=..., type=..., inputs=...)``
call adds a layer to the config being parsed (inputs must be defined first, as in PaddlePaddle).
Parameter shapes come from the layer class registered for ``type``; a ``@config_layer`` wrapper
class (the seed tutorial's style) may also declare them with ``create_input_parameter`` /
``create_bias_parameter``, and they are then checked against the layer class.

Example::

    Layer(name="input", type="data", size=64)
    Layer(name="fc1", type="fc", size=32, active_type="tanh", inputs=[Input("input")])
    Outputs("fc1")
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
import runpy
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any

from sculler.config.keywords import (
    check_input_keywords,
    check_layer_keywords,
    check_settings_keywords,
)
from sculler.core import faces
from sculler.core.activation import get_activation
from sculler.core.builder import ModelBuilder
from sculler.core.expression import LayerOutput, recording, reset_names
from sculler.core.group_layout import flatten_groups
from sculler.core.layer import get_layer_class
from sculler.core.model_config import (
    PARAMETER_FIELDS,
    EvaluatorConfig,
    InputConfig,
    LayerConfig,
    ModelConfig,
)
from sculler.core.suggest import did_you_mean
from sculler.validate import integer, probability

_PARAM_KEYS = PARAMETER_FIELDS - {"name", "dims"}


@dataclasses.dataclass
class TrainerConfig:
    """What ``parse_config`` returns: the model and the ``settings(...)`` of the file."""

    model_config: ModelConfig
    settings: dict[str, Any]


class _ParseContext:
    def __init__(self, config_args: dict[str, str]):
        self.builder = ModelBuilder()
        self.layers: dict[str, LayerConfig] = {}
        self.nodes: dict[str, LayerOutput] = {}  # every layer as a helper input, by name
        self.inputs: list[str] = []
        self.outputs: list[str] = []
        self.settings: dict[str, Any] = {}
        self.config_args = config_args
        self.config_args_read: set[str] = set()  # names get_config_arg asked for
        self.adopted: list[Any] = []  # the config's LayerOutputs (their evaluators)
        self.inputs_declared = False  # Inputs(...) fixed the data layers' order
        self.model_type = "nn"


_local = threading.local()
_CONFIG_LAYERS: dict[str, type[LayerBase]] = {}


def _context() -> _ParseContext:
    ctx = getattr(_local, "ctx", None)
    if ctx is None:
        raise RuntimeError(
            "v1 config functions (Layer, Input, outputs, ...) run inside parse_config(path) "
            "or a `with config_scope():` block"
        )
    return ctx


@contextlib.contextmanager
def config_scope(config_args: dict[str, str] | None = None) -> Iterator[_ParseContext]:
    """Collect the layers declared inside the block (``parse_config`` uses this)."""
    old = getattr(_local, "ctx", None)
    _local.ctx = _ParseContext(dict(config_args or {}))
    try:
        yield _local.ctx
    finally:
        _local.ctx = old


def adopt(out: Any, weight_attrs: list | None, bias_attr: Any) -> None:
    """Add a layer made by a helper function (a v2 ``LayerOutput``) to the config."""
    ctx = _context()
    config = out.config
    if config.name in ctx.layers:
        raise ValueError(f"layer {config.name!r} is defined twice")
    ctx.builder.add_layer(config, weight_attrs, bias_attr)
    ctx.layers[config.name] = config
    ctx.nodes[config.name] = out
    ctx.adopted.append(out)
    if config.type == "data" and not ctx.inputs_declared:
        ctx.inputs.append(config.name)


def adopt_with_ancestors(outs: list) -> None:
    """Adopt ``outs`` and, parents first, every ancestor the config does not have yet."""
    ctx = _context()
    order, seen = [], set()

    def visit(node: Any) -> None:
        unfinished = getattr(node, "finalized", True) is False  # a mixed layer's open block
        if node.name in seen or node.name in ctx.layers or unfinished:
            return
        seen.add(node.name)
        for parent in node.parents:
            visit(parent)
        order.append(node)

    for out in outs:
        visit(out)
    for node in order:
        adopt(node, node.weight_attrs, node.bias_attr)


def adopt_if_parsing(out: Any) -> Any:
    """Adopt ``out`` (and its new ancestors) when a v1 config is being parsed outside a
    recurrent group's step; return it. For functions that are not v1 helper wrappers but
    make layers in configs too (``layer_math.exp``, ``x + y``, a user's declared layer).

    A file is a v1 config once it has declared a layer the v1 way (a helper, ``Layer``) or
    called ``settings``; before that, and in a v2 script run by ``sculler train`` (which
    declares nothing the v1 way), layers stay expressions, as v2 wants them."""
    ctx = getattr(_local, "ctx", None)
    if ctx is not None and not recording() and (ctx.layers or ctx.settings):
        adopt_with_ancestors([out])
    return out


def _adopt_result(result: Any) -> None:
    """What a declared layer function returned joins the config being parsed, if any."""
    for out in result if isinstance(result, (list, tuple)) else [result]:
        if isinstance(out, LayerOutput):
            adopt_if_parsing(out)


faces.on_result(_adopt_result)


def _declared_layer(item: Any) -> Any:
    """The layer (``LayerOutput``) a raw ``Layer(...)`` declared, for the ``LayerConfig`` it
    returned; anything else unchanged."""
    ctx = getattr(_local, "ctx", None)
    if ctx is None or not isinstance(item, LayerConfig) or ctx.layers.get(item.name) is not item:
        return item
    return ctx.nodes.get(item.name, item)


def _resolve_arguments(args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    """Helpers take what ``Layer(...)`` returned (also inside a list) as the layer it is."""

    def resolve(value: Any) -> Any:
        if isinstance(value, (list, tuple)) and any(isinstance(v, LayerConfig) for v in value):
            return type(value)(_declared_layer(v) for v in value)
        return _declared_layer(value)

    return tuple(resolve(a) for a in args), {k: resolve(v) for k, v in kwargs.items()}


faces.on_arguments(_resolve_arguments)


def takes_raw_layers(function: Callable) -> Callable:
    """``function`` with what ``Layer(...)`` returned in its arguments read as that layer
    (declared layer functions get this from :func:`faces.on_arguments`; v1 networks,
    evaluators and ``outputs`` are wrapped with it)."""

    @functools.wraps(function)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        args, kwargs = _resolve_arguments(args, kwargs)
        return function(*args, **kwargs)

    return wrapped


def is_declared(name: str) -> bool:
    """Whether the config being parsed already has a layer called ``name``."""
    return name in _context().layers


def config_layer(type_name: str):
    """Register a config wrapper class for ``type_name`` (used by ``Layer(type=...)``)."""

    def deco(cls: type[LayerBase]) -> type[LayerBase]:
        _CONFIG_LAYERS[type_name] = cls
        return cls

    return deco


class Input:
    """An input of a layer: the producing layer's name plus its weight's settings
    (``parameter_name``, ``initial_std``, ``learning_rate``, ``sparse_update``, ...).
    Any other keyword becomes the input's config attr (e.g. projection settings)."""

    def __init__(self, input_layer_name: Any, parameter_name: str | None = None, **kwargs: Any):
        self.input_layer_name = _layer_name(input_layer_name)
        check_input_keywords(str(self.input_layer_name), kwargs, _PARAM_KEYS)
        self.parameter_name = parameter_name
        self.param_attrs = {k: v for k, v in kwargs.items() if k in _PARAM_KEYS}
        self.attrs = {k: v for k, v in kwargs.items() if k not in _PARAM_KEYS}
        self.format = self.attrs.pop("format", None)
        self.nnz = self.attrs.pop("nnz", None)


class Bias:
    """Settings of a layer's bias: ``Bias(parameter_name="b", initial_std=0.0, ...)``."""

    def __init__(self, parameter_name: str | None = None, **kwargs: Any):
        unknown = set(kwargs) - _PARAM_KEYS
        if unknown:
            raise TypeError(f"Bias: unknown settings {sorted(unknown)}")
        self.attrs = dict(kwargs)
        if parameter_name:
            self.attrs["name"] = parameter_name


def _layer_name(item: Any) -> Any:
    """A layer's name for a raw ``Layer``'s input: a name stays, a layer a helper made joins
    the config (with its new ancestors) and gives its name, a ``Layer(...)`` result its name."""
    if isinstance(item, LayerOutput):
        adopt_with_ancestors([item])
        return item.name
    return item.name if isinstance(item, LayerConfig) else item


def _as_inputs(inputs: Any, layer: str) -> list[Input]:
    if inputs is None:
        return []
    if isinstance(inputs, (str, Input, LayerConfig, LayerOutput)):
        inputs = [inputs]
    out = []
    for i, item in enumerate(inputs):
        item = _layer_name(item)
        if not isinstance(item, (str, Input)):
            raise TypeError(f"layer {layer!r}: input {i} must be a layer name (str), a layer "
                            f"(what a helper or Layer() returned) or an Input(...), got "
                            f"{type(item).__name__} {item!r}")
        out.append(item if isinstance(item, Input) else Input(item))
    return out


class LayerBase:
    """Base of v1 config wrappers: holds the ``LayerConfig`` being declared.

    Subclasses (registered with ``@config_layer``) call ``super().__init__(name, type, size,
    inputs=inputs, **xargs)`` and then ``create_input_parameter`` / ``create_bias_parameter``.
    """

    def __init__(
        self,
        name: str,
        type: str,  # noqa: A002 - PaddlePaddle's keyword
        size: int = 0,
        inputs: Any = None,
        active_type: str = "",
        drop_rate: float = 0.0,
        bias: Any = None,
        **xargs: Any,
    ):
        ctx = _context()
        if name in ctx.layers:
            raise ValueError(f"layer {name!r} is defined twice")
        check_layer_keywords(name, type, xargs, get_layer_class(type))
        try:
            get_activation(active_type or "linear")
        except ValueError as e:
            raise ValueError(f"layer {name!r}: {e}") from None
        self.inputs = _as_inputs(inputs, name)
        for i, inp in enumerate(self.inputs):
            if inp.input_layer_name not in ctx.layers:
                raise ValueError(
                    f"layer {name!r} takes input {inp.input_layer_name!r} (input {i}), which is "
                    "not defined yet; v1 configs define a layer's inputs before the layer"
                )
        self.config = LayerConfig(
            name=name,
            type=type,
            size=0 if size is None else integer(size, f"layer {name!r}: size", minimum=0),
            active_type=active_type or "linear",
            inputs=[
                InputConfig(inp.input_layer_name, inp.parameter_name, dict(inp.attrs))
                for inp in self.inputs
            ],
            drop_rate=probability(drop_rate, f"layer {name!r}: drop_rate"),
            attrs=dict(xargs),
        )
        self.weight_attrs: list[dict | None] = [
            {**inp.param_attrs, **({"sparse_update": True} if inp.format else {})} or None
            for inp in self.inputs
        ]
        self.bias_attr: Any = bias.attrs if isinstance(bias, Bias) else bias
        self._declared_dims: dict[Any, list[int]] = {}

    def get_input_layer(self, index: int) -> LayerConfig:
        return _context().layers[self.inputs[index].input_layer_name]

    def create_input_parameter(self, input_index: int, psize: int, dims=None, sparse=None,
                               format=None) -> None:  # noqa: A002 - PaddlePaddle's keyword
        """Declare input ``input_index``'s weight (``psize`` values of shape ``dims``)."""
        dims = list(dims) if dims is not None else [psize // self.config.size, self.config.size]
        self._declared_dims[input_index] = dims
        attrs = dict(self.weight_attrs[input_index] or {})
        if sparse:
            attrs["sparse_update"] = True
        self.weight_attrs[input_index] = attrs

    def create_bias_parameter(self, bias: Any, size: int, dims=None) -> None:
        """Declare the bias (``bias`` False for none, True or a ``Bias`` for one)."""
        if bias is False:
            self.bias_attr = False
            return
        self._declared_dims["bias"] = list(dims) if dims is not None else [1, size]
        self.bias_attr = bias.attrs if isinstance(bias, Bias) else True

    def _register(self) -> None:
        ctx = _context()
        inputs = [ctx.layers[n] for n in self.config.input_layer_names]
        cls = get_layer_class(self.config.type)
        cls.check_config(self.config, inputs)
        self.config.size = cls.resolve_size(self.config, inputs)
        computed = dict(cls.weight_dims(self.config, inputs))
        if self.bias_attr is not False and "bias" in self._declared_dims:
            computed["bias"] = cls.bias_dims(self.config, inputs)
        for key, dims in self._declared_dims.items():
            if key in computed and list(computed[key]) != list(dims):
                raise ValueError(
                    f"config wrapper of layer {self.config.name!r} ({self.config.type}) declares "
                    f"{'the bias' if key == 'bias' else f'weight {key}'} with shape {dims}, but "
                    f"the layer computes with shape {list(computed[key])}"
                )
        ctx.builder.add_layer(self.config, self.weight_attrs, self.bias_attr)
        ctx.layers[self.config.name] = self.config
        if not recording():  # a helper may take it as input (not inside a group's step)
            node = LayerOutput(self.config, [ctx.nodes[n] for n in
                                             self.config.input_layer_names if n in ctx.nodes])
            ctx.nodes[self.config.name] = node
            ctx.adopted.append(node)  # evaluators a helper attaches to it join the config
        if self.config.type == "data" and not ctx.inputs_declared:
            ctx.inputs.append(self.config.name)


def Layer(name: str, type: str, **xargs: Any) -> LayerConfig:  # noqa: N802,A002 - Paddle's API
    """Declare a layer: ``Layer(name="fc1", type="fc", size=64, inputs=[Input("pool3")])``."""
    cls = _CONFIG_LAYERS.get(type)
    layer = cls(name=name, **xargs) if cls is not None else LayerBase(name, type, **xargs)
    layer._register()
    return layer.config


def Inputs(*names: str) -> None:  # noqa: N802 - Paddle's API
    """Set the order of the data layers (default: see ``outputs``)."""
    ctx = _context()
    ctx.inputs = list(names)
    ctx.inputs_declared = True


def Outputs(*names: str) -> None:  # noqa: N802 - Paddle's API
    """Add output layers; as PaddlePaddle's, each call appends (a name already listed is not
    repeated)."""
    outputs = _context().outputs
    outputs.extend(n for n in dict.fromkeys(names) if n not in outputs)


def Evaluator(name: str, type: str, inputs: list[str], **attrs: Any) -> None:  # noqa: N802,A002
    _context().builder.add_evaluator(EvaluatorConfig(name, type, list(inputs), attrs))


def Settings(**kwargs: Any) -> None:  # noqa: N802 - Paddle's API
    """Record training settings; a key PaddlePaddle and Sculler do not know is refused."""
    check_settings_keywords(kwargs)
    _context().settings.update(kwargs)


def get_config_arg(name: str, arg_type: type, default: Any = None) -> Any:
    """A ``--config_args name=value`` setting, converted to ``arg_type``."""
    ctx = _context()
    ctx.config_args_read.add(name)
    raw = ctx.config_args.get(name)
    if raw is None:
        return default
    if arg_type is bool:
        if raw.lower() not in ("1", "true", "yes", "on", "0", "false", "no", "off"):
            raise ValueError(f"config arg {name}={raw!r} is not a bool; use true/false or 1/0")
        return raw.lower() in ("1", "true", "yes", "on")
    try:
        if arg_type is int:
            try:
                return int(raw)
            except ValueError:
                return integer(float(raw), f"config arg {name}")
        return arg_type(raw)
    except (TypeError, ValueError) as e:
        raise ValueError(f"config arg {name}={raw!r} cannot be read as "
                         f"{getattr(arg_type, '__name__', arg_type)}: {e}") from e


def _parse_args(config_args: str | dict | None) -> dict[str, str]:
    if isinstance(config_args, dict):
        return {k: str(v) for k, v in config_args.items()}
    pairs = [p for p in (config_args or "").split(",") if p.strip()]
    out = {}
    for p in pairs:
        if "=" not in p:
            raise ValueError(f"config_args entries look like name=value, got {p!r}")
        k, v = p.split("=", 1)
        out[k.strip()] = v.strip()
    return out


def _refuse_unread_args(ctx: _ParseContext) -> None:
    """A ``config_args`` name the config never asked ``get_config_arg`` for is a mistake (a
    typo such as ``hiden=256`` would otherwise train with the default)."""
    for name in ctx.config_args:
        if name not in ctx.config_args_read:
            raise ValueError(
                f"config_args: the config never reads {name!r} (get_config_arg)"
                f"{did_you_mean(name, ctx.config_args_read)}; it reads "
                f"{sorted(ctx.config_args_read) or 'no config arg'}")


def finish_config(ctx: _ParseContext) -> ModelConfig:
    """Build the ModelConfig of what ``ctx`` collected (outputs default to the last layer)."""
    outputs = ctx.outputs or ([list(ctx.layers)[-1]] if ctx.layers else [])
    if not outputs:
        raise ValueError("the config declares no layer")
    seen = {e.name for e in ctx.builder.evaluators}
    for out in ctx.adopted:
        for ev in out.evaluators:
            if ev.name not in seen:
                seen.add(ev.name)
                ctx.builder.add_evaluator(ev)
    model = flatten_groups(ctx.builder.build(outputs, input_layer_names=ctx.inputs))
    if ctx.model_type != "nn":  # model_type() named one; a group makes it recurrent_nn
        model.type = ctx.model_type
    return model


@contextlib.contextmanager
def script_dir_on_path(path: str | os.PathLike) -> Iterator[None]:
    """The directory of the script ``path`` first on ``sys.path`` for the block, as
    ``python path`` puts it there, so a config or script imports the modules beside it
    (``from provider import train``, ``data_sources(train="provider:train")``). The modules
    first imported from there are forgotten afterwards, so a config in another folder with
    its own ``provider.py`` gets its own."""
    folder = os.path.dirname(os.path.abspath(os.fspath(path)))
    if folder in sys.path:
        yield
        return
    loaded = set(sys.modules)
    sys.path.insert(0, folder)
    try:
        yield
    finally:
        with contextlib.suppress(ValueError):
            sys.path.remove(folder)
        inside = folder + os.sep
        for name in set(sys.modules) - loaded:
            file = getattr(sys.modules.get(name), "__file__", None) or ""
            if file.startswith(inside):
                del sys.modules[name]


def run_config(
    path: str | os.PathLike | Callable[[], Any], config_args: str | dict | None = None
) -> tuple[TrainerConfig | None, dict[str, Any]]:
    """Run a config file (or a function declaring the config, as PaddlePaddle allowed): its
    model and settings (None when it declares no layer, e.g. a v2 script) and its module
    globals (``{}`` for a function). A file's directory is on ``sys.path`` while it runs."""
    reset_names()
    with config_scope(_parse_args(config_args)) as ctx:
        if callable(path):
            path()
            names: dict[str, Any] = {}
        else:
            with script_dir_on_path(path):
                names = runpy.run_path(os.fspath(path), run_name="__sculler_config__")
        _refuse_unread_args(ctx)
        if not ctx.layers:
            return None, names
        return TrainerConfig(finish_config(ctx), dict(ctx.settings)), names


def parse_config(path: str | os.PathLike | Callable[[], Any],
                 config_args: str | dict | None = None) -> TrainerConfig:
    """Run a v1 config file and return its model and settings.

    Args:
        path: the config file (Python).
        config_args: ``"name=value,name2=value2"`` (or a dict) read by ``get_config_arg``.
    """
    parsed, _ = run_config(path, config_args)
    if parsed is None:
        where = getattr(path, "__name__", None) if callable(path) else os.fspath(path)
        raise ValueError(f"{where}: the config declares no layer")
    return parsed
