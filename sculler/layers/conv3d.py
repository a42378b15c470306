"""3-D convolution layers: ``conv3d`` (Paddle's ``Conv3DLayer``) and ``deconv3d`` (its
transpose, ``DeConv3DLayer``), on NCDHW volumes (a sample is ``C*D*H*W`` values, row-major).

The volume geometry of an input comes from :func:`~sculler.layers.image.volume_geometry` (a
data layer's ``depth``/``height``/``width``, or the ``out_depth``/``out_height``/``out_width``
a 3-D layer writes); each layer writes its own output geometry the same way.
"""

from __future__ import annotations

import math
from typing import Any

from sculler import activation as A
from sculler.core.expression import LayerOutput, make_layer, one_input
from sculler.core.faces import layer_function, onnx_converter
from sculler.core.layer import Layer, register_layer
from sculler.core.model_config import LayerConfig
from sculler.layers.conv import (
    ConvLayer,
    check_groups,
    check_same_output,
    filter_count,
    smart_conv_init,
)
from sculler.layers.image import channels_attr, set_volume_geometry, volume_geometry
from sculler.math.conv import conv_image_size, conv_output_size
from sculler.math.conv3d import (
    conv3d_backward_data,
    conv3d_backward_filter,
    conv3d_forward,
    deconv3d_backward_data,
    deconv3d_backward_filter,
    deconv3d_forward,
)

AXES = ("_z", "_y", "")  # Paddle's attr suffixes of the depth, height and width axes


def xyz_attrs(value: Any, value_y: Any, value_z: Any, what: str, fn: str) -> dict[str, int]:
    """Paddle's 3-D convention as attrs ``what``, ``what_y``, ``what_z``: an int for the three
    axes, or ``[x, y, z]``; an explicit ``*_y``/``*_z`` argument wins for its axis."""
    if isinstance(value, (list, tuple)):
        if len(value) != 3:
            raise ValueError(f"{fn}: {what} must be an int or [x, y, z], got {value!r}")
        x, y, z = value
    else:
        x = y = z = value
    y = y if value_y is None else value_y
    z = z if value_z is None else value_z
    for v in (x, y, z):
        if isinstance(v, bool) or not isinstance(v, int):
            raise TypeError(f"{fn}: {what} must be an int or [x, y, z] of ints, got {value!r} "
                            f"(y: {value_y!r}, z: {value_z!r})")
    return {what: int(x), what + "_y": int(y), what + "_z": int(z)}


def zyx(config, attrs: dict, key: str, default: int | None) -> tuple[int, int, int]:
    """``(z, y, x)`` of setting ``key`` (``key`` is x; ``key_y``/``key_z`` default to it)."""
    x = attrs.get(key, default)
    if x is None:
        raise ValueError(f"layer {config.name!r} ({config.type}): {key} is required")
    return tuple(int(attrs.get(key + suffix, x)) for suffix in AXES)


class VolumeLayer(Layer):
    """Base of the 3-D layers: ``self.geom[i]`` is input ``i``'s ``(C, D, H, W)``,
    ``self.out_geom`` the output's."""

    def init(self, layer_map, parameter_map) -> None:
        super().init(layer_map, parameter_map)
        cfgs = [inp.config for inp in self.inputs]
        self.geom = [volume_geometry(self.config, cfgs, i) for i in range(len(cfgs))]
        self.out_geom = tuple(int(self.attr(k)) for k in
                              ("out_channels", "out_depth", "out_height", "out_width"))

    def input_volume(self, i: int):
        """Input ``i``'s value as ``(N, C, D, H, W)``, after checking its width."""
        self.check_input_width(i, math.prod(self.geom[i]))
        x = self.get_input_value(i)
        return x.reshape((x.shape[0],) + self.geom[i])

    def output_volume(self, which: str = "value"):
        buf = self.output.value if which == "value" else self.output.grad
        return buf.reshape((buf.shape[0],) + self.out_geom)

    def add_input_grad(self, i: int, grad) -> None:
        """``dx_i += grad`` (no-op when input ``i`` takes no gradient)."""
        g = self.get_input_grad(i)
        if g is not None:
            g += grad.reshape(g.shape)


def conv3d_conf(config, i: int) -> dict:
    """Input ``i``'s settings as ``(z, y, x)`` triples (the layer's attrs overridden by the
    input's): ``filter_size`` (required), ``stride`` (1), ``padding`` (0); and ``groups``."""
    a = {**config.attrs, **config.inputs[i].attrs}
    out = {key: zyx(config, a, key, default)
           for key, default in (("filter_size", None), ("stride", 1), ("padding", 0))}
    out["groups"] = int(a.get("groups", 1))
    return out


