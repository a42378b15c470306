"""Convolution terms of the ``mixed`` layer: ``conv`` projection and ``conv_operator``.

``conv`` (PaddlePaddle's ConvProjection): ``y += conv(x, W)`` with a learned filter ``W`` of
shape ``(num_filters, channels/groups * fy * fx)``; ``conv_operator`` (ConvOperator): each
sample's image is convolved with that sample's own filter, read from the operand input
(width ``num_filters * channels * fy * fx``), so filters can be computed by other layers.
Per-input attrs: ``num_filters``, ``filter_size`` (``filter_size_y``), ``stride``
(``stride_y``), ``padding`` (``padding_y``), ``groups`` (projection only), ``trans`` (the
transposed convolution: PaddlePaddle's ConvTransProjection / ConvTransOperator, type
``convt``), and the image's ``channels``/``height``/``width`` when the input layer does not
carry them. Output width ``num_filters * oh * ow`` with ``o = (i + 2p - f) / s + 1``, or
``o = (i - 1) * s + f - 2p`` transposed. Filters are ``(num_filters, channels/groups, fy, fx)``,
transposed ``(channels, num_filters/groups, fy, fx)`` (Paddle's cuDNN filter layouts).
"""

from __future__ import annotations

from typing import Any

from sculler.core.expression import (
    LayerOutput,
    Projection,
)
from sculler.core.faces import layer_function
from sculler.layers.image import image_geometry
from sculler.math import conv as K


