"""v1 helper functions in the style of ``paddle.trainer_config_helpers``.

``from sculler.config.helpers import *`` in a config file gives ``data_layer``, ``fc_layer``,
``classification_cost``, ``outputs``, ``settings``, the ``*Activation`` classes, ``ParamAttr``,
the optimizers and ``data_sources``. Each helper builds its layer exactly as the v2 function of
the same meaning does (same generated names: the first unnamed ``fc_layer`` is
``__fc_layer_0__``) and adds it to the config being parsed.

Example config::

    from sculler.config.helpers import *
    settings(batch_size=128, learning_rate=0.1 / 128, learning_method=MomentumOptimizer(0.9))
    data_sources(train="sculler.dataset.digits:train", test="sculler.dataset.digits:test")
    img = data_layer(name="pixel", size=64)
    hidden = fc_layer(input=img, size=128, act=ReluActivation())
    predict = fc_layer(input=hidden, size=10, act=SoftmaxActivation())
    outputs(classification_cost(input=predict, label=data_layer(name="label", size=10)))
"""

from __future__ import annotations

import functools
from typing import Any

from sculler import activation as _act
from sculler import data_type as _dt
from sculler import layer as _v2
from sculler import networks as _networks
from sculler import op as layer_math
from sculler import pooling as _pooling
from sculler.attr import ExtraAttr, ExtraLayerAttribute, ParamAttr, ParameterAttribute
from sculler.config import evaluators as _v1_evaluators
from sculler.config.config_parser import (
    Bias,
    Input,
    Inputs,
    Layer,
    Outputs,
    Settings,
    _context,
    adopt_with_ancestors,
    get_config_arg,
    takes_raw_layers,
)
from sculler.config.data_provider import define_py_data_sources2
from sculler.config.evaluators import *  # noqa: F403
from sculler.core.expression import layer_support
from sculler.core.faces import Face, faces
from sculler.core.suggest import checked_keywords
from sculler.optimizer import L1Regularization, L2Regularization, ModelAverage
from sculler.validate import integer

__all__ = [
    "Bias", "Input", "Inputs", "inputs", "Layer", "Outputs", "Settings", "get_config_arg",
    "ParamAttr",
    "ParameterAttribute", "ExtraAttr", "ExtraLayerAttribute", "L1Regularization",
    "L2Regularization", "data_layer", "outputs", "settings", "data_sources", "MomentumOptimizer",
    "AdamOptimizer", "AdamaxOptimizer", "AdaGradOptimizer", "DecayedAdaGradOptimizer",
    "AdaDeltaOptimizer", "RMSPropOptimizer", "ModelAverage", "recurrent_group", "beam_search",
    "memory", "StaticInput", "SubsequenceInput", "GeneratedInput", "get_output_layer",
    "gru_step_layer", "gru_step_naive_layer", "lstm_step_layer", "lstmemory_unit",
    "lstmemory_group", "gru_unit", "gru_group", "simple_gru", "simple_attention",
    "dot_product_attention", "AggregateLevel", "ExpandLevel", "MaxPooling", "AvgPooling",
    "SumPooling", "SquareRootNPooling", "sequence_conv_pool", "text_conv_pool",
]  # plus every declared v1 layer helper, added below

# v1 activation names
for _name in ("Tanh", "Sigmoid", "Softmax", "Identity", "Linear", "SequenceSoftmax", "Exp",
              "Relu", "BRelu", "SoftRelu", "STanh", "Abs", "Square", "Log", "Sqrt",
              "Reciprocal", "SoftSign"):
    globals()[f"{_name}Activation"] = getattr(_act, _name)
    __all__.append(f"{_name}Activation")


def _helper(v2_function):
    """A v1 helper: call the v2 function, then add the layers it made to the config being
    parsed (parents first; a network helper makes several). Unknown keywords are refused."""
    checked = checked_keywords(v2_function)

    @takes_raw_layers
    def helper(*args: Any, **kwargs: Any) -> _v2.LayerOutput:
        out = checked(*args, **kwargs)
        adopt_with_ancestors([out])
        return out

    helper.__name__ = v2_function.__name__
    helper.__doc__ = v2_function.__doc__
    return helper


def data_layer(name: str, size: int, height: int | None = None, width: int | None = None,
               depth: int | None = None, layer_attr: Any = None) -> _v2.LayerOutput:
    """A data layer of width ``size`` (its storage type comes from the data source)."""
    return _helper(_v2.data)(name=name, type=_dt.dense_vector(size), height=height,
                             width=width, depth=depth, layer_attr=layer_attr)



def _v1_face(face: Face) -> Any:
    """The v1 helper of a declared face (:mod:`sculler.core.faces`): by its ``kind``, the
    function itself, or a wrapper adding the layers it makes to the config being parsed."""
    if face.kind == "plain":
        return face.function
    if face.kind == "group":
        return _group_helper(face.function)
    return _helper(face.function)


