"""Evaluators of the v2 API (``paddle.v2.evaluator``): metrics reported in events and test().

``classification_error(input, label)`` attaches an evaluator config to the ``input`` layer; a
Topology that reaches that layer computes it every batch, and the trainer reports it under its
name (``<name>`` or ``<function>_evaluator``) in ``metrics``. This module also registers the
core evaluators ``sum`` and ``auc``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from sculler.backend import to_numpy
from sculler.core.evaluator import Evaluator, register_evaluator
from sculler.core.model_config import EvaluatorConfig
from sculler.layer import LayerOutput

__all__ = ["classification_error", "sum", "auc"]


def _attach(type_name: str, fn: str, layers: list[Any], name: str | None,
            attrs: dict[str, Any]) -> EvaluatorConfig:
    for i, layer in enumerate(layers):
        if not isinstance(layer, LayerOutput):
            raise TypeError(f"{fn}: input {i} must be a layer (LayerOutput), got "
                            f"{type(layer).__name__}")
    config = EvaluatorConfig(name or f"{fn}_evaluator", type_name,
                             [layer.name for layer in layers], attrs)
    layers[0].evaluators.append(config)
    return config


def classification_error(input: LayerOutput, label: LayerOutput,  # noqa: A002
                         name: str | None = None, weight: Any = None, top_k: int | None = None,
                         threshold: float = 0.5) -> EvaluatorConfig:
    """Fraction of samples whose arg-max (or top-k) class misses the label:
    ``err = #{i : label_i not in topk(p_i)} / n``."""
    if weight is not None:
        raise NotImplementedError("classification_error(weight=...) is not supported")
    if top_k is not None and (not isinstance(top_k, int) or top_k < 1):
        raise ValueError(f"top_k must be a positive int, got {top_k!r}")
    return _attach("classification_error", "classification_error", [input, label], name,
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


@register_evaluator("sum")
class SumEvaluator(Evaluator):
    def eval_batch(self, layers: dict) -> None:
        out = layers[self.config.input_layers[0]].output
        v = to_numpy(out.value if out.value is not None else out.ids)
        self.total += float(v.sum(dtype=np.float64))
        self.count += v.shape[0]


@register_evaluator("auc")
class AucEvaluator(Evaluator):
    def start(self) -> None:
        super().start()
        self.scores: list[np.ndarray] = []
        self.labels: list[np.ndarray] = []

    def eval_batch(self, layers: dict) -> None:
        out = to_numpy(layers[self.config.input_layers[0]].output.value)
        lab = layers[self.config.input_layers[1]].output
        ids = to_numpy(lab.ids if lab.ids is not None else lab.value).reshape(-1)
        self.scores.append(out[:, -1].astype(np.float64))
        self.labels.append(ids > 0.5)

    def value(self) -> float:
        if not self.scores:
            return 0.0
        s, y = np.concatenate(self.scores), np.concatenate(self.labels)
        npos, nneg = int(y.sum()), int((~y).sum())
        if npos == 0 or nneg == 0:
            return 0.0
        order = np.argsort(s, kind="mergesort")
        ranks = np.empty(len(s))
        sorted_s = s[order]
        # average ranks over ties (1-based)
        _, first, counts = np.unique(sorted_s, return_index=True, return_counts=True)
        avg = first + (counts + 1) / 2.0
        ranks[order] = np.repeat(avg, counts)
        return float((ranks[y].sum() - npos * (npos + 1) / 2.0) / (npos * nneg))
from sculler.v2.evaluators import *  # noqa: E402,F401,F403
