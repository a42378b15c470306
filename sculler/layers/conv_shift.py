"""Circular convolution of two inputs (PaddlePaddle's ``conv_shift``), as the Neural Turing
Machine shifts its attention weights.

``y_i = sum_j a_{(i + j - h) mod M} b_j`` for ``j = 0..N-1``, ``h = (N - 1) / 2``, per sample,
with ``a`` of width ``M`` and ``b`` of odd width ``N``. Backward:
``da_{(i + j - h) mod M} += dy_i b_j`` and ``db_j += sum_i dy_i a_{(i + j - h) mod M}``.
"""

from __future__ import annotations

from typing import Any

from sculler.backend import get_array_module
from sculler.core.expression import LayerOutput, as_inputs, make_layer
from sculler.core.faces import layer_function
from sculler.core.layer import Layer, register_layer


@register_layer("conv_shift")
class ConvShiftLayer(Layer):
    """``y_i = sum_j a_{(i+j-h) mod M} b_j``: ``a`` (width M) circularly convolved with a
    per-sample kernel ``b`` of odd width N centred at ``h = (N-1)/2``; output width M."""

    min_inputs = max_inputs = 2

    @classmethod
    def infer_size(cls, config, inputs):
        if inputs[1].size % 2 != 1:
            raise ValueError(f"layer {config.name!r} (conv_shift): input 1 {inputs[1].name!r} "
                             f"(the shift kernel) must have an odd width, got {inputs[1].size}")
        return inputs[0].size

    def forward(self, pass_type: str) -> None:
        super().forward(pass_type)
        batch = self.check_same_batch()
        a, b = self.get_input_value(0), self.get_input_value(1)
        self.check_input_width(0, self.size)
        xp = get_array_module(a)
        out = self.reserve_output(batch, self.size)
        out[...] = 0
        half = (b.shape[1] - 1) // 2
        for j in range(b.shape[1]):
            out += xp.roll(a, half - j, axis=1) * b[:, j:j + 1]
        self.forward_activation()

    def backward(self, callback=None) -> None:
        self.backward_activation()
        a, b, dy = self.get_input_value(0), self.get_input_value(1), self.output.grad
        xp = get_array_module(a)
        da, db = self.get_input_grad(0), self.get_input_grad(1)
        half = (b.shape[1] - 1) // 2
        for j in range(b.shape[1]):
            if da is not None:
                da += xp.roll(dy * b[:, j:j + 1], j - half, axis=1)
            if db is not None:
                db[:, j] += (dy * xp.roll(a, half - j, axis=1)).sum(axis=1)


@layer_function(v1="conv_shift_layer", types=("conv_shift",))
def conv_shift(a: LayerOutput, b: LayerOutput, name: str | None = None,
               layer_attr: Any = None) -> LayerOutput:
    """Circular convolution of ``a`` with the odd-width kernel ``b``, per sample; width of
    ``a``; no parameters."""
    return make_layer("conv_shift", as_inputs([a, b], "conv_shift"), name=name,
                      bias_attr=False, layer_attr=layer_attr)
