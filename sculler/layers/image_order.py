"""Layers that move an image's values without arithmetic between them: ``rotate`` (each
channel turned 90 degrees clockwise), ``switch_order`` (NCHW to NHWC) and
``scale_sub_region`` (a box of each image multiplied by a constant), as PaddlePaddle defines
them. Images are rows of ``C*H*W`` values in NCHW order.
"""

from __future__ import annotations

from typing import Any

from sculler.backend import get_array_module
from sculler.core.expression import LayerOutput, as_inputs, make_layer, one_input
from sculler.core.faces import layer_function
from sculler.core.layer import register_layer
from sculler.layers.image import ImageLayer, image_geometry, set_output_geometry
from sculler.validate import integer


@register_layer("rotate")
class RotateLayer(ImageLayer):
    """``y[c, j, i] = x[c, H-1-i, j]``: each ``H x W`` channel turned clockwise into
    ``W x H``; backward turns the gradient back."""

    max_inputs = 1

    @classmethod
    def infer_size(cls, config, inputs):
        c, h, w = image_geometry(config, inputs)
        return set_output_geometry(config, c, w, h)

    def forward(self, pass_type: str) -> None:
        super().forward(pass_type)
        x = self.input_image(0)
        self.reserve_output(x.shape[0], self.size)
        self.output_image()[...] = get_array_module(x).rot90(x, -1, axes=(2, 3))
        self.forward_activation()

    def backward(self, callback=None) -> None:
        self.backward_activation()
        gx = self.input_grad_image(0)
        if gx is not None:
            dy = self.output_image("grad")
            gx += get_array_module(dy).rot90(dy, 1, axes=(2, 3))


@register_layer("switch_order")
class SwitchOrderLayer(ImageLayer):
    """``y = x`` reordered from NCHW to NHWC (``y[h, w, c] = x[c, h, w]``), the layout SSD's
    location and confidence heads are read in."""

    max_inputs = 1

    @classmethod
    def infer_size(cls, config, inputs):
        c, h, w = image_geometry(config, inputs)
        return c * h * w

    def forward(self, pass_type: str) -> None:
        super().forward(pass_type)
        x = self.input_image(0)
        out = self.reserve_output(x.shape[0], self.size)
        out.reshape(x.shape[0], x.shape[2], x.shape[3], x.shape[1])[...] = \
            x.transpose(0, 2, 3, 1)
        self.forward_activation()

    def backward(self, callback=None) -> None:
        self.backward_activation()
        gx = self.input_grad_image(0)
        if gx is not None:
            n, c, h, w = gx.shape
            gx += self.output.grad.reshape(n, h, w, c).transpose(0, 3, 1, 2)


@register_layer("scale_sub_region")
class ScaleSubRegionLayer(ImageLayer):
    """``y = x`` except the box ``indices[n] = [c0, c1, h0, h1, w0, w1]`` (1-based, ends
    included) of each image, multiplied by ``value``; input 1 holds the boxes (no gradient)."""

    min_inputs = max_inputs = 2
    image_inputs = 1

    @classmethod
    def infer_size(cls, config, inputs):
        if inputs[1].size != 6:
            raise ValueError(f"layer {config.name!r} (scale_sub_region): input 1 "
                             f"{inputs[1].name!r} holds [c0, c1, h0, h1, w0, w1] per image, so "
                             f"its width must be 6, got {inputs[1].size}")
        return set_output_geometry(config, *image_geometry(config, inputs))

    def _factor(self, x):
        """``value`` inside each image's box, 1 elsewhere, shaped like ``x``."""
        xp = get_array_module(x)
        box = self.get_input_value(1)
        if box.shape[0] != x.shape[0]:
            raise ValueError(f"layer {self.name!r} (scale_sub_region): {box.shape[0]} boxes "
                             f"for {x.shape[0]} images")
        box = xp.rint(box).astype(int) - 1
        inside = xp.ones(x.shape, dtype=bool)
        for axis in range(3):
            pos = xp.arange(x.shape[axis + 1]).reshape([1 if a != axis else -1
                                                        for a in range(3)])[None]
            lo = box[:, 2 * axis].reshape(-1, 1, 1, 1)
            hi = box[:, 2 * axis + 1].reshape(-1, 1, 1, 1)
            inside &= (pos >= lo) & (pos <= hi)
        return xp.where(inside, float(self.attr("value")), 1.0).astype(x.dtype)

    def forward(self, pass_type: str) -> None:
        super().forward(pass_type)
        x = self.input_image(0)
        self.reserve_output(x.shape[0], self.size)
        self._scale = self._factor(x)
        self.output_image()[...] = x * self._scale
        self.forward_activation()

    def backward(self, callback=None) -> None:
        self.backward_activation()
        gx = self.input_grad_image(0)
        if gx is not None:
            gx += self.output_image("grad") * self._scale


@layer_function(v1="rotate_layer", types=("rotate",))
def rotate(input: LayerOutput, height: int, width: int, name: str | None = None,  # noqa: A002
           layer_attr: Any = None) -> LayerOutput:
    """Turn each ``height x width`` channel of the input 90 degrees clockwise."""
    attrs = {"height": integer(height, "rotate: height", minimum=1),
             "width": integer(width, "rotate: width", minimum=1)}
    return make_layer("rotate", [one_input(input, "rotate")], name=name, bias_attr=False,
                      layer_attr=layer_attr, attrs=attrs)


@layer_function(v1="switch_order_layer", types=("switch_order",), prefix="switch_order")
def switch_order(input: LayerOutput, name: str | None = None,  # noqa: A002
                 reshape_axis: int | None = None, act: Any = None,
                 layer_attr: Any = None) -> LayerOutput:
    """Reorder an image from NCHW to NHWC; ``reshape_axis`` (1..3, PaddlePaddle's way to
    describe the output as a matrix of ``prod(dims[:axis])`` rows) is recorded."""
    if reshape_axis is None or isinstance(reshape_axis, bool) or not (
            isinstance(reshape_axis, int) and 0 < reshape_axis < 4):
        raise ValueError(f"switch_order: reshape_axis must be 1, 2 or 3, got {reshape_axis!r}")
    return make_layer("switch_order", [one_input(input, "switch_order")], name=name, act=act,
                      bias_attr=False, layer_attr=layer_attr,
                      attrs={"reshape_axis": reshape_axis})


@layer_function(v1="scale_sub_region_layer", types=("scale_sub_region",),
                prefix="scale_sub_region")
def scale_sub_region(input: LayerOutput, indices: LayerOutput, value: float,  # noqa: A002
                     name: str | None = None) -> LayerOutput:
    """Multiply the box ``[c0, c1, h0, h1, w0, w1]`` (1-based, ends included; one row of
    ``indices`` per image) of each image by ``value``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"scale_sub_region: value must be a number, got {value!r}")
    return make_layer("scale_sub_region", as_inputs([input, indices], "scale_sub_region"),
                      name=name, bias_attr=False, attrs={"value": float(value)})
