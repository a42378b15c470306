"""Per-layer-type ONNX conversions of Sculler layers in test (inference) mode.

Each converter takes ``(graph, layer config, input value names, context)`` and returns the name
of the layer's output before its activation and dropout, shape ``(N, size)``;
:func:`activation` and the dropout scaling (PaddlePaddle's non-inverted dropout: ``y *= 1 -
rate`` at test time) are applied by the caller.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from sculler.core.faces import onnx_converters
from sculler.core.model_config import LayerConfig
from sculler.math.activation import BRELU_MAX, NAME_ALIASES, SOFTRELU_CLIP, STANH_A, STANH_B
from sculler.onnx.graph import GraphBuilder
from sculler.onnx.sequence import (
    AGGREGATE_TYPES,
    RECURRENT_TYPES,
    SEQUENCE_CONVERTERS,
    sequence_refusal,
)

SIMPLE_ACTIVATIONS = {"sigmoid": "Sigmoid", "tanh": "Tanh", "relu": "Relu", "exp": "Exp",
                      "log": "Log", "abs": "Abs", "sqrt": "Sqrt", "reciprocal": "Reciprocal",
                      "softsign": "Softsign"}
EXPORTED_PROJECTIONS = ("full_matrix", "trans_full_matrix", "table", "identity", "dotmul",
                        "scaling", "dotmul_operator", "operand", "slice")


class Context:
    """What converters read besides the graph: the model's layer configs, the parameters (as
    float32 arrays), the opset, and each value's kind ('dense' or 'ids')."""

    def __init__(self, layers: dict[str, LayerConfig], weight: Callable[[str], np.ndarray],
                 opset: int):
        self.layers = layers
        self.weight = weight
        self.opset = opset
        self.kind: dict[str, str] = {}

    def input_configs(self, lc: LayerConfig) -> list[LayerConfig]:
        return [self.layers[n] for n in lc.input_layer_names]

    def require_dense(self, lc: LayerConfig, i: int, x: str) -> None:
        """NotImplementedError unless value ``x`` (input ``i`` of ``lc``) is dense."""
        if self.kind.get(x) != "dense":
            raise NotImplementedError(f"layer {lc.name!r} ({lc.type}): input {i} "
                                      f"({lc.inputs[i].input_layer_name!r}) is not a dense "
                                      "vector")

    def bias(self, g: GraphBuilder, lc: LayerConfig, y: str) -> str:
        """``y + b`` for the common ``(1, size)`` bias (``y`` itself without a bias)."""
        if not lc.bias_parameter_name:
            return y
        b = self.weight(lc.bias_parameter_name).reshape(1, -1)
        return g.op("Add", [y, g.const(f"{lc.name}/bias", b)], lc.name)

    def image_bias(self, g: GraphBuilder, lc: LayerConfig, y4: str,
                   channels: int, spatial_axes: int = 2) -> tuple[str, bool]:
        """Per-channel bias on the NCHW (``spatial_axes=3``: NCDHW) value; ``(value, added)``
        (False: a (1, size) bias is left for the flat value)."""
        if not lc.bias_parameter_name:
            return y4, True
        b = self.weight(lc.bias_parameter_name)
        if b.size != channels:
            return y4, False
        shape = (1, -1) + (1,) * spatial_axes
        return g.op("Add", [y4, g.const(f"{lc.name}/bias", b.reshape(shape))],
                    lc.name), True


def activation(g: GraphBuilder, name: str, x: str, hint: str) -> str:
    """The activation ``name`` applied to ``x`` (Sculler's constants: brelu clips to [0, 24],
    softrelu clips its input to [-40, 40], stanh is 1.7159 tanh(2/3 x))."""
    name = NAME_ALIASES.get(name, name)
    if name == "linear":
        return x
    if name in SIMPLE_ACTIVATIONS:
        return g.op(SIMPLE_ACTIVATIONS[name], [x], hint)
    if name == "softmax":
        return g.op("Softmax", [x], hint, axis=-1)
    if name == "brelu":
        return g.op("Clip", [x, g.const(f"{hint}/lo", 0.0), g.const(f"{hint}/hi", BRELU_MAX)],
                    hint)
    if name == "softrelu":
        clipped = g.op("Clip", [x, g.const(f"{hint}/lo", -SOFTRELU_CLIP),
                                g.const(f"{hint}/hi", SOFTRELU_CLIP)], hint)
        return g.op("Softplus", [clipped], hint)
    if name == "stanh":
        inner = g.op("Mul", [x, g.const(f"{hint}/b", STANH_B)], hint)
        return g.op("Mul", [g.op("Tanh", [inner], hint), g.const(f"{hint}/a", STANH_A)], hint)
    if name == "square":
        return g.op("Mul", [x, x], hint)
    raise NotImplementedError(f"activation {name!r}")


