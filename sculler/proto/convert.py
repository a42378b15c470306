"""Sculler's :class:`~sculler.core.model_config.ModelConfig` to and from PaddlePaddle's
``paddle.ModelConfig`` protobuf message, and the message's text format.

Common fields map one to one (layer name, type, size, active_type, inputs, bias and drop
rate; parameters; input/output layer names; evaluators; sub-models). Layer settings, which
Sculler keeps in ``LayerConfig.attrs`` / ``InputConfig.attrs``, map to the proto field of the
same name (``num_filters``, ``reversed``, ``active_gate_type``, ``trans_type``, ...) or, for the
image layers and projections, to Paddle's per-input messages (``conv_conf``, ``pool_conf``,
``norm_conf``, ``image_conf``, ``proj_conf``). Nothing is dropped silently: a setting with no
counterpart on the other side raises ValueError naming the layer and the field, and so does a
PaddlePaddle layer type Sculler does not implement. Fields that carry no computation
(``device``, ``is_shared``, ``para_id``, ...) and fields left at their proto default are
accepted and not kept (see ``IGNORED_*``).

:func:`from_proto` rebuilds sizes and parameter shapes with Sculler's own layer classes (the
proto's are checked against them), so a model PaddlePaddle serialized runs as Sculler builds
it. Parameter ``dims`` are written as PaddlePaddle writes them (``ParameterConfig.paddle_dims``
where a layer declares them: none for a conv weight, ``[F, 1]`` for a conv bias); read back,
the arrays take Sculler's shapes, with the same values.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import fields
from typing import Any

from sculler.core.activation import get_activation
from sculler.core.builder import ModelBuilder
from sculler.core.layer import get_layer_class
from sculler.core.model_config import (
    EvaluatorConfig,
    GeneratorConfig,
    InputConfig,
    LayerConfig,
    LinkConfig,
    MemoryConfig,
    ModelConfig,
    ParameterConfig,
    SubModelConfig,
)
from sculler.layers.conv import conv_conf
from sculler.layers.conv3d import conv3d_conf
from sculler.layers.image import image_geometry, volume_geometry
from sculler.layers.mixed import _proj_width
from sculler.layers.mixed_conv import conv_geometry
from sculler.layers.pool3d import pool3d_conf
from sculler.proto import messages

__all__ = ["to_proto", "from_proto", "model_config_text", "parse_network", "IGNORED_LAYER_FIELDS",
           "IGNORED_PARAMETER_FIELDS"]

# LayerConfig fields whose Sculler attr has the same name and meaning.
SAME_NAME_FIELDS = frozenset({
    "num_filters", "shared_biases", "partial_sum", "num_classes", "reversed",
    "active_gate_type", "active_state_type", "num_neg_samples", "output_max_index",
    "softmax_selfnorm_alpha", "norm_by_times", "coeff", "average_strategy",
    "error_clipping_threshold", "NDCG_num", "max_sort_size", "slope", "intercept", "bos_id",
    "eos_id", "beam_size", "select_first", "trans_type", "use_global_stats",
    "moving_average_fraction", "user_arg", "height", "width", "blank", "seq_pool_stride",
    "axis", "offset", "shape", "delta", "epsilon", "factor_size", "data_norm_strategy",
})
# LayerConfig fields a layer type's Sculler attr names differently: type -> {field: attr}.
RENAMED_FIELDS = {"cos": {"cos_scale": "scale"}, "cos_vm": {"cos_scale": "scale"},
                  "nce": {"neg_sampling_dist": "neg_distribution"},
                  "print": {"user_arg": "format"}}
# Per-input messages of input 0 whose fields are the layer's attrs of the same name.
INPUT_CONF_FIELDS = {"roi_pool": ("roi_pool_conf", ("pooled_width", "pooled_height",
                                                    "spatial_scale")),
                     "row_conv": ("row_conv_conf", ("context_length",)),
                     "priorbox": ("priorbox_conf", ("min_size", "max_size", "aspect_ratio",
                                                    "variance")),
                     "multibox_loss": ("multibox_loss_conf", (
                         "num_classes", "overlap_threshold", "neg_pos_ratio", "neg_overlap",
                         "background_id", "input_num")),
                     "detection_output": ("detection_output_conf", (
                         "num_classes", "nms_threshold", "nms_top_k", "keep_top_k",
                         "confidence_threshold", "background_id", "input_num"))}
# Fields about placement or bookkeeping, not about what the layer computes.
IGNORED_LAYER_FIELDS = frozenset({"device"})
IGNORED_PARAMETER_FIELDS = frozenset({"device", "num_batches_regularization", "para_id",
                                      "need_compact", "is_shared", "parameter_block_size"})
# Attrs Sculler keeps that PaddlePaddle carries outside the ModelConfig: a data layer's data
# type travels with the model file (Topology.data_type), as in PaddlePaddle.
DATA_TYPE_ATTRS = ("kind", "seq_type")

CONV_TYPES = frozenset({"exconv", "conv", "cudnn_conv"})
CONVT_TYPES = frozenset({"exconvt", "convt", "cudnn_convt"})
CONV3D_TYPES = frozenset({"conv3d", "deconv3d"})
# Layers whose input geometry PaddlePaddle writes in an image_conf inside a per-input message,
# with the settings that message holds besides it.
IMAGE_CONF_LAYERS = {"maxout": ("maxout_conf", ("groups",)),
                     "spp": ("spp_conf", ("pool_type", "pyramid_height")),
                     "bilinear_interp": ("bilinear_interp_conf", ("out_size_x", "out_size_y")),
                     "pad": ("pad_conf", ("pad_c", "pad_h", "pad_w"))}
# Image layers: PaddlePaddle writes their OUTPUT geometry in LayerConfig.height/width (spp
# writes 1 and its number of bins).
IMAGE_OUTPUT_TYPES = CONV_TYPES | CONVT_TYPES | CONV3D_TYPES | set(IMAGE_CONF_LAYERS) | {
    "pool", "pool3d", "batch_norm", "cudnn_batch_norm", "norm", "roi_pool"}
GEOMETRY_ATTRS = ("out_channels", "out_depth", "out_height", "out_width")
# The 3-D settings: Sculler's attr (x axis; "_y"/"_z" the others) -> Paddle's conv_conf /
# pool_conf field of the x axis.
CONV3D_FIELDS = {"filter_size": "filter_size", "stride": "stride", "padding": "padding"}
POOL3D_FIELDS = {"pool_size": "size_x", "stride": "stride", "padding": "padding"}
VOLUME_KEYS = ("channels", "depth", "height", "width")
CONV_KEYS = ("filter_size", "filter_size_y", "stride", "stride_y", "padding", "padding_y",
             "dilation", "dilation_y", "groups", "channels", "height", "width", "caffe_mode")
POOL_KEYS = ("pool_type", "pool_size", "pool_size_y", "stride", "stride_y", "padding",
             "padding_y", "ceil_mode", "exclude_mode", "channels", "height", "width")
CONV3D_KEYS = tuple(k + s for k in ("filter_size", "stride", "padding") for s in ("", "_y", "_z")
                    ) + ("groups",) + VOLUME_KEYS
POOL3D_KEYS = tuple(k + s for k in ("pool_size", "stride", "padding") for s in ("", "_y", "_z")
                    ) + ("pool_type", "ceil_mode") + VOLUME_KEYS
NORM_KEYS = ("norm_type", "norm_size", "scale", "power", "channels", "height", "width")
# Sculler projection kind -> PaddlePaddle ProjectionConfig.type
PROJ_TO_PADDLE = {"full_matrix": "fc", "trans_full_matrix": "trans_fc", "table": "table",
                  "identity": "identity", "dotmul": "dot_mul", "scaling": "scaling",
                  "context": "context", "conv": "conv", "slice": "slice"}
PROJ_FROM_PADDLE = {v: k for k, v in PROJ_TO_PADDLE.items()} | {"identity_offset": "identity",
                                                                 "convt": "conv"}
PROJECTION_LAYERS = frozenset({"mixed", "concat2"})
EVALUATOR_RENAMED = {"classification_threshold": "threshold"}
EVALUATOR_SAME_NAME = frozenset({"chunk_scheme", "num_chunk_types", "excluded_chunk_types",
                                 "top_k", "positive_label", "num_results", "delimited",
                                 "dict_file", "result_file", "overlap_threshold",
                                 "background_id", "evaluate_difficult", "ap_type"})


def _fail(layer: str, what: str) -> ValueError:
    return ValueError(f"layer {layer!r}: {what}")


# ----------------------------------------------------------------------------- to_proto


def to_proto(model_config: ModelConfig) -> Any:
    """PaddlePaddle's ``paddle.ModelConfig`` message for ``model_config`` (sizes and image
    geometry resolved, as :class:`~sculler.core.builder.ModelBuilder` leaves them)."""
    M = messages()
    out = M.ModelConfig(type=model_config.type)
    by_name = {lc.name: lc for lc in model_config.layers}
    for lc in model_config.layers:
        missing = [n for n in lc.input_layer_names if n not in by_name]
        if missing:
            raise _fail(lc.name, f"takes inputs {missing}, which the model does not define")
        _layer_to_proto(lc, [by_name[n] for n in lc.input_layer_names], out.layers.add())
    for pc in model_config.parameters:
        _parameter_to_proto(pc, out.parameters.add())
    out.input_layer_names.extend(model_config.input_layer_names)
    out.output_layer_names.extend(model_config.output_layer_names)
    for ev in model_config.evaluators:
        _evaluator_to_proto(ev, out.evaluators.add())
    for sm in model_config.sub_models:
        _dataclass_to_message(sm, out.sub_models.add())
    return out


def _layer_to_proto(lc: LayerConfig, inputs: list[LayerConfig], p: Any) -> None:
    p.name = lc.name
    if lc.size:  # PaddlePaddle leaves it unset where its engine works the size out
        p.size = int(lc.size)
    p.type = "mixed" if lc.type in ("embedding", "table") else lc.type
    p.active_type = "" if lc.active_type in ("linear", "", None) else lc.active_type
    if lc.bias_parameter_name:
        p.bias_parameter_name = lc.bias_parameter_name
    if lc.drop_rate:
        p.drop_rate = float(lc.drop_rate)
    attrs = {k: v for k, v in lc.attrs.items() if v is not None}
    in_attrs = [{k: v for k, v in ic.attrs.items() if v is not None} for ic in lc.inputs]
    for ic in lc.inputs:
        pin = p.inputs.add(input_layer_name=ic.input_layer_name)
        if ic.input_parameter_name:
            pin.input_parameter_name = ic.input_parameter_name
    if lc.type == "data":
        for key in DATA_TYPE_ATTRS:
            attrs.pop(key, None)
        if "depth" in attrs:  # a volume's depth (LayerConfig.depth is only read from data)
            p.depth = int(attrs.pop("depth"))
    if lc.type in IMAGE_OUTPUT_TYPES and "out_height" in attrs:
        p.height, p.width = _paddle_output_geometry(lc.type, attrs)
        if "out_depth" in attrs:
            p.depth = int(attrs["out_depth"])
    if lc.type in CONV_TYPES or lc.type in CONVT_TYPES:
        _conv_to_proto(lc, inputs, p, attrs, in_attrs)
    elif lc.type in CONV3D_TYPES:
        _conv3d_to_proto(lc, inputs, p, attrs, in_attrs)
    elif lc.type == "pool3d":
        _pool3d_to_proto(lc, inputs, p, attrs)
    elif lc.type in IMAGE_CONF_LAYERS:
        conf_name, keys = IMAGE_CONF_LAYERS[lc.type]
        conf = getattr(p.inputs[0], conf_name)
        _image_conf(conf.image_conf, image_geometry(lc, inputs, 0))
        for key in keys:
            _set_field(conf, key, attrs.pop(key))
        _pop(attrs, ("channels", "height", "width"))
        _pop(in_attrs[0], ("channels", "height", "width"))
    elif lc.type == "pool":
        _pool_to_proto(lc, inputs, p, attrs)
    elif lc.type == "norm":
        _norm_to_proto(lc, inputs, p, attrs)
    elif lc.type in ("batch_norm", "cudnn_batch_norm") and attrs.pop("img3D", False):
        conf = p.inputs[0].image_conf
        c, d, h, w = volume_geometry(lc, inputs, 0)
        conf.channels, conf.img_size_z, conf.img_size_y, conf.img_size = c, d, h, w
        _pop(attrs, VOLUME_KEYS)
        _pop(in_attrs[0], VOLUME_KEYS)
    elif lc.type in ("batch_norm", "cudnn_batch_norm"):
        _image_conf(p.inputs[0].image_conf, image_geometry(lc, inputs, 0, flat_ok=True))
        _pop(attrs, ("channels", "height", "width"))
        _pop(in_attrs[0], ("channels", "height", "width"))
    elif lc.type in PROJECTION_LAYERS or lc.type in ("embedding", "table"):
        _projections_to_proto(lc, inputs, p, in_attrs)
    elif lc.type == "clip":
        p.inputs[0].clip_conf.min = float(attrs.pop("min"))
        p.inputs[0].clip_conf.max = float(attrs.pop("max"))
    elif lc.type == "get_output":  # which output of its input (an lstm_step's 'state')
        p.inputs[0].input_layer_argument = str(attrs.pop("arg_name"))
    elif lc.type == "featmap_expand" and not attrs.pop("as_row_vector", True):
        p.user_arg = "as_col_vec"  # PaddlePaddle's way to say as_row_vector=False
    if lc.type in IMAGE_OUTPUT_TYPES:
        for key in GEOMETRY_ATTRS:
            attrs.pop(key, None)
    if lc.type in INPUT_CONF_FIELDS:
        conf_name, keys = INPUT_CONF_FIELDS[lc.type]
        conf = getattr(p.inputs[0], conf_name)
        for key in keys:
            value = attrs.pop(key)
            if isinstance(value, list):
                getattr(conf, key).extend(value)
            else:
                setattr(conf, key, value)
    type_renames = RENAMED_FIELDS.get(lc.type, {})
    renamed = {v: k for k, v in type_renames.items()}
    for key, value in attrs.items():
        field = renamed.get(key, key)
        if field not in SAME_NAME_FIELDS and field not in type_renames:
            raise _fail(lc.name, f"({lc.type}) setting {key}={value!r} has no field in "
                        "PaddlePaddle's LayerConfig; it cannot be written to a Paddle model")
        _set_field(p, field, value)
    for i, left in enumerate(in_attrs):
        if left:
            raise _fail(lc.name, f"({lc.type}) input {i} settings {sorted(left)} have no "
                        "field in PaddlePaddle's LayerInputConfig")


def _image_conf(conf: Any, geometry: tuple[int, int, int]) -> None:
    conf.channels, conf.img_size_y, conf.img_size = geometry


def _paddle_output_geometry(layer_type: str, attrs: dict) -> tuple[int, int]:
    """LayerConfig ``(height, width)`` as PaddlePaddle writes them for an image layer."""
    if layer_type == "spp":
        return 1, (4 ** int(attrs["pyramid_height"]) - 1) // 3
    return int(attrs["out_height"]), int(attrs["out_width"])


def _set_field(msg: Any, field: str, value: Any) -> None:
    if isinstance(value, (list, tuple)):
        getattr(msg, field).extend(value)
    else:
        setattr(msg, field, value)


def _pop(d: dict, keys: tuple[str, ...]) -> None:
    for key in keys:
        d.pop(key, None)


def _conv_to_proto(lc, inputs, p, attrs, in_attrs) -> None:
    trans = lc.type in CONVT_TYPES
    nf = int(attrs["num_filters"])
    for i in range(len(lc.inputs)):
        cf, (c, h, w) = conv_conf(lc, i), image_geometry(lc, inputs, i)
        if not (trans or cf["caffe_mode"]):
            raise _fail(lc.name, "caffe_mode=False convolutions are not supported")
        conf = p.inputs[i].conv_conf
        conf.filter_size_y, conf.filter_size = cf["filter_size"]
        conf.stride_y, conf.stride = cf["stride"]
        conf.padding_y, conf.padding = cf["padding"]
        conf.dilation_y, conf.dilation = cf["dilation"]
        conf.groups, conf.channels = cf["groups"], c
        out_hw = int(attrs["out_height"]), int(attrs["out_width"])
        # a transposed convolution is described as the convolution it inverts: its input is
        # that convolution's output (PaddlePaddle's parse_conv with trans=True)
        conf.filter_channels = (nf if trans else c) // cf["groups"]
        (conf.img_size_y, conf.img_size), (conf.output_y, conf.output_x) = (
            (out_hw, (h, w)) if trans else ((h, w), out_hw))
        conf.caffe_mode = cf["caffe_mode"]
        _pop(in_attrs[i], CONV_KEYS)
    _pop(attrs, CONV_KEYS)
    p.num_filters = int(attrs.pop("num_filters"))
    p.shared_biases = bool(attrs.pop("shared_biases", True))


def _set_zyx(conf: Any, fields: dict[str, str], zyx_of: Any) -> None:
    """Write each setting's three axes into ``conf`` (Paddle's x field, ``_y``, ``_z``)."""
    for key, field in fields.items():
        z, y, x = zyx_of(key)
        setattr(conf, field, x)
        setattr(conf, field.replace("_x", "") + "_y", y)
        setattr(conf, field.replace("_x", "") + "_z", z)


def _conv3d_to_proto(lc, inputs, p, attrs, in_attrs) -> None:
    """``conv_conf`` with the ``_z`` fields, as PaddlePaddle's parse_conv3d writes it (a
    deconv3d is described as the convolution it inverts; filter_channels F/groups)."""
    trans = lc.type == "deconv3d"
    nf = int(attrs["num_filters"])
    out_dhw = tuple(int(attrs[k]) for k in ("out_depth", "out_height", "out_width"))
    for i in range(len(lc.inputs)):
        cf, (c, *dhw) = conv3d_conf(lc, i), volume_geometry(lc, inputs, i)
        conf = p.inputs[i].conv_conf
        _set_zyx(conf, CONV3D_FIELDS, cf.__getitem__)
        conf.groups, conf.channels, conf.caffe_mode = cf["groups"], c, True
        conf.filter_channels = (nf if trans else c) // cf["groups"]
        img, out = (out_dhw, dhw) if trans else (dhw, out_dhw)
        conf.img_size_z, conf.img_size_y, conf.img_size = img
        conf.output_z, conf.output_y, conf.output_x = out
        _pop(in_attrs[i], CONV3D_KEYS)
    _pop(attrs, CONV3D_KEYS)
    p.num_filters = int(attrs.pop("num_filters"))
    p.shared_biases = bool(attrs.pop("shared_biases", True))


def _pool3d_to_proto(lc, inputs, p, attrs) -> None:
    c, d, h, w = volume_geometry(lc, inputs, 0)
    conf = p.inputs[0].pool_conf
    conf.pool_type = str(attrs.get("pool_type", "max-projection"))
    conf.channels, conf.img_size_z, conf.img_size_y, conf.img_size = c, d, h, w
    window = dict(zip(POOL3D_FIELDS, pool3d_conf(lc)))
    _set_zyx(conf, POOL3D_FIELDS, window.__getitem__)
    conf.output_z, conf.output_y, conf.output_x = (
        int(attrs[k]) for k in ("out_depth", "out_height", "out_width"))
    _pop(attrs, POOL3D_KEYS)


def _pool_to_proto(lc, inputs, p, attrs) -> None:
    c, h, w = image_geometry(lc, inputs, 0)
    conf = p.inputs[0].pool_conf
    conf.pool_type = str(attrs.get("pool_type", "max-projection"))
    conf.channels, conf.img_size, conf.img_size_y = c, w, h
    conf.size_x = int(attrs["pool_size"])
    conf.size_y = int(attrs.get("pool_size_y", conf.size_x))
    conf.stride = int(attrs.get("stride", 1))
    conf.stride_y = int(attrs.get("stride_y", conf.stride))
    conf.padding = int(attrs.get("padding", 0))
    conf.padding_y = int(attrs.get("padding_y", conf.padding))
    conf.output_x, conf.output_y = int(attrs["out_width"]), int(attrs["out_height"])
    if not attrs.get("exclude_mode", True):  # unset means True to PaddlePaddle's PoolLayer
        conf.exclude_mode = False
    _pop(attrs, POOL_KEYS)


def _norm_to_proto(lc, inputs, p, attrs) -> None:
    c, h, w = image_geometry(lc, inputs, 0)
    conf = p.inputs[0].norm_conf
    conf.norm_type = str(attrs.get("norm_type", "cmrnorm-projection"))
    conf.channels, conf.size = c, int(attrs["norm_size"])
    # PaddlePaddle stores alpha / size for the cross-map norm (config_parser's parse_norm)
    conf.scale = float(attrs.get("scale", 0.0128)) / conf.size
    conf.pow = float(attrs.get("power", 0.75))
    conf.img_size, conf.img_size_y, conf.output_x, conf.output_y = w, h, w, h
    conf.blocked = False
    _pop(attrs, NORM_KEYS)


def _projections_to_proto(lc, inputs, p, in_attrs) -> None:
    for i, (ic, src) in enumerate(zip(lc.inputs, inputs)):
        a = in_attrs[i]
        kind = a.pop("proj", "table" if lc.type in ("embedding", "table") else None)
        if kind == "operand":
            continue
        if kind == "dotmul_operator":  # inputs i and i+1, PaddlePaddle's DotMulOperator
            p.operator_confs.add(type="dot_mul", input_indices=[i, i + 1],
                                 input_sizes=[src.size, inputs[i + 1].size],
                                 output_size=src.size, dotmul_scale=float(a.pop("scale", 1.0)))
            continue
        if kind not in PROJ_TO_PADDLE:
            raise _fail(lc.name, f"({lc.type}) input {i}: projection/operator {kind!r} cannot "
                        f"be written to a Paddle model; supported: {sorted(PROJ_TO_PADDLE)}")
        conf = p.inputs[i].proj_conf
        conf.type = PROJ_TO_PADDLE[kind]
        conf.name = f"_{lc.name.split('@')[0]}.w{i}"
        conf.input_size = int(src.size)
        conf.output_size = int(_proj_width(kind, ic.attrs, src.size) or lc.size)
        a.pop("size", None)
        if kind == "identity" and "offset" in a:
            conf.type, conf.offset = "identity_offset", int(a.pop("offset"))
        elif kind == "slice":
            for start, end in a.pop("slices"):
                conf.slices.add(start=int(start), end=int(end))
        elif kind == "context":
            conf.context_start = int(a.pop("context_start", 0))
            conf.context_length = int(a.pop("context_len"))
            conf.trainable_padding = bool(a.pop("trainable_padding", False))
        elif kind == "conv":
            geo = conv_geometry(lc, inputs, i)
            (c, h, w), (_, _, fy, fx) = geo["x_shape"], geo["w_shape"]
            nf, trans = geo["num_filters"], geo["trans"]
            cc = conf.conv_conf
            cc.filter_size, cc.filter_size_y = fx, fy
            cc.stride_y, cc.stride = geo["stride"]
            cc.padding_y, cc.padding = geo["padding"]
            # a transposed one is written as the convolution it inverts (parse_conv, trans)
            cc.groups, cc.channels = geo["groups"], c
            cc.filter_channels = (nf if trans else c) // geo["groups"]
            (cc.img_size_y, cc.img_size), (cc.output_y, cc.output_x) = (
                (geo["out_hw"], (h, w)) if trans else ((h, w), geo["out_hw"]))
            cc.caffe_mode = True
            if trans:
                conf.type = "convt"
            conf.num_filters = nf
            _pop(a, ("num_filters", "trans"))
            _pop(a, CONV_KEYS)


def _parameter_to_proto(pc: ParameterConfig, p: Any) -> None:
    p.name, p.size = pc.name, int(pc.size)
    written = pc.dims if pc.paddle_dims is None else pc.paddle_dims
    p.dims.extend(int(d) for d in written)
    if pc.learning_rate != 1.0:
        p.learning_rate = float(pc.learning_rate)
    for key in ("momentum", "decay_rate", "decay_rate_l1", "gradient_clipping_threshold"):
        if getattr(pc, key) is not None:
            setattr(p, key, float(getattr(pc, key)))
    if pc.initial_strategy == "uniform" or pc.initial_min is not None:
        lo = -1.0 if pc.initial_min is None else float(pc.initial_min)
        hi = 1.0 if pc.initial_max is None else float(pc.initial_max)
        p.initial_strategy, p.initial_mean, p.initial_std = 1, (lo + hi) / 2, (hi - lo) / 2
        p.initial_smart = False
    else:
        p.initial_strategy, p.initial_mean = 0, float(pc.initial_mean)
        # Sculler's initial_std=None is 1/sqrt(dims[0]) of its own dims; it is PaddlePaddle's
        # initial_smart only where Paddle's rule (1/sqrt of the written dims[0], or of the
        # size without dims) gives the same std
        smart = pc.initial_std is None
        p.initial_std = 1.0 / math.sqrt(pc.dims[0] if pc.dims else pc.size) if smart else float(
            pc.initial_std)
        paddle_first = written[0] if len(written) else pc.size
        same_rule = (pc.dims[0] if pc.dims else pc.size) == paddle_first
        p.initial_smart = smart and same_rule and pc.initial_mean == 0.0
    for key in ("is_static", "sparse_update", "sparse_remote_update"):
        if getattr(pc, key):
            setattr(p, key, True)


def _evaluator_to_proto(ev: EvaluatorConfig, p: Any) -> None:
    p.name, p.type = ev.name, ev.type
    p.input_layers.extend(ev.input_layers)
    renamed = {v: k for k, v in EVALUATOR_RENAMED.items()}
    for key, value in ev.attrs.items():
        if value is None:
            continue
        field = renamed.get(key, key)
        if field not in EVALUATOR_SAME_NAME and field not in EVALUATOR_RENAMED:
            raise ValueError(f"evaluator {ev.name!r} ({ev.type}): setting {key}={value!r} has "
                             "no field in PaddlePaddle's EvaluatorConfig")
        _set_field(p, field, value)


def _dataclass_to_message(obj: Any, msg: Any) -> None:
    """Copy a dataclass whose fields are named as the message's (SubModelConfig & co.).
    False flags are left unset, as PaddlePaddle leaves them, except the two it always writes
    (``is_recurrent_layer_group``; ``reversed`` of a recurrent group)."""
    for f in fields(obj):
        value = getattr(obj, f.name)
        always = f.name == "is_recurrent_layer_group" or (
            f.name == "reversed" and getattr(obj, "is_recurrent_layer_group", False))
        if value is None or (value is False and not always):
            continue
        if isinstance(value, list):
            for item in value:
                if isinstance(item, str):
                    getattr(msg, f.name).append(item)
                else:
                    _dataclass_to_message(item, getattr(msg, f.name).add())
        elif hasattr(value, "__dataclass_fields__"):
            _dataclass_to_message(value, getattr(msg, f.name))
        else:
            setattr(msg, f.name, value)


# --------------------------------------------------------------------------- from_proto


def from_proto(message: Any) -> ModelConfig:
    """The Sculler ModelConfig of a ``paddle.ModelConfig`` message (or its serialized bytes).

    Sizes, image geometry and parameter shapes are rebuilt by Sculler's layer classes and
    checked against the message's; any mismatch, unknown layer type or unmapped setting raises
    ValueError naming the layer and field."""
    M = messages()
    if isinstance(message, (bytes, bytearray)):
        try:
            message = M.ModelConfig.FromString(bytes(message))
        except Exception as e:  # the runtime raises its own DecodeError
            raise ValueError(f"from_proto: not a serialized paddle.ModelConfig ({e})") from e
    if not isinstance(message, M.ModelConfig):
        raise TypeError(f"from_proto takes a paddle.ModelConfig message or its bytes, got "
                        f"{type(message).__name__}")
    if message.type not in ("nn", "recurrent_nn"):
        raise ValueError(f"from_proto: model type {message.type!r} (PaddlePaddle's MultiNetwork "
                         "and others) has no Sculler equivalent; expected 'nn' or "
                         "'recurrent_nn'")
    if message.HasField("external_config"):
        raise ValueError("from_proto: external_config (layers run by an outside engine) has no "
                         "Sculler equivalent")
    params = {p.name: p for p in message.parameters}
    builder = ModelBuilder()
    sizes, geometry = {}, {}
    for pl in message.layers:
        lc = _layer_from_proto(pl)
        if pl.HasField("size"):
            sizes[lc.name] = int(pl.size)
        if pl.type in IMAGE_OUTPUT_TYPES and pl.HasField("height"):
            geometry[lc.name] = (int(pl.height), int(pl.width))
        weight_attrs = [_parameter_attrs(params, ic.input_parameter_name, lc.name)
                        for ic in lc.inputs]
        bias = (_parameter_attrs(params, lc.bias_parameter_name, lc.name)
                if lc.bias_parameter_name else False)
        builder.add_layer(lc, weight_attrs, bias)
    for pe in message.evaluators:
        builder.add_evaluator(_evaluator_from_proto(pe))
    mc = builder.build(list(message.output_layer_names), list(message.input_layer_names))
    for lc in mc.layers:
        if lc.name in sizes and lc.size != sizes[lc.name]:
            raise _fail(lc.name, f"({lc.type}) the Paddle model says size {sizes[lc.name]}, "
                        f"Sculler's {lc.type} layer computes {lc.size} from its inputs")
        if lc.name in geometry and "out_height" in lc.attrs:
            have = _paddle_output_geometry(lc.type, lc.attrs)
            if have != geometry[lc.name]:
                raise _fail(lc.name, f"({lc.type}) the Paddle model says output height, "
                            f"width {geometry[lc.name]}, Sculler computes {have}")
    built = {pc.name: pc for pc in mc.parameters}
    for name, pp in params.items():
        if name not in built:
            raise ValueError(f"parameter {name!r} of the Paddle model is used by no layer "
                             "Sculler built")
        if built[name].size != pp.size:
            raise ValueError(f"parameter {name!r}: the Paddle model says size {pp.size}, "
                             f"Sculler's layers need {built[name].dims} ({built[name].size})")
        _smart_from_proto(pp, built[name])
    extra = [n for n in built if n not in params]
    if extra:
        raise ValueError(f"Sculler's layers need parameters {extra}, which the Paddle model "
                         "does not define")
    mc.parameters = [built[name] for name in params]
    mc.sub_models = [_sub_model_from_proto(sm) for sm in message.sub_models]
    mc.type = message.type
    return mc


def _layer_from_proto(pl: Any) -> LayerConfig:
    try:
        get_layer_class(pl.type)
    except (KeyError, ValueError):
        raise _fail(pl.name, f"PaddlePaddle layer type {pl.type!r} has no Sculler "
                    "implementation") from None
    act = pl.active_type or "linear"
    try:
        get_activation(act)
    except ValueError as e:
        raise _fail(pl.name, f"active_type: {e}") from None
    lc = LayerConfig(name=pl.name, type=pl.type, size=int(pl.size), active_type=act,
                     bias_parameter_name=pl.bias_parameter_name or None,
                     drop_rate=float(pl.drop_rate))
    handled = {"name", "type", "size", "active_type", "inputs", "bias_parameter_name",
               "drop_rate"} | IGNORED_LAYER_FIELDS
    for pin in pl.inputs:
        lc.inputs.append(InputConfig(pin.input_layer_name, pin.input_parameter_name or None))
    if pl.type in IMAGE_OUTPUT_TYPES:
        handled |= {"height", "width", "depth"}  # output geometry: checked after the build
    if pl.type == "data" and pl.HasField("depth"):
        lc.attrs["depth"] = int(pl.depth)
        handled.add("depth")
    if pl.type in CONV_TYPES or pl.type in CONVT_TYPES or pl.type in CONV3D_TYPES:
        lc.attrs["num_filters"] = int(pl.num_filters)
        lc.attrs["shared_biases"] = bool(pl.shared_biases)
        handled |= {"num_filters", "shared_biases"}
    for i, pin in enumerate(pl.inputs):
        _input_from_proto(pl, i, pin, lc)
    if pl.operator_confs:
        _operators_from_proto(pl, lc)
        handled.add("operator_confs")
    if pl.type == "featmap_expand":
        lc.attrs["as_row_vector"] = pl.user_arg != "as_col_vec"
        handled.add("user_arg")
    for fd, value in pl.ListFields():
        name = fd.name
        if name in handled:
            continue
        type_renames = RENAMED_FIELDS.get(pl.type, {})
        if name in SAME_NAME_FIELDS or name in type_renames:
            key = type_renames.get(name, name)
            lc.attrs[key] = list(value) if _repeated(fd) else value
        elif not _repeated(fd) and fd.has_default_value and (
                value == fd.default_value):
            continue
        else:
            raise _fail(pl.name, f"({pl.type}) PaddlePaddle field {name}={_short(value)} has "
                        "no Sculler equivalent")
    return lc


def _repeated(fd: Any) -> bool:
    is_repeated = getattr(fd, "is_repeated", None)  # protobuf >= 6; older runtimes: label
    return bool(is_repeated) if is_repeated is not None else fd.label == fd.LABEL_REPEATED


def _short(value: Any) -> str:
    text = repr(value).replace("\n", " ")
    return text if len(text) < 80 else text[:77] + "..."


def _input_from_proto(pl: Any, i: int, pin: Any, lc: LayerConfig) -> None:
    a = lc.inputs[i].attrs
    for fd, conf in pin.ListFields():
        name = fd.name
        if name in ("input_layer_name", "input_parameter_name"):
            continue
        if name == "conv_conf" and (pl.type in CONV_TYPES or pl.type in CONVT_TYPES):
            a.update(_conv_attrs(pl, conf))
        elif pl.type in IMAGE_CONF_LAYERS and name == IMAGE_CONF_LAYERS[pl.type][0]:
            a.update(_image_attrs(pl, conf.image_conf))
            for key in IMAGE_CONF_LAYERS[pl.type][1]:
                value = getattr(conf, key)
                lc.attrs[key] = list(value) if isinstance(value, Iterable) and not isinstance(
                    value, str) else value
        elif name == "conv_conf" and pl.type in CONV3D_TYPES:
            a.update(_conv3d_attrs(pl, conf))
        elif name == "pool_conf" and pl.type == "pool":
            lc.attrs.update(_pool_attrs(pl, conf))
        elif name == "pool_conf" and pl.type == "pool3d":
            lc.attrs.update(_pool3d_attrs(pl, conf))
        elif name == "norm_conf" and pl.type == "norm":
            if conf.norm_type != "cmrnorm-projection" or conf.blocked:
                raise _fail(pl.name, f"norm_type {conf.norm_type!r} (blocked={conf.blocked}) "
                            "is not supported; Sculler has cmrnorm-projection")
            lc.attrs.update(norm_type=conf.norm_type, norm_size=int(conf.size),
                            scale=float(conf.scale) * conf.size, power=float(conf.pow),
                            channels=int(conf.channels), height=int(conf.img_size_y
                                                                    or conf.img_size),
                            width=int(conf.img_size))
        elif name == "image_conf" and pl.type in ("batch_norm", "cudnn_batch_norm"):
            if conf.HasField("img_size_z"):  # PaddlePaddle's batch_norm_layer(img3D=True)
                lc.attrs["img3D"] = True
                a.update(channels=int(conf.channels), depth=int(conf.img_size_z),
                         height=int(conf.img_size_y or conf.img_size), width=int(conf.img_size))
            else:
                a.update(_image_attrs(pl, conf))
        elif name == "proj_conf" and pl.type in PROJECTION_LAYERS:
            a.update(_projection_attrs(pl, i, conf))
        elif pl.type in INPUT_CONF_FIELDS and name == INPUT_CONF_FIELDS[pl.type][0]:
            keys = INPUT_CONF_FIELDS[pl.type][1]
            for sub, value in conf.ListFields():
                if sub.name not in keys:
                    raise _fail(pl.name, f"({pl.type}) {name}.{sub.name} has no Sculler "
                                "equivalent")
                repeated = not isinstance(value, (str, bytes, int, float))
                lc.attrs[sub.name] = list(value) if repeated else value
        elif name == "clip_conf" and pl.type == "clip":
            lc.attrs.update(min=float(conf.min), max=float(conf.max))
        elif name == "input_layer_argument" and pl.type == "get_output":
            lc.attrs["arg_name"] = str(conf)
        else:
            raise _fail(pl.name, f"({pl.type}) input {i} PaddlePaddle field {name} has no "
                        "Sculler equivalent")


def _image_attrs(pl: Any, img: Any) -> dict[str, int]:
    """Sculler's input geometry attrs of a PaddlePaddle ImageConfig (2-D images only)."""
    _check_3d(pl, img, ("img_size_z",))
    return {"channels": int(img.channels), "height": int(img.img_size_y or img.img_size),
            "width": int(img.img_size)}


