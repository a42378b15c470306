"""v1 evaluator helpers (``trainer_config_helpers.evaluators``): the v2 evaluators of
:mod:`sculler.evaluator` under PaddlePaddle's v1 names, signatures and default names
(``__auc_evaluator_0__``: v1 names every evaluator from its function's name).

An evaluator attaches to its input layer; the config collects it when the model is built.
"""

from __future__ import annotations

from typing import Any

from sculler import evaluator as _ev
from sculler.core.evaluator_base import _EVALUATORS
from sculler.core.expression import LayerOutput, auto_name
from sculler.core.model_config import EvaluatorConfig
from sculler.v2.evaluators import attach as _attach
from sculler.v2.evaluators import layer_list

__all__ = ["classification_error_evaluator", "auc_evaluator", "pnpair_evaluator",
           "precision_recall_evaluator", "ctc_error_evaluator", "chunk_evaluator",
           "sum_evaluator", "column_sum_evaluator", "value_printer_evaluator",
           "gradient_printer_evaluator", "maxid_printer_evaluator", "maxframe_printer_evaluator",
           "seqtext_printer_evaluator", "detection_map_evaluator",
           "classification_error_printer_evaluator", "evaluator_base"]


def _name(name: str | None, fn: str) -> str:
    return name if name is not None else auto_name(fn)


def classification_error_evaluator(input: LayerOutput, label: LayerOutput,  # noqa: A002
                                   name: str | None = None, weight: Any = None,
                                   top_k: int | None = None,
                                   threshold: float | None = None) -> EvaluatorConfig:
    """Classification error (see :func:`sculler.evaluator.classification_error`)."""
    return _ev.classification_error(
        input=input, label=label, name=_name(name, "classification_error_evaluator"),
        weight=weight, top_k=top_k, threshold=0.5 if threshold is None else threshold)


def auc_evaluator(input: LayerOutput, label: LayerOutput, name: str | None = None,  # noqa: A002
                  weight: Any = None) -> EvaluatorConfig:
    """Area under the ROC curve (see :func:`sculler.evaluator.auc`)."""
    return _ev.auc(input=input, label=label, name=_name(name, "auc_evaluator"), weight=weight)


def pnpair_evaluator(input: LayerOutput, label: LayerOutput, query_id: LayerOutput,  # noqa: A002
                     weight: Any = None, name: str | None = None) -> EvaluatorConfig:
    """Positive/negative pair ratio within queries (see :func:`sculler.evaluator.pnpair`)."""
    return _ev.pnpair(input=input, label=label, query_id=query_id, weight=weight,
                      name=_name(name, "pnpair_evaluator"))


def precision_recall_evaluator(input: LayerOutput, label: LayerOutput,  # noqa: A002
                               positive_label: int | None = None, weight: Any = None,
                               name: str | None = None) -> EvaluatorConfig:
    """Precision, recall and F1 (see :func:`sculler.evaluator.precision_recall`)."""
    return _ev.precision_recall(input=input, label=label, positive_label=positive_label,
                                weight=weight, name=_name(name, "precision_recall_evaluator"))


def ctc_error_evaluator(input: LayerOutput, label: LayerOutput,  # noqa: A002
                        name: str | None = None) -> EvaluatorConfig:
    """CTC edit distance (see :func:`sculler.evaluator.ctc_error`)."""
    return _ev.ctc_error(input=input, label=label, name=_name(name, "ctc_error_evaluator"))


def chunk_evaluator(input: LayerOutput, label: LayerOutput, chunk_scheme: str,  # noqa: A002
                    num_chunk_types: int, name: str | None = None,
                    excluded_chunk_types: list[int] | None = None) -> EvaluatorConfig:
    """Chunk F1 of tag sequences (see :func:`sculler.evaluator.chunk`)."""
    return _ev.chunk(input=input, label=label, chunk_scheme=chunk_scheme,
                     num_chunk_types=num_chunk_types, name=_name(name, "chunk_evaluator"),
                     excluded_chunk_types=excluded_chunk_types)


def sum_evaluator(input: LayerOutput, name: str | None = None,  # noqa: A002
                  weight: Any = None) -> EvaluatorConfig:
    """Mean per-sample sum (see :func:`sculler.evaluator.sum`)."""
    return _ev.sum(input=input, name=_name(name, "sum_evaluator"), weight=weight)


def column_sum_evaluator(input: LayerOutput, name: str | None = None,  # noqa: A002
                         weight: Any = None) -> EvaluatorConfig:
    """Weighted mean of the last column (see :func:`sculler.evaluator.column_sum`)."""
    return _ev.column_sum(input=input, name=_name(name, "column_sum_evaluator"), weight=weight)


def value_printer_evaluator(input: Any, name: str | None = None) -> EvaluatorConfig:  # noqa: A002
    """Log the layer's values every batch (see :func:`sculler.evaluator.value_printer`)."""
    return _ev.value_printer(input=input, name=_name(name, "value_printer_evaluator"))


