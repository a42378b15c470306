"""Sequence layers of the v2 API: ``pooling``, ``last_seq``, ``first_seq``, ``expand``,
``seq_concat``, ``seq_reshape``, ``sub_seq``, ``seq_slice``, ``sub_nested_seq``,
``kmax_seq_score``, with PaddlePaddle's signatures and automatic names; re-exported by
:mod:`sculler.layer`. The engine layers live in ``sculler/layers/sequence*.py``.

Example:
    >>> import sculler as paddle
    >>> words = paddle.layer.data(name="w", type=paddle.data_type.dense_vector_sequence(8))
    >>> paddle.layer.pooling(input=words, pooling_type=paddle.pooling.Avg()).size
    8
"""

from __future__ import annotations

from typing import Any

import sculler.layers.sequence  # noqa: F401 - registers seqlastins, max, average
import sculler.layers.sequence_select  # noqa: F401 - registers subseq, seq_slice, ...
import sculler.layers.sequence_shape  # noqa: F401 - registers expand, seqconcat, seqreshape
from sculler import pooling as P
from sculler.v2.layer_base import LayerOutput, as_inputs, make_layer

__all__ = ["AggregateLevel", "ExpandLevel", "pooling", "last_seq", "first_seq", "expand",
           "seq_concat", "seq_reshape", "sub_seq", "seq_slice", "sub_nested_seq",
           "kmax_seq_score"]


class AggregateLevel:
    """What a sequence aggregation reduces: every sequence to one row (``TO_NO_SEQUENCE``)
    or every sub-sequence of a nested input to one row (``TO_SEQUENCE``)."""

    TO_NO_SEQUENCE = "non-seq"
    TO_SEQUENCE = "seq"
    EACH_TIMESTEP = TO_NO_SEQUENCE
    EACH_SEQUENCE = TO_SEQUENCE


class ExpandLevel:
    """What ``expand`` repeats: one row per sequence (``FROM_NO_SEQUENCE``) or one row per
    sub-sequence (``FROM_SEQUENCE``)."""

    FROM_NO_SEQUENCE = "non-seq"
    FROM_SEQUENCE = "seq"
    FROM_TIMESTEP = FROM_NO_SEQUENCE


def _level(value: Any, allowed: tuple[str, ...], fn: str, what: str) -> str:
    if value not in allowed:
        raise ValueError(f"{fn}: {what} must be one of {allowed} (AggregateLevel/ExpandLevel "
                         f"constants), got {value!r}")
    return value


def _agg_attrs(agg_level: Any, stride: int, fn: str) -> dict:
    level = _level(agg_level, ("non-seq", "seq"), fn, "agg_level")
    stride = int(stride)
    if stride != -1 and stride <= 0:
        raise ValueError(f"{fn}: stride must be -1 (off) or positive, got {stride}")
    if stride > 0 and level == "seq":
        raise ValueError(f"{fn}: stride={stride} needs agg_level=AggregateLevel.TO_NO_SEQUENCE")
    return {"trans_type": level, "seq_pool_stride": stride}


def pooling(input: LayerOutput, pooling_type: Any = None, name: str | None = None,  # noqa: A002
            bias_attr: Any = None, agg_level: str = AggregateLevel.TO_NO_SEQUENCE,
            stride: int = -1, layer_attr: Any = None) -> LayerOutput:
    """Pool each sequence (or sub-sequence, or stride window) to one row: ``Max`` (default),
    ``Avg`` (sum/L), ``Sum`` or ``SquareRootN`` (sum/sqrt(L)); then an optional bias
    (``bias_attr``, off by default). Engine type ``max`` or ``average``."""
    if pooling_type is None:
        pooling_type = P.Max()
    if not isinstance(pooling_type, P.BasePool):
        raise TypeError(f"pooling: pooling_type must be a paddle.pooling type such as "
                        f"paddle.pooling.Max(), got {pooling_type!r}")
    attrs = _agg_attrs(agg_level, stride, "pooling")
    if pooling_type.name == "max":
        layer_type = "max"
        if getattr(pooling_type, "output_max_index", None):
            attrs["output_max_index"] = True
    else:
        layer_type = "average"
        attrs["average_strategy"] = pooling_type.name
    return make_layer(layer_type, as_inputs(input, "pooling"), name=name,
                      name_prefix="pooling_layer", bias_attr=bias_attr or False,
                      layer_attr=layer_attr, attrs=attrs)


def _instance(input: Any, name: Any, agg_level: Any, stride: int, layer_attr: Any,  # noqa: A002
              first: bool) -> LayerOutput:
    fn = "first_seq" if first else "last_seq"
    attrs = _agg_attrs(agg_level, stride, fn)
    attrs["select_first"] = first
    return make_layer("seqlastins", as_inputs(input, fn), name=name, name_prefix=fn,
                      bias_attr=False, layer_attr=layer_attr, attrs=attrs)


def last_seq(input: LayerOutput, name: str | None = None,  # noqa: A002
             agg_level: str = AggregateLevel.TO_NO_SEQUENCE, stride: int = -1,
             layer_attr: Any = None) -> LayerOutput:
    """The last row of each sequence (or sub-sequence, or stride window, the windows starting
    at the front)."""
    return _instance(input, name, agg_level, stride, layer_attr, first=False)


