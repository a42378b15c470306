"""Evaluators: metrics accumulated over the batches of a pass (``classification_error``, ...).

An evaluator reads layer outputs after ``Network.forward``; ``start()`` resets it,
``eval_batch(layers)`` adds one batch, ``value()`` returns the metric so far. The base class
and the registry live in :mod:`sculler.core.evaluator_base`; this module imports every
evaluator family (:mod:`sculler.core.metrics`), so ``create_evaluator`` knows all types.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from sculler.backend import get_array_module, is_gpu_array, to_device_of, to_numpy
from sculler.core import (  # noqa: F401 - register the other evaluator types
    detection_map,
    metrics,
    printers,
)
from sculler.core.evaluator_base import _EVALUATORS, Evaluator, register_evaluator
from sculler.core.metrics import device_weights, sample_weights
from sculler.core.model_config import EvaluatorConfig
from sculler.core.suggest import close_matches
from sculler.math import cuda

__all__ = ["Evaluator", "create_evaluator", "metrics_of", "register_evaluator"]

def create_evaluator(config: EvaluatorConfig) -> Evaluator:
    cls = _EVALUATORS.get(config.type)
    if cls is None:
        close = close_matches(config.type, _EVALUATORS)
        raise ValueError(f"unknown evaluator type {config.type!r}; close matches: {close}")
    return cls(config)


def metrics_of(evaluators: list[Evaluator]) -> dict[str, float]:
    """The metrics dict of events and test results: ``name -> value()`` plus
    ``name.statistic`` for evaluators with several (``values()``); evaluators that only
    print (``reports_value = False``) are left out."""
    out: dict[str, float] = {}
    for ev in evaluators:
        if not ev.reports_value:
            continue
        out[ev.name] = ev.value()
        out.update({f"{ev.name}.{k}": v for k, v in ev.values().items()})
    return out


@register_evaluator("classification_error")
class ClassificationError(Evaluator):
    """Fraction of samples whose arg-max (top_k) prediction misses the label; a one-column
    output is read as a probability with ``threshold`` (default 0.5). With a third input (a
    ``(n, 1)`` weight column), PaddlePaddle's weighted error:
    ``err = sum_i w_i [label_i not in topk(p_i)] / sum_i w_i``."""

    additive = True

    def missed(self, layers: dict):
        """Per sample, whether the prediction misses the label (``(n,)`` bools) and the
        predictions ``(n, C)``."""
        out = layers[self.config.input_layers[0]].output
        label = layers[self.config.input_layers[1]].output
        probs = out.value if type(out.value) is np.ndarray else to_numpy(out.value)
        ids = label.ids if label.ids is not None else label.value
        ids = (ids if type(ids) is np.ndarray else to_numpy(ids)).reshape(-1)
        top_k = int(self.config.attrs.get("top_k", 1))
        if probs.shape[1] == 1:
            return (probs[:, 0] > self.config.attrs.get("threshold", 0.5)) != (ids > 0.5), probs
        if top_k == 1:
            return probs.argmax(axis=1) != ids, probs
        top = np.argpartition(-probs, top_k - 1, axis=1)[:, :top_k]
        return ~(top == ids[:, None]).any(axis=1), probs

    def device_sums(self, layers: dict) -> tuple[Any, Any] | None:
        """On the GPU the top-1 (or one-column threshold) error is counted there, weighted or
        not: its sum, and the weights' sum, come back instead of the predictions and the
        labels. (``top_k`` > 1 is counted on the host.)"""
        value = layers[self.config.input_layers[0]].output.value
        label = layers[self.config.input_layers[1]].output
        ids = label.ids if label.ids is not None else label.value
        if not is_gpu_array(value) or ids is None or (
                value.shape[1] > 1 and int(self.config.attrs.get("top_k", 1)) != 1):
            return None
        xp = get_array_module(value)
        ids = to_device_of(ids, value).reshape(-1)
        if ids.shape[0] != value.shape[0]:
            return None  # eval_batch reports the mismatch
        weighted = len(self.config.input_layers) > 2
        weight = device_weights(self, layers, 2, value) if weighted else None
        if weighted and weight is None:
            return None
        threshold = float(self.config.attrs.get("threshold", 0.5))
        sums = xp.empty(2, dtype=np.float64)
        if cuda.classification_misses(value, ids, weight, threshold, sums):
            return (sums, None) if weighted else (sums[0], value.shape[0])
        if value.shape[1] == 1:
            missed = (value[:, 0] > threshold) != (ids > 0.5)
        else:
            missed = value.argmax(axis=1) != ids
        if not weighted:
            return missed.sum(dtype=np.float64), value.shape[0]
        return xp.stack([(weight * missed).sum(), weight.sum()]), None

    def add_sums(self, sums: np.ndarray, extra: Any) -> None:
        """Unweighted: ``sums`` the misses, ``extra`` the samples; weighted (``extra`` None):
        the weighted misses and the weights' sum."""
        if extra is None:
            self.total += float(sums[0])
            self.count += float(sums[1])
        else:
            super().add_sums(sums, extra)

    def eval_batch(self, layers: dict) -> None:
        sums = self.device_sums(layers)
        if sums is not None:
            self.add_sums(to_numpy(sums[0]), sums[1])
            return
        missed, probs = self.missed(layers)
        if len(self.config.input_layers) > 2:
            weight = sample_weights(self, layers, 2, probs.shape[0])
            self.total += float(weight[missed].sum())
            self.count += float(weight.sum())
        else:
            self.total += float(np.count_nonzero(missed))
            self.count += probs.shape[0]


@register_evaluator("classification_error_printer")
class ClassificationErrorPrinter(ClassificationError):
    """Logs each sample's classification error (1 missed, 0 right) and, for sequences, the
    start offsets, in PaddlePaddle's format (``Printer=<name> Classification Error:``); it
    reports no metric."""

    reports_value = False
    additive = False

    def eval_batch(self, layers: dict) -> None:
        import logging  # (loaded when a printer first prints, not with sculler)

        log = logging.getLogger("sculler.evaluator")
        missed, _ = self.missed(layers)
        log.info("Printer=%s Classification Error:\n%s", self.name,
                 np.array2string(missed.astype(np.float32)[:, None]))
        starts = layers[self.config.input_layers[0]].output.seq_starts
        if starts is not None:
            log.info("Printer=%s sequence pos vector:\n%s", self.name,
                     np.array2string(to_numpy(starts)))

    def value(self) -> float:
        return 0.0
