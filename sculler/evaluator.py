"""Evaluators of the v2 API (``paddle.v2.evaluator``): metrics reported in events and test().

``classification_error(input, label)`` attaches an evaluator config to the ``input`` layer; a
Topology that reaches that layer computes it every batch, and the trainer reports it under its
name (``<name>`` or ``<function>_evaluator``) in ``metrics``; evaluators with several
statistics also report ``<name>.<statistic>``. The evaluator classes live in
``sculler.core.evaluator`` and ``sculler.core.metrics``.
"""

from __future__ import annotations

from typing import Any

from sculler.core.expression import LayerOutput
from sculler.core.model_config import EvaluatorConfig
from sculler.v2 import evaluators as _more
from sculler.v2.evaluators import *  # noqa: F401,F403
from sculler.v2.evaluators import attach as _attach

__all__ = ["classification_error", "sum", "auc"]


def classification_error(input: LayerOutput, label: LayerOutput,  # noqa: A002
                         name: str | None = None, weight: Any = None, top_k: int | None = None,
                         threshold: float = 0.5) -> EvaluatorConfig:
    """Fraction of samples whose arg-max (or top-k) class misses the label:
    ``err = #{i : label_i not in topk(p_i)} / n``; with ``weight`` (a width-1 layer),
    PaddlePaddle's weighted error ``sum_i w_i [label_i not in topk(p_i)] / sum_i w_i``."""
    if weight is not None and (not isinstance(weight, LayerOutput) or weight.size != 1):
        raise ValueError(f"classification_error: weight must be a layer of width 1 (one weight "
                         f"per sample), got {weight!r}")
    if top_k is not None and (not isinstance(top_k, int) or top_k < 1):
        raise ValueError(f"top_k must be a positive int, got {top_k!r}")
    inputs = [input, label] + ([weight] if weight is not None else [])
    return _attach("classification_error", "classification_error", inputs, name,
                   {"top_k": top_k or 1, "threshold": float(threshold)})


def sum(input: LayerOutput, name: str | None = None,  # noqa: A001,A002
        weight: Any = None) -> EvaluatorConfig:
    """Mean over samples of the sum of each sample's values: ``sum_i sum_j x_ij / n``
    (PaddlePaddle's sum evaluator prints total / samples)."""
    if weight is not None:
        raise NotImplementedError("sum(weight=...) is not supported")
    return _attach("sum", "sum", [input], name, {})


def auc(input: LayerOutput, label: LayerOutput, name: str | None = None,  # noqa: A002
        weight: Any = None) -> EvaluatorConfig:
    """Area under the ROC curve of the positive-class score (last column of ``input``)
    against 0/1 labels, over the whole pass (exact, by ranks)."""
    if weight is not None:
        raise NotImplementedError("auc(weight=...) is not supported")
    return _attach("auc", "auc", [input, label], name, {})


__all__ += _more.__all__
