"""Single-input dense layers: affine and clipping maps, row normalisations, reshapes.

Each is PaddlePaddle's layer of the same type name (``slope_intercept``, ``scale_shift``,
``prelu``, ``clip``, ``sum_to_one_norm``, ``row_l2_norm``, ``trans``, ``resize``,
``featmap_expand``); the math is in each class docstring.
"""

from __future__ import annotations

from typing import Any

from sculler.backend import get_array_module
from sculler.core.expression import (
    LayerOutput,
    as_inputs,
    make_layer,
    simple_layer,
)
from sculler.core.faces import layer_function
from sculler.core.layer import Layer, register_layer


class _Unary(Layer):
    """One dense input; output width equals the input width unless the subclass says."""

    min_inputs = 1
    max_inputs = 1

    @classmethod
    def infer_size(cls, config, inputs):
        return inputs[0].size

    def _x(self):
        arg = self.get_input(0)
        if arg.value is None or arg.is_sparse:
            raise ValueError(f"layer {self.name!r} ({self.type_name}): input 0 "
                             f"({self.inputs[0].name!r}) must be dense, got {arg.describe()}")
        return arg.value


@register_layer("slope_intercept")
class SlopeInterceptLayer(_Unary):
    """``y = slope * x + intercept`` (attrs ``slope``, ``intercept``); ``dx += slope * dy``."""

    row_wise = True

    def forward(self, pass_type: str) -> None:
        super().forward(pass_type)
        x = self._x()
        out = self.reserve_output(x.shape[0], self.size)
        out[...] = x
        out *= self.attr("slope", 1.0)
        out += self.attr("intercept", 0.0)
        self.forward_activation()

    def backward(self, callback=None) -> None:
        self.backward_activation()
        g = self.get_input_grad(0)
        if g is not None:
            g += self.attr("slope", 1.0) * self.output.grad


@register_layer("scale_shift")
class ScaleShiftLayer(_Unary):
    """``y = w * x + b`` with one learned scalar ``w`` (1x1) and an optional scalar bias.

    ``dw += sum(x * dy)``, ``db += sum(dy)``, ``dx += w * dy``.
    """

    default_bias = True

    @classmethod
    def weight_dims(cls, config, inputs):
        return {0: (1, 1)}

    @classmethod
    def bias_dims(cls, config, inputs):
        return (1, 1)

    def forward(self, pass_type: str) -> None:
        super().forward(pass_type)
        x = self._x()
        out = self.reserve_output(x.shape[0], self.size)
        get_array_module(x).multiply(x, self.weights[0].w[0, 0], out=out)
        if self.bias is not None:
            out += self.bias.w[0, 0]
        self.forward_activation()

    def backward(self, callback=None) -> None:
        self.backward_activation()
        dy, x = self.output.grad, self.get_input_value(0)
        w = self.weights[0]
        if w.w_grad is not None:
            w.w_grad += (x * dy).sum()
            w.parameter.inc_update(callback)
        if self.bias is not None and self.bias.w_grad is not None:
            self.bias.w_grad += dy.sum()
            self.bias.parameter.inc_update(callback)
        g = self.get_input_grad(0)
        if g is not None:
            g += w.w[0, 0] * dy


