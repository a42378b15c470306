"""Normalisation layers: ``batch_norm`` (Paddle's ``BatchNormalizationLayer``) and ``norm`` with
``norm_type="cmrnorm-projection"`` (cross-map response normalisation, ``img_cmrnorm_layer``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from sculler import activation as A
from sculler.core.expression import (
    LayerOutput,
    make_layer,
    one_input,
)
from sculler.core.faces import layer_function, onnx_converter
from sculler.core.layer import PASS_TEST, PASS_TRAIN, register_layer
from sculler.core.model_config import LayerConfig
from sculler.layers.cross_channel_norm import CrossChannelNormLayer
from sculler.layers.image import (
    ImageLayer,
    channels_attr,
    image_geometry,
    set_output_geometry,
    set_volume_geometry,
    volume_geometry,
)
from sculler.math.norm import (
    batch_norm_backward,
    batch_norm_forward,
    compiled_images,
    cross_map_norm_backward,
    cross_map_norm_forward,
)


@register_layer("batch_norm", "cudnn_batch_norm")
class BatchNormLayer(ImageLayer):
    """``y = f(scale * (x - mean) / sqrt(var + 1e-5) + bias)`` per channel.

    Statistics run over ``N*H*W`` per channel (over ``N`` for a non-image input, which counts
    as ``(size, 1, 1)``). Training uses the batch statistics and updates the moving ones,
    ``m = m * f + batch * (1 - f)`` (``f = moving_average_fraction``); a test pass uses the
    moving statistics unless ``use_global_stats`` is explicitly False (as the C++ layer: the
    attribute only matters in test passes). The gradient-check pass (PASS_GC) uses batch
    statistics but leaves the moving ones untouched, so forward stays deterministic.

    Inputs: exactly three, as Paddle's config_parser makes them: the image, then twice more
    (the same layer, or any layer: only their parameters are used) whose weights ``w1``/``w2``
    are the moving mean and variance, ``(1, C)`` each, static and starting at 0 (the layer's
    ``weight_defaults``). Weight ``w0``: the ``(1, C)`` scale, starting at 1; bias ``(1, C)``
    (on by default).

    Attrs: ``channels``/``height``/``width`` of the input (else from the input layer, else a
    flat input), ``img3D`` (a ``C x D x H x W`` volume, ``depth`` from the attrs or the input
    layer; statistics over ``N*D*H*W``), ``moving_average_fraction`` (0.9),
    ``use_global_stats`` (unset), ``epsilon`` (1e-5). Output geometry equals the input's.
    """

    default_bias = True
    min_inputs = 3
    max_inputs = 3
    flat_ok = True
    image_inputs = 1
    first_write = True

    @classmethod
    def input_geometry(cls, config, inputs, i=0):
        """``(C, H, W)``; a volume (attr ``img3D``) counts as ``(C, D*H, W)``: the statistics
        run over all its voxels per channel."""
        if not config.attrs.get("img3D"):
            return image_geometry(config, inputs, i, flat_ok=True)
        c, d, h, w = volume_geometry(config, inputs, i)
        return c, d * h, w

    @classmethod
    def infer_size(cls, config, inputs):
        if config.attrs.get("img3D"):
            return set_volume_geometry(config, *volume_geometry(config, inputs, 0))
        return set_output_geometry(config, *cls.input_geometry(config, inputs))

    @classmethod
    def weight_dims(cls, config, inputs):
        c = cls.input_geometry(config, inputs)[0]
        return {0: (1, c), 1: (1, c), 2: (1, c)}

    @classmethod
    def bias_dims(cls, config, inputs):
        return (1, cls.input_geometry(config, inputs)[0])

    @classmethod
    def paddle_dims(cls, config, inputs):
        """PaddlePaddle writes no dims for the scale (the moving statistics are ``[1, C]``)."""
        return {0: ()}

    @classmethod
    def weight_defaults(cls, config, inputs):
        moving = {"is_static": True, "initial_mean": 0.0, "initial_std": 0.0}
        return {0: {"initial_mean": 1.0, "initial_std": 0.0}, 1: moving, 2: dict(moving)}

    def init(self, layer_map, parameter_map) -> None:
        super().init(layer_map, parameter_map)
        self.out_geom = self.geom[0]
        self._relu_fused = False
        for k, what in ((1, "moving mean"), (2, "moving variance")):
            if self.weights[k].w_grad is not None:
                raise ValueError(
                    f"layer {self.name!r} (batch_norm): the {what} parameter "
                    f"{self.weights[k].parameter.name!r} (weight of input {k}) must be static; "
                    "create it with is_static=True"
                )

    def _global(self) -> bool:
        return self.pass_type == PASS_TEST and self.attr("use_global_stats") is not False

    def forward(self, pass_type: str) -> None:
        super().forward(pass_type)
        x = self.input_image(0)
        self.reserve_output(x.shape[0], self.size)
        mean, var = self.weights[1].w.reshape(-1), self.weights[2].w.reshape(-1)
        if pass_type != PASS_TRAIN:
            mean, var = mean.copy(), var.copy()
        bias = self.bias.w.reshape(-1) if self.bias is not None else None
        # a relu is applied (and its gradient taken) in the compiled kernels' passes
        self._relu_fused = (not self._global() and compiled_images(x)
                            and self.fusable_activation("relu"))
        _, self._mean, self._inv_std = batch_norm_forward(
            x, self.weights[0].w.reshape(-1), bias, mean, var, self._global(),
            float(self.attr("moving_average_fraction", 0.9)), float(self.attr("epsilon", 1e-5)),
            out=self.output_image(), alloc=self.scratch, relu=self._relu_fused,
        )
        self.forward_activation(applied=self._relu_fused)

    def backward(self, callback=None) -> None:
        """First write (``first_write``): the input and parameter gradients are overwritten
        when this is their first contribution of the pass, so the network need not zero them."""
        # the fused relu's gradient is the kernel's, unless a consumer wrote dL/dz already
        relu_grad = self._relu_fused and not self.grad_is_preact
        self.backward_activation(applied=self._relu_fused)
        scale = self.weights[0]
        dscale = None if scale.w_grad is None else scale.w_grad.reshape(-1)
        has_bias = self.bias is not None and self.bias.w_grad is not None
        dbias = self.bias.w_grad.reshape(-1) if has_bias else None
        dx = self.input_grad_image(0)
        dy = self.output_image("grad")
        betas = (self.input_grad_beta(0) if dx is not None else 0.0,
                 self.param_grad_beta(scale) if dscale is not None else 0.0,
                 self.param_grad_beta(self.bias) if has_bias else 0.0)
        if dx is None:  # an input without a gradient: dx is computed anyway, into scratch
            dx = self.scratch("bn_dx", dy.shape)
        batch_norm_backward(dy, self.input_image(0), self._mean, self._inv_std,
                            scale.w.reshape(-1), self._global(), dx=dx, dscale=dscale,
                            dbias=dbias, betas=betas, alloc=self.scratch,
                            relu_output=self.output_image() if relu_grad else None)
        if has_bias:
            self.bias.parameter.inc_update(callback)
        if dscale is not None:
            scale.parameter.inc_update(callback)


@register_layer("norm")
class CrossMapNormLayer(ImageLayer):
    """Local response normalisation across channels (``norm_type="cmrnorm-projection"``).

    ``y[c] = x[c] * (1 + scale/norm_size * sum_{c' in window(c)} x[c']^2)^(-power)``, the
    window ``norm_size`` channels starting at ``c - (norm_size-1)//2``, clipped.

    Attrs: ``norm_type`` ("cmrnorm-projection"; "cross-channel-norm" selects
    :class:`~sculler.layers.cross_channel_norm.CrossChannelNormLayer`), ``norm_size``
    (window, Paddle's ``size``), ``scale`` (the alpha given to ``img_cmrnorm_layer``, default
    0.0128; Paddle's NormConfig stores ``scale/size``), ``power`` (0.75),
    ``channels``/``height``/``width`` of the input. Output geometry equals the input's.
    """

    max_inputs = 1

    @classmethod
    def variant(cls, config) -> type:
        """The class of this ``norm_type`` (the engine type ``norm`` covers both)."""
        t = config.attrs.get("norm_type", "cmrnorm-projection")
        if t == "cross-channel-norm":
            return CrossChannelNormLayer
        if t != "cmrnorm-projection":
            raise ValueError(f"layer {config.name!r} (norm): norm_type {t!r} is not supported; "
                             "use 'cmrnorm-projection' or 'cross-channel-norm'")
        return CrossMapNormLayer

    @classmethod
    def weight_dims(cls, config, inputs):
        variant = cls.variant(config)
        return {} if variant is CrossMapNormLayer else variant.weight_dims(config, inputs)

    @classmethod
    def weight_defaults(cls, config, inputs):
        variant = cls.variant(config)
        return {} if variant is CrossMapNormLayer else variant.weight_defaults(config, inputs)

    @classmethod
    def infer_size(cls, config, inputs):
        variant = cls.variant(config)
        if variant is not CrossMapNormLayer:
            return variant.infer_size(config, inputs)
        n = config.attrs.get("norm_size")
        if not isinstance(n, int) or n < 1:
            raise ValueError(f"layer {config.name!r} (norm): norm_size must be a positive int, "
                             f"got {n!r}")
        return set_output_geometry(config, *image_geometry(config, inputs))

    def _params(self):
        return (int(self.attr("norm_size")), float(self.attr("scale", 0.0128)),
                float(self.attr("power", 0.75)))

    def forward(self, pass_type: str) -> None:
        super().forward(pass_type)
        x = self.input_image(0)
        self.reserve_output(x.shape[0], self.size)
        self._y, self._denom = cross_map_norm_forward(x, *self._params())
        self.output_image()[...] = self._y
        self.add_bias()
        self.forward_activation()

    def backward(self, callback=None) -> None:
        self.backward_activation_and_bias(callback)
        gx = self.input_grad_image(0)
        if gx is not None:
            cross_map_norm_backward(self.output_image("grad"), self.input_image(0), self._y,
                                    self._denom, *self._params(), out=gx)


@layer_function(v1="batch_norm_layer", types=("batch_norm",), prefix="batch_norm")
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
    ``_<name>.w1``/``.w2``). A non-image input normalises each of its columns; ``img3D=True``
    normalises each channel of a ``C x D x H x W`` volume (the data layer's ``depth``).
    """
    fn = "batch_norm"
    src = one_input(input, fn)
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
    if img3D:
        attrs["img3D"] = True
    if use_global_stats is not None:
        attrs["use_global_stats"] = bool(use_global_stats)
    out = make_layer("batch_norm", [src, src, src], name=name, name_prefix="batch_norm",
                     act=act, default_act=A.Relu, param_attr=[param_attr, None, None],
                     bias_attr=bias_attr, layer_attr=layer_attr, attrs=attrs,
                     input_attrs=[channels_attr(num_channels, fn), {}, {}])
    out.weight_attrs[1:3] = moving
    return out


@layer_function(v1="img_cmrnorm_layer", types=("norm",), prefix="crmnorm")
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
             "power": float(power), **channels_attr(num_channels, fn)}
    return make_layer("norm", [one_input(input, fn)], name=name, name_prefix="crmnorm",
                      bias_attr=False, layer_attr=layer_attr, attrs=attrs)


