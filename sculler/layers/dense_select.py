"""Selection layers: ``maxid`` (argmax ids), ``sampling_id`` (ids drawn from each row) and
``selective_fc`` (an fc computing only selected output columns)."""

from __future__ import annotations

from typing import Any

from sculler import activation as A
from sculler.backend import get_array_module, to_device_of
from sculler.core.expression import (
    LayerOutput,
    as_inputs,
    make_layer,
    no_support,
    simple_layer,
)
from sculler.core.faces import layer_function
from sculler.core.layer import Layer, register_layer
from sculler.math.sparse import CsrMatrix


@register_layer("maxid")
class MaxIdLayer(Layer):
    """Ids of the ``beam_size`` largest entries of each row, largest first (ids hold
    batch*beam_size entries), and their values (batch x beam_size). Not differentiable.

    The layer's size is the input's width, as PaddlePaddle sets it, so an ``embedding`` over
    the ids has a [vocabulary, width] table and can share the one of the target words."""

    min_inputs = 1
    max_inputs = 1

    @classmethod
    def infer_size(cls, config, inputs):
        k = int(config.attrs.get("beam_size", 1))
        if not 1 <= k <= inputs[0].size:
            raise ValueError(f"layer {config.name!r} (maxid): beam_size {k} must be in "
                             f"[1, {inputs[0].size}]")
        return inputs[0].size

    def forward(self, pass_type: str) -> None:
        super().forward(pass_type)
        x = self.get_input_value(0)
        xp = get_array_module(x)
        k = int(self.config.attrs.get("beam_size", 1))
        order = xp.argsort(-x, axis=1, kind="stable")[:, :k]
        out = self.reserve_output(x.shape[0], k)
        out[...] = xp.take_along_axis(x, order, axis=1)
        self.output.ids = order.reshape(-1).astype(xp.int64)
        self.forward_activation()

    def backward(self, callback=None) -> None:
        """No gradient flows through an argmax."""


@register_layer("sampling_id")
class SamplingIdLayer(Layer):
    """``id_i ~ Categorical(x_i)``: one id per row drawn with the row's (non-negative,
    summing to one) entries as probabilities. Output ids only; not differentiable. Seeded
    per layer name, reproducible within a process."""

    min_inputs = 1
    max_inputs = 1

    @classmethod
    def infer_size(cls, config, inputs):
        return inputs[0].size

    def forward(self, pass_type: str) -> None:
        super().forward(pass_type)
        x = self.get_input_value(0)
        xp = get_array_module(x)
        cdf = xp.cumsum(x, axis=1)
        u = xp.asarray(self._rng.random_sample((x.shape[0], 1))) * cdf[:, -1:]
        ids = (cdf <= u).sum(axis=1)
        self.output.value = None
        self.output.grad = None
        self.output.ids = xp.minimum(ids, x.shape[1] - 1).astype(xp.int64)
        self.output.seq_starts = self.get_input(0).seq_starts

    def backward(self, callback=None) -> None:
        """Sampling has no gradient."""


@register_layer("selective_fc")
class SelectiveFCLayer(Layer):
    """An fc ``y = f(sum_i x_i W_i^T + b)`` whose weights are stored transposed
    (size x D_i, PaddlePaddle's layout). With attr ``has_select`` the last input is a sparse
    (batch x size) selection: only selected columns are computed, the others are 0 in the
    output and receive no gradient (Paddle returns them as a sparse matrix)."""

    default_bias = True

    @classmethod
    def _n_data(cls, config, inputs) -> int:
        return len(inputs) - (1 if config.attrs.get("has_select") else 0)

    @classmethod
    def check_config(cls, config, inputs):
        super().check_config(config, inputs)
        if config.attrs.get("has_select"):
            if len(inputs) < 2 or inputs[-1].size != config.size:
                raise ValueError(f"layer {config.name!r} (selective_fc): the selection input "
                                 f"(last) must have width size={config.size}")

    @classmethod
    def weight_dims(cls, config, inputs):
        return {i: (config.size, inputs[i].size) for i in range(cls._n_data(config, inputs))}

    def _mask(self):
        if not self.attr("has_select"):
            return None
        sel = self.get_input(len(self.inputs) - 1).value
        dense = sel.toarray(dtype=self.dtype) if isinstance(sel, CsrMatrix) else sel
        return dense != 0

    def forward(self, pass_type: str) -> None:
        super().forward(pass_type)
        batch = self.check_same_batch()
        out = self.reserve_output(batch, self.size)
        out[...] = 0
        for i, weight in enumerate(self.weights[: self._n_data(self.config, self.inputs)]):
            out += self.get_input_value(i) @ weight.w.T
        self.add_bias()
        self.forward_activation()
        mask = self._mask()
        if mask is not None:
            out *= to_device_of(mask, out)

    def backward(self, callback=None) -> None:
        mask = self._mask()
        if mask is not None:
            self.output.grad *= to_device_of(mask, self.output.grad)
        self.backward_activation_and_bias(callback)
        dz = self.output.grad
        for i, weight in enumerate(self.weights[: self._n_data(self.config, self.inputs)]):
            x = self.get_input_value(i)
            if weight.w_grad is not None:
                weight.w_grad += dz.T @ x
            g = self.get_input_grad(i)
            if g is not None:
                g += dz @ weight.w
            if weight.w_grad is not None:
                weight.parameter.inc_update(callback)


@layer_function(v1="maxid_layer", types=("maxid",))
def max_id(input: LayerOutput, name: str | None = None,  # noqa: A002
           layer_attr: Any = None) -> LayerOutput:
    """Id of the largest entry of each row (``ids``; ``value`` holds the maximum)."""
    return simple_layer("maxid", "maxid_layer", [input], name, layer_attr)


@layer_function(v1="sampling_id_layer", types=("sampling_id",))
def sampling_id(input: LayerOutput, name: str | None = None,  # noqa: A002
                layer_attr: Any = None) -> LayerOutput:
    """One id per row drawn from the row's probabilities."""
    return simple_layer("sampling_id", "sampling_id_layer", [input], name, layer_attr)


@layer_function(v1="selective_fc_layer", types=("selective_fc",))
def selective_fc(input: Any, size: int, select: LayerOutput | None = None,  # noqa: A002
                 act: Any = None, name: str | None = None, pass_generation: bool = False,
                 has_selected_colums: bool = True, mul_ratio: float = 0.02,
                 param_attr: Any = None, bias_attr: Any = None,
                 layer_attr: Any = None) -> LayerOutput:
    """An fc (weights stored size x D) computing only the columns ``select`` marks; without
    ``select`` every column. ``mul_ratio`` is a speed hint and is not needed here."""
    no_support("selective_fc", pass_generation=pass_generation)
    inputs = as_inputs(input, "selective_fc")
    has_select = select is not None and has_selected_colums
    pattrs = param_attr if isinstance(param_attr, (list, tuple)) else [param_attr] * len(inputs)
    if has_select:
        inputs, pattrs = inputs + [select], list(pattrs) + [None]
    return make_layer("selective_fc", inputs, name=name, name_prefix="selective_fc_layer",
                      size=size, act=act, default_act=A.Tanh, param_attr=list(pattrs),
                      bias_attr=bias_attr, layer_attr=layer_attr,
                      attrs={"has_select": bool(has_select)})