def conv_geometry(config, inputs, i: int) -> dict:
    """Image shape, filter, stride, padding, groups and output size of conv term ``i``."""
    a = config.inputs[i].attrs
    c, h, w = image_geometry(config, inputs, i)
    fx = int(a["filter_size"])
    fy = int(a.get("filter_size_y") or fx)
    sx = int(a.get("stride", 1))
    sy = int(a.get("stride_y") or sx)
    px = int(a.get("padding", 0))
    py = int(a["padding_y"]) if a.get("padding_y") is not None else px
    groups = int(a.get("groups", 1))
    f = int(a["num_filters"])
    if c % groups or f % groups:
        raise ValueError(f"layer {config.name!r} (mixed): conv input {i} has {c} channels and "
                         f"{f} filters, not divisible by groups={groups}")
    trans = bool(a.get("trans", False))
    size = K.conv_image_size if trans else K.conv_output_size
    try:
        oh, ow = size(h, fy, py, sy), size(w, fx, px, sx)
    except ValueError as e:
        raise ValueError(f"layer {config.name!r} (mixed): conv input {i}: {e}") from None
    w_shape = (c, f // groups, fy, fx) if trans else (f, c // groups, fy, fx)
    return {"x_shape": (c, h, w), "w_shape": w_shape, "stride": (sy, sx), "trans": trans,
            "padding": (py, px), "groups": groups, "out_hw": (oh, ow), "num_filters": f,
            "width": f * oh * ow}


def operand_width(geometry: dict) -> int:
    f, cg, fy, fx = geometry["w_shape"]
    return f * cg * geometry["groups"] * fy * fx


class ConvTerms:
    """Mixin of :class:`~sculler.layers.mixed.MixedLayer`: forward/backward of conv terms."""

    def _geometry(self, i: int) -> dict:
        geo = self._conv_cache.get(i)
        if geo is None:
            geo = self._conv_cache[i] = conv_geometry(
                self.config, [inp.config for inp in self.inputs], i)
        return geo

    def _image(self, i: int, geo: dict):
        return self._in(i).reshape((-1,) + geo["x_shape"])

    @staticmethod
    def _kernels(geo: dict):
        """(forward, backward-data, backward-filter) of the term's convolution."""
        if geo["trans"]:
            return (K.conv2d_transpose_forward, K.conv2d_transpose_backward_data,
                    K.conv2d_transpose_backward_filter)
        return K.conv2d_forward, K.conv2d_backward_data, K.conv2d_backward_filter

    def _fwd_conv(self, i, out):
        geo = self._geometry(i)
        w = self.weights[i].w.reshape(geo["w_shape"])
        y = self._kernels(geo)[0](self._image(i, geo), w, geo["stride"], geo["padding"], 1,
                                  geo["groups"])
        out += y.reshape(out.shape)

    def _bwd_conv(self, i, dy):
        geo = self._geometry(i)
        x = self._image(i, geo)
        dy4 = dy.reshape(x.shape[0], geo["num_filters"], *geo["out_hw"])
        _, backward_data, backward_filter = self._kernels(geo)
        weight = self.weights[i]
        if weight.w_grad is not None:
            backward_filter(x, dy4, geo["w_shape"], geo["stride"], geo["padding"], 1,
                            geo["groups"], out=weight.w_grad.reshape(geo["w_shape"]))
        g = self.get_input_grad(i)
        if g is not None:
            backward_data(dy4, weight.w.reshape(geo["w_shape"]), x.shape, geo["stride"],
                          geo["padding"], 1, geo["groups"], out=g.reshape(x.shape))

    def _filters(self, i: int, geo: dict):
        f, cg, fy, fx = geo["w_shape"]
        return self._in(i + 1).reshape(-1, f, cg, fy, fx)

    def _fwd_conv_operator(self, i, out):
        geo = self._geometry(i)
        x, filters = self._image(i, geo), self._filters(i, geo)
        forward = self._kernels(geo)[0]
        for n in range(x.shape[0]):
            y = forward(x[n : n + 1], filters[n], geo["stride"], geo["padding"])
            out[n] += y.reshape(-1)

    def _bwd_conv_operator(self, i, dy):
        geo = self._geometry(i)
        x, filters = self._image(i, geo), self._filters(i, geo)
        dy4 = dy.reshape(x.shape[0], geo["num_filters"], *geo["out_hw"])
        _, backward_data, backward_filter = self._kernels(geo)
        gx, gf = self.get_input_grad(i), self.get_input_grad(i + 1)
        for n in range(x.shape[0]):
            if gx is not None:
                backward_data(dy4[n : n + 1], filters[n], (1,) + geo["x_shape"],
                              geo["stride"], geo["padding"],
                              out=gx[n].reshape((1,) + geo["x_shape"]))
            if gf is not None:
                backward_filter(x[n : n + 1], dy4[n : n + 1], geo["w_shape"], geo["stride"],
                                geo["padding"], out=gf[n].reshape(geo["w_shape"]))


def _conv_attrs(fn: str, filter_size: int, num_filters: int, num_channels: int | None,
                stride: int, padding: int, filter_size_y: int | None, stride_y: int | None,
                padding_y: int | None, trans: bool) -> dict:
    attrs = {"filter_size": int(filter_size), "num_filters": int(num_filters),
             "stride": int(stride), "padding": int(padding)}
    if trans:
        attrs["trans"] = True
    for key, val in (("channels", num_channels), ("filter_size_y", filter_size_y),
                     ("stride_y", stride_y), ("padding_y", padding_y)):
        if val is not None:
            attrs[key] = int(val)
    return attrs


@layer_function(v1="conv_operator", kind="plain")
def conv_operator(img: LayerOutput, filter: LayerOutput, filter_size: int,  # noqa: A002
                  num_filters: int, num_channels: int | None = None, stride: int = 1,
                  padding: int = 0, filter_size_y: int | None = None, stride_y: int | None = None,
                  padding_y: int | None = None, trans: bool = False) -> Projection:
    """Convolve each sample's image with that sample's own filters, read from ``filter``
    (width ``num_filters * channels * fy * fx``); output ``num_filters * oh * ow`` wide.
    ``trans=True``: the transposed convolution, filters ``(channels, num_filters, fy, fx)``,
    output side ``(i - 1) * s + f - 2p``."""
    attrs = _conv_attrs("conv_operator", filter_size, num_filters, num_channels, stride, padding,
                        filter_size_y, stride_y, padding_y, trans)
    return Projection("conv_operator", [img, filter], attrs)


@layer_function(v1="conv_projection", kind="plain")
def conv_projection(input: LayerOutput, filter_size: int, num_filters: int,  # noqa: A002
                    num_channels: int | None = None, stride: int = 1, padding: int = 0,
                    filter_size_y: int | None = None, stride_y: int | None = None,
                    padding_y: int | None = None, groups: int = 1, param_attr: Any = None,
                    trans: bool = False) -> Projection:
    """``conv(x, W)`` with a learned ``(num_filters, channels/groups * fy * fx)`` filter;
    ``trans=True``: the transposed convolution with a ``(channels, num_filters/groups * fy *
    fx)`` filter, output side ``(i - 1) * s + f - 2p``."""
    attrs = _conv_attrs("conv_projection", filter_size, num_filters, num_channels, stride,
                        padding, filter_size_y, stride_y, padding_y, trans)
    attrs["groups"] = int(groups)
    return Projection("conv", [input], attrs, param_attr=param_attr)