def _group_helper(v2_function):
    """A v1 helper for a function that runs a step function (a recurrent group): the layers
    the step makes belong to the group's step model, not to the config, so they are taken
    back out of the config and only the group (and its out-links) are added."""

    @functools.wraps(v2_function)
    @takes_raw_layers
    def helper(*args: Any, **kwargs: Any) -> Any:
        ctx = _context()
        n_layers, n_adopted, n_inputs = len(ctx.builder._layers), len(ctx.adopted), len(
            ctx.inputs)
        out = v2_function(*args, **kwargs)
        for lc in ctx.builder._layers[n_layers:]:
            ctx.layers.pop(lc.name, None)
            ctx.nodes.pop(lc.name, None)
            ctx.builder._weight_attrs.pop(lc.name, None)
            ctx.builder._bias_attrs.pop(lc.name, None)
        del ctx.builder._layers[n_layers:]
        del ctx.adopted[n_adopted:]
        del ctx.inputs[n_inputs:]
        adopt_with_ancestors(out if isinstance(out, list) else [out])
        return out

    return helper


recurrent_group = _group_helper(_v2.recurrent_group)
beam_search = _group_helper(_v2.beam_search)
memory = _v2.memory
StaticInput = _v2.StaticInput
SubsequenceInput = _v2.SubsequenceInput
GeneratedInput = _v2.GeneratedInput
get_output_layer = _helper(_v2.get_output)
gru_step_layer = _helper(_v2.gru_step)
gru_step_naive_layer = _v2.gru_step_naive
lstm_step_layer = _helper(_v2.lstm_step)
lstmemory_unit = _networks.lstmemory_unit
gru_unit = _networks.gru_unit
simple_attention = _networks.simple_attention
dot_product_attention = _networks.dot_product_attention
lstmemory_group = _group_helper(_networks.lstmemory_group)
gru_group = _group_helper(_networks.gru_group)
simple_gru = _group_helper(_networks.simple_gru)


# sequence layers (sculler/v2/sequence_layers.py)
AggregateLevel, ExpandLevel = _v2.AggregateLevel, _v2.ExpandLevel
MaxPooling, AvgPooling = _pooling.Max, _pooling.Avg
SumPooling, SquareRootNPooling = _pooling.Sum, _pooling.SquareRootN
sequence_conv_pool = text_conv_pool = _helper(_networks.sequence_conv_pool)


for _face in faces():
    for _name in _face.v1_names:
        globals()[_name] = _v1_face(_face)
        __all__.append(_name)


# networks (trainer_config_helpers.networks) built from several layers
for _name in ("simple_img_conv_pool", "img_separable_conv", "img_conv_bn_pool", "img_conv_group",
              "small_vgg",
              "vgg_16_network", "simple_lstm", "simple_gru2", "bidirectional_lstm",
              "bidirectional_gru", "multi_head_attention"):
    globals()[_name] = _helper(getattr(_networks, _name))
    __all__.append(_name)
__all__ += ["layer_math", "define_py_data_sources2", "layer_support", *_v1_evaluators.__all__]
for _name in _v1_evaluators.__all__:  # an evaluator may watch a raw Layer(...)
    globals()[_name] = takes_raw_layers(getattr(_v1_evaluators, _name))


def _flat(layers: tuple) -> list:
    return [x for item in layers for x in (item if isinstance(item, (list, tuple)) else [item])]


@takes_raw_layers
def inputs(*layers: Any) -> None:
    """Declare the data layers and the order samples feed them: ``inputs(image, label)``."""
    Inputs(*[x if isinstance(x, str) else x.name for x in _flat(layers)])


@takes_raw_layers
def outputs(*layers: Any) -> None:
    """Declare the output (cost) layers: ``outputs(cost)``. Unless ``inputs(...)`` or an earlier
    ``outputs(...)`` set them, the data layers are those the outputs depend on, in
    PaddlePaddle's order: a depth-first walk from the outputs in order, parents before a layer,
    each parent in input order."""
    flat = _flat(layers)
    for i, x in enumerate(flat):
        if not isinstance(x, (str, _v2.LayerOutput)):
            raise TypeError(f"outputs: item {i} must be a layer (LayerOutput) or a layer name, "
                            f"got {type(x).__name__}")
    ctx = _context()
    adopt_with_ancestors([x for x in flat if not isinstance(x, str)])
    if not ctx.inputs_declared and all(not isinstance(x, str) for x in flat):
        order: list[str] = []
        seen: set[str] = set()

        def visit(node: Any) -> None:
            if node.name in seen:
                return
            seen.add(node.name)
            for parent in node.parents:
                visit(parent)
            if node.layer_type == "data":
                order.append(node.name)

        for out in flat:
            visit(out)
        ctx.inputs = order
        # as PaddlePaddle's HasInputsSet(): a later outputs(...) call only adds outputs
        ctx.inputs_declared = bool(order)
    Outputs(*[x if isinstance(x, str) else x.name for x in flat])