@onnx_converter("batch_norm", "cudnn_batch_norm")
def batch_norm_to_onnx(g: Any, lc: LayerConfig, ins: list[str], ctx: Any) -> str:
    """Test mode: ``scale * (x - moving mean) / sqrt(moving var + eps) + bias`` per
    channel."""
    if lc.attrs.get("use_global_stats") is False:
        raise NotImplementedError(f"layer {lc.name!r} (batch_norm): use_global_stats=False "
                                  "normalises with the batch's statistics at test time")
    ctx.require_dense(lc, 0, ins[0])
    c, h, w = BatchNormLayer.input_geometry(lc, ctx.input_configs(lc))
    params = [ctx.weight(lc.inputs[k].input_parameter_name).reshape(-1) for k in range(3)]
    bias = (ctx.weight(lc.bias_parameter_name).reshape(-1) if lc.bias_parameter_name
            else np.zeros(c, np.float32))
    names = [g.const(f"{lc.name}/{what}", v) for what, v in (
        ("scale", params[0]), ("bias", bias), ("mean", params[1]), ("var", params[2]))]
    y = g.op("BatchNormalization", [g.to_image(ins[0], (c, h, w), lc.name), *names], lc.name,
             epsilon=float(lc.attrs.get("epsilon", 1e-5)))
    return g.to_flat(y, lc.size, lc.name)