def _operators_from_proto(pl: Any, lc: LayerConfig) -> None:
    """PaddlePaddle's dot_mul operators over inputs (i, j) become Sculler's
    ``dotmul_operator`` at input i followed by its ``operand``; the operand input moves next
    to it when PaddlePaddle listed another input between them (the sum does not depend on the
    order of the inputs)."""
    if pl.type != "mixed":
        raise _fail(pl.name, f"({pl.type}) operator_confs outside a mixed layer")
    follows: dict[int, int] = {}
    for op in pl.operator_confs:
        if op.type != "dot_mul" or len(op.input_indices) != 2:
            raise _fail(pl.name, f"(mixed) operator {op.type!r} has no Sculler equivalent; "
                        "supported: dot_mul")
        i, j = op.input_indices
        for k in (i, j):
            if lc.inputs[k].attrs:
                raise _fail(pl.name, f"(mixed) input {k} is both a projection and an operand")
        lc.inputs[i].attrs.update(proj="dotmul_operator", scale=float(op.dotmul_scale))
        lc.inputs[j].attrs["proj"] = "operand"
        follows[j] = i
    order = []
    for k in range(len(lc.inputs)):
        if k not in follows:
            order.append(k)
        if k in follows.values():
            order.append(next(j for j, i in follows.items() if i == k))
    lc.inputs = [lc.inputs[k] for k in order]