class _Method:
    """A v1 ``learning_method``: the sculler.optimizer class name and its own arguments."""

    def __init__(self, optimizer: str, **kwargs: Any):
        self.optimizer = optimizer
        self.kwargs = {k: v for k, v in kwargs.items() if v is not None}


def MomentumOptimizer(momentum: float | None = None, sparse: bool = False) -> _Method:  # noqa: N802
    return _Method("Momentum", momentum=momentum, sparse=sparse)


def AdamOptimizer(beta1: float = 0.9, beta2: float = 0.999,  # noqa: N802
                  epsilon: float = 1e-8) -> _Method:
    return _Method("Adam", beta1=beta1, beta2=beta2, epsilon=epsilon)


def AdamaxOptimizer(beta1: float = 0.9, beta2: float = 0.999) -> _Method:  # noqa: N802
    return _Method("Adamax", beta1=beta1, beta2=beta2)


def AdaGradOptimizer() -> _Method:  # noqa: N802
    return _Method("AdaGrad")


def DecayedAdaGradOptimizer(rho: float = 0.95, epsilon: float = 1e-6) -> _Method:  # noqa: N802
    return _Method("DecayedAdaGrad", rho=rho, epsilon=epsilon)


def AdaDeltaOptimizer(rho: float = 0.95, epsilon: float = 1e-6) -> _Method:  # noqa: N802
    return _Method("AdaDelta", rho=rho, epsilon=epsilon)


def RMSPropOptimizer(rho: float = 0.95, epsilon: float = 1e-6) -> _Method:  # noqa: N802
    return _Method("RMSProp", rho=rho, epsilon=epsilon)


def settings(batch_size: int, learning_rate: float = 1e-3,
             learning_rate_decay_a: float | None = None,
             learning_rate_decay_b: float | None = None,
             learning_rate_schedule: str | None = None, learning_rate_args: str | None = None,
             learning_method: _Method | None = None, regularization: Any = None,
             is_async: bool = False, model_average: Any = None,
             gradient_clipping_threshold: float | None = None,
             num_passes: int | None = None) -> None:
    """Training settings, PaddlePaddle's keywords (plus ``num_passes``, a Sculler extension):
    batch size, learning rate and its schedule, method, regularization, model averaging,
    clipping; ``sculler train`` turns them into an optimizer. A misspelt keyword is refused
    with the closest name; ``batch_size`` and ``num_passes`` must be positive ints (``128.0``
    is read as 128, ``12.7`` is an error)."""
    if is_async:
        raise NotImplementedError("settings: is_async=True (asynchronous SGD) is not supported")
    if learning_method is not None and not isinstance(learning_method, _Method):
        raise TypeError(
            f"settings(learning_method=...) must be an optimizer object such as "
            f"AdamOptimizer() or MomentumOptimizer(0.9) (from sculler.config.helpers), got "
            f"{learning_method!r}")
    schedule = {"learning_rate_decay_a": learning_rate_decay_a,
                "learning_rate_decay_b": learning_rate_decay_b,
                "learning_rate_schedule": learning_rate_schedule,
                "learning_rate_args": learning_rate_args}
    Settings(batch_size=integer(batch_size, "settings: batch_size", minimum=1),
             learning_rate=float(learning_rate),
             learning_method=learning_method or MomentumOptimizer(),
             regularization=regularization, model_average=model_average,
             gradient_clipping_threshold=gradient_clipping_threshold,
             num_passes=None if num_passes is None else integer(
                 num_passes, "settings: num_passes", minimum=1),
             **{k: v for k, v in schedule.items() if v is not None})


settings = checked_keywords(settings)


def data_sources(train: str, test: str | None = None, input_types: dict | None = None) -> None:
    """Where ``sculler train`` reads data: ``"module:function"`` names of reader creators
    (``function()`` returns a reader), e.g. ``"sculler.dataset.digits:train"``.
    ``input_types`` (data layer name -> ``sculler.data_type`` type) overrides the types
    inferred from the first sample (float vector -> dense, int -> integer ids)."""
    for role, spec in (("train", train), ("test", test)):
        if spec is not None and not isinstance(spec, str):
            raise TypeError(
                f"data_sources({role}=...) takes a 'module:function' string naming a reader "
                f"creator, got {spec!r}; a reader written in the config itself cannot be "
                "named: move it into a module beside the config (e.g. provider.py) and pass "
                f"{role}='provider:{role}'")
    Settings(train_source=train, test_source=test, input_types=dict(input_types or {}))
