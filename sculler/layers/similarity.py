"""Similarity layers: cosine similarity (``cos``) and the pairwise ranking cost (``rank-cost``)."""

from __future__ import annotations

from typing import Any

import numpy as np

from sculler.backend import einsum_into
from sculler.core.expression import (
    LayerOutput,
    as_inputs,
    make_layer,
    no_support,
)
from sculler.core.faces import layer_function
from sculler.core.layer import Layer, equal_widths, register_layer
from sculler.validate import integer


@register_layer("cos")
class CosSimLayer(Layer):
    """``y_i = scale * <a_i, b_i> / (|a_i| |b_i|)`` for two inputs of one width (Paddle's
    CosSimLayer). With ``c = y/scale``: ``da = scale*dy*(b/(|a||b|) - c*a/|a|^2)`` and
    symmetrically for ``db``."""

    min_inputs = 2
    max_inputs = 2

    @classmethod
    def infer_size(cls, config, inputs):
        equal_widths(config, inputs)
        return 1

    def forward(self, pass_type: str) -> None:
        super().forward(pass_type)
        batch = self.check_same_batch()
        a, b = self.get_input_value(0), self.get_input_value(1)
        self.check_input_width(1, a.shape[1])
        na = self.scratch("na", (batch,))
        nb = self.scratch("nb", (batch,))
        np.sqrt(np.einsum("ij,ij->i", a, a), out=na)
        np.sqrt(np.einsum("ij,ij->i", b, b), out=nb)
        out = self.reserve_output(batch, 1)
        einsum_into("ij,ij->i", a, b, out=out[:, 0])
        out[:, 0] /= na * nb
        out *= self.attr("scale", 1.0)
        self.forward_activation()

    def backward(self, callback=None) -> None:
        self.backward_activation()
        scale = self.attr("scale", 1.0)
        a, b = self.get_input_value(0), self.get_input_value(1)
        n = a.shape[0]
        na, nb = self._bufs["na"][:n], self._bufs["nb"][:n]
        c = self.output.value[:, 0] / scale
        dy = self.output.grad[:, 0] * scale
        for x, other, nx, i in ((a, b, na, 0), (b, a, nb, 1)):
            g = self.get_input_grad(i)
            if g is not None:
                g += (dy / (na * nb))[:, None] * other - (dy * c / (nx * nx))[:, None] * x


@register_layer("cos_vm")
class CosSimVecMatLayer(Layer):
    """``y_k = scale * <a, b_k> / (|a| |b_k|)`` for ``k < size``: ``a`` (width M) against
    each of the ``size`` width-M vectors that ``b`` (width M*size) holds side by side
    (PaddlePaddle's CosSimVecMatLayer). With ``c_k = y_k / scale``:
    ``da = scale sum_k dy_k (b_k / (|a||b_k|) - c_k a / |a|^2)``,
    ``db_k = scale dy_k (a / (|a||b_k|) - c_k b_k / |b_k|^2)``."""

    min_inputs = max_inputs = 2

    @classmethod
    def infer_size(cls, config, inputs):
        if config.size < 1 or inputs[1].size != inputs[0].size * config.size:
            raise ValueError(f"layer {config.name!r} (cos_vm): input 1 {inputs[1].name!r} must "
                             f"hold size={config.size} vectors of input 0's width "
                             f"{inputs[0].size} (width {inputs[0].size * config.size}), got "
                             f"{inputs[1].size}")
        return config.size

    def _split(self):
        a, b = self.get_input_value(0), self.get_input_value(1)
        return a, b.reshape(b.shape[0], self.size, a.shape[1])

    def forward(self, pass_type: str) -> None:
        super().forward(pass_type)
        self.check_same_batch()
        a, b = self._split()
        na = np.sqrt(np.einsum("ij,ij->i", a, a))[:, None]
        nb = np.sqrt(np.einsum("ikj,ikj->ik", b, b))
        out = self.reserve_output(a.shape[0], self.size)
        out[...] = np.einsum("ij,ikj->ik", a, b) / (na * nb) * self.attr("scale", 1.0)
        self._norms = na, nb
        self.forward_activation()

    def backward(self, callback=None) -> None:
        self.backward_activation()
        scale = self.attr("scale", 1.0)
        a, b = self._split()
        na, nb = self._norms
        c = self.output.value / scale
        dy = self.output.grad * scale
        ga, gb = self.get_input_grad(0), self.get_input_grad(1)
        if ga is not None:
            ga += np.einsum("ik,ikj->ij", dy / (na * nb), b) - (dy * c).sum(1, keepdims=True) \
                * a / (na * na)
        if gb is not None:
            gb += ((dy / (na * nb))[:, :, None] * a[:, None, :]
                   - (dy * c / (nb * nb))[:, :, None] * b).reshape(gb.shape)