def _check_3d(pl: Any, conf: Any, keys: tuple[str, ...]) -> None:
    for key in keys:
        if conf.HasField(key) and getattr(conf, key) != 1 and not key.startswith("padding"):
            raise _fail(pl.name, f"({pl.type}) {key}={getattr(conf, key)}: 3-D images are not "
                        "supported")


def _conv_attrs(pl: Any, conf: Any, trans: bool | None = None,
                num_filters: int | None = None) -> dict[str, Any]:
    """Sculler's attrs of a 2-D ``conv_conf``; ``trans``/``num_filters`` default to the
    layer's (a projection passes its own)."""
    _check_3d(pl, conf, ("filter_size_z", "stride_z", "output_z", "img_size_z"))
    trans = pl.type in CONVT_TYPES if trans is None else trans
    if not (trans or conf.caffe_mode):
        raise _fail(pl.name, f"({pl.type}) caffe_mode=false convolutions are not supported")
    filters = (pl.num_filters if num_filters is None else num_filters) if trans else \
        conf.channels
    if conf.filter_channels * conf.groups != filters:
        raise _fail(pl.name, f"({pl.type}) filter_channels {conf.filter_channels} * groups "
                    f"{conf.groups} != {'num_filters' if trans else 'channels'} {filters}")
    width, height = ((conf.output_x, conf.output_y or conf.output_x) if trans else
                     (conf.img_size, conf.img_size_y or conf.img_size))
    out = {"filter_size": conf.filter_size, "filter_size_y": conf.filter_size_y,
           "stride": conf.stride, "stride_y": conf.stride_y, "padding": conf.padding,
           "padding_y": conf.padding_y, "dilation": conf.dilation,
           "dilation_y": conf.dilation_y, "groups": conf.groups, "channels": conf.channels,
           "height": height, "width": width}
    if not conf.caffe_mode:
        out["caffe_mode"] = False
    return out