@register_layer("prelu")
class PReluLayer(_Unary):
    """Parametric ReLU: ``y_j = x_j`` where ``x_j > 0`` else ``a_{j // partial_sum} * x_j``.

    The weight has ``D / partial_sum`` slopes (attr ``partial_sum``, default 1: one slope per
    unit; ``D``: one shared slope). ``da_k += sum over x_j < 0 in group k of x_j * dy_j``.
    """

    @classmethod
    def check_config(cls, config, inputs):
        super().check_config(config, inputs)
        ps = int(config.attrs.get("partial_sum", 1))
        if ps <= 0 or inputs[0].size % ps:
            raise ValueError(f"layer {config.name!r} (prelu): partial_sum {ps} must be a "
                             f"positive divisor of the input width {inputs[0].size}")

    @classmethod
    def weight_dims(cls, config, inputs):
        return {0: (1, inputs[0].size // int(config.attrs.get("partial_sum", 1)))}

    def _slopes(self):
        """Per-unit slopes (1, D): each group slope repeated ``partial_sum`` times."""
        return get_array_module(self.weights[0].w).repeat(
            self.weights[0].w, int(self.attr("partial_sum", 1)), axis=1)

    def forward(self, pass_type: str) -> None:
        super().forward(pass_type)
        x = self._x()
        xp = get_array_module(x)
        out = self.reserve_output(x.shape[0], self.size)
        xp.multiply(x, xp.where(x > 0, 1.0, self._slopes()), out=out)
        self.forward_activation()

    def backward(self, callback=None) -> None:
        self.backward_activation()
        x, dy = self.get_input_value(0), self.output.grad
        xp = get_array_module(x)
        w = self.weights[0]
        if w.w_grad is not None:
            per_unit = (xp.where(x > 0, 0.0, x) * dy).sum(axis=0)
            w.w_grad += per_unit.reshape(w.w.shape[1], -1).sum(axis=1)[None, :]
            w.parameter.inc_update(callback)
        g = self.get_input_grad(0)
        if g is not None:
            g += xp.where(x > 0, 1.0, self._slopes()) * dy


@register_layer("clip")
class ClipLayer(_Unary):
    """``y = min(max(x, min), max)`` (attrs ``min``, ``max``); ``dx += dy`` strictly inside."""

    @classmethod
    def check_config(cls, config, inputs):
        super().check_config(config, inputs)
        lo, hi = config.attrs.get("min"), config.attrs.get("max")
        if lo is None or hi is None or lo >= hi:
            raise ValueError(f"layer {config.name!r} (clip): needs attrs min < max, got "
                             f"min={lo!r}, max={hi!r}")

    def forward(self, pass_type: str) -> None:
        super().forward(pass_type)
        x = self._x()
        out = self.reserve_output(x.shape[0], self.size)
        get_array_module(x).clip(x, self.attr("min"), self.attr("max"), out=out)
        self.forward_activation()

    def backward(self, callback=None) -> None:
        self.backward_activation()
        g = self.get_input_grad(0)
        if g is not None:
            x = self.get_input_value(0)
            g += ((x > self.attr("min")) & (x < self.attr("max"))) * self.output.grad


@register_layer("sum_to_one_norm")
class SumToOneNormLayer(_Unary):
    """``y_j = x_j / s`` with ``s = sum_k x_k`` per row;
    ``dx_j += (dy_j - sum_k dy_k y_k) / s``."""

    def forward(self, pass_type: str) -> None:
        super().forward(pass_type)
        x = self._x()
        s = self.scratch("s", (x.shape[0], 1))
        x.sum(axis=1, keepdims=True, out=s)
        out = self.reserve_output(x.shape[0], self.size)
        get_array_module(x).divide(x, s, out=out)
        self.forward_activation()

    def backward(self, callback=None) -> None:
        self.backward_activation()
        g = self.get_input_grad(0)
        if g is not None:
            dy, y = self.output.grad, self.output.value
            s = self._bufs["s"][: y.shape[0]].reshape(-1, 1)
            g += (dy - (dy * y).sum(axis=1, keepdims=True)) / s


@register_layer("row_l2_norm")
class RowL2NormLayer(_Unary):
    """``y = x / |x|`` per row; ``dx += (dy - y * <dy, y>) / |x|``."""

    def forward(self, pass_type: str) -> None:
        super().forward(pass_type)
        x = self._x()
        xp = get_array_module(x)
        n = self.scratch("n", (x.shape[0], 1))
        xp.sqrt((x * x).sum(axis=1, keepdims=True), out=n)
        out = self.reserve_output(x.shape[0], self.size)
        xp.divide(x, n, out=out)
        self.forward_activation()

    def backward(self, callback=None) -> None:
        self.backward_activation()
        g = self.get_input_grad(0)
        if g is not None:
            dy, y = self.output.grad, self.output.value
            n = self._bufs["n"][: y.shape[0]].reshape(-1, 1)
            g += (dy - y * (dy * y).sum(axis=1, keepdims=True)) / n


@register_layer("trans")
class TransLayer(_Unary):
    """``y = x^T``: a (batch x D) input becomes a (D x batch) output (no sequence layout);
    ``dx += dy^T``. ``size`` records D, the number of output rows."""

    def forward(self, pass_type: str) -> None:
        super().forward(pass_type)
        x = self._x()
        out = self.reserve_output(x.shape[1], x.shape[0])
        self.output.seq_starts = self.output.sub_seq_starts = None
        out[...] = x.T
        self.forward_activation()

    def backward(self, callback=None) -> None:
        self.backward_activation()
        g = self.get_input_grad(0)
        if g is not None:
            g += self.output.grad.T


@register_layer("resize")
class ResizeLayer(_Unary):
    """Reinterpret the (batch x D) block row-major as (batch * D / size) x size; the element
    count must divide. No sequence layout; ``dx`` is ``dy`` read back the other way."""

    @classmethod
    def infer_size(cls, config, inputs):
        return Layer.infer_size(config, inputs)

    def forward(self, pass_type: str) -> None:
        super().forward(pass_type)
        x = self._x()
        if x.size % self.size:
            raise ValueError(f"layer {self.name!r} (resize): {x.shape[0]} x {x.shape[1]} "
                             f"elements do not split into rows of width {self.size}")
        out = self.reserve_output(x.size // self.size, self.size)
        self.output.seq_starts = self.output.sub_seq_starts = None
        out[...] = x.reshape(out.shape)
        self.forward_activation()

    def backward(self, callback=None) -> None:
        self.backward_activation()
        g = self.get_input_grad(0)
        if g is not None:
            g += self.output.grad.reshape(g.shape)


@register_layer("featmap_expand")
class FeatMapExpandLayer(_Unary):
    """Repeat each row ``num_filters`` times (v2 ``repeat``): as a row vector
    ``[x, x, ..., x]`` (attr ``as_row_vector`` true, default) or elementwise
    ``[x_1, x_1, ..., x_D, x_D]``. ``dx`` sums the copies."""

    @classmethod
    def infer_size(cls, config, inputs):
        n = int(config.attrs.get("num_filters", 0))
        if n <= 0:
            raise ValueError(f"layer {config.name!r} (featmap_expand): attr num_filters must "
                             f"be a positive int, got {config.attrs.get('num_filters')!r}")
        return inputs[0].size * n

    def forward(self, pass_type: str) -> None:
        super().forward(pass_type)
        x = self._x()
        n, d = int(self.attr("num_filters")), x.shape[1]
        out = self.reserve_output(x.shape[0], self.size)
        if self.attr("as_row_vector", True):
            out.reshape(-1, n, d)[...] = x[:, None, :]
        else:
            out.reshape(-1, d, n)[...] = x[:, :, None]
        self.forward_activation()

    def backward(self, callback=None) -> None:
        self.backward_activation()
        g = self.get_input_grad(0)
        if g is not None:
            n, d = int(self.attr("num_filters")), g.shape[1]
            dy = self.output.grad
            g += dy.reshape(-1, n, d).sum(axis=1) if self.attr("as_row_vector", True) else (
                dy.reshape(-1, d, n).sum(axis=2))


@layer_function(v1="slope_intercept_layer", types=("slope_intercept",))
def slope_intercept(input: LayerOutput, name: str | None = None, slope: float = 1.0,  # noqa: A002
                    intercept: float = 0.0, layer_attr: Any = None) -> LayerOutput:
    """``y = slope * x + intercept``."""
    return simple_layer("slope_intercept", "slope_intercept_layer", [input], name, layer_attr,
                   attrs={"slope": float(slope), "intercept": float(intercept)})


@layer_function(v1="sum_to_one_norm_layer", types=("sum_to_one_norm",))
def sum_to_one_norm(input: LayerOutput, name: str | None = None,  # noqa: A002
                    layer_attr: Any = None) -> LayerOutput:
    """``y = x / sum(x)`` per row."""
    return simple_layer("sum_to_one_norm", "sum_to_one_norm_layer", [input], name, layer_attr)


@layer_function(v1="row_l2_norm_layer", types=("row_l2_norm",))
def row_l2_norm(input: LayerOutput, name: str | None = None,  # noqa: A002
                layer_attr: Any = None) -> LayerOutput:
    """``y = x / |x|`` per row."""
    return simple_layer("row_l2_norm", "row_l2_norm_layer", [input], name, layer_attr)


@layer_function(v1="trans_layer", types=("trans",))
def trans(input: LayerOutput, name: str | None = None,  # noqa: A002
          layer_attr: Any = None) -> LayerOutput:
    """The transposed batch: (batch x D) becomes (D x batch)."""
    return simple_layer("trans", "trans_layer", [input], name, layer_attr)


@layer_function(v1="resize_layer", types=("resize",), prefix="resize")
def resize(input: LayerOutput, size: int, name: str | None = None) -> LayerOutput:  # noqa: A002
    """Re-read the batch row-major as rows of width ``size``."""
    return simple_layer("resize", "resize", [input], name, size=size)


@layer_function(v1="clip_layer", types=("clip",), prefix="clip")
def clip(input: LayerOutput, min: float, max: float,  # noqa: A002
         name: str | None = None) -> LayerOutput:
    """``y = min(max(x, min), max)``."""
    return simple_layer("clip", "clip", [input], name,
                   attrs={"min": float(min), "max": float(max)})


@layer_function(v1="scale_shift_layer", types=("scale_shift",), prefix="scale_shift")
def scale_shift(input: LayerOutput, name: str | None = None,  # noqa: A002
                param_attr: Any = None, bias_attr: Any = None) -> LayerOutput:
    """``y = w * x + b`` with learned scalars ``w`` and (by default) ``b``."""
    return make_layer("scale_shift", as_inputs(input, "scale_shift"), name=name,
                      name_prefix="scale_shift", param_attr=param_attr,
                      bias_attr=bias_attr)


@layer_function(v1="prelu_layer", types=("prelu",))
def prelu(input: LayerOutput, name: str | None = None, partial_sum: int = 1,  # noqa: A002
          channel_shared: bool | None = None, num_channels: int | None = None,
          param_attr: Any = None, layer_attr: Any = None) -> LayerOutput:
    """Parametric ReLU ``y = x (x > 0), a x (x <= 0)`` with one slope per ``partial_sum``
    units; ``channel_shared`` True: one slope, False: one per channel (``num_channels``)."""
    if channel_shared is not None:
        if channel_shared:
            partial_sum = input.size
        else:
            if not num_channels or input.size % int(num_channels):
                raise ValueError(f"prelu: channel_shared=False needs num_channels dividing the "
                                 f"input width {input.size}, got {num_channels!r}")
            partial_sum = input.size // int(num_channels)
    return make_layer("prelu", as_inputs(input, "prelu"), name=name, name_prefix="prelu_layer",
                      param_attr=param_attr, bias_attr=False, layer_attr=layer_attr,
                      attrs={"partial_sum": int(partial_sum)})


@layer_function(v1="repeat_layer", types=("featmap_expand",))
def repeat(input: LayerOutput, num_repeats: int, as_row_vector: bool = True,  # noqa: A002
           act: Any = None, name: str | None = None, layer_attr: Any = None) -> LayerOutput:
    """``[x, x, ..., x]`` (as_row_vector) or ``[x_1, x_1, ..., x_D, x_D]``,
    ``num_repeats`` copies."""
    return simple_layer("featmap_expand", "repeat_layer", [input], name, layer_attr, act=act,
                   attrs={"num_filters": int(num_repeats), "as_row_vector": bool(as_row_vector)})
