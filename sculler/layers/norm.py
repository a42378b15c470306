"""Normalisation layers: ``batch_norm`` (Paddle's ``BatchNormalizationLayer``) and ``norm`` with
``norm_type="cmrnorm-projection"`` (cross-map response normalisation, ``img_cmrnorm_layer``)."""

from __future__ import annotations

from sculler.core.layer import PASS_TEST, PASS_TRAIN, register_layer
from sculler.layers.image import ImageLayer, image_geometry, set_output_geometry
from sculler.math.norm import (
    batch_norm_backward,
    batch_norm_forward,
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
    flat input), ``moving_average_fraction`` (0.9), ``use_global_stats`` (unset),
    ``epsilon`` (1e-5). Output geometry equals the input's.
    """

    default_bias = True
    min_inputs = 3
    max_inputs = 3
    flat_ok = True
    image_inputs = 1

    @classmethod
    def infer_size(cls, config, inputs):
        return set_output_geometry(config, *image_geometry(config, inputs, 0, flat_ok=True))

    @classmethod
    def weight_dims(cls, config, inputs):
        c = image_geometry(config, inputs, 0, flat_ok=True)[0]
        return {0: (1, c), 1: (1, c), 2: (1, c)}

    @classmethod
    def bias_dims(cls, config, inputs):
        return (1, image_geometry(config, inputs, 0, flat_ok=True)[0])

    @classmethod
    def weight_defaults(cls, config, inputs):
        moving = {"is_static": True, "initial_mean": 0.0, "initial_std": 0.0}
        return {0: {"initial_mean": 1.0, "initial_std": 0.0}, 1: moving, 2: dict(moving)}

    def init(self, layer_map, parameter_map) -> None:
        super().init(layer_map, parameter_map)
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
        y, self._x_hat, self._inv_std = batch_norm_forward(
            x, self.weights[0].w.reshape(-1), bias, mean, var, self._global(),
            float(self.attr("moving_average_fraction", 0.9)), float(self.attr("epsilon", 1e-5)),
        )
        self.output_image()[...] = y
        self.forward_activation()

    def backward(self, callback=None) -> None:
        self.backward_activation()
        scale = self.weights[0]
        dscale = None if scale.w_grad is None else scale.w_grad.reshape(-1)
        has_bias = self.bias is not None and self.bias.w_grad is not None
        dbias = self.bias.w_grad.reshape(-1) if has_bias else None
        batch_norm_backward(self.output_image("grad"), self._x_hat, self._inv_std,
                            scale.w.reshape(-1), self._global(), dx=self.input_grad_image(0),
                            dscale=dscale, dbias=dbias)
        if has_bias:
            self.bias.parameter.inc_update(callback)
        if dscale is not None:
            scale.parameter.inc_update(callback)


@register_layer("norm")
class CrossMapNormLayer(ImageLayer):
    """Local response normalisation across channels (``norm_type="cmrnorm-projection"``).

    ``y[c] = x[c] * (1 + scale/norm_size * sum_{c' in window(c)} x[c']^2)^(-power)``, the
    window ``norm_size`` channels starting at ``c - (norm_size-1)//2``, clipped.

    Attrs: ``norm_type`` ("cmrnorm-projection", the only type supported), ``norm_size``
    (window, Paddle's ``size``), ``scale`` (the alpha given to ``img_cmrnorm_layer``, default
    0.0128; Paddle's NormConfig stores ``scale/size``), ``power`` (0.75),
    ``channels``/``height``/``width`` of the input. Output geometry equals the input's.
    """

    max_inputs = 1

    @classmethod
    def infer_size(cls, config, inputs):
        t = config.attrs.get("norm_type", "cmrnorm-projection")
        if t != "cmrnorm-projection":
            raise ValueError(f"layer {config.name!r} (norm): norm_type {t!r} is not supported; "
                             "only 'cmrnorm-projection'")
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
        self.backward_activation()
        self.backward_bias(callback)
        gx = self.input_grad_image(0)
        if gx is not None:
            cross_map_norm_backward(self.output_image("grad"), self.input_image(0), self._y,
                                    self._denom, *self._params(), out=gx)
