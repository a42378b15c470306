"""The ``pool`` layer: max or average pooling of images (Paddle's ``PoolLayer`` /
``PoolProjectionLayer``)."""

from __future__ import annotations

from typing import Any

import numpy as np

from sculler.core.expression import (
    LayerOutput,
    make_layer,
    one_input,
)
from sculler.core.faces import layer_function, onnx_converter
from sculler.core.layer import register_layer
from sculler.core.model_config import LayerConfig
from sculler.layers.image import (
    ImageLayer,
    _pool_type,
    channels_attr,
    image_geometry,
    pool_type_name,
    set_output_geometry,
    xy_pair,
)
from sculler.math.conv import channel_sums, conv_output_size, pair
from sculler.math.pool import (
    avg_pool2d_backward,
    avg_pool2d_forward,
    max_pool2d_backward,
    max_pool2d_forward,
    tap_dtype,
)


def pool_conf(config) -> dict:
    """``(y, x)`` pairs for window, stride and padding from the attrs (``pool_size`` is x,
    ``pool_size_y`` y and defaults to x; ``stride``/``stride_y`` default 1; ``padding``/
    ``padding_y`` default 0)."""
    a = config.attrs
    if a.get("pool_size") is None:
        raise ValueError(f"layer {config.name!r} (pool): pool_size is required")
    out = {}
    for key, default in (("pool_size", None), ("stride", 1), ("padding", 0)):
        x = a.get(key, default)
        out[key] = (int(a.get(key + "_y", x)), int(x))
    return out


@register_layer("pool")
class PoolLayer(ImageLayer):
    """Max or average pooling over ``ky x kx`` windows, per channel.

    Max: ``y = max over the window clipped to the image``; average: ``y = sum / count`` with
    ``count`` the window cells inside the image (``exclude_mode``, Paddle's default) or inside
    the padded image. Output side ``1 + ceil((img + 2p - k) / s)`` (``ceil_mode``, Paddle's
    pooling default; ``floor`` otherwise).

    Attrs: ``pool_type`` ("max-projection" (default) / "avg-projection"; Paddle's
    "cudnn-max-pool", "cudnn-avg-pool" and "max-pool-with-mask" map to max/avg),
    ``pool_size``/``pool_size_y``, ``stride``/``stride_y``, ``padding``/``padding_y``,
    ``ceil_mode`` (True), ``exclude_mode`` (True), ``channels``/``height``/``width`` of the
    input (else from the input layer). Output geometry ``(C, oh, ow)``. No bias by default.
    """

    max_inputs = 1
    first_write = True

    @classmethod
    def infer_size(cls, config, inputs):
        c, h, w = image_geometry(config, inputs)
        _pool_type(config)
        cf = pool_conf(config)
        caffe = not config.attrs.get("ceil_mode", True)
        try:
            oh, ow = (conv_output_size(n, cf["pool_size"][a], cf["padding"][a], cf["stride"][a],
                                       caffe_mode=caffe) for a, n in ((0, h), (1, w)))
        except ValueError as e:
            raise ValueError(f"layer {config.name!r} (pool): {e}") from None
        return set_output_geometry(config, c, oh, ow)

    @classmethod
    def bias_dims(cls, config, inputs):
        return (1, int(config.attrs["out_channels"]))

    def init(self, layer_map, parameter_map) -> None:
        super().init(layer_map, parameter_map)
        cf = pool_conf(self.config)
        self.window = (cf["pool_size"], cf["stride"], cf["padding"])
        ky, kx = pair(cf["pool_size"], "size", 1)
        self._taps = tap_dtype(ky * kx + 1)  # the argmax dtype of max pooling
        self.is_max = _pool_type(self.config) == "max"
        self.ceil_mode = bool(self.attr("ceil_mode", True))
        self.exclude_mode = bool(self.attr("exclude_mode", True))

    def forward(self, pass_type: str) -> None:
        super().forward(pass_type)
        x = self.input_image(0)
        self.reserve_output(x.shape[0], self.size)
        out = self.output_image()
        if self.is_max:
            _, self._argmax = max_pool2d_forward(
                x, *self.window, ceil_mode=self.ceil_mode, out=out,
                argmax_out=self.scratch("argmax", out.shape, self._taps))
        else:
            avg_pool2d_forward(x, *self.window, ceil_mode=self.ceil_mode,
                               exclude_mode=self.exclude_mode, out=out)
        if self.bias is not None:
            out += self.bias.w.reshape(1, -1, 1, 1)
        self.forward_activation()

    def backward(self, callback=None) -> None:
        self.backward_activation()
        dy = self.output_image("grad")
        if self.bias is not None and self.bias.w_grad is not None:
            channel_sums(dy, self.bias.w_grad, self.param_grad_beta(self.bias))
            self.bias.parameter.inc_update(callback)
        gx = self.input_grad_image(0)
        if gx is None:
            return
        beta = self.input_grad_beta(0)
        if self.is_max:
            max_pool2d_backward(dy, self._argmax, gx.shape, *self.window, out=gx, beta=beta)
        else:
            if beta == 0.0:  # the kernel adds: clear the stale buffer first
                gx[...] = 0
            avg_pool2d_backward(dy, gx.shape, *self.window, exclude_mode=self.exclude_mode,
                                out=gx)


@layer_function(v1="img_pool_layer", types=("pool",), prefix="pool")
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
    src = one_input(input, fn)
    kx, ky = xy_pair(pool_size, pool_size_y, "pool_size", fn)
    sx, sy = xy_pair(stride, stride_y, "stride", fn)
    px, py = xy_pair(padding, padding_y, "padding", fn)
    attrs = {"pool_type": pool_type_name(pool_type, fn), "pool_size": kx, "pool_size_y": ky,
             "stride": sx, "stride_y": sy, "padding": px, "padding_y": py,
             "ceil_mode": bool(ceil_mode),
             "exclude_mode": True if exclude_mode is None else bool(exclude_mode),
             **channels_attr(num_channels, fn)}
    return make_layer("pool", [src], name=name, name_prefix="pool", bias_attr=False,
                      layer_attr=layer_attr, attrs=attrs)


@onnx_converter("pool")
def pool_to_onnx(g: Any, lc: LayerConfig, ins: list[str], ctx: Any) -> str:
    """Max or average pooling (Paddle's ceil mode and exclude mode by default)."""
    ctx.require_dense(lc, 0, ins[0])
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
        count = np.outer(*(window_counts(o, s, k, n, p, exclude)
                           for o, s, k, n, p in ((oh, sy, ky, h, py), (ow, sx, kx, w, px))))
        factor = np.where(count > 0, ky * kx / np.maximum(count, 1), 0.0)
        y = g.op("Mul", [g.op("AveragePool", [x], lc.name, **attrs),
                         g.const(f"{lc.name}/factor", factor[None, None])], lc.name)
    y, done = ctx.image_bias(g, lc, y, c)
    flat = g.to_flat(y, lc.size, lc.name)
    return flat if done else ctx.bias(g, lc, flat)


def window_counts(out: int, stride: int, k: int, n: int, pad: int,
                   exclude: bool) -> np.ndarray:
    """Per output position along one axis: the window's cells inside the image
    (``exclude``) or inside the padded image."""
    lo, hi = (0, n) if exclude else (-pad, n + pad)
    start = np.arange(out) * stride - pad
    return np.clip(np.minimum(start + k, hi) - np.maximum(start, lo), 0, None)
