"""v2 evaluator functions (``paddle.v2.evaluator``) for the evaluators of
:mod:`sculler.core.metrics`: ``precision_recall``, ``pnpair``, ``chunk``, ``column_sum``,
``value_printer`` and ``ctc_error``. Each attaches an EvaluatorConfig to its first input
layer; the trainer reports it under ``name`` (default ``<function>_evaluator``).
``sculler.evaluator`` re-exports them.

Example:
    >>> import sculler as paddle
    >>> p = paddle.layer.data(name="p", type=paddle.data_type.dense_vector(3))
    >>> y = paddle.layer.data(name="y", type=paddle.data_type.integer_value(3))
    >>> paddle.evaluator.precision_recall(input=p, label=y).name
    'precision_recall_evaluator'
"""

from __future__ import annotations

from typing import Any

from sculler.core.detection_map import AP_TYPES
from sculler.core.expression import LayerOutput
from sculler.core.metrics import CHUNK_SCHEMES  # importing registers the core evaluators
from sculler.core.model_config import EvaluatorConfig
from sculler.validate import integer, number

__all__ = ["precision_recall", "pnpair", "chunk", "column_sum", "value_printer", "ctc_error",
           "gradient_printer", "maxid_printer", "maxframe_printer", "seqtext_printer",
           "classification_error_printer",
           "detection_map"]


def attach(type_name: str, fn: str, layers: list[Any], name: str | None,
           attrs: dict[str, Any]) -> EvaluatorConfig:
    """Attach an evaluator config of ``type_name`` to ``layers[0]`` (checked: layers)."""
    for i, layer in enumerate(layers):
        if not isinstance(layer, LayerOutput):
            raise TypeError(f"{fn}: input {i} must be a layer (LayerOutput), got "
                            f"{type(layer).__name__}")
    config = EvaluatorConfig(name or f"{fn}_evaluator", type_name,
                             [layer.name for layer in layers], attrs)
    layers[0].evaluators.append(config)
    return config


def layer_list(input: Any) -> list[Any]:  # noqa: A002
    """One layer or a list of them, as a list."""
    return list(input) if isinstance(input, (list, tuple)) else [input]


def _with_weight(layers: list[Any], weight: Any) -> list[Any]:
    return layers + ([weight] if weight is not None else [])


def precision_recall(input: LayerOutput, label: LayerOutput,  # noqa: A002
                     positive_label: int | None = None, weight: LayerOutput | None = None,
                     name: str | None = None) -> EvaluatorConfig:
    """Precision, recall and F1 of arg-max predictions (or ``p >= 0.5`` against a sparse
    multi-hot label): ``P = TP/(TP+FP)``, ``R = TP/(TP+FN)``, ``F1 = 2PR/(P+R)``. The reported
    value is ``positive_label``'s F1, or the macro-average F1 over classes."""
    if positive_label is not None and (isinstance(positive_label, bool)
                                       or not isinstance(positive_label, int)
                                       or positive_label < 0):
        raise ValueError(f"precision_recall: positive_label must be a class id >= 0, got "
                         f"{positive_label!r}")
    return attach("precision_recall", "precision_recall", _with_weight([input, label], weight),
                   name, {"positive_label": -1 if positive_label is None else positive_label})


def pnpair(input: LayerOutput, label: LayerOutput, query_id: LayerOutput,  # noqa: A002
           weight: LayerOutput | None = None, name: str | None = None) -> EvaluatorConfig:
    """Ratio of correctly to wrongly ordered pairs within each query (``query_id`` holds the
    query ids), scoring by the last column of ``input``: ``pos / neg``."""
    return attach("pnpair", "pnpair", _with_weight([input, label, query_id], weight), name, {})


def chunk(input: LayerOutput, label: LayerOutput, chunk_scheme: str,  # noqa: A002
          num_chunk_types: int, name: str | None = None,
          excluded_chunk_types: list[int] | None = None) -> EvaluatorConfig:
    """Chunk-level F1 of predicted tag sequences (``input``: ids, e.g. crf_decoding) against
    ``label``, with ``tag = chunk_type * tag_types + tag_type`` under ``chunk_scheme``
    (IOB, IOE, IOBES or plain) and ``num_chunk_types * tag_types`` as the outside tag."""
    if chunk_scheme not in CHUNK_SCHEMES:
        raise ValueError(f"chunk: chunk_scheme must be one of {sorted(CHUNK_SCHEMES)}, got "
                         f"{chunk_scheme!r}")
    if isinstance(num_chunk_types, bool) or not isinstance(num_chunk_types, int) or (
            num_chunk_types < 1):
        raise ValueError(f"chunk: num_chunk_types must be a positive int, got "
                         f"{num_chunk_types!r}")
    return attach("chunk", "chunk", [input, label], name,
                   {"chunk_scheme": chunk_scheme, "num_chunk_types": num_chunk_types,
                    "excluded_chunk_types": [int(t) for t in excluded_chunk_types or []]})