@register_layer("conv3d")
class Conv3DLayer(VolumeLayer):
    """3-D convolution over one or more volume inputs, outputs summed, plus bias.

    ``y[n, f, o] = sum_i sum_{c, k} W_i[f, c, kz, ky, kx] * xpad_i[n, c, oz*sz + kz,
    oy*sy + ky, ox*sx + kx] + b[f]`` (channels ``c`` of ``f``'s group); output side
    ``1 + floor((img + 2p - k) / s)`` per axis (Paddle's caffe mode).

    Attrs: ``num_filters`` (F), ``filter_size``/``_y``/``_z``, ``stride``/``_y``/``_z`` (1),
    ``padding``/``_y``/``_z`` (0), ``groups`` (1), ``shared_biases`` (True: one bias per
    filter, else one per output value); ``channels``/``depth``/``height``/``width`` of the input
    (else from the input layer). Weight of input ``i``: ``(F, C_i/groups * kd*kh*kw)``,
    row-major ``(F, C/g, kd, kh, kw)``, Paddle's layout. Output geometry ``(F, oD, oH, oW)``.
    """

    default_bias = True
    trans = False
    paddle_dims = classmethod(ConvLayer.paddle_dims.__func__)
    bias_dims = classmethod(ConvLayer.bias_dims.__func__)

    @classmethod
    def _geometry(cls, config, inputs):
        """``(F, output (D, H, W), {input: weight matrix shape})``."""
        nf = filter_count(config)
        out, shapes = None, {}
        for i in range(len(inputs)):
            c, *dhw = volume_geometry(config, inputs, i)
            cf = conv3d_conf(config, i)
            g = cf["groups"]
            check_groups(config, g, c, nf)
            fn = conv_image_size if cls.trans else conv_output_size
            try:
                size = tuple(fn(dhw[a], cf["filter_size"][a], cf["padding"][a],
                                cf["stride"][a]) for a in range(3))
            except ValueError as e:
                raise ValueError(f"layer {config.name!r} ({config.type}): {e}") from None
            out = check_same_output(config, i, size, out)
            taps = math.prod(cf["filter_size"])
            shapes[i] = (nf * taps, c // g) if cls.trans else (nf, c // g * taps)
        return nf, out, shapes

    @classmethod
    def infer_size(cls, config, inputs):
        nf, dhw, _ = cls._geometry(config, inputs)
        return set_volume_geometry(config, nf, *dhw)

    @classmethod
    def weight_dims(cls, config, inputs):
        return cls._geometry(config, inputs)[2]

    def init(self, layer_map, parameter_map) -> None:
        super().init(layer_map, parameter_map)
        self.confs = [conv3d_conf(self.config, i) for i in range(len(self.inputs))]

    def _w(self, i: int):
        """Input ``i``'s weight as the kernels use it."""
        cf, w = self.confs[i], self.weights[i].w
        if self.trans:
            return w
        return w.reshape((w.shape[0], self.geom[i][0] // cf["groups"]) + cf["filter_size"])

    def _args(self, i: int):
        cf = self.confs[i]
        return cf["stride"], cf["padding"], cf["groups"]

    def forward(self, pass_type: str) -> None:
        super().forward(pass_type)
        batch = self.check_same_batch()
        self.reserve_output(batch, self.size)
        y = self.output_volume()
        for i in range(len(self.inputs)):
            x = self.input_volume(i)
            if self.trans:
                part = deconv3d_forward(x, self._w(i), (batch,) + self.out_geom,
                                        self.confs[i]["filter_size"], *self._args(i))
            else:
                part = conv3d_forward(x, self._w(i), *self._args(i), self.out_geom[1:])
            if i == 0:
                y[...] = part
            else:
                y += part
        if self.bias is not None:
            if self.bias.w.size == self.out_geom[0]:
                y += self.bias.w.reshape(1, -1, 1, 1, 1)
            else:
                self.add_bias()
        self.forward_activation()

    def backward(self, callback=None) -> None:
        self.backward_activation()
        dy = self.output_volume("grad")
        if self.bias is not None and self.bias.w_grad is not None:
            if self.bias.w.size == self.out_geom[0]:
                self.bias.w_grad += dy.sum(axis=(0, 2, 3, 4)).reshape(self.bias.w_grad.shape)
            else:
                self.bias.w_grad += self.output.grad.sum(axis=0).reshape(self.bias.w_grad.shape)
            self.bias.parameter.inc_update(callback)
        for i, weight in enumerate(self.weights):
            x, w, cf = self.input_volume(i), self._w(i), self.confs[i]
            if weight.w_grad is not None:
                if self.trans:
                    gw = deconv3d_backward_filter(x, dy, w.shape, cf["filter_size"],
                                                  *self._args(i))
                else:
                    gw = conv3d_backward_filter(x, dy, w.shape, *self._args(i))
                weight.w_grad += gw.reshape(weight.w_grad.shape)
            if self.get_input_grad(i) is not None:
                if self.trans:
                    gx = deconv3d_backward_data(dy, w, x, cf["filter_size"], *self._args(i))
                else:
                    gx = conv3d_backward_data(dy, w, x.shape, *self._args(i))
                self.add_input_grad(i, gx)
            if weight.w_grad is not None:
                weight.parameter.inc_update(callback)


@register_layer("deconv3d")
class DeConv3DLayer(Conv3DLayer):
    """3-D transposed convolution (``img_conv3d(trans=True)``): the input gradient of a
    ``conv3d`` mapping ``F`` channels to ``C``, so output side ``(img - 1)*s + k - 2p`` per
    axis.

    Attrs as :class:`Conv3DLayer`; ``num_filters`` is the number of OUTPUT channels. Weight of
    input ``i``: the ``(F * kd*kh*kw, C_i/groups)`` matrix of Paddle's ``DeConv3DLayer``, group
    ``g``'s block the rows ``g*F/groups*k .. (g+1)*F/groups*k``, rows ordered
    ``(f, kz, ky, kx)``. (Paddle's config_parser sizes it ``F * F/groups * k`` whatever the
    input channels, which its engine only runs when ``C == F``; Sculler sizes it from ``C``,
    the same numbers in that case.) Output geometry ``(F, D, H, W)``.
    """

    trans = True


@layer_function(v1="img_conv3d_layer", types=("conv3d", "deconv3d"), prefix="conv3d")
def img_conv3d(input: LayerOutput, filter_size: Any, num_filters: int,  # noqa: A002
               name: str | None = None, num_channels: int | None = None, act: Any = None,
               groups: int = 1, stride: Any = 1, padding: Any = 0, bias_attr: Any = None,
               param_attr: Any = None, shared_biases: bool = True, layer_attr: Any = None,
               trans: bool = False, layer_type: str | None = None) -> LayerOutput:
    """3-D convolution of a ``C x D x H x W`` volume (``trans=True`` or
    ``layer_type="deconv3d"``: transposed); default act Relu, with bias.

    ``y[f] = act(sum_{c,k} W[f, c, kz, ky, kx] * xpad[c, oz*s + kz, oy*s + ky, ox*s + kx]
    + b[f])``, output side ``1 + (img + 2p - k) // s``. ``filter_size``, ``stride`` and
    ``padding`` are an int or ``[x, y, z]``. Without an explicit initial std the weights are
    drawn ``N(0, sqrt(2 / (filter_size^2 * C)))`` as Paddle's.
    """
    fn = "img_conv3d"
    src = one_input(input, fn)
    allowed = ("deconv3d",) if trans else ("conv3d", "deconv3d")
    if layer_type is None:
        layer_type = "deconv3d" if trans else "conv3d"
    elif layer_type not in allowed:
        raise ValueError(f"{fn}: layer_type {layer_type!r} does not match trans={trans}; "
                         f"expected one of {allowed}")
    attrs = {**xyz_attrs(filter_size, None, None, "filter_size", fn),
             **xyz_attrs(stride, None, None, "stride", fn),
             **xyz_attrs(padding, None, None, "padding", fn),
             "groups": int(groups), **channels_attr(num_channels, fn)}
    out = make_layer(layer_type, [src], name=name, name_prefix="conv3d", act=act,
                     default_act=A.Relu, param_attr=param_attr, bias_attr=bias_attr,
                     layer_attr=layer_attr, input_attrs=[attrs],
                     attrs={"num_filters": int(num_filters),
                            "shared_biases": bool(shared_biases)})
    smart_conv_init(out, attrs["filter_size"], volume_geometry(out.config, [src.config])[0])
    return out


@onnx_converter("conv3d", "deconv3d")
def conv3d_to_onnx(g: Any, lc: LayerConfig, ins: list[str], ctx: Any) -> str:
    """3-D ``Conv`` (weights ``(F, C/g, kd, kh, kw)``) or ``ConvTranspose`` (weights
    ``(C, F/g, kd, kh, kw)``, regrouped from Paddle's ``(F*k, C/g)`` matrix) of each input,
    summed, plus bias."""
    cfgs = ctx.input_configs(lc)
    nf = int(lc.attrs["num_filters"])
    trans = lc.type == "deconv3d"
    parts = []
    for i, x in enumerate(ins):
        ctx.require_dense(lc, i, x)
        c, *dhw = volume_geometry(lc, cfgs, i)
        cf = conv3d_conf(lc, i)
        k, g_ = cf["filter_size"], cf["groups"]
        w = ctx.weight(lc.inputs[i].input_parameter_name)
        if trans:
            w = w.reshape(g_, nf // g_, *k, c // g_).transpose(0, 5, 1, 2, 3, 4)
            w = w.reshape(c, nf // g_, *k)
        else:
            w = w.reshape(nf, c // g_, *k)
        parts.append(g.op("ConvTranspose" if trans else "Conv",
                          [g.to_image(x, (c, *dhw), lc.name), g.const(f"{lc.name}/w{i}", w)],
                          lc.name, kernel_shape=list(k), pads=list(cf["padding"]) * 2,
                          strides=list(cf["stride"]), group=g_))
    y = parts[0] if len(parts) == 1 else g.op("Sum", parts, lc.name)
    y, done = ctx.image_bias(g, lc, y, nf, spatial_axes=3)
    flat = g.to_flat(y, lc.size, lc.name)
    return flat if done else ctx.bias(g, lc, flat)
