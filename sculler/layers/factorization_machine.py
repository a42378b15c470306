"""The order-2 interactions of a factorization machine (PaddlePaddle's
``factorization_machine``, Rendle 2010), the second-order part of a DeepFM model.

``y = sum_{i<j} <v_i, v_j> x_i x_j = 1/2 sum_f [(sum_i v_if x_i)^2 - sum_i v_if^2 x_i^2]``
per sample, with latent vectors ``V`` of shape ``(input width, factor_size)``; output width 1.
With ``s = x V``: ``dx_i = dy (V s - x_i |v_i|^2)`` and
``dV = x^T (dy s) - V * (x^2)^T dy``. The input may be dense or sparse (binary or float).
"""

from __future__ import annotations

from typing import Any

from sculler.backend import get_array_module
from sculler.core.expression import LayerOutput, make_layer, one_input
from sculler.core.faces import layer_function
from sculler.core.layer import Layer, register_layer
from sculler.math.sparse import to_scipy
from sculler.validate import integer


@register_layer("factorization_machine")
class FactorizationMachineLayer(Layer):
    """``y = 1/2 sum_f [(x V)_f^2 - (x^2 V^2)_f]``: pairwise interactions of the input's
    features through latent vectors ``V`` (``(width, factor_size)``, attrs ``factor_size``)."""

    max_inputs = 1

    @classmethod
    def infer_size(cls, config, inputs):
        return 1

    @classmethod
    def weight_dims(cls, config, inputs):
        return {0: (inputs[0].size, int(config.attrs["factor_size"]))}

    def _products(self):
        """``(x, x^2, s = x V, x^2 V^2)`` with ``x`` dense or a scipy CSR matrix."""
        arg, v = self.get_input(0), self.weights[0].w
        self.check_input_width(0, v.shape[0])
        x = to_scipy(arg.value, v.dtype, get_array_module(v)) if arg.is_sparse else arg.value
        x2 = x.multiply(x) if arg.is_sparse else x * x
        return x, x2, x @ v, x2 @ (v * v)

    def forward(self, pass_type: str) -> None:
        super().forward(pass_type)
        _, _, s, x2v2 = self._products()
        out = self.reserve_output(s.shape[0], 1)
        out[:, 0] = 0.5 * (s * s - x2v2).sum(axis=1)
        self.forward_activation()

    def backward(self, callback=None) -> None:
        self.backward_activation()
        x, x2, s, _ = self._products()
        weight, dy = self.weights[0], self.output.grad
        v = weight.w
        dx = self.get_input_grad(0)
        if dx is not None:
            dx += dy * (s @ v.T - x * (v * v).sum(axis=1))
        if weight.w_grad is not None:
            weight.w_grad += x.T @ (dy * s) - v * (x2.T @ dy)
            weight.parameter.inc_update(callback)


@layer_function(v1="factorization_machine", types=("factorization_machine",))
def factorization_machine(input: LayerOutput, factor_size: int, act: Any = None,  # noqa: A002
                          name: str | None = None, param_attr: Any = None,
                          layer_attr: Any = None) -> LayerOutput:
    """Order-2 feature interactions ``sum_{i<j} <v_i, v_j> x_i x_j`` (width 1); default
    act Linear, no bias."""
    factor_size = integer(factor_size, "factorization_machine: factor_size", minimum=1)
    return make_layer("factorization_machine", [one_input(input, "factorization_machine")],
                      name=name, act=act, param_attr=param_attr, bias_attr=False,
                      layer_attr=layer_attr, attrs={"factor_size": factor_size})