def _zyx_attrs(conf: Any, fields: dict[str, str]) -> dict[str, int]:
    """The inverse of :func:`_set_zyx`: Sculler's ``key``/``key_y``/``key_z`` attrs."""
    out = {}
    for key, field in fields.items():
        stem = field.replace("_x", "")
        out.update({key: int(getattr(conf, field)), key + "_y": int(getattr(conf, stem + "_y")),
                    key + "_z": int(getattr(conf, stem + "_z"))})
    return out


def _conv3d_attrs(pl: Any, conf: Any) -> dict[str, Any]:
    trans = pl.type == "deconv3d"
    if not conf.caffe_mode:
        raise _fail(pl.name, f"({pl.type}) caffe_mode=false convolutions are not supported")
    if conf.dilation != 1 or conf.dilation_y != 1:
        raise _fail(pl.name, f"({pl.type}) a dilated 3-D convolution has no Sculler equivalent")
    filters = pl.num_filters if trans else conf.channels
    if conf.filter_channels * conf.groups != filters:
        raise _fail(pl.name, f"({pl.type}) filter_channels {conf.filter_channels} * groups "
                    f"{conf.groups} != {'num_filters' if trans else 'channels'} {filters}")
    src = ((conf.output_z, conf.output_y, conf.output_x) if trans else
           (conf.img_size_z, conf.img_size_y, conf.img_size))
    return {**_zyx_attrs(conf, CONV3D_FIELDS), "groups": int(conf.groups),
            "channels": int(conf.channels), **dict(zip(VOLUME_KEYS[1:], map(int, src)))}


