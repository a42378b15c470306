"""L2 normalisation across channels with a learned per-channel scale (PaddlePaddle's
``cross_channel_norm``, SSD's conv4_3 normalisation; engine type ``norm`` with
``norm_type="cross-channel-norm"``).

``y[c, p] = s_c x[c, p] / n_p`` with ``n_p = sqrt(sum_c x[c, p]^2 + 1e-6)`` at every spatial
position ``p``. Backward (exact): ``ds_c = sum_p dy[c,p] u[c,p]`` with ``u = x / n`` and
``dx[k, p] = (s_k dy[k,p] - u[k,p] sum_c s_c dy[c,p] u[c,p]) / n_p``. (PaddlePaddle's kernel
leaves ``s_c`` out of that sum, which is exact only when every scale is equal.)
"""

from __future__ import annotations

from typing import Any

from sculler.backend import get_array_module
from sculler.core.expression import LayerOutput, make_layer, one_input
from sculler.core.faces import layer_function
from sculler.layers.image import ImageLayer, channels_attr, image_geometry, set_output_geometry

EPS = 1e-6


class CrossChannelNormLayer(ImageLayer):
    """``y = s_c x / sqrt(sum_c x^2 + 1e-6)`` per position; the scale ``s`` is the input's
    weight, shape ``(channels, 1)`` (default 1). Selected by the ``norm`` type for
    ``norm_type="cross-channel-norm"``."""

    max_inputs = 1

    @classmethod
    def infer_size(cls, config, inputs):
        return set_output_geometry(config, *image_geometry(config, inputs))

    @classmethod
    def weight_dims(cls, config, inputs):
        return {0: (image_geometry(config, inputs)[0], 1)}

    @classmethod
    def weight_defaults(cls, config, inputs):
        return {0: {"initial_mean": 1.0, "initial_std": 0.0}}

    def forward(self, pass_type: str) -> None:
        super().forward(pass_type)
        x = self.input_image(0)
        xp = get_array_module(x)
        self.reserve_output(x.shape[0], self.size)
        self._norm = xp.sqrt((x * x).sum(axis=1, keepdims=True) + EPS)
        scale = self.weights[0].w.reshape(1, -1, 1, 1)
        self.output_image()[...] = x / self._norm * scale
        self.forward_activation()

    def backward(self, callback=None) -> None:
        self.backward_activation()
        weight, x, dy = self.weights[0], self.input_image(0), self.output_image("grad")
        u = x / self._norm
        if weight.w_grad is not None:
            weight.w_grad += (dy * u).sum(axis=(0, 2, 3)).reshape(-1, 1)
        gx = self.input_grad_image(0)
        if gx is not None:
            sdy = dy * weight.w.reshape(1, -1, 1, 1)
            gx += (sdy - u * (sdy * u).sum(axis=1, keepdims=True)) / self._norm
        if weight.w_grad is not None:
            weight.parameter.inc_update(callback)


@layer_function(v1="cross_channel_norm_layer", types=("norm",), prefix="cross_channel_norm")
def cross_channel_norm(input: LayerOutput, name: str | None = None,  # noqa: A002
                       param_attr: Any = None, num_channels: int | None = None) -> LayerOutput:
    """Normalise each position's channel vector to unit L2 norm, then scale channel ``c`` by
    a learned ``s_c`` (``param_attr``; default 1). No bias, linear."""
    fn = "cross_channel_norm"
    return make_layer("norm", [one_input(input, fn)], name=name, bias_attr=False,
                      param_attr=param_attr,
                      attrs={"norm_type": "cross-channel-norm",
                             **channels_attr(num_channels, fn)})
