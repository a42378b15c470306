"""v2 wrappers (``paddle.v2.layer``) of the extra cost layers: self-normalised, binary and
robust regression costs, ``sum_cost``, ``lambda_cost``, ``nce`` and ``hsigmoid``.

Signatures follow PaddlePaddle v0.11; unnamed layers get its ``wrap_name_default`` names
(``__huber_regression_cost_0__``, ``__nce_layer_0__``, ...). ``sculler.layer`` re-exports them.

Example:
    >>> import sculler as paddle
    >>> x = paddle.layer.data(name="x", type=paddle.data_type.dense_vector(3))
    >>> y = paddle.layer.data(name="y", type=paddle.data_type.dense_vector(3))
    >>> paddle.layer.smooth_l1_cost(input=x, label=y).size
    1
"""

from __future__ import annotations

from typing import Any

from sculler.v2.layer_base import LayerOutput, as_inputs, make_layer

__all__ = [
    "cross_entropy_with_selfnorm_cost", "multi_binary_label_cross_entropy_cost",
    "soft_binary_class_cross_entropy_cost", "huber_regression_cost",
    "huber_classification_cost", "smooth_l1_cost", "sum_cost", "lambda_cost", "nce",
    "hsigmoid",
]


def _simple(layer_type: str, prefix: str, inputs: list, name: str | None, coeff: float,
            layer_attr: Any, fn: str, **attrs: Any) -> LayerOutput:
    return make_layer(layer_type, as_inputs(inputs, fn), name=name, name_prefix=prefix,
                      layer_attr=layer_attr, attrs={"coeff": float(coeff), **attrs})


def cross_entropy_with_selfnorm_cost(input: LayerOutput, label: LayerOutput,  # noqa: A002
                                     name: str | None = None, coeff: float = 1.0,
                                     softmax_selfnorm_alpha: float = 0.1,
                                     layer_attr: Any = None) -> LayerOutput:
    """``coeff * (-log x[label] + log Z + alpha (log Z)^2)``, ``Z = sum_j x_j``: cross
    entropy of unnormalised scores that also drives ``Z`` to 1."""
    return _simple("multi_class_cross_entropy_with_selfnorm", "cross_entropy_with_selfnorm",
                   [input, label], name, coeff, layer_attr, "cross_entropy_with_selfnorm_cost",
                   softmax_selfnorm_alpha=float(softmax_selfnorm_alpha))


def multi_binary_label_cross_entropy_cost(input: LayerOutput, label: LayerOutput,  # noqa: A002
                                          name: str | None = None, coeff: float = 1.0,
                                          layer_attr: Any = None) -> LayerOutput:
    """``-coeff * sum_j [y_j] log p_j + [not y_j] log(1 - p_j)`` for a multi-hot label
    (sparse_binary_vector, dense 0/1, or one class id)."""
    return _simple("multi_binary_label_cross_entropy", "multi_binary_label_cross_entropy",
                   [input, label], name, coeff, layer_attr,
                   "multi_binary_label_cross_entropy_cost")


def soft_binary_class_cross_entropy_cost(input: LayerOutput, label: LayerOutput,  # noqa: A002
                                         name: str | None = None, coeff: float = 1.0,
                                         weight: LayerOutput | None = None,
                                         layer_attr: Any = None) -> LayerOutput:
    """``-coeff * w * sum_j y_j log p_j + (1 - y_j) log(1 - p_j)`` for soft targets in
    [0, 1]. PaddlePaddle has the engine layer but no helper: a Sculler extension."""
    inputs = [input, label] + ([weight] if weight is not None else [])
    return _simple("soft_binary_class_cross_entropy", "soft_binary_class_cross_entropy",
                   inputs, name, coeff, layer_attr, "soft_binary_class_cross_entropy_cost")


def huber_regression_cost(input: LayerOutput, label: LayerOutput,  # noqa: A002
                          name: str | None = None, delta: float = 1.0, coeff: float = 1.0,
                          layer_attr: Any = None) -> LayerOutput:
    """Huber loss summed over dimensions: ``a^2/2`` for ``a = |y - x| <= delta``,
    ``delta (a - delta/2)`` beyond, times ``coeff``."""
    if delta <= 0:
        raise ValueError(f"huber_regression_cost: delta must be positive, got {delta!r}")
    return _simple("huber_regression", "huber_regression_cost", [input, label], name, coeff,
                   layer_attr, "huber_regression_cost", delta=float(delta))


def huber_classification_cost(input: LayerOutput, label: LayerOutput,  # noqa: A002
                              name: str | None = None, coeff: float = 1.0,
                              layer_attr: Any = None) -> LayerOutput:
    """Two-class Huber loss of one score per sample against labels 0/1 (``y = 2l - 1``):
    ``-4yf`` below ``yf = -1``, ``(1 - yf)^2`` below 1, else 0."""
    return _simple("huber_classification", "huber_classification_cost", [input, label], name,
                   coeff, layer_attr, "huber_classification_cost")


