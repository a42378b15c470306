"""Layers that merge inputs: ``concat`` (side by side) and ``addto`` (elementwise sum)."""

from __future__ import annotations

from typing import Any

from sculler.attr import ExtraLayerAttribute
from sculler.backend import get_array_module
from sculler.core.expression import (
    LayerOutput,
    Projection,
    as_inputs,
    make_layer,
    no_support,
)
from sculler.core.faces import layer_function, onnx_converter
from sculler.core.layer import Layer, register_layer
from sculler.core.model_config import LayerConfig
from sculler.math.jit import absent, compilable
from sculler.math.parallel import run_ranges


@register_layer("concat")
class ConcatLayer(Layer):
    """``y = f([x_1, x_2, ...] + b)``: inputs side by side; width is the sum of input widths."""

    row_wise = True

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
        self.backward_activation_and_bias(callback)
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

    first_write = True
    row_wise = True
    _relu_kernels = None

    def _compiled_relu(self, values, out):
        """The compiled sum-and-relu kernels (:mod:`sculler.math.sum_kernels`) for two
        C-contiguous NumPy float inputs, no bias and a fusable relu; else None."""
        if (len(values) != 2 or self.bias is not None or not self.fusable_activation("relu")
                or not compilable(*values, out)
                or not all(a.flags.c_contiguous for a in (*values, out))):
            return None
        from sculler.math import sum_kernels  # noqa: PLC0415

        return sum_kernels

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
        """The sum in one pass per input: ``x_0 + x_1`` straight into the output buffer (and
        through a relu in the same pass on the compiled kernels: :meth:`_compiled_relu`)."""
        super().forward(pass_type)
        out = self.reserve_output(self.check_same_batch(), self.size)
        for i in range(len(self.inputs)):
            self.check_input_width(i, self.size)
        values = [self.get_input_value(i) for i in range(len(self.inputs))]
        self._relu_kernels = self._compiled_relu(values, out)
        if self._relu_kernels is not None:
            run_ranges(self._relu_kernels.add_relu, out.size, values[0].reshape(-1),
                       values[1].reshape(-1), out.reshape(-1))
            self.forward_activation(applied=True)
            return
        if len(values) == 1:
            out[...] = values[0]
        else:
            get_array_module(out).add(values[0], values[1], out=out)
        for v in values[2:]:
            out += v
        self.add_bias()
        self.forward_activation()

    def backward(self, callback=None) -> None:
        """First write (``first_write``): an input gradient not yet written in this pass is
        overwritten with a copy, so the network need not zero it."""
        if self._relu_kernels is not None and not self.grad_is_preact:
            self.backward_activation(applied=True)
            grads = [self.get_input_grad(i) for i in range(2)]
            betas = [self.input_grad_beta(i) if g is not None else 0.0
                     for i, g in enumerate(grads)]
            if grads[0] is None:
                grads, betas = grads[::-1], betas[::-1]
            if grads[0] is not None:
                second = (grads[1].reshape(-1) if grads[1] is not None
                          else absent(grads[0].dtype, 1))
                run_ranges(self._relu_kernels.relu_grad_into, grads[0].size,
                           self.output.value.reshape(-1), self.output.grad.reshape(-1),
                           grads[0].reshape(-1), betas[0] != 0.0, second, betas[1] != 0.0)
            return
        self.backward_activation_and_bias(callback)
        grad = self.output.grad
        for i in range(len(self.inputs)):
            g = self.get_input_grad(i)
            if g is None:
                continue
            if self.input_grad_beta(i) == 0.0:
                g[...] = grad
            else:
                g += grad


@layer_function(v1="concat_layer", types=("concat", "concat2"), prefix="concat")
def concat(input: Any, act: Any = None, name: str | None = None,  # noqa: A002
           layer_attr: Any = None, bias_attr: Any = None, param_attr: Any = None,
           parameter_name: str | None = None) -> LayerOutput:
    """Inputs side by side: ``y = act([x_1, x_2, ...])``; width is the sum of widths. Given
    projections (``concat(input=[table_projection(w1, size=32), ...])``) it is
    PaddlePaddle's concat2: each projection fills its own block of columns."""
    no_support("concat", param_attr=param_attr, parameter_name=parameter_name)
    items = list(input) if isinstance(input, (list, tuple)) else [input]
    if any(isinstance(p, Projection) for p in items):
        return _concat_projections(items, act, name, layer_attr, bias_attr)
    return make_layer("concat", as_inputs(input, "concat"), name=name, act=act,
                      bias_attr=bias_attr, layer_attr=layer_attr)


def _concat_projections(items: list, act: Any, name: Any, layer_attr: Any,
                        bias_attr: Any) -> LayerOutput:
    if not all(isinstance(p, Projection) for p in items):
        raise TypeError("concat: input must be all layers or all projections, got "
                        f"{[type(p).__name__ for p in items]}")
    in_attrs = [dict(p.input_attrs()[0], **({"size": p.size} if p.size else {})) for p in items]
    return make_layer("concat2", [p.inputs[0] for p in items], name=name, name_prefix="concat",
                      act=act, param_attr=[p.param_attr for p in items], bias_attr=bias_attr,
                      layer_attr=layer_attr, input_attrs=in_attrs)


@layer_function(v1="addto_layer", types=("addto",), prefix="addto")
def addto(input: Any, act: Any = None, name: str | None = None,  # noqa: A002
          bias_attr: Any = None, layer_attr: Any = None, param_attr: Any = None,
          parameter_name: str | None = None) -> LayerOutput:
    """Elementwise sum ``y = act(sum_i x_i + b)``; no bias unless ``bias_attr`` asks."""
    no_support("addto", param_attr=param_attr, parameter_name=parameter_name)
    return make_layer("addto", as_inputs(input, "addto"), name=name, act=act,
                      bias_attr=bias_attr, layer_attr=layer_attr)


@layer_function(v1="dropout_layer", types=("addto",), prefix="dropout")
def dropout(input: LayerOutput, dropout_rate: float, name: str | None = None,  # noqa: A002
            **kw: Any) -> LayerOutput:
    """Dropout as PaddlePaddle builds it: an ``addto`` whose ``drop_rate`` is
    ``dropout_rate`` (units zeroed with that probability in training, scaled by
    ``1 - dropout_rate`` in testing)."""
    no_support("dropout", **kw)
    return make_layer("addto", as_inputs(input, "dropout"), name=name,
                      name_prefix="dropout", bias_attr=False,
                      layer_attr=ExtraLayerAttribute(drop_rate=dropout_rate))


@onnx_converter("concat")
def concat_to_onnx(g: Any, lc: LayerConfig, ins: list[str], ctx: Any) -> str:
    for i, x in enumerate(ins):
        ctx.require_dense(lc, i, x)
    return ctx.bias(g, lc, g.op("Concat", ins, lc.name, axis=1))


@onnx_converter("addto")
def addto_to_onnx(g: Any, lc: LayerConfig, ins: list[str], ctx: Any) -> str:
    for i, x in enumerate(ins):
        ctx.require_dense(lc, i, x)
    y = ins[0] if len(ins) == 1 else g.op("Sum", ins, lc.name)
    return ctx.bias(g, lc, y)