def _pool3d_attrs(pl: Any, conf: Any) -> dict[str, Any]:
    if conf.HasField("start"):
        raise _fail(pl.name, "(pool3d) pool_conf.start has no Sculler equivalent")
    a = {"pool_type": conf.pool_type, **_zyx_attrs(conf, POOL3D_FIELDS),
         "channels": int(conf.channels), "depth": int(conf.img_size_z),
         "height": int(conf.img_size_y), "width": int(conf.img_size)}
    # ceil_mode is not stored: PaddlePaddle wrote it into output_x, so read it back from there
    span = conf.img_size + 2 * conf.padding - conf.size_x
    a["ceil_mode"] = conf.output_x == -(-span // conf.stride) + 1
    if not a["ceil_mode"] and conf.output_x != span // conf.stride + 1:
        raise _fail(pl.name, f"(pool3d) output_x {conf.output_x} matches neither rounding of "
                    f"img_size {conf.img_size}")
    return a


def _pool_attrs(pl: Any, conf: Any) -> dict[str, Any]:
    _check_3d(pl, conf, ("size_z", "stride_z", "output_z", "img_size_z"))
    if conf.HasField("start"):
        raise _fail(pl.name, "(pool) pool_conf.start has no Sculler equivalent")
    size_y = conf.size_y if conf.HasField("size_y") else conf.size_x
    stride_y = conf.stride_y if conf.HasField("stride_y") else conf.stride
    pad_y = conf.padding_y if conf.HasField("padding_y") else conf.padding
    img_y = conf.img_size_y or conf.img_size
    # ceil_mode is not stored: PaddlePaddle wrote it into output_x, so read it back from there
    span = conf.img_size + 2 * conf.padding - conf.size_x
    ceil_out = -(-span // conf.stride) + 1
    floor_out = span // conf.stride + 1
    if conf.output_x not in (ceil_out, floor_out):
        raise _fail(pl.name, f"(pool) output_x {conf.output_x} matches neither rounding "
                    f"({floor_out} floor, {ceil_out} ceil) of img_size {conf.img_size}")
    return {"pool_type": conf.pool_type, "pool_size": conf.size_x, "pool_size_y": size_y,
            "stride": conf.stride, "stride_y": stride_y, "padding": conf.padding,
            "padding_y": pad_y, "ceil_mode": conf.output_x == ceil_out,
            "exclude_mode": conf.exclude_mode if conf.HasField("exclude_mode") else True,
            "channels": conf.channels, "height": img_y, "width": conf.img_size}


def _projection_attrs(pl: Any, i: int, conf: Any) -> dict[str, Any]:
    kind = PROJ_FROM_PADDLE.get(conf.type)
    if kind is None:
        raise _fail(pl.name, f"({pl.type}) input {i}: projection type {conf.type!r} has no "
                    f"Sculler equivalent; supported: {sorted(PROJ_FROM_PADDLE)}")
    a: dict[str, Any] = {"proj": kind}
    if conf.type == "identity_offset":
        a.update(offset=int(conf.offset), size=int(conf.output_size))
    elif kind == "slice":
        a["slices"] = [[int(r.start), int(r.end)] for r in conf.slices]
    elif kind == "context":
        a.update(context_start=int(conf.context_start), context_len=int(conf.context_length),
                 trainable_padding=bool(conf.trainable_padding))
    elif kind == "conv":
        if conf.conv_conf.dilation != 1 or conf.conv_conf.dilation_y != 1:
            raise _fail(pl.name, f"({pl.type}) input {i}: a dilated conv projection has no "
                        "Sculler equivalent")
        trans = conf.type == "convt"
        a.update(_conv_attrs(pl, conf.conv_conf, trans, conf.num_filters),
                 num_filters=int(conf.num_filters))
        _pop(a, ("dilation", "dilation_y"))
        if trans:
            a["trans"] = True
    if kind in ("full_matrix", "trans_full_matrix", "table") and conf.output_size != pl.size:
        a["size"] = int(conf.output_size)
    for fd, _ in conf.ListFields():
        known = {"type", "name", "input_size", "output_size", "offset", "context_start",
                 "context_length", "trainable_padding", "conv_conf", "num_filters", "slices"}
        if fd.name not in known:
            raise _fail(pl.name, f"({pl.type}) input {i} proj_conf.{fd.name} has no Sculler "
                        "equivalent")
    return a


def _parameter_attrs(params: dict[str, Any], name: str | None, layer: str) -> dict | None:
    """Sculler ParameterConfig fields of the proto parameter ``name`` (dims excluded)."""
    if name is None:
        return None
    p = params.get(name)
    if p is None:
        raise _fail(layer, f"uses parameter {name!r}, which the Paddle model does not define")
    for fd, value in p.ListFields():
        if fd.name in ("is_sparse", "format", "update_hooks") and value:
            raise ValueError(f"parameter {name!r}: PaddlePaddle field {fd.name}="
                             f"{_short(value)} has no Sculler equivalent")
    out: dict[str, Any] = {"learning_rate": p.learning_rate}
    for key in ("momentum", "decay_rate", "decay_rate_l1", "gradient_clipping_threshold"):
        if p.HasField(key):
            out[key] = getattr(p, key)
    if p.initial_strategy == 1:
        out.update(initial_strategy="uniform", initial_min=p.initial_mean - p.initial_std,
                   initial_max=p.initial_mean + p.initial_std)
    elif p.initial_strategy == 0:
        out.update(initial_mean=p.initial_mean, initial_std=p.initial_std)
    else:
        raise ValueError(f"parameter {name!r}: unknown initial_strategy {p.initial_strategy}")
    for key in ("is_static", "sparse_update", "sparse_remote_update"):
        out[key] = bool(getattr(p, key))
    return out


def _smart_from_proto(p: Any, pc: ParameterConfig) -> None:
    """PaddlePaddle's initial_smart is Sculler's initial_std=None when both compute the same
    std (Sculler from its own dims, which may be laid out differently)."""
    if p.initial_smart and p.dims and pc.dims and p.dims[0] == pc.dims[0]:
        pc.initial_std = None


def _evaluator_from_proto(pe: Any) -> EvaluatorConfig:
    ev = EvaluatorConfig(pe.name, pe.type, list(pe.input_layers))
    for fd, value in pe.ListFields():
        if fd.name in ("name", "type", "input_layers"):
            continue
        key = EVALUATOR_RENAMED.get(fd.name, fd.name)
        if fd.name in EVALUATOR_SAME_NAME or fd.name in EVALUATOR_RENAMED:
            ev.attrs[key] = list(value) if _repeated(fd) else value
        else:
            raise ValueError(f"evaluator {pe.name!r}: field {fd.name} has no Sculler "
                             "equivalent")
    return ev


def _sub_model_from_proto(sm: Any) -> SubModelConfig:
    def links(items: Any) -> list[LinkConfig]:
        return [LinkConfig(k.layer_name, k.link_name, k.has_subseq) for k in items]

    memories = [MemoryConfig(
        m.layer_name, m.link_name,
        boot_layer_name=m.boot_layer_name if m.HasField("boot_layer_name") else None,
        boot_bias_parameter_name=(m.boot_bias_parameter_name
                                  if m.HasField("boot_bias_parameter_name") else None),
        boot_bias_active_type=(m.boot_bias_active_type
                               if m.HasField("boot_bias_active_type") else None),
        boot_with_const_id=m.boot_with_const_id if m.HasField("boot_with_const_id") else None,
        is_sequence=m.is_sequence) for m in sm.memories]
    gen = None
    if sm.HasField("generator"):
        g = sm.generator
        gen = GeneratorConfig(g.max_num_frames, g.eos_layer_name, g.num_results_per_sample,
                              g.beam_size, g.log_prob)
    return SubModelConfig(
        name=sm.name, layer_names=list(sm.layer_names),
        input_layer_names=list(sm.input_layer_names),
        output_layer_names=list(sm.output_layer_names),
        evaluator_names=list(sm.evaluator_names),
        is_recurrent_layer_group=sm.is_recurrent_layer_group, reversed=sm.reversed,
        memories=memories, in_links=links(sm.in_links), out_links=links(sm.out_links),
        generator=gen,
        target_inlinkid=sm.target_inlinkid if sm.HasField("target_inlinkid") else None)


def model_config_text(model_config: ModelConfig | Any) -> str:
    """``model_config`` (Sculler's, or a ``paddle.ModelConfig`` message) in PaddlePaddle's
    protobuf text format, as ``str()`` of PaddlePaddle's message prints it."""
    from google.protobuf import text_format

    message = model_config if not isinstance(model_config, ModelConfig) else to_proto(
        model_config)
    return text_format.MessageToString(message)


def parse_network(output_layers: Any, extra_layers: Any = None) -> Any:
    """``paddle.layer.parse_network``: the ``paddle.ModelConfig`` message of the network that
    computes ``output_layers`` (a layer or a list) and ``extra_layers``, as PaddlePaddle v2
    returns it: ``str()`` of it is the protobuf text format, ``SerializeToString()`` its bytes,
    and :func:`from_proto` turns it back into Sculler's ModelConfig.

    Like PaddlePaddle's, ``output_layer_names`` lists only ``output_layers``, and a ``root``
    sub-model lists the layers outside recurrent groups."""
    from sculler.topology import Topology

    outputs = list(output_layers) if isinstance(output_layers, (list, tuple)) else [
        output_layers]
    mc = Topology(outputs, extra_layers).proto()
    message = to_proto(mc)
    del message.output_layer_names[:]
    message.output_layer_names.extend(o.name for o in outputs)
    if not any(sm.name == "root" for sm in mc.sub_models):
        groups = [type(sm)() for sm in message.sub_models]
        for copy, sm in zip(groups, message.sub_models):
            copy.CopyFrom(sm)
        del message.sub_models[:]
        in_groups = {n for sm in mc.sub_models for n in sm.layer_names}
        names = [lc.name for lc in mc.layers if lc.name not in in_groups]
        root = message.sub_models.add(name="root", is_recurrent_layer_group=False)
        root.layer_names.extend(names)
        root.input_layer_names.extend(n for n in names if n in mc.input_layer_names)
        root.output_layer_names.extend(n for n in names if n in message.output_layer_names)
        root.evaluator_names.extend(ev.name for ev in mc.evaluators)
        message.sub_models.extend(groups)
    return message
