"""Dense layers combining two or more inputs row by row.

PaddlePaddle's ``scaling``, ``power``, ``interpolation`` (a per-sample scalar weight is input
0), ``dot_prod``, ``l2_distance``, ``out_prod``, ``convex_comb``, ``tensor`` and
``multiplex``; the math is in each class docstring.
"""

from __future__ import annotations

from typing import Any

from sculler.backend import einsum_into, get_array_module, is_gpu_array
from sculler.core.expression import (
    LayerOutput,
    as_inputs,
    make_layer,
    simple_layer,
)
from sculler.core.faces import layer_function
from sculler.core.layer import Layer, register_layer
from sculler.math.cuda import scaling_backward


def _need_width(config, inp, width: int, what: str) -> None:
    if inp.size != width:
        raise ValueError(f"layer {config.name!r} ({config.type}): {what} {inp.name!r} has width "
                         f"{inp.size}, expected {width}")


class _Pair(Layer):
    """Two dense inputs of one batch size; subclasses define ``_check`` and the math."""

    min_inputs = 2
    max_inputs = 2

    def _values(self):
        self.check_same_batch()
        return self.get_input_value(0), self.get_input_value(1)

    def _add_grad(self, i: int, value) -> None:
        g = self.get_input_grad(i)
        if g is not None:
            g += value


class _WeightedBy(_Pair):
    """Input 0 is a per-sample scalar ``w`` (width 1), input 1 the data ``x``; the output
    takes the data's width and sequence layout."""

    @classmethod
    def infer_size(cls, config, inputs):
        _need_width(config, inputs[0], 1, "weight input")
        return inputs[1].size

    def _reserve(self):
        w, x = self._values()
        out = self.reserve_output(x.shape[0], self.size)
        src = self.get_input(1)
        self.output.seq_starts, self.output.sub_seq_starts = src.seq_starts, src.sub_seq_starts
        return w, x, out


@register_layer("scaling")
class ScalingLayer(_WeightedBy):
    """``y_i = w_i * x_i``; ``dw_i += <x_i, dy_i>``, ``dx_i += w_i * dy_i``."""

    row_wise = True

    def forward(self, pass_type: str) -> None:
        super().forward(pass_type)
        w, x, out = self._reserve()
        get_array_module(x).multiply(x, w, out=out)
        self.forward_activation()

    def backward(self, callback=None) -> None:
        self.backward_activation()
        w, x = self.get_input_value(0), self.get_input_value(1)
        dy = self.output.grad
        if is_gpu_array(dy):
            scaling_backward(w, x, dy, self.get_input_grad(0), self.get_input_grad(1))
            return
        self._add_grad(0, (x * dy).sum(axis=1, keepdims=True))
        self._add_grad(1, w * dy)


@register_layer("power")
class PowerLayer(_WeightedBy):
    """``y_i = x_i ^ w_i`` elementwise (``x > 0``); ``dx += w x^(w-1) dy``,
    ``dw_i += sum_j y_ij log(x_ij) dy_ij``."""

    def forward(self, pass_type: str) -> None:
        super().forward(pass_type)
        w, x, out = self._reserve()
        get_array_module(x).power(x, w, out=out)
        self.forward_activation()

    def backward(self, callback=None) -> None:
        self.backward_activation()
        w, x = self.get_input_value(0), self.get_input_value(1)
        xp = get_array_module(x)
        dy = self.output.grad
        y = xp.power(x, w)
        self._add_grad(0, (y * xp.log(x) * dy).sum(axis=1, keepdims=True))
        self._add_grad(1, w * xp.power(x, w - 1.0) * dy)


@register_layer("interpolation")
class InterpolationLayer(Layer):
    """``y_i = w_i * a_i + (1 - w_i) * b_i`` for inputs (w, a, b);
    ``dw_i += <a_i - b_i, dy_i>``, ``da += w dy``, ``db += (1 - w) dy``."""

    min_inputs = 3
    max_inputs = 3

    @classmethod
    def infer_size(cls, config, inputs):
        _need_width(config, inputs[0], 1, "weight input")
        _need_width(config, inputs[2], inputs[1].size, "input")
        return inputs[1].size

    def forward(self, pass_type: str) -> None:
        super().forward(pass_type)
        batch = self.check_same_batch()
        w, a, b = (self.get_input_value(i) for i in range(3))
        out = self.reserve_output(batch, self.size)
        src = self.get_input(1)
        self.output.seq_starts, self.output.sub_seq_starts = src.seq_starts, src.sub_seq_starts
        get_array_module(a).subtract(a, b, out=out)
        out *= w
        out += b
        self.forward_activation()

    def backward(self, callback=None) -> None:
        self.backward_activation()
        w, a, b = (self.get_input_value(i) for i in range(3))
        dy = self.output.grad
        for i, val in ((0, lambda: ((a - b) * dy).sum(axis=1, keepdims=True)),
                       (1, lambda: w * dy), (2, lambda: (1.0 - w) * dy)):
            g = self.get_input_grad(i)
            if g is not None:
                g += val()


