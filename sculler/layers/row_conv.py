"""Lookahead (row) convolution over each sequence (PaddlePaddle's ``row_conv``, from Deep
Speech 2): every step mixes in the next ``context_len - 1`` steps of its own sequence.

``y_t = sum_{k=0}^{K-1} x_{t+k} * W_k`` (elementwise per column; terms past the end of the
sequence are zero), with ``W`` of shape ``(K, width)``. Backward:
``dx_{t+k} += dy_t * W_k`` and ``dW_k += sum_t dy_t * x_{t+k}`` over the valid pairs.
"""

from __future__ import annotations

from typing import Any

from sculler.backend import get_array_module
from sculler.core.expression import LayerOutput, make_layer, one_input
from sculler.core.faces import layer_function
from sculler.core.layer import Layer, register_layer
from sculler.layers.sequence import require_sequences
from sculler.validate import integer


@register_layer("row_conv")
class RowConvLayer(Layer):
    """``y_t = sum_k x_{t+k} * W_k`` within each sequence; ``W`` is ``(context_len, width)``,
    attrs ``context_length``; output width and sequence layout are the input's."""

    max_inputs = 1

    @classmethod
    def infer_size(cls, config, inputs):
        return inputs[0].size

    @classmethod
    def weight_dims(cls, config, inputs):
        return {0: (int(config.attrs["context_length"]), inputs[0].size)}

    def _remaining(self, arg, xp):
        """Per row, the steps from it to its sequence's end (row t may reach t + k iff k is
        below this)."""
        starts = xp.asarray(arg.seq_starts)
        lengths = starts[1:] - starts[:-1]
        ends = xp.repeat(starts[1:], lengths)
        return ends - xp.arange(int(starts[-1]))

    def forward(self, pass_type: str) -> None:
        super().forward(pass_type)
        arg = require_sequences(self, 0)
        x, w = arg.value, self.weights[0].w
        self.check_input_width(0, self.size)
        xp = get_array_module(x)
        n = x.shape[0]
        out = self.reserve_output(n, self.size)
        out[...] = x * w[0]
        remaining = self._remaining(arg, xp)
        for k in range(1, min(w.shape[0], n)):
            out[:n - k] += (remaining[:n - k, None] > k) * x[k:] * w[k]
        self.output.seq_starts, self.output.sub_seq_starts = arg.seq_starts, arg.sub_seq_starts
        self.forward_activation()

    def backward(self, callback=None) -> None:
        self.backward_activation()
        arg, w, weight = self.get_input(0), self.weights[0].w, self.weights[0]
        x, dy, dx = arg.value, self.output.grad, self.get_input_grad(0)
        xp = get_array_module(x)
        n = x.shape[0]
        remaining = self._remaining(arg, xp)
        for k in range(min(w.shape[0], n)):
            dy_k = dy[:n - k] * (remaining[:n - k, None] > k)
            if dx is not None:
                dx[k:] += dy_k * w[k]
            if weight.w_grad is not None:
                weight.w_grad[k] += (dy_k * x[k:]).sum(axis=0)
        if weight.w_grad is not None:
            weight.parameter.inc_update(callback)


@layer_function(v1="row_conv_layer", types=("row_conv",))
def row_conv(input: LayerOutput, context_len: int, act: Any = None,  # noqa: A002
             name: str | None = None, param_attr: Any = None,
             layer_attr: Any = None) -> LayerOutput:
    """Lookahead convolution of each sequence over ``context_len`` steps (the current one
    included); default act Linear, no bias."""
    context_len = integer(context_len, "row_conv: context_len", minimum=1)
    return make_layer("row_conv", [one_input(input, "row_conv")], name=name, act=act,
                      param_attr=param_attr, bias_attr=False, layer_attr=layer_attr,
                      attrs={"context_length": context_len})
