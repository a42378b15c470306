"""Per-layer-type ONNX conversions of Sculler layers in test (inference) mode.

Each converter takes ``(graph, layer config, input value names, context)`` and returns the name
of the layer's output before its activation and dropout, shape ``(N, size)``;
:func:`activation` and the dropout scaling (PaddlePaddle's non-inverted dropout: ``y *= 1 -
rate`` at test time) are applied by the caller.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from sculler.core.model_config import LayerConfig
from sculler.layers.conv import conv_conf
from sculler.layers.image import image_geometry
from sculler.layers.pool import pool_conf
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
                        "scaling", "dotmul_operator", "operand")


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


def _bias(g: GraphBuilder, lc: LayerConfig, y: str, ctx: Context) -> str:
    """``y + b`` for the common ``(1, size)`` bias."""
    if not lc.bias_parameter_name:
        return y
    b = ctx.weight(lc.bias_parameter_name).reshape(1, -1)
    return g.op("Add", [y, g.const(f"{lc.name}/bias", b)], lc.name)


def _dense_input(lc: LayerConfig, i: int, x: str, ctx: Context) -> None:
    if ctx.kind.get(x) != "dense":
        raise NotImplementedError(f"layer {lc.name!r} ({lc.type}): input {i} "
                                  f"({lc.inputs[i].input_layer_name!r}) is not a dense vector")


def fc(g: GraphBuilder, lc: LayerConfig, ins: list[str], ctx: Context) -> str:
    """``y = sum_i x_i W_i + b``."""
    parts = []
    for i, (ic, x) in enumerate(zip(lc.inputs, ins)):
        _dense_input(lc, i, x, ctx)
        w = g.const(f"{lc.name}/w{i}", ctx.weight(ic.input_parameter_name))
        parts.append(g.op("MatMul", [x, w], lc.name))
    y = parts[0] if len(parts) == 1 else g.op("Sum", parts, lc.name)
    return _bias(g, lc, y, ctx)


def embedding(g: GraphBuilder, lc: LayerConfig, ins: list[str], ctx: Context) -> str:
    """``y = W[ids]``."""
    if ctx.kind.get(ins[0]) != "ids":
        raise NotImplementedError(f"layer {lc.name!r} (embedding): input is not integer ids")
    table = g.const(f"{lc.name}/table", ctx.weight(lc.inputs[0].input_parameter_name))
    return _bias(g, lc, g.op("Gather", [table, ins[0]], lc.name, axis=0), ctx)


def concat(g: GraphBuilder, lc: LayerConfig, ins: list[str], ctx: Context) -> str:
    for i, x in enumerate(ins):
        _dense_input(lc, i, x, ctx)
    return _bias(g, lc, g.op("Concat", ins, lc.name, axis=1), ctx)


def addto(g: GraphBuilder, lc: LayerConfig, ins: list[str], ctx: Context) -> str:
    for i, x in enumerate(ins):
        _dense_input(lc, i, x, ctx)
    y = ins[0] if len(ins) == 1 else g.op("Sum", ins, lc.name)
    return _bias(g, lc, y, ctx)


def mixed(g: GraphBuilder, lc: LayerConfig, ins: list[str], ctx: Context) -> str:
    """Sum of the projections (see sculler.layers.mixed) plus bias."""
    parts = []
    for i, (ic, x) in enumerate(zip(lc.inputs, ins)):
        kind, hint = ic.attrs.get("proj"), f"{lc.name}/{i}"
        if kind != "table":
            _dense_input(lc, i, x, ctx)
        w = ctx.weight(ic.input_parameter_name) if ic.input_parameter_name else None
        if kind == "full_matrix":
            parts.append(g.op("MatMul", [x, g.const(hint, w)], hint))
        elif kind == "trans_full_matrix":
            parts.append(g.op("MatMul", [x, g.const(hint, w.T)], hint))
        elif kind == "table":
            if ctx.kind.get(x) != "ids":
                raise NotImplementedError(f"layer {lc.name!r} (mixed): table projection input "
                                          f"{i} is not integer ids")
            parts.append(g.op("Gather", [g.const(hint, w), x], hint, axis=0))
        elif kind == "identity":
            parts.append(_identity(g, lc, i, x, ctx, hint))
        elif kind == "dotmul":
            parts.append(g.op("Mul", [x, g.const(hint, w.reshape(1, -1))], hint))
        elif kind == "scaling":
            parts.append(g.op("Mul", [x, g.const(hint, w.reshape(()))], hint))
        elif kind == "dotmul_operator":
            prod = g.op("Mul", [x, ins[i + 1]], hint)
            scale = float(ic.attrs.get("scale", 1.0))
            parts.append(g.op("Mul", [prod, g.const(hint, scale)], hint))
        elif kind != "operand":
            raise NotImplementedError(f"layer {lc.name!r} (mixed): projection {kind!r} "
                                      f"(input {i})")
    y = parts[0] if len(parts) == 1 else g.op("Sum", parts, lc.name)
    return _bias(g, lc, y, ctx)


def _identity(g: GraphBuilder, lc: LayerConfig, i: int, x: str, ctx: Context,
              hint: str) -> str:
    """An identity projection with ``offset``: a column window of a wider input, or the
    input placed at ``offset`` in the (wider) output."""
    width = ctx.layers[lc.inputs[i].input_layer_name].size
    off = int(lc.inputs[i].attrs.get("offset", 0))
    if width == lc.size and off == 0:
        return x
    if width >= lc.size:
        return g.op("Slice", [x, g.const(f"{hint}/s", [off], np.int64),
                              g.const(f"{hint}/e", [off + lc.size], np.int64),
                              g.const(f"{hint}/a", [1], np.int64)], hint)
    pads = g.const(f"{hint}/pads", [0, off, 0, lc.size - off - width], np.int64)
    return g.op("Pad", [x, pads], hint)


def _image_bias(g: GraphBuilder, lc: LayerConfig, y4: str, channels: int, ctx: Context,
                size: int) -> tuple[str, bool]:
    """Per-channel bias on the NCHW value; ``(value, added)`` (False: a (1, size) bias is
    left for the flat value)."""
    if not lc.bias_parameter_name:
        return y4, True
    b = ctx.weight(lc.bias_parameter_name)
    if b.size != channels:
        return y4, False
    return g.op("Add", [y4, g.const(f"{lc.name}/bias", b.reshape(1, -1, 1, 1))], lc.name), True


def exconv(g: GraphBuilder, lc: LayerConfig, ins: list[str], ctx: Context) -> str:
    """2-D convolution of each input (weights ``(F, C/g, fy, fx)``), summed, plus bias."""
    cfgs = ctx.input_configs(lc)
    nf = int(lc.attrs["num_filters"])
    parts = []
    for i, x in enumerate(ins):
        _dense_input(lc, i, x, ctx)
        c, h, w = image_geometry(lc, cfgs, i)
        cf = conv_conf(lc, i)
        (fy, fx), (py, px) = cf["filter_size"], cf["padding"]
        weight = ctx.weight(lc.inputs[i].input_parameter_name).reshape(
            nf, c // cf["groups"], fy, fx)
        parts.append(g.op("Conv", [g.to_image(x, (c, h, w), lc.name),
                                   g.const(f"{lc.name}/w{i}", weight)], lc.name,
                          kernel_shape=[fy, fx], pads=[py, px, py, px],
                          strides=list(cf["stride"]), dilations=list(cf["dilation"]),
                          group=cf["groups"]))
    y = parts[0] if len(parts) == 1 else g.op("Sum", parts, lc.name)
    y, done = _image_bias(g, lc, y, nf, ctx, lc.size)
    flat = g.to_flat(y, lc.size, lc.name)
    return flat if done else _bias(g, lc, flat, ctx)


def pool(g: GraphBuilder, lc: LayerConfig, ins: list[str], ctx: Context) -> str:
    """Max or average pooling (Paddle's ceil mode and exclude mode by default)."""
    from sculler.layers.image import _pool_type

    _dense_input(lc, 0, ins[0], ctx)
    c, h, w = image_geometry(lc, ctx.input_configs(lc), 0)
    cf = pool_conf(lc)
    (ky, kx), (sy, sx), (py, px) = cf["pool_size"], cf["stride"], cf["padding"]
    oh, ow = int(lc.attrs["out_height"]), int(lc.attrs["out_width"])
    # Sculler's windows (ceil mode may keep windows that ONNX's ceil_mode drops, some lying
    # wholly in the padding): pad explicitly, far side included, and pool without padding.
    extra_y, extra_x = (max(0, (o - 1) * s + k - (n + 2 * p))
                        for o, s, k, n, p in ((oh, sy, ky, h, py), (ow, sx, kx, w, px)))
    is_max = _pool_type(lc) == "max"
    pads = g.const(f"{lc.name}/pads", [0, 0, py, px, 0, 0, py + extra_y, px + extra_x],
                   np.int64)
    fill = g.const(f"{lc.name}/fill", -np.inf if is_max else 0.0)
    x = g.op("Pad", [g.to_image(ins[0], (c, h, w), lc.name), pads, fill], lc.name)
    attrs = {"kernel_shape": [ky, kx], "strides": [sy, sx]}
    if is_max:
        y = g.op("MaxPool", [x], lc.name, **attrs)
    else:  # the window mean times k*k / (cells that count), 0 for an empty window
        exclude = bool(lc.attrs.get("exclude_mode", True))
        count = np.outer(*(_window_counts(o, s, k, n, p, exclude)
                           for o, s, k, n, p in ((oh, sy, ky, h, py), (ow, sx, kx, w, px))))
        factor = np.where(count > 0, ky * kx / np.maximum(count, 1), 0.0)
        y = g.op("Mul", [g.op("AveragePool", [x], lc.name, **attrs),
                         g.const(f"{lc.name}/factor", factor[None, None])], lc.name)
    y, done = _image_bias(g, lc, y, c, ctx, lc.size)
    flat = g.to_flat(y, lc.size, lc.name)
    return flat if done else _bias(g, lc, flat, ctx)


def _window_counts(out: int, stride: int, k: int, n: int, pad: int,
                   exclude: bool) -> np.ndarray:
    """Per output position along one axis: the window's cells inside the image
    (``exclude``) or inside the padded image."""
    lo, hi = (0, n) if exclude else (-pad, n + pad)
    start = np.arange(out) * stride - pad
    return np.clip(np.minimum(start + k, hi) - np.maximum(start, lo), 0, None)


def batch_norm(g: GraphBuilder, lc: LayerConfig, ins: list[str], ctx: Context) -> str:
    """Test mode: ``scale * (x - moving mean) / sqrt(moving var + eps) + bias`` per
    channel."""
    if lc.attrs.get("use_global_stats") is False:
        raise NotImplementedError(f"layer {lc.name!r} (batch_norm): use_global_stats=False "
                                  "normalises with the batch's statistics at test time")
    _dense_input(lc, 0, ins[0], ctx)
    c, h, w = image_geometry(lc, ctx.input_configs(lc), 0, flat_ok=True)
    params = [ctx.weight(lc.inputs[k].input_parameter_name).reshape(-1) for k in range(3)]
    bias = (ctx.weight(lc.bias_parameter_name).reshape(-1) if lc.bias_parameter_name
            else np.zeros(c, np.float32))
    names = [g.const(f"{lc.name}/{what}", v) for what, v in (
        ("scale", params[0]), ("bias", bias), ("mean", params[1]), ("var", params[2]))]
    y = g.op("BatchNormalization", [g.to_image(ins[0], (c, h, w), lc.name), *names], lc.name,
             epsilon=float(lc.attrs.get("epsilon", 1e-5)))
    return g.to_flat(y, lc.size, lc.name)


CONVERTERS: dict[str, Callable[[GraphBuilder, LayerConfig, list[str], Context], str]] = {
    "fc": fc, "embedding": embedding, "table": embedding, "concat": concat, "addto": addto,
    "mixed": mixed, "exconv": exconv, "conv": exconv, "cudnn_conv": exconv, "pool": pool,
    "batch_norm": batch_norm, "cudnn_batch_norm": batch_norm,
}


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
