"""v2 wrappers (``paddle.v2.layer``) of the structured costs: ``crf``, ``crf_decoding``,
``ctc`` and ``warp_ctc``.

Signatures follow PaddlePaddle v0.11; unnamed layers get its names (``__crf_layer_0__``,
``__crf_decoding_layer_0__``, ``__ctc_layer_0__``, ``__warp_ctc_layer_0__``). ``crf`` and
``crf_decoding`` share their (C + 2) x C parameter when given the same ``ParamAttr(name=...)``.

Example:
    >>> import sculler as paddle
    >>> x = paddle.layer.data(name="x", type=paddle.data_type.dense_vector_sequence(3))
    >>> y = paddle.layer.data(name="y", type=paddle.data_type.integer_value_sequence(3))
    >>> paddle.layer.crf(input=x, label=y).name
    '__crf_layer_0__'
"""

from __future__ import annotations

from typing import Any

from sculler.v2.layer_base import LayerOutput, as_inputs, make_layer

__all__ = ["crf", "crf_decoding", "ctc", "warp_ctc"]


def _check_size(fn: str, size: int | None, expected: int, what: str) -> int:
    if size is None:
        return expected
    if isinstance(size, bool) or not isinstance(size, int) or size != expected:
        raise ValueError(f"{fn}: size={size!r} must equal {what} ({expected})")
    return size


def crf(input: LayerOutput, label: LayerOutput, size: int | None = None,  # noqa: A002
        weight: LayerOutput | None = None, param_attr: Any = None, name: str | None = None,
        coeff: float = 1.0, layer_attr: Any = None) -> LayerOutput:
    """Linear-chain CRF negative log-likelihood, one cost per sequence:
    ``weight_n * (log Z_n - score_n(label))``; ``coeff`` scales only the gradient (as in
    PaddlePaddle). ``input``: emission scores of width C = ``size``; ``label``: an id sequence
    over C classes; ``weight``: optional per-sequence column. Parameter (C + 2) x C."""
    inputs = as_inputs([input, label] + ([weight] if weight is not None else []), "crf")
    if label.size != input.size:
        raise ValueError(f"crf: input width {input.size} must equal the label's number of "
                         f"classes {label.size}")
    _check_size("crf", size, input.size, "the input width")
    return make_layer("crf", inputs, name=name, name_prefix="crf_layer", param_attr=param_attr,
                      bias_attr=False, layer_attr=layer_attr, attrs={"coeff": float(coeff)})


def crf_decoding(input: LayerOutput, size: int, label: LayerOutput | None = None,  # noqa: A002
                 param_attr: Any = None, name: str | None = None,
                 layer_attr: Any = None) -> LayerOutput:
    """Viterbi decoding with the CRF parameter: the best tag ids of each sequence (``ids``);
    with ``label``, ``value`` is 1 per token where the decoded tag is wrong, else 0."""
    inputs = as_inputs([input] + ([label] if label is not None else []), "crf_decoding")
    _check_size("crf_decoding", size, input.size, "the input width")
    return make_layer("crf_decoding", inputs, name=name, name_prefix="crf_decoding_layer",
                      param_attr=param_attr, bias_attr=False, layer_attr=layer_attr)


def _ctc(layer_type: str, input: LayerOutput, label: LayerOutput,  # noqa: A002
         size: int | None, name: str | None, layer_attr: Any, **attrs: Any) -> LayerOutput:
    if not (layer_type == "warp_ctc" and size is not None and size == label.size):
        size = _check_size(layer_type, size, label.size + 1,
                           "the label's number of classes + 1")
    if input.size != size:
        raise ValueError(f"{layer_type}: input width {input.size} must equal size {size} "
                         "(number of labels + 1 for the blank)")
    return make_layer(layer_type, as_inputs([input, label], layer_type), name=name,
                      name_prefix=f"{layer_type}_layer", layer_attr=layer_attr,
                      attrs={"num_classes": size, **attrs})


def ctc(input: LayerOutput, label: LayerOutput, size: int | None = None,  # noqa: A002
        name: str | None = None, norm_by_times: bool = False,
        layer_attr: Any = None) -> LayerOutput:
    """CTC cost ``-log p(label | input)`` per sequence, on probabilities (a softmax output)
    of width ``size`` = label classes + 1; the blank is the LAST class. ``norm_by_times``
    divides the gradient by the sequence length."""
    return _ctc("ctc", input, label, size, name, layer_attr, norm_by_times=bool(norm_by_times))


def warp_ctc(input: LayerOutput, label: LayerOutput, size: int | None = None,  # noqa: A002
             name: str | None = None, blank: int = 0, norm_by_times: bool = False,
             layer_attr: Any = None) -> LayerOutput:
    """CTC cost on unnormalised activations (linear act; the softmax is inside) of width
    ``size`` = label classes + 1; the blank is class ``blank`` (default 0). As Sculler's data
    layers check id ranges, a label whose ids reach ``size - 1`` (any blank but the last) may
    be declared with ``size`` ids and an explicit ``size`` (a Sculler extension)."""
    if input.activation not in ("", "linear"):
        raise ValueError(f"warp_ctc: input {input.name!r} must have a linear activation (the "
                         f"softmax is inside warp_ctc), got {input.activation!r}")
    if isinstance(blank, bool) or not isinstance(blank, int):
        raise TypeError(f"warp_ctc: blank must be an int, got {blank!r}")
    width = label.size + 1 if size is None else size
    if not 0 <= blank < width:
        raise ValueError(f"warp_ctc: blank {blank} must lie in [0, {width})")
    return _ctc("warp_ctc", input, label, size, name, layer_attr, blank=blank,
                norm_by_times=bool(norm_by_times))
