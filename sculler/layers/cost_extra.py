"""More per-sample cost layers of PaddlePaddle's CostLayer.cpp: self-normalised and binary cross
entropies, Huber (regression and two-class), smooth L1 and the plain ``sum_cost``.

Each (but ``sum_cost``) is a :class:`~sculler.layers.cost.CostLayer`: inputs
``[prediction, label]`` and an optional per-sample ``weight`` column; the output is
``coeff * weight_i * cost_i`` of shape (batch, 1).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from sculler.backend import get_array_module, to_device_of
from sculler.core.expression import (
    LayerOutput,
    as_inputs,
    make_layer,
)
from sculler.core.faces import layer_function
from sculler.core.layer import Layer, register_layer
from sculler.layers.cost import CostLayer, cost_layer
from sculler.math.bbox import smooth_l1, smooth_l1_grad
from sculler.math.sparse import CsrMatrix


def _dense_label(layer: CostLayer, label_arg, x):
    """The label as a dense (batch, width) value shaped like ``x`` (ValueError otherwise)."""
    y = label_arg.value
    if isinstance(y, CsrMatrix):
        if y.shape != x.shape:
            y = None
        else:
            y = y.toarray(x.dtype)
    if y is None or y.shape != x.shape:
        raise ValueError(
            f"layer {layer.name!r} ({layer.type_name}): label ({layer.inputs[1].name!r}) must be "
            f"a dense value of shape {tuple(x.shape)}, got {label_arg.describe()}"
        )
    return to_device_of(y, x)


@register_layer("multi_class_cross_entropy_with_selfnorm")
class CrossEntropyWithSelfNorm(CostLayer):
    """Cross entropy of unnormalised scores ``x`` (e.g. an exp output) that also pushes the
    normaliser ``Z_i = sum_j x_ij`` towards 1:
    ``cost_i = -log x_i[l_i] + log Z_i + alpha * (log Z_i)^2``;
    ``dx_ij = -[j = l_i] / x_ij + 1/Z_i + 2 alpha log(Z_i) / Z_i``
    (``alpha`` = attr ``softmax_selfnorm_alpha``, default 0.1)."""

    def sample_cost(self, x, label_arg, out) -> None:
        ids = self.label_ids(label_arg, x.shape[1])
        log_z = np.log(x.sum(axis=1))
        alpha = self.attr("softmax_selfnorm_alpha", 0.1)
        out[...] = -np.log(x[np.arange(x.shape[0]), ids]) + log_z + alpha * log_z * log_z

    def sample_grad(self, x, label_arg, dcost, dx) -> None:
        rows = np.arange(x.shape[0])
        ids = label_arg.ids
        z = x.sum(axis=1)
        alpha = self.attr("softmax_selfnorm_alpha", 0.1)
        dx += (dcost * (1.0 + 2.0 * alpha * np.log(z)) / z)[:, None]
        dx[rows, ids] -= dcost / x[rows, ids]


@register_layer("multi_binary_label_cross_entropy")
class MultiBinaryLabelCrossEntropy(CostLayer):
    """Independent binary cross entropies of probabilities ``p`` against a multi-hot label
    ``y`` (sparse ids per sample, dense 0/1, or one class id per sample):
    ``cost_i = -sum_j [y_ij] log p_ij + [not y_ij] log(1 - p_ij)``;
    ``dp_ij = -1/p_ij`` where ``y_ij`` is set, ``1/(1 - p_ij)`` elsewhere."""

    def _hot(self, label_arg, x):
        if label_arg.ids is not None and label_arg.value is None:
            xp = get_array_module(x)
            ids = to_device_of(self.label_ids(label_arg, x.shape[1]), x)
            hot = xp.zeros(x.shape, dtype=bool)
            hot[xp.arange(x.shape[0]), ids] = True
            return hot
        return _dense_label(self, label_arg, x) > 0.5

    def sample_cost(self, x, label_arg, out) -> None:
        hot = self._hot(label_arg, x)
        out[...] = -np.log(np.where(hot, x, 1.0 - x)).sum(axis=1)

    def sample_grad(self, x, label_arg, dcost, dx) -> None:
        hot = self._hot(label_arg, x)
        dx += dcost[:, None] * np.where(hot, -1.0 / x, 1.0 / (1.0 - x))


@register_layer("soft_binary_class_cross_entropy")
class SoftBinaryClassCrossEntropy(CostLayer):
    """Binary cross entropy against soft targets ``y`` in [0, 1]:
    ``cost_i = -sum_j y_ij log p_ij + (1 - y_ij) log(1 - p_ij)``;
    ``dp = (p - y) / (p (1 - p))``."""

    def sample_cost(self, x, label_arg, out) -> None:
        y = _dense_label(self, label_arg, x)
        out[...] = -(y * np.log(x) + (1.0 - y) * np.log(1.0 - x)).sum(axis=1)

    def sample_grad(self, x, label_arg, dcost, dx) -> None:
        y = _dense_label(self, label_arg, x)
        dx += dcost[:, None] * (-y / x + (1.0 - y) / (1.0 - x))


@register_layer("huber_regression")
class HuberRegression(CostLayer):
    """Huber loss summed over dimensions, with ``a = |y - x|`` and ``delta`` (default 1):
    ``cost = a^2 / 2`` where ``a <= delta``, ``delta (a - delta/2)`` beyond;
    ``dx = x - y`` clipped to ``[-delta, delta]``."""

    def sample_cost(self, x, label_arg, out) -> None:
        delta = self.attr("delta", 1.0)
        a = np.abs(_dense_label(self, label_arg, x) - x)
        out[...] = np.where(a <= delta, 0.5 * a * a, delta * (a - 0.5 * delta)).sum(axis=1)

    def sample_grad(self, x, label_arg, dcost, dx) -> None:
        delta = self.attr("delta", 1.0)
        dx += dcost[:, None] * np.clip(x - _dense_label(self, label_arg, x), -delta, delta)


@register_layer("huber_classification")
class HuberClassification(CostLayer):
    """PaddlePaddle's robust two-class Huber loss on one score ``f`` per sample, labels 0/1
    mapped to ``y = 2 l - 1``: ``cost = -4 y f`` where ``y f < -1``, ``(1 - y f)^2`` where
    ``y f < 1``, else 0; ``df = -4 y``, ``-2 y (1 - y f)`` and 0 on those pieces."""

    def _margin(self, x, label_arg):
        if x.shape[1] != 1:
            raise ValueError(
                f"layer {self.name!r} (huber_classification): input {self.inputs[0].name!r} "
                f"must have width 1 (one score per sample), got width {x.shape[1]}"
            )
        y = 2.0 * self.label_ids(label_arg, 2) - 1.0
        return y, y * x[:, 0]

    def sample_cost(self, x, label_arg, out) -> None:
        _, m = self._margin(x, label_arg)
        out[...] = np.where(m < -1.0, -4.0 * m, np.where(m < 1.0, (1.0 - m) ** 2, 0.0))

    def sample_grad(self, x, label_arg, dcost, dx) -> None:
        y, m = self._margin(x, label_arg)
        g = np.where(m < -1.0, -4.0 * y, np.where(m < 1.0, -2.0 * y * (1.0 - m), 0.0))
        dx[:, 0] += dcost * g


@register_layer("smooth_l1")
class SmoothL1Cost(CostLayer):
    """Smooth L1 (Fast R-CNN) summed over dimensions, ``a = |x - y|``:
    ``cost = a^2 / 2`` where ``a < 1``, ``a - 1/2`` beyond; ``dx = clip(x - y, -1, 1)``."""

    def sample_cost(self, x, label_arg, out) -> None:
        out[...] = smooth_l1(x - _dense_label(self, label_arg, x)).sum(axis=1)

    def sample_grad(self, x, label_arg, dcost, dx) -> None:
        dx += dcost[:, None] * smooth_l1_grad(x - _dense_label(self, label_arg, x))


@register_layer("sum_cost")
class SumCost(Layer):
    """The sum of the input's values as a cost: ``cost_i = sum_j x_ij``; ``dx_ij = dcost_i``
    (Paddle adds 1; here the incoming gradient, which the network seeds with 1)."""

    is_cost = True
    min_inputs = 1
    max_inputs = 1

    @classmethod
    def infer_size(cls, config, inputs):
        return 1

    def forward(self, pass_type: str) -> None:
        super().forward(pass_type)
        x = self.get_input_value(0)
        out = self.reserve_output(x.shape[0], 1)
        np.sum(x, axis=1, out=out[:, 0])
        self.forward_activation()

    def backward(self, callback=None) -> None:
        self.backward_activation()
        dx = self.get_input_grad(0)
        if dx is not None:
            dx += self.output.grad


@layer_function(v1="cross_entropy_with_selfnorm",
                types=("multi_class_cross_entropy_with_selfnorm",))
def cross_entropy_with_selfnorm_cost(input: LayerOutput, label: LayerOutput,  # noqa: A002
                                     name: str | None = None, coeff: float = 1.0,
                                     softmax_selfnorm_alpha: float = 0.1,
                                     layer_attr: Any = None) -> LayerOutput:
    """``coeff * (-log x[label] + log Z + alpha (log Z)^2)``, ``Z = sum_j x_j``: cross
    entropy of unnormalised scores that also drives ``Z`` to 1."""
    return cost_layer("multi_class_cross_entropy_with_selfnorm", "cross_entropy_with_selfnorm",
                   [input, label], name, coeff, layer_attr, "cross_entropy_with_selfnorm_cost",
                   softmax_selfnorm_alpha=float(softmax_selfnorm_alpha))


@layer_function(v1="multi_binary_label_cross_entropy", types=("multi_binary_label_cross_entropy",))
def multi_binary_label_cross_entropy_cost(input: LayerOutput, label: LayerOutput,  # noqa: A002
                                          name: str | None = None, coeff: float = 1.0,
                                          layer_attr: Any = None) -> LayerOutput:
    """``-coeff * sum_j [y_j] log p_j + [not y_j] log(1 - p_j)`` for a multi-hot label
    (sparse_binary_vector, dense 0/1, or one class id)."""
    return cost_layer("multi_binary_label_cross_entropy", "multi_binary_label_cross_entropy",
                   [input, label], name, coeff, layer_attr,
                   "multi_binary_label_cross_entropy_cost")


@layer_function(types=("soft_binary_class_cross_entropy",),
                prefix="soft_binary_class_cross_entropy")
def soft_binary_class_cross_entropy_cost(input: LayerOutput, label: LayerOutput,  # noqa: A002
                                         name: str | None = None, coeff: float = 1.0,
                                         weight: LayerOutput | None = None,
                                         layer_attr: Any = None) -> LayerOutput:
    """``-coeff * w * sum_j y_j log p_j + (1 - y_j) log(1 - p_j)`` for soft targets in
    [0, 1]. PaddlePaddle has the engine layer but no helper: a Sculler extension."""
    inputs = [input, label] + ([weight] if weight is not None else [])
    return cost_layer("soft_binary_class_cross_entropy", "soft_binary_class_cross_entropy",
                   inputs, name, coeff, layer_attr, "soft_binary_class_cross_entropy_cost")


@layer_function(v1="huber_regression_cost", types=("huber_regression",))
def huber_regression_cost(input: LayerOutput, label: LayerOutput,  # noqa: A002
                          name: str | None = None, delta: float = 1.0, coeff: float = 1.0,
                          layer_attr: Any = None) -> LayerOutput:
    """Huber loss summed over dimensions: ``a^2/2`` for ``a = |y - x| <= delta``,
    ``delta (a - delta/2)`` beyond, times ``coeff``."""
    if delta <= 0:
        raise ValueError(f"huber_regression_cost: delta must be positive, got {delta!r}")
    return cost_layer("huber_regression", "huber_regression_cost", [input, label], name, coeff,
                   layer_attr, "huber_regression_cost", delta=float(delta))


@layer_function(v1="huber_classification_cost", types=("huber_classification",))
def huber_classification_cost(input: LayerOutput, label: LayerOutput,  # noqa: A002
                              name: str | None = None, coeff: float = 1.0,
                              layer_attr: Any = None) -> LayerOutput:
    """Two-class Huber loss of one score per sample against labels 0/1 (``y = 2l - 1``):
    ``-4yf`` below ``yf = -1``, ``(1 - yf)^2`` below 1, else 0."""
    return cost_layer("huber_classification", "huber_classification_cost", [input, label], name,
                   coeff, layer_attr, "huber_classification_cost")


@layer_function(v1="smooth_l1_cost", types=("smooth_l1",))
def smooth_l1_cost(input: LayerOutput, label: LayerOutput,  # noqa: A002
                   name: str | None = None, coeff: float = 1.0,
                   layer_attr: Any = None) -> LayerOutput:
    """Smooth L1 summed over dimensions: ``a^2/2`` for ``a = |x - y| < 1``, ``a - 1/2``
    beyond, times ``coeff``."""
    return cost_layer("smooth_l1", "smooth_l1_cost", [input, label], name, coeff, layer_attr,
                   "smooth_l1_cost")


@layer_function(v1="sum_cost", types=("sum_cost",))
def sum_cost(input: LayerOutput, name: str | None = None,  # noqa: A002
             layer_attr: Any = None) -> LayerOutput:
    """The sum of the input's values per sample, used as a cost: ``cost_i = sum_j x_ij``."""
    return make_layer("sum_cost", as_inputs(input, "sum_cost"), name=name,
                      name_prefix="sum_cost", layer_attr=layer_attr)
