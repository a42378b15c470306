"""Convolution layers: ``exconv`` (im2col + GEMM, Paddle's ``ExpandConvLayer``) and ``exconvt``
(its transpose, Paddle's ``trans=True`` / ``ConvTransLayer``)."""

from __future__ import annotations

import math
from typing import Any

from sculler import activation as A
from sculler import backend
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
    channels_attr,
    image_geometry,
    set_output_geometry,
    xy_pair,
)
from sculler.math import conv_direct
from sculler.math.conv import (
    channel_sums,
    conv2d_backward_data,
    conv2d_backward_filter,
    conv2d_bias_in_gemm,
    conv2d_dy_columns,
    conv2d_dy_columns_needed,
    conv2d_forward,
    conv2d_transpose_backward_data,
    conv2d_transpose_backward_filter,
    conv2d_transpose_forward,
    conv2d_unfold,
    conv_image_size,
    conv_output_size,
)

# The forward's unfolded input is kept for the filter gradient when it is at most this big
# (bytes per input); larger ones are unfolded again in the backward pass.
KEEP_COLS_BYTES = 256 << 20


def conv_conf(config, i: int) -> dict:
    """Input ``i``'s convolution settings: the layer's attrs overridden by the input's attrs,
    as ``(y, x)`` pairs. Paddle names: ``filter_size`` is x, ``filter_size_y`` y (default x);
    likewise ``stride``/``stride_y`` (1), ``padding``/``padding_y`` (0), ``dilation``/
    ``dilation_y`` (1)."""
    a = {**config.attrs, **config.inputs[i].attrs}
    out = {}
    for key, default in (("filter_size", None), ("stride", 1), ("padding", 0), ("dilation", 1)):
        x = a.get(key, default)
        if x is None:
            raise ValueError(f"layer {config.name!r} ({config.type}): filter_size is required")
        out[key] = (int(a.get(key + "_y", x)), int(x))
    out["groups"] = int(a.get("groups", 1))
    out["caffe_mode"] = bool(a.get("caffe_mode", True))
    return out


def filter_count(config) -> int:
    """The layer's ``num_filters`` (ValueError naming the layer unless >= 1)."""
    nf = int(config.attrs.get("num_filters", 0))
    if nf < 1:
        raise ValueError(f"layer {config.name!r} ({config.type}): num_filters must be >= 1, "
                         f"got {nf}")
    return nf


def check_groups(config, groups: int, channels: int, nf: int) -> None:
    """ValueError unless ``groups`` divides the input channels and the filters."""
    if groups < 1 or channels % groups or nf % groups:
        raise ValueError(f"layer {config.name!r} ({config.type}): groups={groups} must divide "
                         f"the input channels {channels} and num_filters {nf}")


def check_same_output(config, i: int, size: tuple, first: tuple | None) -> tuple:
    """Input ``i``'s output size, after checking it equals input 0's (``first``)."""
    if first is not None and size != first:
        raise ValueError(f"layer {config.name!r} ({config.type}): input {i} gives an output of "
                         f"{size}, input 0 gives {first}; they must agree")
    return size


def smart_conv_init(out: LayerOutput, filter_size: int, channels: int) -> None:
    """Paddle's conv weight init ``N(0, sqrt(2 / (filter_size^2 * C)))`` for input 0, unless
    the user set an initial std, strategy or initializer."""
    wa = dict(out.weight_attrs[0] or {})
    if "initial_std" not in wa and "initial_strategy" not in wa and 0 not in out.initializers:
        wa.update(initial_mean=0.0, initial_std=math.sqrt(2.0 / (filter_size ** 2 * channels)))
        out.weight_attrs[0] = wa