def ctc_error(input: LayerOutput, label: LayerOutput,  # noqa: A002
              name: str | None = None) -> EvaluatorConfig:
    """CTC edit distance: greedy-decode each output sequence (arg-max per frame, repeats
    merged, blank = the last class dropped) and average
    ``levenshtein(label, decoded) / max(|label|, |decoded|)`` over sequences; also reports
    ``.deletion_error``, ``.insertion_error``, ``.substitution_error``, ``.sequence_error``."""
    return attach("ctc_edit_distance", "ctc_error", [input, label], name, {})


def column_sum(input: LayerOutput, name: str | None = None,  # noqa: A002
               weight: LayerOutput | None = None) -> EvaluatorConfig:
    """Weighted mean over samples of the last column of ``input``:
    ``sum_i w_i x_i[-1] / sum_i w_i``."""
    return attach("last-column-sum", "column_sum", _with_weight([input], weight), name,
                   {"column": -1})


def value_printer(input: Any, name: str | None = None) -> EvaluatorConfig:  # noqa: A002
    """Log the values of one layer or a list of layers every batch (logger
    ``sculler.evaluator``, level INFO); reports no number of its own."""
    return attach("value_printer", "value_printer", layer_list(input), name, {})


def gradient_printer(input: Any, name: str | None = None) -> EvaluatorConfig:  # noqa: A002
    """Log the output gradient of one layer or a list every training batch."""
    return attach("gradient_printer", "gradient_printer", layer_list(input), name, {})


def _num_results(num_results: Any, fn: str) -> int:
    return 1 if num_results is None else integer(num_results, f"{fn}: num_results", minimum=1)


def maxid_printer(input: Any, num_results: int | None = None,  # noqa: A002
                  name: str | None = None) -> EvaluatorConfig:
    """Log the ``num_results`` largest entries (id and value) of every row."""
    return attach("max_id_printer", "maxid_printer", layer_list(input), name,
                  {"num_results": _num_results(num_results, "maxid_printer")})


def maxframe_printer(input: Any, num_results: int | None = None,  # noqa: A002
                     name: str | None = None) -> EvaluatorConfig:
    """Log the ``num_results`` highest frames of each sequence of a width-1 layer."""
    return attach("max_frame_printer", "maxframe_printer", layer_list(input), name,
                  {"num_results": _num_results(num_results, "maxframe_printer")})


def seqtext_printer(input: Any, result_file: str, id_input: Any = None,  # noqa: A002
                    dict_file: str | None = None, delimited: bool | None = None,
                    name: str | None = None) -> EvaluatorConfig:
    """Write each sequence of ids of ``input`` to ``result_file`` as a line of tokens
    (words of ``dict_file`` if given), prefixed by the sample id from ``id_input``."""
    if not isinstance(result_file, str) or not result_file:
        raise ValueError(f"seqtext_printer: result_file must be a file name, got "
                         f"{result_file!r}")
    layers = ([id_input] if id_input is not None else []) + layer_list(input)
    return attach("seq_text_printer", "seqtext_printer", layers, name,
                  {"result_file": result_file, "dict_file": dict_file,
                   "delimited": True if delimited is None else bool(delimited)})


def detection_map(input: LayerOutput, label: LayerOutput,  # noqa: A002
                  overlap_threshold: float = 0.5, background_id: int = 0,
                  evaluate_difficult: bool = False, ap_type: str = "11point",
                  name: str | None = None) -> EvaluatorConfig:
    """Mean average precision (in percent) of ``detection_output``'s detections against
    ``label`` (a sequence per image of ``[label, xmin, ymin, xmax, ymax, difficult]``): a
    detection is a hit when it overlaps an untaken box of its class by more than
    ``overlap_threshold``; ``ap_type`` is ``"11point"`` (VOC2007) or ``"Integral"``."""
    if ap_type not in AP_TYPES:
        raise ValueError(f"detection_map: ap_type must be one of {AP_TYPES}, got {ap_type!r}")
    if not isinstance(evaluate_difficult, bool):
        raise TypeError(f"detection_map: evaluate_difficult must be True or False, got "
                        f"{evaluate_difficult!r}")
    threshold = number(overlap_threshold, "detection_map: overlap_threshold", 0.0, 1.0)
    return attach("detection_map", "detection_map", [input, label, label], name,
                  {"overlap_threshold": threshold,
                   "background_id": integer(background_id, "detection_map: background_id",
                                            minimum=0),
                   "evaluate_difficult": evaluate_difficult, "ap_type": ap_type})


def classification_error_printer(input: LayerOutput, label: LayerOutput,  # noqa: A002
                                 threshold: float = 0.5,
                                 name: str | None = None) -> EvaluatorConfig:
    """Log each sample's classification error (1 missed, 0 right) every batch."""
    return attach("classification_error_printer", "classification_error_printer",
                  [input, label], name, {"threshold": float(threshold)})