def gradient_printer_evaluator(input: Any, name: str | None = None) -> EvaluatorConfig:  # noqa: A002
    """Log the layer's output gradient every training batch."""
    return _ev.gradient_printer(input=input, name=_name(name, "gradient_printer_evaluator"))


def maxid_printer_evaluator(input: Any, num_results: int | None = None,  # noqa: A002
                            name: str | None = None) -> EvaluatorConfig:
    """Log the largest entries of every row (see :func:`sculler.evaluator.maxid_printer`)."""
    return _ev.maxid_printer(input=input, num_results=num_results,
                             name=_name(name, "maxid_printer_evaluator"))


def maxframe_printer_evaluator(input: Any, num_results: int | None = None,  # noqa: A002
                               name: str | None = None) -> EvaluatorConfig:
    """Log each sequence's highest frames (see :func:`sculler.evaluator.maxframe_printer`)."""
    return _ev.maxframe_printer(input=input, num_results=num_results,
                                name=_name(name, "maxframe_printer_evaluator"))


def seqtext_printer_evaluator(input: Any, result_file: str, id_input: Any = None,  # noqa: A002
                              dict_file: str | None = None, delimited: bool | None = None,
                              name: str | None = None) -> EvaluatorConfig:
    """Write sequences of ids as text (see :func:`sculler.evaluator.seqtext_printer`)."""
    return _ev.seqtext_printer(input=input, result_file=result_file, id_input=id_input,
                               dict_file=dict_file, delimited=delimited,
                               name=_name(name, "seqtext_printer_evaluator"))


def detection_map_evaluator(input: LayerOutput, label: LayerOutput,  # noqa: A002
                            overlap_threshold: float = 0.5, background_id: int = 0,
                            evaluate_difficult: bool = False, ap_type: str = "11point",
                            name: str | None = None) -> EvaluatorConfig:
    """Detection mAP in percent (see :func:`sculler.evaluator.detection_map`)."""
    return _ev.detection_map(input=input, label=label, overlap_threshold=overlap_threshold,
                             background_id=background_id, evaluate_difficult=evaluate_difficult,
                             ap_type=ap_type, name=_name(name, "detection_map_evaluator"))


def classification_error_printer_evaluator(input: Any, label: Any,  # noqa: A002
                                           threshold: float = 0.5,
                                           name: str | None = None) -> EvaluatorConfig:
    """Log each sample's classification error every batch (see
    :func:`sculler.evaluator.classification_error_printer`)."""
    return _ev.classification_error_printer(
        input=input, label=label, threshold=threshold,
        name=_name(name, "classification_error_printer_evaluator"))


# PaddlePaddle's evaluator type names -> Sculler's, and its config keys -> the attrs they
# become (keys not listed keep their name)
PADDLE_EVALUATOR_TYPES = {"last-column-auc": "auc"}
PADDLE_EVALUATOR_KEYS = {"classification_threshold": "threshold"}


def evaluator_base(input: Any, type: str, label: Any = None, weight: Any = None,  # noqa: A002
                   name: str | None = None, chunk_scheme: str | None = None,
                   num_chunk_types: int | None = None,
                   classification_threshold: float | None = None,
                   positive_label: int | None = None, dict_file: str | None = None,
                   result_file: str | None = None, num_results: int | None = None,
                   delimited: bool | None = None, top_k: int | None = None,
                   excluded_chunk_types: list | None = None,
                   overlap_threshold: float | None = None, background_id: int | None = None,
                   evaluate_difficult: bool | None = None,
                   ap_type: str | None = None) -> EvaluatorConfig:
    """PaddlePaddle's generic evaluator: an evaluator of engine ``type`` over ``input`` (a
    layer or a list), then ``label`` and ``weight`` if given, with ``settings``
    (PaddlePaddle's EvaluatorConfig fields; None values are left out). No default name, as in
    PaddlePaddle."""
    settings = {"chunk_scheme": chunk_scheme, "num_chunk_types": num_chunk_types,
                "classification_threshold": classification_threshold,
                "positive_label": positive_label, "dict_file": dict_file,
                "result_file": result_file, "num_results": num_results, "delimited": delimited,
                "top_k": top_k, "excluded_chunk_types": excluded_chunk_types,
                "overlap_threshold": overlap_threshold, "background_id": background_id,
                "evaluate_difficult": evaluate_difficult, "ap_type": ap_type}
    engine_type = PADDLE_EVALUATOR_TYPES.get(type, type)
    if engine_type not in _EVALUATORS:
        raise ValueError(f"evaluator_base: unknown evaluator type {type!r}; known: "
                         f"{sorted(_EVALUATORS)}")
    if name is None:
        raise ValueError("evaluator_base: name is required (PaddlePaddle gives it no default)")
    layers = layer_list(input) + [x for x in (label, weight) if x is not None]
    attrs = {PADDLE_EVALUATOR_KEYS.get(k, k): v for k, v in settings.items() if v is not None}
    return _attach(engine_type, "evaluator_base", layers, name, attrs)
