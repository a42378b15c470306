"""The ``pool3d`` layer: max or average pooling of NCDHW volumes (Paddle's ``Pool3DLayer``)."""

from __future__ import annotations

from typing import Any

import numpy as np

from sculler.backend import get_array_module
from sculler.core.expression import LayerOutput, make_layer, one_input
from sculler.core.faces import layer_function, onnx_converter
from sculler.core.layer import register_layer
from sculler.core.model_config import LayerConfig
from sculler.layers.conv3d import VolumeLayer, xyz_attrs, zyx
from sculler.layers.image import (
    _pool_type,
    channels_attr,
    pool_type_name,
    set_volume_geometry,
    volume_geometry,
)
from sculler.layers.pool import window_counts
from sculler.math.conv import conv_output_size
from sculler.math.conv3d import pool3d_scatter, pool3d_windows


def pool3d_conf(config) -> tuple[tuple[int, int, int], ...]:
    """``(z, y, x)`` triples of window, stride and padding (``pool_size`` is x,
    ``pool_size_y``/``_z`` default to it; strides 1, paddings 0)."""
    a = config.attrs
    return tuple(zyx(config, a, key, default)
                 for key, default in (("pool_size", None), ("stride", 1), ("padding", 0)))


@register_layer("pool3d")
class Pool3DLayer(VolumeLayer):
    """Max or average pooling over ``kd x kh x kw`` windows, per channel.

    Window ``o`` covers ``o*s - p .. o*s - p + k - 1`` per axis, clipped to the volume. Max:
    ``y = max over the window``; average: ``y = sum / count``, ``count`` the window's voxels
    inside the volume (Paddle's ``avgPool3DForward``), 0 for a window wholly in the padding
    (max: the dtype's lowest value, as Paddle's ``-FLT_MAX``, and no gradient).
    Output side ``1 + ceil((img + 2p - k) / s)`` (``floor`` with ``ceil_mode=False``).

    Attrs: ``pool_type`` ("max-projection" default / "avg-projection"), ``pool_size``/``_y``/
    ``_z``, ``stride``/``_y``/``_z``, ``padding``/``_y``/``_z``, ``ceil_mode`` (True),
    ``channels``/``depth``/``height``/``width`` of the input. Output geometry
    ``(C, oD, oH, oW)``. No parameters.
    """

    max_inputs = 1

    @classmethod
    def infer_size(cls, config, inputs):
        c, *dhw = volume_geometry(config, inputs)
        _pool_type(config)
        k, st, pad = pool3d_conf(config)
        caffe = not config.attrs.get("ceil_mode", True)
        try:
            out = (conv_output_size(dhw[a], k[a], pad[a], st[a], caffe_mode=caffe)
                   for a in range(3))
            return set_volume_geometry(config, c, *out)
        except ValueError as e:
            raise ValueError(f"layer {config.name!r} (pool3d): {e}") from None

    def init(self, layer_map, parameter_map) -> None:
        super().init(layer_map, parameter_map)
        self.window = pool3d_conf(self.config)
        self.is_max = _pool_type(self.config) == "max"

    def _counts(self, xp, dtype):
        """Voxels of the volume inside each window, ``(oD, oH, oW)``."""
        ones = xp.ones((1, 1) + self.geom[0][1:], dtype=dtype)
        return pool3d_windows(ones, *self.window, self.out_geom[1:], 0.0).sum(axis=0)[0, 0]

    def forward(self, pass_type: str) -> None:
        super().forward(pass_type)
        x = self.input_volume(0)
        xp = get_array_module(x)
        self.reserve_output(x.shape[0], self.size)
        y = self.output_volume()
        if self.is_max:
            lowest = float(np.finfo(x.dtype).min)  # a window wholly in the padding: Paddle's
            taps = pool3d_windows(x, *self.window, self.out_geom[1:], lowest)
            self._argmax = taps.argmax(axis=0)
            y[...] = xp.take_along_axis(taps, self._argmax[None], axis=0)[0]
        else:
            count = self._counts(xp, x.dtype)
            total = pool3d_windows(x, *self.window, self.out_geom[1:], 0.0).sum(axis=0)
            y[...] = xp.where(count > 0, total / xp.maximum(count, 1), 0.0)
        self.forward_activation()

    def backward(self, callback=None) -> None:
        self.backward_activation()
        gx = self.get_input_grad(0)
        if gx is None:
            return
        dy = self.output_volume("grad")
        xp = get_array_module(dy)
        taps = int(np.prod(self.window[0]))
        x_shape = (dy.shape[0],) + self.geom[0]
        if self.is_max:
            dtaps = xp.zeros((taps,) + dy.shape, dtype=dy.dtype)
            xp.put_along_axis(dtaps, self._argmax[None], dy[None], axis=0)
        else:
            count = self._counts(xp, dy.dtype)
            share = xp.where(count > 0, dy / xp.maximum(count, 1), 0.0)
            dtaps = xp.broadcast_to(share[None], (taps,) + dy.shape)
        gx += pool3d_scatter(dtaps, x_shape, *self.window).reshape(gx.shape)