def unsupported_activation(name: str) -> bool:
    name = NAME_ALIASES.get(name, name)
    return name != "linear" and name not in SIMPLE_ACTIVATIONS and name not in (
        "softmax", "brelu", "softrelu", "stanh", "square")




























CONVERTERS = onnx_converters()  # declared beside each layer (sculler.core.faces)


def sequence_levels(model_layers: list[LayerConfig], data_levels: dict[str, int]
                    ) -> dict[str, int]:
    """Each layer's sequence level (0 = a vector per sample, 1 = a sequence, 2 = nested): data
    layers from their data types, whole-sequence aggregations one below their input, every
    other layer the deepest of its inputs."""
    levels: dict[str, int] = {}
    for lc in model_layers:
        if lc.type == "data":
            levels[lc.name] = data_levels[lc.name]
            continue
        ins = [levels[n] for n in lc.input_layer_names]
        deepest = max(ins, default=0)
        levels[lc.name] = max(deepest - 1, 0) if lc.type in AGGREGATE_TYPES else deepest
    return levels


def refusal(lc: LayerConfig, levels: dict[str, int]) -> str | None:
    """Why ``lc`` cannot be exported (None when it can), checked before anything is built;
    ``levels`` are the layers' sequence levels (:func:`sequence_levels`)."""
    who = f"{lc.name!r} (type {lc.type})"
    ins = [levels[n] for n in lc.input_layer_names]
    if lc.type in SEQUENCE_CONVERTERS:
        why = sequence_refusal(lc)
        if why is None and ins[0] != 1:
            why = (f"{who}: input {lc.input_layer_names[0]!r} is "
                   f"{'a nested sequence' if ins[0] else 'not a sequence'} (only single-level "
                   "sequences are exported)")
        return why
    if lc.type not in CONVERTERS:
        return f"{who}: no ONNX conversion"
    if len(set(ins)) > 1:
        return (f"{who}: mixes sequence and non-sequence inputs "
                f"{dict(zip(lc.input_layer_names, ins))}")
    if lc.active_type == "sequence_softmax":
        if levels[lc.name] != 1 or lc.size != 1:
            return (f"{who}: activation 'sequence_softmax' needs a width-1 sequence (got "
                    f"width {lc.size}, sequence level {levels[lc.name]})")
    elif unsupported_activation(lc.active_type):
        return f"{who}: activation {lc.active_type!r}"
    if lc.type == "mixed":
        bad = [ic.attrs.get("proj") for ic in lc.inputs
               if ic.attrs.get("proj") not in EXPORTED_PROJECTIONS]
        if bad:
            return f"{who}: projection(s) {bad}"
    return None


def convert(g: GraphBuilder, lc: LayerConfig, ins: list[str], ctx: Context,
            output: str | None) -> str:
    """The layer's full test-mode output: its converter, activation, then dropout scaling.
    Recurrent layers apply their activations inside the cell; ``sequence_softmax`` over the
    single sequence is a softmax over its rows (axis 0)."""
    if lc.type in SEQUENCE_CONVERTERS:
        y = SEQUENCE_CONVERTERS[lc.type](g, lc, ins, ctx)
    else:
        y = CONVERTERS[lc.type](g, lc, ins, ctx)
    if lc.active_type == "sequence_softmax":
        y = g.op("Softmax", [y], lc.name, axis=0)
    elif lc.type not in RECURRENT_TYPES:
        y = activation(g, lc.active_type, y, lc.name)
    if lc.drop_rate > 0:
        y = g.op("Mul", [y, g.const(f"{lc.name}/keep", 1.0 - lc.drop_rate)], lc.name)
    if output is not None:
        y = g.op("Identity", [y], lc.name, output=output)
    ctx.kind[y] = "dense"
    return y