class _SameWidthPair(_Pair):
    @classmethod
    def infer_size(cls, config, inputs):
        _need_width(config, inputs[1], inputs[0].size, "input")
        return 1


@register_layer("dot_prod")
class DotProdLayer(_SameWidthPair):
    """``y_i = <a_i, b_i>``; ``da += dy b``, ``db += dy a``."""

    def forward(self, pass_type: str) -> None:
        super().forward(pass_type)
        a, b = self._values()
        out = self.reserve_output(a.shape[0], 1)
        out[:, 0] = (a * b).sum(axis=1)
        self.forward_activation()

    def backward(self, callback=None) -> None:
        self.backward_activation()
        a, b = self.get_input_value(0), self.get_input_value(1)
        dy = self.output.grad
        self._add_grad(0, dy * b)
        self._add_grad(1, dy * a)


@register_layer("l2_distance")
class L2DistanceLayer(_SameWidthPair):
    """``y_i = |a_i - b_i|``; ``da += dy (a - b) / y = -db``."""

    def forward(self, pass_type: str) -> None:
        super().forward(pass_type)
        a, b = self._values()
        out = self.reserve_output(a.shape[0], 1)
        d = a - b
        dist = self.scratch("dist", (a.shape[0], 1))
        get_array_module(a).sqrt((d * d).sum(axis=1, keepdims=True), out=dist)
        out[...] = dist
        self.forward_activation()

    def backward(self, callback=None) -> None:
        self.backward_activation()
        a, b = self.get_input_value(0), self.get_input_value(1)
        dist = self._bufs["dist"][: a.shape[0]].reshape(-1, 1)
        coef = self.output.grad / dist
        self._add_grad(0, coef * (a - b))
        self._add_grad(1, coef * (b - a))


@register_layer("out_prod")
class OuterProdLayer(_Pair):
    """``y_i = vec(a_i b_i^T)`` (width M*N, row-major); ``da_i += dY_i b_i``,
    ``db_i += dY_i^T a_i``."""

    @classmethod
    def infer_size(cls, config, inputs):
        return inputs[0].size * inputs[1].size

    def forward(self, pass_type: str) -> None:
        super().forward(pass_type)
        a, b = self._values()
        out = self.reserve_output(a.shape[0], self.size)
        out.reshape(-1, a.shape[1], b.shape[1])[...] = a[:, :, None] * b[:, None, :]
        self.forward_activation()

    def backward(self, callback=None) -> None:
        self.backward_activation()
        a, b = self.get_input_value(0), self.get_input_value(1)
        dy = self.output.grad.reshape(-1, a.shape[1], b.shape[1])
        self._add_grad(0, (dy * b[:, None, :]).sum(axis=2))
        self._add_grad(1, (dy * a[:, :, None]).sum(axis=1))