@layer_function(v1="img_pool3d_layer", types=("pool3d",), prefix="pool3d")
def img_pool3d(input: LayerOutput, pool_size: Any, name: str | None = None,  # noqa: A002
               num_channels: int | None = None, pool_type: Any = None, stride: Any = 1,
               padding: Any = 0, layer_attr: Any = None, pool_size_y: int | None = None,
               stride_y: int | None = None, padding_y: int | None = None,
               pool_size_z: int | None = None, stride_z: int | None = None,
               padding_z: int | None = None, ceil_mode: bool = True) -> LayerOutput:
    """Max (default) or average pooling of a ``C x D x H x W`` volume per channel.

    ``pool_size``, ``stride``, ``padding``: an int or ``[x, y, z]``; ``*_y``/``*_z`` override
    an axis. Output side ``1 + ceil((img + 2p - k) / s)`` (``floor`` with
    ``ceil_mode=False``); average pooling divides by the window's voxels inside the volume.
    """
    fn = "img_pool3d"
    src = one_input(input, fn)
    attrs = {"pool_type": pool_type_name(pool_type, fn),
             **xyz_attrs(pool_size, pool_size_y, pool_size_z, "pool_size", fn),
             **xyz_attrs(stride, stride_y, stride_z, "stride", fn),
             **xyz_attrs(padding, padding_y, padding_z, "padding", fn),
             "ceil_mode": bool(ceil_mode), **channels_attr(num_channels, fn)}
    return make_layer("pool3d", [src], name=name, name_prefix="pool3d", bias_attr=False,
                      layer_attr=layer_attr, attrs=attrs)


@onnx_converter("pool3d")
def pool3d_to_onnx(g: Any, lc: LayerConfig, ins: list[str], ctx: Any) -> str:
    """3-D max or average pooling: explicit padding (far side included, as the ceil-mode
    windows need), then ``MaxPool``/``AveragePool`` without padding; the average is scaled by
    ``k / (voxels of the window inside the volume)``."""
    ctx.require_dense(lc, 0, ins[0])
    c, *dhw = volume_geometry(lc, ctx.input_configs(lc), 0)
    k, st, pad = pool3d_conf(lc)
    out = [int(lc.attrs[key]) for key in ("out_depth", "out_height", "out_width")]
    far = [max(0, (o - 1) * s + kk - (n + 2 * p)) for o, s, kk, n, p in zip(out, st, k, dhw, pad)]
    is_max = _pool_type(lc) == "max"
    pads = g.const(f"{lc.name}/pads", [0, 0, *pad, 0, 0, *(p + e for p, e in zip(pad, far))],
                   np.int64)
    fill = g.const(f"{lc.name}/fill", -np.inf if is_max else 0.0)
    x = g.op("Pad", [g.to_image(ins[0], (c, *dhw), lc.name), pads, fill], lc.name)
    attrs = {"kernel_shape": list(k), "strides": list(st)}
    if is_max:
        y = g.op("MaxPool", [x], lc.name, **attrs)
    else:
        counts = [window_counts(o, s, kk, n, p, True) for o, s, kk, n, p in
                  zip(out, st, k, dhw, pad)]
        count = counts[0][:, None, None] * counts[1][None, :, None] * counts[2][None, None, :]
        factor = np.where(count > 0, np.prod(k) / np.maximum(count, 1), 0.0)
        y = g.op("Mul", [g.op("AveragePool", [x], lc.name, **attrs),
                         g.const(f"{lc.name}/factor", factor[None, None])], lc.name)
    return g.to_flat(y, lc.size, lc.name)