@register_layer("exconv", "conv", "cudnn_conv")
class ConvLayer(ImageLayer):
    """2-D convolution over one or more image inputs, outputs summed, plus bias.

    ``y[n, f] = sum_i sum_{c, ky, kx} W_i[f, c, ky, kx] * xpad_i[n, c, oy*sy + ky*dy,
    ox*sx + kx*dx] + b[f]``; output side ``1 + floor((img + 2p - (k-1)*d - 1) / s)``
    (Paddle's ``cnn_output_size`` in caffe mode, the only mode its convolutions use).

    Attrs: ``num_filters`` (F, required), ``filter_size``/``filter_size_y``,
    ``stride``/``stride_y``, ``padding``/``padding_y``, ``dilation``/``dilation_y``, ``groups``
    (1), ``shared_biases`` (True: one bias per filter; False: one per
    output element); ``channels``/``height``/``width`` of the input (else from the input layer).
    Any of these except ``num_filters`` may be set per input in ``InputConfig.attrs``.

    Weight of input ``i``: ``(F, C_i/groups * fy * fx)``, row-major ``(F, C/g, fy, fx)``,
    Paddle's memory layout, so Paddle parameter files load unchanged. Bias: ``(1, F)`` shared,
    else ``(1, size)``. Output geometry ``(F, oh, ow)``.
    """

    default_bias = True
    first_write = True
    trans = False

    @classmethod
    def _out_hw(cls, config, geom, cf):
        args = [(geom[1 + a], cf["filter_size"][a], cf["padding"][a], cf["stride"][a],
                 cf["dilation"][a], cf["caffe_mode"]) for a in (0, 1)]
        fn = conv_image_size if cls.trans else conv_output_size
        try:
            return tuple(fn(*arg) for arg in args)
        except ValueError as e:
            raise ValueError(f"layer {config.name!r} ({config.type}): {e}") from None

    @classmethod
    def _geometry(cls, config, inputs):
        nf = filter_count(config)
        out, shapes = None, {}
        for i in range(len(inputs)):
            geom, cf = image_geometry(config, inputs, i), conv_conf(config, i)
            g = cf["groups"]
            if not (cls.trans or cf["caffe_mode"]):
                raise ValueError(f"layer {config.name!r} ({config.type}): caffe_mode=False is only "
                                 "supported by the transposed convolution (exconvt)")
            check_groups(config, g, geom[0], nf)
            out = check_same_output(config, i, cls._out_hw(config, geom, cf), out)
            fy, fx = cf["filter_size"]
            rows, cols = (geom[0], nf // g) if cls.trans else (nf, geom[0] // g)
            shapes[i] = (rows, cols, fy, fx)
        return nf, out, shapes

    @classmethod
    def infer_size(cls, config, inputs):
        nf, (oh, ow), _ = cls._geometry(config, inputs)
        return set_output_geometry(config, nf, oh, ow)

    @classmethod
    def weight_dims(cls, config, inputs):
        _, _, shapes = cls._geometry(config, inputs)
        return {i: (s[0], s[1] * s[2] * s[3]) for i, s in shapes.items()}

    @classmethod
    def paddle_dims(cls, config, inputs):
        """PaddlePaddle writes no dims for a convolution's weights and ``[n, 1]`` for its
        bias of ``n`` values."""
        written = {i: () for i in cls.weight_dims(config, inputs)}
        written["bias"] = (int(math.prod(cls.bias_dims(config, inputs))), 1)
        return written

    @classmethod
    def bias_dims(cls, config, inputs):
        if config.attrs.get("shared_biases", True):
            return (1, int(config.attrs["num_filters"]))
        return (1, config.size)

    def init(self, layer_map, parameter_map) -> None:
        super().init(layer_map, parameter_map)
        _, _, shapes = self._geometry(self.config, [inp.config for inp in self.inputs])
        self.w_shapes = shapes
        self.confs = [conv_conf(self.config, i) for i in range(len(self.inputs))]
        self._direct = [None if self.trans else conv_direct.DirectConv(
            cf["filter_size"], cf["padding"], cf["stride"]) for cf in self.confs]
        self._direct_used = [False] * len(self.confs)

    @property
    def direct_inputs(self) -> tuple[bool, ...]:
        """Which inputs the last batch convolved on the direct kernels."""
        return tuple(self._direct_used)

    def _use_direct(self, i: int, x) -> bool:
        """Whether input ``i`` convolves on the direct kernels this batch
        (``sculler/math/conv_direct.py``: dilation 1, one group, NumPy arrays, numba
        installed)."""
        cf = self.confs[i]
        used = self._direct[i] is not None and conv_direct.applicable(
            x, cf["filter_size"], *self._args(i))
        self._direct_used[i] = used
        return used

    def _shared_bias(self) -> bool:
        """Whether the bias is one value a filter (``shared_biases``), not one an output unit."""
        return self.bias is not None and self.bias.w.size == self.out_geom[0]

    def _args(self, i):
        cf = self.confs[i]
        return cf["stride"], cf["padding"], cf["dilation"], cf["groups"]

    def _unfold(self, i: int, x, w_shape, bias_row: bool = False):
        """Input ``i`` unfolded for the GEMM (with a row of ones for the bias when
        ``bias_row``), in a reused buffer; kept for the backward pass (``self._cols[i]``)
        unless bigger than ``KEEP_COLS_BYTES``."""
        cf = self.confs[i]
        n_cols = x.shape[0] * self.out_geom[1] * self.out_geom[2]
        n = (w_shape[1] * cf["groups"] * w_shape[2] * w_shape[3] + bias_row) * n_cols
        keep = n * x.dtype.itemsize <= KEEP_COLS_BYTES
        buf = self.scratch(f"cols{i}", (n,), x.dtype) if keep else None
        cols = conv2d_unfold(x, w_shape, *self._args(i)[:3], out=buf, bias_row=bias_row)
        self._cols[i] = cols if keep else None
        return cols

    def forward(self, pass_type: str) -> None:
        super().forward(pass_type)
        batch = self.check_same_batch()
        self.reserve_output(batch, self.size)
        y = self.output_image()
        self._cols = [None] * len(self.weights)
        shared_bias = self._shared_bias()
        for i, weight in enumerate(self.weights):
            x = self.input_image(i)
            w = weight.w.reshape(self.w_shapes[i])
            if self._use_direct(i, x):
                bias = self.bias.w if shared_bias and i == 0 else None
                self._direct[i].forward(x, w, y, bias=bias, accumulate=i > 0)
                continue
            if self.trans:
                part = conv2d_transpose_forward(x, w, *self._args(i), self.confs[i]["caffe_mode"])
            else:
                if i == 0:  # the first input's convolution adds the shared bias, in its GEMM
                    bias = self.bias.w if shared_bias else None
                    in_gemm = shared_bias and conv2d_bias_in_gemm(self.out_geom[1:],
                                                                  self.confs[0]["groups"])
                    cols = self._unfold(0, x, w.shape, bias_row=in_gemm)
                    work = (self.scratch("prod", (w.shape[0], cols.shape[1]))
                            if backend.is_gpu_array(x) else None)
                    conv2d_forward(x, w, *self._args(0), out=y, cols=cols, bias=bias, work=work)
                    continue
                part = conv2d_forward(x, w, *self._args(i), cols=self._unfold(i, x, w.shape))
            if i == 0:
                y[...] = part
                if shared_bias:
                    y += self.bias.w.reshape(1, -1, 1, 1)
            else:
                y += part
        if self.bias is not None and not shared_bias:
            self.output.value += self.bias.w
        self.forward_activation()

    def backward(self, callback=None) -> None:
        self.backward_activation()
        dy = self.output_image("grad")
        dy_cols = {}
        bias = self.bias if self.bias is not None and self.bias.w_grad is not None else None
        shared = bias is not None and self._shared_bias()
        # on the GPU a shared bias's gradient comes out of the launch that lays out dy
        bias_done = False
        if not self.trans:
            for i, cf in enumerate(self.confs):
                if self._direct_used[i]:
                    continue
                on_gpu = backend.is_gpu_array(dy)
                needed = conv2d_dy_columns_needed(self.out_geom[1:], cf["groups"],
                                                  self.input_grad_image(i) is not None, on_gpu)
                if needed and cf["groups"] not in dy_cols:
                    g = cf["groups"]
                    buf = (self.scratch(f"dycols{g}", (g, dy.shape[1] // g, dy.size // dy.shape[1]))
                           if on_gpu else None)
                    sums = on_gpu and shared and not bias_done
                    dy_cols[g] = conv2d_dy_columns(
                        dy, g, out=buf, bias_grad=bias.w_grad if sums else None,
                        bias_beta=self.param_grad_beta(bias) if sums else 1.0)
                    bias_done = bias_done or sums
        # else out of input 0's filter GEMM (the row of ones its kept columns carry, see
        # conv2d_unfold) when that GEMM runs
        bias_beta = None
        if bias_done:
            bias.parameter.inc_update(callback)
        elif bias is not None:
            beta = self.param_grad_beta(bias)
            if not shared:
                gb = bias.w_grad.reshape(-1)
                if beta == 0.0:
                    gb[...] = 0
                gb += self.output.grad.sum(axis=0)
            elif self.trans or self.weights[0].w_grad is None or self._direct_used[0]:
                channel_sums(dy, bias.w_grad, beta, next(iter(dy_cols.values()), None))
            else:
                bias_beta = beta
            if bias_beta is None:
                bias.parameter.inc_update(callback)
        for i, weight in enumerate(self.weights):
            x = self.input_image(i)
            shape = self.w_shapes[i]
            w = weight.w.reshape(shape)
            gx = self.input_grad_image(i)
            if self._direct_used[i]:
                self._direct_backward(i, dy, w, weight, gx, callback)
                continue
            if weight.w_grad is not None:
                gw = weight.w_grad.reshape(shape)
                beta = self.param_grad_beta(weight)
                if self.trans:
                    if beta == 0.0:
                        gw[...] = 0
                    conv2d_transpose_backward_filter(x, dy, shape, *self._args(i), out=gw)
                else:
                    with_bias = i == 0 and bias_beta is not None
                    conv2d_backward_filter(x, dy, shape, *self._args(i), out=gw, beta=beta,
                                           cols=self._cols[i],
                                           dy_cols=dy_cols.get(self.confs[i]["groups"]),
                                           bias_grad=self.bias.w_grad if with_bias else None,
                                           bias_beta=bias_beta if with_bias else 1.0)
                    if with_bias:
                        self.bias.parameter.inc_update(callback)
            if gx is not None:
                beta = self.input_grad_beta(i)
                if self.trans:
                    if beta == 0.0:
                        gx[...] = 0
                    conv2d_transpose_backward_data(dy, w, x.shape, *self._args(i), out=gx)
                else:
                    work = (self.scratch("dcols", (math.prod(shape[1:]) * self.confs[i]["groups"],
                                                   dy.size // dy.shape[1]))
                            if backend.is_gpu_array(dy) else None)
                    conv2d_backward_data(dy, w, x.shape, *self._args(i), out=gx, beta=beta,
                                         dy_cols=dy_cols.get(self.confs[i]["groups"]),
                                         work=work)
            if weight.w_grad is not None:
                weight.parameter.inc_update(callback)


    def _direct_backward(self, i: int, dy, w, weight, gx, callback) -> None:
        """Input ``i``'s filter and input gradients on the direct kernels."""
        gw = beta_w = None
        if weight.w_grad is not None:
            gw, beta_w = weight.w_grad.reshape(self.w_shapes[i]), self.param_grad_beta(weight)
        beta_x = self.input_grad_beta(i) if gx is not None else 0.0
        self._direct[i].backward(dy, w, gw, beta_w, gx, beta_x)
        if gw is not None:
            weight.parameter.inc_update(callback)


@register_layer("exconvt", "convt", "cudnn_convt")
class ConvTransLayer(ConvLayer):
    """Transposed convolution (Paddle's ``img_conv_layer(trans=True)``): the input gradient of
    an ``exconv`` mapping ``F`` channels to ``C``, so output side
    ``(img - 1)*s + (k-1)*d + 1 - 2p`` (+1 without ``caffe_mode``).

    Attrs as :class:`ConvLayer`, plus ``caffe_mode`` (True; False adds one row and column, the
    inverse of a ceil-mode output size); ``num_filters`` is the number of OUTPUT channels. Weight of
    input ``i``: ``(C_i, F/groups * fy * fx)``, row-major ``(C, F/g, fy, fx)`` as Paddle's
    deconvolution filters. Output geometry ``(F, H', W')``.
    """

    trans = True


@layer_function(v1="img_conv_layer", types=("exconv", "exconvt"), prefix="conv")
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
    src = one_input(input, fn)
    fx, fy = xy_pair(filter_size, filter_size_y, "filter_size", fn)
    sx, sy = xy_pair(stride, stride_y, "stride", fn)
    px, py = xy_pair(padding, padding_y, "padding", fn)
    dx, dy = xy_pair(dilation, dilation_y, "dilation", fn)
    allowed = ("exconvt", "cudnn_convt") if trans else ("exconv", "cudnn_conv")
    if layer_type is None:
        layer_type = allowed[0]
    elif layer_type not in allowed:
        raise ValueError(f"{fn}: layer_type {layer_type!r} does not match trans={trans}; "
                         f"expected one of {allowed}")
    in_attrs = {"filter_size": fx, "filter_size_y": fy, "stride": sx, "stride_y": sy,
                "padding": px, "padding_y": py, "dilation": dx, "dilation_y": dy,
                "groups": int(groups), **channels_attr(num_channels, fn)}
    out = make_layer(layer_type, [src], name=name, name_prefix="conv", act=act,
                     default_act=A.Relu, param_attr=param_attr, bias_attr=bias_attr,
                     layer_attr=layer_attr, input_attrs=[in_attrs],
                     attrs={"num_filters": int(num_filters),
                            "shared_biases": bool(shared_biases)})
    smart_conv_init(out, fx, image_geometry(out.config, [src.config])[0])
    return out


@onnx_converter("exconv", "conv", "cudnn_conv")
def conv_to_onnx(g: Any, lc: LayerConfig, ins: list[str], ctx: Any) -> str:
    """2-D convolution of each input (weights ``(F, C/g, fy, fx)``), summed, plus bias."""
    cfgs = ctx.input_configs(lc)
    nf = int(lc.attrs["num_filters"])
    parts = []
    for i, x in enumerate(ins):
        ctx.require_dense(lc, i, x)
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
    y, done = ctx.image_bias(g, lc, y, nf)
    flat = g.to_flat(y, lc.size, lc.name)
    return flat if done else ctx.bias(g, lc, flat)