@register_layer("convex_comb")
class ConvexCombLayer(_Pair):
    """v2 ``linear_comb``: weights ``w_i`` (width M) and vectors ``V_i`` (width M*N, read as
    M rows of N): ``y_i = w_i V_i`` (width N = ``size``). ``dw_i += V_i dy_i``,
    ``dV_i += w_i^T dy_i``."""

    @classmethod
    def infer_size(cls, config, inputs):
        m, mn = inputs[0].size, inputs[1].size
        size = config.size or (mn // m if m and mn % m == 0 else 0)
        if size <= 0 or m * size != mn:
            raise ValueError(f"layer {config.name!r} (convex_comb): vectors width {mn} must be "
                             f"weights width {m} times size {config.size}")
        return size

    def _split(self):
        w, v = self._values()
        return w, v.reshape(-1, w.shape[1], self.size)

    def forward(self, pass_type: str) -> None:
        super().forward(pass_type)
        w, v = self._split()
        out = self.reserve_output(w.shape[0], self.size)
        xp = get_array_module(w)
        xp.matmul(w[:, None, :], v, out=out.reshape(-1, 1, self.size))
        self.forward_activation()

    def backward(self, callback=None) -> None:
        self.backward_activation()
        w, v = self._split()
        dy = self.output.grad
        self._add_grad(0, (v * dy[:, None, :]).sum(axis=2))
        g = self.get_input_grad(1)
        if g is not None:
            g.reshape(v.shape)[...] += w[:, :, None] * dy[:, None, :]


@register_layer("tensor")
class TensorLayer(_Pair):
    """Bilinear ``y_ik = a_i W_k b_i^T + bias_k`` for k < size; the weight is stored
    (M, N * size) and read as ``size`` blocks of M x N, block k at flat offset k*M*N.

    ``dW_k += sum_i dy_ik a_i^T b_i``, ``da_i += sum_k dy_ik W_k b_i``,
    ``db_i += sum_k dy_ik W_k^T a_i``.
    """

    default_bias = True

    @classmethod
    def weight_dims(cls, config, inputs):
        return {0: (inputs[0].size, inputs[1].size * config.size)}

    @classmethod
    def paddle_dims(cls, config, inputs):
        """PaddlePaddle writes ``[M, N, size]`` for the same memory (block k at k*M*N)."""
        return {0: (inputs[0].size, inputs[1].size, config.size)}

    def _blocks(self, w):
        a_dim, b_dim = self.inputs[0].size, self.inputs[1].size
        return w.reshape(self.size, a_dim, b_dim)

    def forward(self, pass_type: str) -> None:
        super().forward(pass_type)
        a, b = self._values()
        xp = get_array_module(a)
        w = self._blocks(self.weights[0].w)
        out = self.reserve_output(a.shape[0], self.size)
        aw = xp.einsum("im,kmn->ikn", a, w)
        einsum_into("ikn,in->ik", aw, b, out=out)
        self.add_bias()
        self.forward_activation()

    def backward(self, callback=None) -> None:
        self.backward_activation()
        a, b = self.get_input_value(0), self.get_input_value(1)
        xp = get_array_module(a)
        dy = self.output.grad
        weight = self.weights[0]
        w = self._blocks(weight.w)
        self.backward_bias(callback)
        self._add_grad(0, xp.einsum("ik,kmn,in->im", dy, w, b))
        self._add_grad(1, xp.einsum("ik,kmn,im->in", dy, w, a))
        if weight.w_grad is not None:
            self._blocks(weight.w_grad)[...] += xp.einsum("ik,im,in->kmn", dy, a, b)
            weight.parameter.inc_update(callback)


@register_layer("multiplex")
class MultiplexLayer(Layer):
    """Row i of the output is row i of data input ``1 + idx_i``, where input 0 carries the
    ids ``idx``; the gradient goes back to the chosen rows only."""

    min_inputs = 3

    @classmethod
    def infer_size(cls, config, inputs):
        for inp in inputs[2:]:
            _need_width(config, inp, inputs[1].size, "data input")
        return inputs[1].size

    def _ids(self):
        arg = self.get_input(0)
        if arg.ids is None:
            raise ValueError(f"layer {self.name!r} (multiplex): input 0 "
                             f"({self.inputs[0].name!r}) must carry integer ids, got "
                             f"{arg.describe()}")
        n = len(self.inputs) - 1
        if arg.ids.size and (arg.ids.min() < 0 or arg.ids.max() >= n):
            raise ValueError(f"layer {self.name!r} (multiplex): ids must be in [0, {n}) to pick "
                             f"one of {n} data inputs, got {arg.ids.min()}..{arg.ids.max()}")
        return arg.ids

    def forward(self, pass_type: str) -> None:
        super().forward(pass_type)
        batch = self.check_same_batch()
        ids = self._ids()
        out = self.reserve_output(batch, self.size)
        src = self.get_input(1)
        self.output.seq_starts, self.output.sub_seq_starts = src.seq_starts, src.sub_seq_starts
        for k in range(len(self.inputs) - 1):
            rows = ids == k
            out[rows] = self.get_input_value(k + 1)[rows]
        self.forward_activation()

    def backward(self, callback=None) -> None:
        self.backward_activation()
        ids = self.get_input(0).ids
        for k in range(len(self.inputs) - 1):
            g = self.get_input_grad(k + 1)
            if g is not None:
                rows = ids == k
                g[rows] += self.output.grad[rows]


@layer_function(v1="scaling_layer", types=("scaling",))
def scaling(input: LayerOutput, weight: LayerOutput, name: str | None = None,  # noqa: A002
            layer_attr: Any = None) -> LayerOutput:
    """``y_i = w_i * x_i`` with a per-sample scalar ``weight`` (width 1)."""
    return simple_layer("scaling", "scaling_layer", [weight, input], name, layer_attr)


@layer_function(v1="power_layer", types=("power",))
def power(input: LayerOutput, weight: LayerOutput, name: str | None = None,  # noqa: A002
          layer_attr: Any = None) -> LayerOutput:
    """``y_i = x_i ^ w_i`` elementwise with a per-sample exponent ``weight`` (width 1)."""
    return simple_layer("power", "power_layer", [weight, input], name, layer_attr)


@layer_function(v1="interpolation_layer", types=("interpolation",))
def interpolation(input: list, weight: LayerOutput, name: str | None = None,  # noqa: A002
                  layer_attr: Any = None) -> LayerOutput:
    """``y_i = w_i * a_i + (1 - w_i) * b_i`` for ``input = [a, b]``."""
    pair = as_inputs(input, "interpolation")
    if len(pair) != 2:
        raise ValueError(f"interpolation: input must be two layers [a, b], got {len(pair)}")
    return simple_layer("interpolation", "interpolation_layer", [weight, *pair], name, layer_attr)


@layer_function(v1="tensor_layer", types=("tensor",))
def tensor(a: LayerOutput, b: LayerOutput, size: int, act: Any = None,
           name: str | None = None, param_attr: Any = None, bias_attr: Any = None,
           layer_attr: Any = None) -> LayerOutput:
    """Bilinear ``y_k = act(a W_k b^T + bias_k)``, k < size; with bias by default."""
    return make_layer("tensor", as_inputs([a, b], "tensor"), name=name,
                      name_prefix="tensor_layer", size=size, act=act,
                      param_attr=[param_attr, None], bias_attr=bias_attr, layer_attr=layer_attr)


@layer_function(v1="multiplex_layer", types=("multiplex",))
def multiplex(input: list, name: str | None = None,  # noqa: A002
              layer_attr: Any = None) -> LayerOutput:
    """``input = [index, x_0, x_1, ...]``: row i is row i of ``x_{index_i}``."""
    return simple_layer("multiplex", "multiplex_layer", list(input), name, layer_attr)


@layer_function(v1="out_prod_layer", types=("out_prod",))
def out_prod(input1: LayerOutput, input2: LayerOutput, name: str | None = None,
             layer_attr: Any = None) -> LayerOutput:
    """Row-wise outer product, flattened: width ``M * N``."""
    return simple_layer("out_prod", "out_prod_layer", [input1, input2], name, layer_attr)


@layer_function(v1=("linear_comb_layer", "convex_comb_layer"), v2=("linear_comb", "convex_comb"),
                types=("convex_comb",))
def linear_comb(weights: LayerOutput, vectors: LayerOutput, size: int | None = None,
                name: str | None = None, layer_attr: Any = None) -> LayerOutput:
    """``y_i = w_i V_i`` with ``V_i`` the row read as (width of weights) x size."""
    return simple_layer("convex_comb", "linear_comb_layer", [weights, vectors], name, layer_attr,
                   size=size or 0)


@layer_function(v1="l2_distance_layer", types=("l2_distance",))
def l2_distance(x: LayerOutput, y: LayerOutput, name: str | None = None,
                layer_attr: Any = None) -> LayerOutput:
    """``|x_i - y_i|`` per row (width 1)."""
    return simple_layer("l2_distance", "l2_distance_layer", [x, y], name, layer_attr)


@layer_function(v1="dot_prod_layer", types=("dot_prod",))
def dot_prod(input1: LayerOutput, input2: LayerOutput, name: str | None = None,
             layer_attr: Any = None) -> LayerOutput:
    """``<a_i, b_i>`` per row (width 1)."""
    return simple_layer("dot_prod", "dot_prod_layer", [input1, input2], name, layer_attr)
