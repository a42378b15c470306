"""Layers that merge inputs: ``concat`` (side by side) and ``addto`` (elementwise sum)."""

from __future__ import annotations

from sculler.core.layer import Layer, register_layer


@register_layer("concat")
class ConcatLayer(Layer):
    """``y = f([x_1, x_2, ...] + b)``: inputs side by side; width is the sum of input widths."""

    @classmethod
    def infer_size(cls, config, inputs):
        return sum(inp.size for inp in inputs)

    def forward(self, pass_type: str) -> None:
        super().forward(pass_type)
        out = self.reserve_output(self.check_same_batch(), self.size)
        col = 0
        for i, inp in enumerate(self.inputs):
            self.check_input_width(i, inp.size)
            out[:, col : col + inp.size] = self.get_input_value(i)
            col += inp.size
        self.add_bias()
        self.forward_activation()

    def backward(self, callback=None) -> None:
        self.backward_activation()
        self.backward_bias(callback)
        col = 0
        for i, inp in enumerate(self.inputs):
            grad = self.get_input_grad(i)
            if grad is not None:
                grad += self.output.grad[:, col : col + inp.size]
            col += inp.size


@register_layer("addto")
class AddtoLayer(Layer):
    """``y = f(sum_i x_i + b)``; all inputs have the same width. With ``drop_rate`` this is
    PaddlePaddle's dropout layer. The output keeps input 0's image geometry (a ResNet's
    shortcut sum feeds the next convolution)."""

    @classmethod
    def infer_size(cls, config, inputs):
        sizes = {inp.size for inp in inputs}
        if len(sizes) != 1:
            raise ValueError(
                f"layer {config.name!r} (addto): inputs {[i.name for i in inputs]} have "
                f"different sizes {[i.size for i in inputs]}"
            )
        geometry = ("out_channels", "out_height", "out_width")
        if all(k in inputs[0].attrs for k in geometry):
            config.attrs.update({k: inputs[0].attrs[k] for k in geometry})
        return sizes.pop()

    def forward(self, pass_type: str) -> None:
        super().forward(pass_type)
        out = self.reserve_output(self.check_same_batch(), self.size)
        for i in range(len(self.inputs)):
            self.check_input_width(i, self.size)
            if i == 0:
                out[...] = self.get_input_value(0)
            else:
                out += self.get_input_value(i)
        self.add_bias()
        self.forward_activation()

    def backward(self, callback=None) -> None:
        self.backward_activation()
        self.backward_bias(callback)
        for i in range(len(self.inputs)):
            grad = self.get_input_grad(i)
            if grad is not None:
                grad += self.output.grad