def smooth_l1_cost(input: LayerOutput, label: LayerOutput,  # noqa: A002
                   name: str | None = None, coeff: float = 1.0,
                   layer_attr: Any = None) -> LayerOutput:
    """Smooth L1 summed over dimensions: ``a^2/2`` for ``a = |x - y| < 1``, ``a - 1/2``
    beyond, times ``coeff``."""
    return _simple("smooth_l1", "smooth_l1_cost", [input, label], name, coeff, layer_attr,
                   "smooth_l1_cost")


def sum_cost(input: LayerOutput, name: str | None = None,  # noqa: A002
             layer_attr: Any = None) -> LayerOutput:
    """The sum of the input's values per sample, used as a cost: ``cost_i = sum_j x_ij``."""
    return make_layer("sum_cost", as_inputs(input, "sum_cost"), name=name,
                      name_prefix="sum_cost", layer_attr=layer_attr)


def lambda_cost(input: LayerOutput, score: LayerOutput, name: str | None = None,  # noqa: A002
                NDCG_num: int = 5, max_sort_size: int = -1,  # noqa: N803
                layer_attr: Any = None) -> LayerOutput:
    """LambdaRank over lists (sequences): forward gives each list's NDCG@``NDCG_num`` of the
    model scores ``input`` against relevances ``score``; backward is LambdaRank's gradient."""
    for key, val in (("NDCG_num", NDCG_num), ("max_sort_size", max_sort_size)):
        if isinstance(val, bool) or not isinstance(val, int):
            raise TypeError(f"lambda_cost: {key} must be an int, got {val!r}")
    if NDCG_num < 1:
        raise ValueError(f"lambda_cost: NDCG_num must be >= 1, got {NDCG_num}")
    return make_layer("lambda_cost", as_inputs([input, score], "lambda_cost"), name=name,
                      name_prefix="lambda_cost", layer_attr=layer_attr,
                      attrs={"NDCG_num": NDCG_num, "max_sort_size": max_sort_size})


def nce(input: Any, label: LayerOutput, num_classes: int | None = None,  # noqa: A002
        param_attr: Any = None, weight: LayerOutput | None = None, num_neg_samples: int = 10,
        neg_distribution: list[float] | None = None, name: str | None = None,
        bias_attr: Any = None, layer_attr: Any = None) -> LayerOutput:
    """Noise-contrastive estimation cost: the true class against ``num_neg_samples`` classes
    drawn from ``neg_distribution`` (uniform by default), one (num_classes x width) weight
    per input and a bias. ``num_classes`` defaults to the label layer's size."""
    feats = as_inputs(input, "nce")
    n = int(num_classes if num_classes is not None else label.size)
    if neg_distribution is not None:
        neg_distribution = [float(p) for p in neg_distribution]
        if len(neg_distribution) != n or abs(sum(neg_distribution) - 1.0) > 1e-6:
            raise ValueError(f"nce: neg_distribution must have num_classes={n} probabilities "
                             f"summing to 1, got {len(neg_distribution)} summing to "
                             f"{sum(neg_distribution):.6g}")
    if isinstance(num_neg_samples, bool) or not isinstance(num_neg_samples, int) or (
            num_neg_samples < 1):
        raise ValueError(f"nce: num_neg_samples must be a positive int, got "
                         f"{num_neg_samples!r}")
    inputs = feats + [label] + ([weight] if weight is not None else [])
    pattrs = param_attr
    if isinstance(param_attr, (list, tuple)):
        pattrs = list(param_attr) + [None] * (len(inputs) - len(param_attr))
    elif param_attr is not None:
        pattrs = [param_attr] * len(feats) + [None] * (len(inputs) - len(feats))
    return make_layer("nce", as_inputs(inputs, "nce"), name=name, name_prefix="nce_layer",
                      param_attr=pattrs, bias_attr=bias_attr, layer_attr=layer_attr,
                      attrs={"num_classes": n, "num_neg_samples": num_neg_samples,
                             "neg_distribution": neg_distribution,
                             "with_weight": weight is not None})


def hsigmoid(input: Any, label: LayerOutput, num_classes: int | None = None,  # noqa: A002
             name: str | None = None, bias_attr: Any = None, param_attr: Any = None,
             layer_attr: Any = None) -> LayerOutput:
    """Hierarchical sigmoid cost over Paddle's binary code tree of ``num_classes`` leaves
    (default: the label layer's size); one (num_classes - 1) x width weight per input."""
    feats = as_inputs(input, "hsigmoid")
    n = int(num_classes if num_classes is not None else label.size)
    if n < 2:
        raise ValueError(f"hsigmoid: num_classes must be >= 2, got {n}")
    pattrs = param_attr
    if isinstance(param_attr, (list, tuple)):
        pattrs = list(param_attr) + [None]
    elif param_attr is not None:
        pattrs = [param_attr] * len(feats) + [None]
    return make_layer("hsigmoid", as_inputs(feats + [label], "hsigmoid"), name=name,
                      name_prefix="hsigmoid", param_attr=pattrs, bias_attr=bias_attr,
                      layer_attr=layer_attr, attrs={"num_classes": n})