def first_seq(input: LayerOutput, name: str | None = None,  # noqa: A002
              agg_level: str = AggregateLevel.TO_NO_SEQUENCE, stride: int = -1,
              layer_attr: Any = None) -> LayerOutput:
    """The first row of each sequence (or sub-sequence, or stride window, the windows aligned
    to the end)."""
    return _instance(input, name, agg_level, stride, layer_attr, first=True)


def expand(input: LayerOutput, expand_as: LayerOutput, name: str | None = None,  # noqa: A002
           bias_attr: Any = False, expand_level: str = ExpandLevel.FROM_NO_SEQUENCE,
           layer_attr: Any = None) -> LayerOutput:
    """Repeat each row of ``input`` over the matching sequence (``FROM_NO_SEQUENCE``) or
    sub-sequence (``FROM_SEQUENCE``) of ``expand_as``; the output has ``expand_as``'s
    positions. No activation."""
    level = _level(expand_level, ("non-seq", "seq"), "expand", "expand_level")
    return make_layer("expand", as_inputs([input, expand_as], "expand"), name=name,
                      name_prefix="expand_layer", bias_attr=bias_attr, layer_attr=layer_attr,
                      attrs={"trans_type": level})


def seq_concat(a: LayerOutput, b: LayerOutput, act: Any = None, name: str | None = None,
               layer_attr: Any = None, bias_attr: Any = None) -> LayerOutput:
    """Per sample, the rows of ``a`` followed by the rows of ``b`` (one width); default act
    Identity, no bias."""
    return make_layer("seqconcat", as_inputs([a, b], "seq_concat"), name=name,
                      name_prefix="seqconcat", act=act, bias_attr=bias_attr or False,
                      layer_attr=layer_attr)


def seq_reshape(input: LayerOutput, reshape_size: int, act: Any = None,  # noqa: A002
                name: str | None = None, layer_attr: Any = None,
                bias_attr: Any = None) -> LayerOutput:
    """Each sequence's data re-read as rows of width ``reshape_size`` (L*M/reshape_size rows);
    default act Identity, no bias."""
    if int(reshape_size) <= 0:
        raise ValueError(f"seq_reshape: reshape_size must be positive, got {reshape_size}")
    return make_layer("seqreshape", as_inputs(input, "seq_reshape"), name=name,
                      name_prefix="seqreshape", size=int(reshape_size), act=act,
                      bias_attr=bias_attr or False, layer_attr=layer_attr)


def sub_seq(input: LayerOutput, offsets: LayerOutput, sizes: LayerOutput,  # noqa: A002
            act: Any = None, bias_attr: Any = None, name: str | None = None) -> LayerOutput:
    """Rows ``[offset_n, offset_n + size_n)`` of each sequence n; ``offsets`` and ``sizes``
    hold one integer per sequence (``integer_value`` data or ids). Default act Linear, no
    bias unless ``bias_attr`` asks."""
    return make_layer("subseq", as_inputs([input, offsets, sizes], "sub_seq"), name=name,
                      name_prefix="sub_seq", act=act, bias_attr=bias_attr or False)


def seq_slice(input: LayerOutput, starts: LayerOutput | None,  # noqa: A002
              ends: LayerOutput | None, name: str | None = None) -> LayerOutput:
    """Inclusive slices ``[start, end]`` of each sequence (or sub-sequence of a nested
    input): ``starts``/``ends`` are dense (one row per (sub-)sequence, K columns, -1 ends a
    row); either may be None (start 0 / the last row). Each slice becomes a sequence (a
    sub-sequence of its sample for nested input)."""
    if starts is None and ends is None:
        raise ValueError("seq_slice: give starts, ends or both")
    extra = [m for m in (starts, ends) if m is not None]
    if len(extra) == 2 and starts.size != ends.size:
        raise ValueError(f"seq_slice: starts and ends must have one width, got {starts.size} "
                         f"and {ends.size}")
    return make_layer("seq_slice", as_inputs([input, *extra], "seq_slice"), name=name,
                      name_prefix="seq_slice", bias_attr=False,
                      attrs={"select_first": starts is not None})


def sub_nested_seq(input: LayerOutput, selected_indices: LayerOutput,  # noqa: A002
                   name: str | None = None) -> LayerOutput:
    """The sub-sequences of each sample listed in ``selected_indices`` (N x K, -1 ends a
    row), in that order: a nested sequence. Typically fed by ``kmax_seq_score``."""
    return make_layer("sub_nested_seq", as_inputs([input, selected_indices], "sub_nested_seq"),
                      name=name, name_prefix="sub_nested_seq", bias_attr=False)


def kmax_seq_score(input: LayerOutput, name: str | None = None,  # noqa: A002
                   beam_size: int = 1) -> LayerOutput:
    """Row indices (relative to each (sub-)sequence, best first, -1 padded) of the
    ``beam_size`` highest width-1 scores; width ``beam_size``, no gradient."""
    return make_layer("kmax_seq_score", as_inputs(input, "kmax_seq_score"), name=name,
                      bias_attr=False, attrs={"beam_size": int(beam_size)})
