"""Image layers of the v2 API: ``img_conv``, ``img_pool``, ``batch_norm``, ``img_cmrnorm``,
``maxout``, ``spp``, ``bilinear_interp``, ``block_expand``, ``pad`` and ``crop``.

Each is a thin wrapper filling the attrs of an engine layer in ``sculler/layers/{conv,pool,
norm,image}.py`` (see docs/layers_image.md). Images are ``dense_vector(C*H*W)`` rows in NCHW
order; give the data layer ``height``/``width`` (``layer.data(..., height=28, width=28)``) and
every later layer finds its geometry from its input, so ``num_channels`` may stay None.
Argument names, defaults and automatic names follow PaddlePaddle's ``img_conv_layer`` & co.
(``__conv_0__``, ``__pool_0__``, ``__batch_norm_0__``, ``__crmnorm_0__``, ...).

Example:
    >>> import sculler as paddle
    >>> img = paddle.layer.data(name="img", type=paddle.data_type.dense_vector(784),
    ...                         height=28, width=28)
    >>> c = paddle.layer.img_conv(input=img, filter_size=5, num_filters=20)
    >>> paddle.layer.img_pool(input=c, pool_size=2, stride=2).size  # 20 x 12 x 12
    2880
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import sculler.layers.conv  # noqa: F401 - registers exconv/exconvt
import sculler.layers.image  # noqa: F401 - registers maxout, spp, bilinear_interp, ...
import sculler.layers.norm  # noqa: F401 - registers batch_norm and norm
import sculler.layers.pool  # noqa: F401 - registers pool
from sculler import activation as A
from sculler import pooling as P
from sculler.layers.image import image_geometry
from sculler.v2.layer_base import LayerOutput, as_inputs, make_layer, no_support

__all__ = ["img_conv", "img_pool", "batch_norm", "img_cmrnorm", "maxout", "spp",
           "bilinear_interp", "block_expand", "pad", "crop"]


def _xy(value: Any, value_y: Any, what: str, fn: str) -> tuple[int, int]:
    """Paddle's ``(x, y)`` convention: an int for both axes, or a pair ``(x, y)``; an explicit
    ``*_y`` argument wins for the y axis."""
    if isinstance(value, (list, tuple)):
        if len(value) != 2:
            raise ValueError(f"{fn}: {what} must be an int or a pair (x, y), got {value!r}")
        x, y = value
    else:
        x = y = value
    if value_y is not None:
        y = value_y
    for v in (x, y):
        if isinstance(v, bool) or not isinstance(v, int):
            raise TypeError(f"{fn}: {what} must be an int or a pair of ints (x, y), got "
                            f"{value!r} (y: {value_y!r})")
    return int(x), int(y)


def _one_input(input: Any, fn: str) -> LayerOutput:  # noqa: A002
    items = as_inputs(input, fn)
    if len(items) != 1:
        raise ValueError(f"{fn}: takes one input layer, got {len(items)}")
    return items[0]


def _channels(num_channels: int | None, fn: str) -> dict[str, int]:
    if num_channels is None:
        return {}
    if isinstance(num_channels, bool) or not isinstance(num_channels, int) or num_channels < 1:
        raise ValueError(f"{fn}: num_channels must be a positive int or None, got "
                         f"{num_channels!r}")
    return {"channels": int(num_channels)}


def _pool_name(pool_type: Any, fn: str) -> str:
    """Engine ``pool_type`` for a ``paddle.pooling`` object (Max default)."""
    if pool_type is None:
        pool_type = P.Max()
    if not isinstance(pool_type, P.BasePool):
        raise TypeError(f"{fn}: pool_type must be paddle.pooling.Max() or Avg(), got "
                        f"{pool_type!r}")
    if pool_type.name == "max":
        return "max-projection"
    if pool_type.name == "average":
        return "avg-projection"
    raise NotImplementedError(f"{fn}: pool_type {pool_type!r} is not supported for images; use "
                              "paddle.pooling.Max() or Avg()")


def img_conv(input: LayerOutput, filter_size: Any, num_filters: int,  # noqa: A002
             name: str | None = None, num_channels: int | None = None, act: Any = None,
             groups: int = 1, stride: Any = 1, padding: Any = 0, dilation: Any = 1,
             bias_attr: Any = None, param_attr: Any = None, shared_biases: bool = True,
             layer_attr: Any = None, filter_size_y: int | None = None,
             stride_y: int | None = None, padding_y: int | None = None,
             dilation_y: int | None = None, trans: bool = False,
             layer_type: str | None = None) -> LayerOutput:
    """2-D convolution (``trans=True``: transposed convolution); default act Relu, with bias.

    ``y[f] = act(sum_{c,i,j} W[f, c, i, j] * xpad[c, oy*s + i*d, ox*s + j*d] + b[f])``, output
    side ``1 + (img + 2p - (k-1)d - 1) // s``. ``filter_size``, ``stride``, ``padding`` and
    ``dilation`` are an int or ``(x, y)``; ``*_y`` override the y axis. Without an explicit
    initial std or range the weights are drawn as Paddle's conv "smart" init,
    ``N(0, sqrt(2 / (filter_size^2 * C)))``. Weight ``(F, C/groups * fy * fx)``.
    """
    fn = "img_conv"
    src = _one_input(input, fn)
    fx, fy = _xy(filter_size, filter_size_y, "filter_size", fn)
    sx, sy = _xy(stride, stride_y, "stride", fn)
    px, py = _xy(padding, padding_y, "padding", fn)
    dx, dy = _xy(dilation, dilation_y, "dilation", fn)
    allowed = ("exconvt", "cudnn_convt") if trans else ("exconv", "cudnn_conv")
    if layer_type is None:
        layer_type = allowed[0]
    elif layer_type not in allowed:
        raise ValueError(f"{fn}: layer_type {layer_type!r} does not match trans={trans}; "
                         f"expected one of {allowed}")
    in_attrs = {"filter_size": fx, "filter_size_y": fy, "stride": sx, "stride_y": sy,
                "padding": px, "padding_y": py, "dilation": dx, "dilation_y": dy,
                "groups": int(groups), **_channels(num_channels, fn)}
    out = make_layer(layer_type, [src], name=name, name_prefix="conv", act=act,
                     default_act=A.Relu, param_attr=param_attr, bias_attr=bias_attr,
                     layer_attr=layer_attr, input_attrs=[in_attrs],
                     attrs={"num_filters": int(num_filters),
                            "shared_biases": bool(shared_biases)})
    wa = dict(out.weight_attrs[0] or {})
    if "initial_std" not in wa and "initial_strategy" not in wa and 0 not in out.initializers:
        channels = image_geometry(out.config, [src.config])[0]
        wa.update(initial_mean=0.0, initial_std=math.sqrt(2.0 / (fx * fx * channels)))
        out.weight_attrs[0] = wa
    return out


def img_pool(input: LayerOutput, pool_size: int, name: str | None = None,  # noqa: A002
             num_channels: int | None = None, pool_type: Any = None, stride: int = 1,
             padding: int = 0, layer_attr: Any = None, pool_size_y: int | None = None,
             stride_y: int | None = None, padding_y: int | None = None,
             ceil_mode: bool = True, exclude_mode: bool | None = None) -> LayerOutput:
    """Max (default) or average pooling per channel over ``pool_size`` windows.

    Output side ``1 + ceil((img + 2p - k) / s)`` (``floor`` with ``ceil_mode=False``); average
    pooling divides by the cells inside the image (``exclude_mode`` None/True) or inside the
    padded window (False). No parameters.
    """
    fn = "img_pool"
    src = _one_input(input, fn)
    kx, ky = _xy(pool_size, pool_size_y, "pool_size", fn)
    sx, sy = _xy(stride, stride_y, "stride", fn)
    px, py = _xy(padding, padding_y, "padding", fn)
    attrs = {"pool_type": _pool_name(pool_type, fn), "pool_size": kx, "pool_size_y": ky,
             "stride": sx, "stride_y": sy, "padding": px, "padding_y": py,
             "ceil_mode": bool(ceil_mode),
             "exclude_mode": True if exclude_mode is None else bool(exclude_mode),
             **_channels(num_channels, fn)}
    return make_layer("pool", [src], name=name, name_prefix="pool", bias_attr=False,
                      layer_attr=layer_attr, attrs=attrs)


def batch_norm(input: LayerOutput, act: Any = None, name: str | None = None,  # noqa: A002
               img3D: bool = False, num_channels: int | None = None, bias_attr: Any = None,
               param_attr: Any = None, layer_attr: Any = None,
               batch_norm_type: str | None = None, epsilon: float = 1e-5,
               moving_average_fraction: float = 0.9, use_global_stats: bool | None = None,
               mean_var_names: Sequence[str] | None = None) -> LayerOutput:
    """Batch normalisation per channel; default act Relu, with bias.

    ``y = act(gamma * (x - mu) / sqrt(var + epsilon) + beta)``: batch statistics in training
    (moving ones updated ``m = f*m + (1-f)*batch``), moving statistics in testing unless
    ``use_global_stats=False``. ``param_attr`` is gamma's (default 1), ``bias_attr`` beta's;
    ``mean_var_names`` names the static moving mean and variance (default
    ``_<name>.w1``/``.w2``). A non-image input normalises each of its columns.
    """
    fn = "batch_norm"
    no_support(fn, img3D=img3D)
    src = _one_input(input, fn)
    types = (None, "batch_norm", "cudnn_batch_norm", "mkldnn_batch_norm")
    if batch_norm_type not in types:
        raise ValueError(f"{fn}: batch_norm_type must be one of {types}, got "
                         f"{batch_norm_type!r}")
    if not 0.0 <= moving_average_fraction <= 1.0:
        raise ValueError(f"{fn}: moving_average_fraction must be in [0, 1], got "
                         f"{moving_average_fraction!r}")
    moving: list[Any] = [None, None]
    if mean_var_names is not None:
        if isinstance(mean_var_names, str) or len(mean_var_names) != 2:
            raise ValueError(f"{fn}: mean_var_names must be [mean name, variance name], got "
                             f"{mean_var_names!r}")
        moving = [{"name": str(n)} for n in mean_var_names]
    if isinstance(param_attr, (list, tuple)):
        raise TypeError(f"{fn}: param_attr is the scale's attribute (one attr.Param), got a "
                        f"list {param_attr!r}")
    attrs: dict[str, Any] = {"epsilon": float(epsilon),
                             "moving_average_fraction": float(moving_average_fraction)}
    if use_global_stats is not None:
        attrs["use_global_stats"] = bool(use_global_stats)
    out = make_layer("batch_norm", [src, src, src], name=name, name_prefix="batch_norm",
                     act=act, default_act=A.Relu, param_attr=[param_attr, None, None],
                     bias_attr=bias_attr, layer_attr=layer_attr, attrs=attrs,
                     input_attrs=[_channels(num_channels, fn), {}, {}])
    out.weight_attrs[1:3] = moving
    return out


def img_cmrnorm(input: LayerOutput, size: int, scale: float = 0.0128,  # noqa: A002
                power: float = 0.75, name: str | None = None, num_channels: int | None = None,
                layer_attr: Any = None) -> LayerOutput:
    """Local response normalisation across ``size`` neighbouring channels.

    ``y[c] = x[c] * (1 + scale/size * sum_{c' near c} x[c']^2)^(-power)``.
    """
    fn = "img_cmrnorm"
    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        raise ValueError(f"{fn}: size must be a positive int, got {size!r}")
    attrs = {"norm_type": "cmrnorm-projection", "norm_size": size, "scale": float(scale),
             "power": float(power), **_channels(num_channels, fn)}
    return make_layer("norm", [_one_input(input, fn)], name=name, name_prefix="crmnorm",
                      bias_attr=False, layer_attr=layer_attr, attrs=attrs)


def maxout(input: LayerOutput, groups: int, num_channels: int | None = None,  # noqa: A002
           name: str | None = None, layer_attr: Any = None) -> LayerOutput:
    """Maxout over channel groups: ``y[o] = max_k x[o*groups + k]``, ``C/groups`` channels."""
    fn = "maxout"
    return make_layer("maxout", [_one_input(input, fn)], name=name, name_prefix="maxout_layer",
                      bias_attr=False, layer_attr=layer_attr,
                      attrs={"groups": int(groups), **_channels(num_channels, fn)})


def spp(input: LayerOutput, name: str | None = None, num_channels: int | None = None,  # noqa: A002
        pool_type: Any = None, pyramid_height: int | None = None,
        layer_attr: Any = None) -> LayerOutput:
    """Spatial pyramid pooling: level ``l`` pools into ``2^l x 2^l`` bins; width
    ``C * (4^pyramid_height - 1) / 3``."""
    fn = "spp"
    if pyramid_height is None:
        raise ValueError(f"{fn}: pyramid_height is required (an int >= 1)")
    attrs = {"pyramid_height": int(pyramid_height), "pool_type": _pool_name(pool_type, fn),
             **_channels(num_channels, fn)}
    return make_layer("spp", [_one_input(input, fn)], name=name, name_prefix="spp",
                      bias_attr=False, layer_attr=layer_attr, attrs=attrs)


def bilinear_interp(input: LayerOutput, out_size_x: int | None = None,  # noqa: A002
                    out_size_y: int | None = None, name: str | None = None,
                    layer_attr: Any = None) -> LayerOutput:
    """Bilinear resize to ``out_size_y x out_size_x`` with aligned corners."""
    fn = "bilinear_interp"
    if out_size_x is None or out_size_y is None:
        raise ValueError(f"{fn}: out_size_x and out_size_y are required, got {out_size_x!r} "
                         f"and {out_size_y!r}")
    return make_layer("bilinear_interp", [_one_input(input, fn)], name=name,
                      name_prefix="bilinear_interp_layer", bias_attr=False,
                      layer_attr=layer_attr,
                      attrs={"out_size_x": int(out_size_x), "out_size_y": int(out_size_y)})


def block_expand(input: LayerOutput, block_x: int = 0, block_y: int = 0,  # noqa: A002
                 stride_x: int = 0, stride_y: int = 0, padding_x: int = 0, padding_y: int = 0,
                 num_channels: int | None = None, name: str | None = None,
                 layer_attr: Any = None) -> LayerOutput:
    """Image to a sequence of ``block_y x block_x`` blocks (im2col per image): each sample
    becomes ``oh * ow`` steps of width ``C * block_y * block_x``. Blocks and strides must be
    given (>= 1), as in Paddle."""
    fn = "block_expand"
    attrs = {"block_x": int(block_x), "block_y": int(block_y), "stride_x": int(stride_x),
             "stride_y": int(stride_y), "padding_x": int(padding_x),
             "padding_y": int(padding_y), **_channels(num_channels, fn)}
    return make_layer("blockexpand", [_one_input(input, fn)], name=name,
                      name_prefix="block_expand_layer", bias_attr=False, layer_attr=layer_attr,
                      attrs=attrs)


def _pad_pair(value: Any, what: str) -> list[int]:
    if value is None:
        return [0, 0]
    if isinstance(value, (list, tuple)) and len(value) == 2:
        return [int(value[0]), int(value[1])]
    raise ValueError(f"pad: {what} must be [before, after], got {value!r}")


def pad(input: LayerOutput, pad_c: Sequence[int] | None = None,  # noqa: A002
        pad_h: Sequence[int] | None = None, pad_w: Sequence[int] | None = None,
        name: str | None = None, layer_attr: Any = None) -> LayerOutput:
    """Zero padding of channels, rows and columns, each ``[before, after]``: output
    ``(C + sum(pad_c), H + sum(pad_h), W + sum(pad_w))``."""
    attrs = {"pad_c": _pad_pair(pad_c, "pad_c"), "pad_h": _pad_pair(pad_h, "pad_h"),
             "pad_w": _pad_pair(pad_w, "pad_w")}
    return make_layer("pad", [_one_input(input, "pad")], name=name, name_prefix="pad",
                      bias_attr=False, layer_attr=layer_attr, attrs=attrs)


def crop(input: Any, offset: Sequence[int], axis: int = 2,  # noqa: A002
         shape: Sequence[int] | None = None, name: str | None = None,
         layer_attr: Any = None) -> LayerOutput:
    """Crop dimensions ``axis..3`` of the ``(N, C, H, W)`` image, starting at ``offset``, to
    ``shape`` or, with ``input=[image, reference]``, to the reference layer's geometry."""
    fn = "crop"
    inputs = as_inputs(input, fn)
    if len(inputs) > 2:
        raise ValueError(f"{fn}: input is one image layer or [image, reference], got "
                         f"{len(inputs)} layers")
    if len(inputs) == 1 and shape is None:
        raise ValueError(f"{fn}: give shape=[...] or a reference layer input=[image, ref]")
    attrs: dict[str, Any] = {"axis": int(axis), "offset": [int(v) for v in offset]}
    if shape is not None:
        attrs["shape"] = [int(v) for v in shape]
    return make_layer("crop", inputs, name=name, name_prefix="crop_layer", bias_attr=False,
                      layer_attr=layer_attr, attrs=attrs)