@register_layer("rank-cost")
class RankingCostLayer(Layer):
    """PaddlePaddle's RankingCost: ``o = left - right``,
    ``cost = coeff * w * (-label*o + log(1 + exp(o)))`` with label in [0, 1];
    ``dcost/dleft = coeff * w * (sigmoid(o) - label) = -dcost/dright``."""

    is_cost = True
    min_inputs = 3
    max_inputs = 4

    @classmethod
    def infer_size(cls, config, inputs):
        for inp in inputs[:2]:
            if inp.size != 1:
                raise ValueError(f"layer {config.name!r} (rank-cost): input {inp.name!r} has "
                                 f"width {inp.size}; left and right scores must have width 1")
        return 1

    def _label(self):
        arg = self.get_input(2)
        lab = arg.value if arg.value is not None else arg.ids
        if lab is None or lab.shape[0] != self.get_input_value(0).shape[0]:
            raise ValueError(f"layer {self.name!r} (rank-cost): label input "
                             f"{self.inputs[2].name!r} must hold one value per sample, got "
                             f"{arg.describe()}")
        return lab.reshape(-1, 1)

    def _scale(self):
        coeff = self.attr("coeff", 1.0)
        return coeff * self.get_input_value(3) if len(self.inputs) == 4 else coeff

    def forward(self, pass_type: str) -> None:
        super().forward(pass_type)
        batch = self.check_same_batch()
        o = self.scratch("o", (batch, 1))
        np.subtract(self.get_input_value(0), self.get_input_value(1), out=o)
        out = self.reserve_output(batch, 1)
        np.logaddexp(0.0, o, out=out)
        out -= self._label() * o
        out *= self._scale()
        self.forward_activation()

    def backward(self, callback=None) -> None:
        self.backward_activation()
        n = self.output.grad.shape[0]
        o = self._bufs["o"][:n].reshape(n, 1)
        d = self.scratch("d", (n, 1))
        np.negative(o, out=d)
        np.exp(d, out=d)
        d += 1.0
        np.reciprocal(d, out=d)
        d -= self._label()
        d *= self.output.grad
        d *= self._scale()
        for i, sign in ((0, 1.0), (1, -1.0)):
            g = self.get_input_grad(i)
            if g is not None:
                g += sign * d
        if len(self.inputs) == 4 and self.get_input_grad(3) is not None:
            raw = np.logaddexp(0.0, o) - self._label() * o
            self.get_input_grad(3)[...] += self.attr("coeff", 1.0) * raw * self.output.grad


@layer_function(v1="cos_sim", types=("cos", "cos_vm"))
def cos_sim(a: LayerOutput, b: LayerOutput, scale: float = 1, size: int = 1,
            name: str | None = None, layer_attr: Any = None, **kw: Any) -> LayerOutput:
    """``y = scale * a.b / (|a| |b|)`` per sample for ``a`` and ``b`` of one width; with
    ``size`` > 1, ``b`` holds ``size`` vectors of ``a``'s width side by side and
    ``y_k = scale * cos(a, b_k)`` (PaddlePaddle's ``cos_vm``)."""
    no_support("cos_sim", **kw)
    size = integer(size, "cos_sim: size", minimum=1)
    return make_layer("cos" if size == 1 else "cos_vm", as_inputs([a, b], "cos_sim"),
                      name=name, size=size, layer_attr=layer_attr,
                      attrs={"scale": float(scale)})


@layer_function(v1="rank_cost", types=("rank-cost",))
def rank_cost(left: LayerOutput, right: LayerOutput, label: LayerOutput, weight: Any = None,
              name: str | None = None, coeff: float = 1.0, layer_attr: Any = None,
              **kw: Any) -> LayerOutput:
    """Pairwise ranking cost ``-label*o + log(1 + exp(o))`` with ``o = left - right``."""
    no_support("rank_cost", **kw)
    inputs = [left, right, label] + ([weight] if weight is not None else [])
    return make_layer("rank-cost", as_inputs(inputs, "rank_cost"), name=name,
                      name_prefix="rank_cost", layer_attr=layer_attr,
                      attrs={"coeff": float(coeff)})
