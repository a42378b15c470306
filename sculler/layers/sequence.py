"""Sequence aggregation: ``seqlastins`` (last_seq / first_seq), ``max`` and ``average`` pooling.

Each layer reduces segments of its (packed) input sequence to one row:

- ``trans_type="non-seq"`` (``AggregateLevel.TO_NO_SEQUENCE``, default): one row per top-level
  sequence (a nested input is flattened); the output is not a sequence;
- ``trans_type="seq"`` (``TO_SEQUENCE``): the input must be nested; one row per sub-sequence, and
  the output is a sequence per sample (PaddlePaddle's degraded positions);
- ``seq_pool_stride=k > 0`` (plain sequences only): each sequence is cut into windows of ``k``
  rows and reduced per window; the output is a sequence of ``ceil(L / k)`` rows. Windows start
  at the front, except for first_seq, whose windows are aligned to the end.

The helpers here (:func:`sequence_origin`, :func:`require_sequences`, :func:`require_nonempty`)
are shared by the other sequence layer modules for their error messages.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from sculler import pooling as P
from sculler.backend import cached_like, get_array_module
from sculler.core.expression import (
    LayerOutput,
    as_inputs,
    make_layer,
)
from sculler.core.faces import layer_function
from sculler.core.layer import PASS_TEST, Layer, register_layer
from sculler.math import segment as S


def sequence_origin(layer: Layer, i: int, starts) -> str:
    """Who made the positions ``starts`` of input ``i``: ``data layer 'x'`` or ``layer 'y'``
    (following the inputs that pass the same positions through)."""
    src = layer.inputs[i]
    while True:
        nxt = next((p for p in src.inputs if p.output.seq_starts is starts
                    or p.output.sub_seq_starts is starts), None)
        if nxt is None:
            break
        src = nxt
    kind = "data layer" if src.type_name == "data" else "layer"
    return f"{kind} {src.name!r}"


def require_sequences(layer: Layer, i: int, nested: bool | None = None, what: str = ""):
    """The input's Argument; ValueError unless it is a sequence (``nested``: True = must be
    nested, False = must not be, None = either)."""
    arg = layer.get_input(i)
    who = f"layer {layer.name!r} ({layer.type_name}{what})"
    if arg.seq_starts is None:
        raise ValueError(f"{who}: input {i} ({layer.inputs[i].name!r}) must be a sequence, got "
                         f"{arg.describe()}")
    if nested and arg.sub_seq_starts is None:
        raise ValueError(f"{who}: input {i} ({layer.inputs[i].name!r}) must be a nested "
                         "sequence (a *_sub_sequence data type), got a plain sequence")
    if nested is False and arg.sub_seq_starts is not None:
        raise ValueError(f"{who}: input {i} ({layer.inputs[i].name!r}) must be a plain "
                         "sequence, got a nested sequence")
    return arg


def require_nonempty(layer: Layer, i: int, starts, why: str) -> None:
    """ValueError naming the data layer and sample when a segment of ``starts`` (the input's
    sequence or sub-sequence positions) is empty."""
    empty = np.flatnonzero(S.lengths(starts) == 0)
    if empty.size == 0:
        return
    arg, k = layer.get_input(i), int(empty[0])
    origin = sequence_origin(layer, i, starts)
    if starts is arg.sub_seq_starts:
        sample = int(np.searchsorted(arg.seq_starts, starts[k], side="right") - 1)
        sample = min(sample, arg.num_sequences - 1)
        where = f"sub-sequence {k} (in sample {sample})"
    else:
        where = f"sequence {k} (sample {k})"
    raise ValueError(f"layer {layer.name!r} ({layer.type_name}): {where} of input {i} "
                     f"({layer.inputs[i].name!r}, positions from {origin}) is empty; {why}")


class SequenceLayer(Layer):
    """Base of the sequence layers: the output layout is set explicitly, then bias and
    activation; backward hands each input's gradient buffer to :meth:`add_input_grad`."""

    def finish_forward(self, seq_starts, sub_seq_starts=None) -> None:
        self.output.seq_starts, self.output.sub_seq_starts = seq_starts, sub_seq_starts
        self.add_bias()
        self.forward_activation()

    def backward(self, callback=None) -> None:
        self.backward_activation_and_bias(callback)
        for i in range(len(self.inputs)):
            g = self.get_input_grad(i)
            if g is not None:
                self.add_input_grad(i, g, self.output.grad)

    def add_input_grad(self, i: int, g, dy) -> None:
        """``g += dL/dx_i`` given the output gradient ``dy`` (after the activation)."""
        raise NotImplementedError


class SequenceAggregate(SequenceLayer):
    """Base of the aggregating layers: works out the segments to reduce and the output
    layout from ``trans_type`` and ``seq_pool_stride``; subclasses reduce."""

    max_inputs = 1
    windows_from_end = False
    allows_empty = False

    @classmethod
    def infer_size(cls, config, inputs):
        level = config.attrs.get("trans_type", "non-seq")
        if level not in ("non-seq", "seq"):
            raise ValueError(f"layer {config.name!r} ({config.type}): trans_type (agg_level) "
                             f"must be 'non-seq' or 'seq', got {level!r}")
        if level == "seq" and int(config.attrs.get("seq_pool_stride", -1)) > 0:
            raise ValueError(f"layer {config.name!r} ({config.type}): stride needs "
                             "agg_level=TO_NO_SEQUENCE (a stride is for plain sequences)")
        return inputs[0].size

    def segments(self) -> tuple[np.ndarray, np.ndarray | None]:
        """``(segments to reduce, output seq_starts or None)`` for this batch."""
        level = self.attr("trans_type", "non-seq")
        stride = int(self.attr("seq_pool_stride", -1))
        arg = require_sequences(self, 0, nested=True if level == "seq" else None,
                                what=f", agg_level={level!r}")
        if level == "seq":
            segs, out = arg.sub_seq_starts, S.degrade(arg.seq_starts, arg.sub_seq_starts)
            self._check_empty(segs)
            ambiguous = np.isin(segs[:-1], arg.seq_starts[1:-1]) & (S.lengths(segs) == 0)
            if ambiguous.any():
                k = int(np.flatnonzero(ambiguous)[0])
                raise ValueError(
                    f"layer {self.name!r} ({self.type_name}): sub-sequence {k} of input 0 "
                    f"({self.inputs[0].name!r}, positions from "
                    f"{sequence_origin(self, 0, segs)}) is empty and lies on the boundary "
                    "between two samples, so agg_level=TO_SEQUENCE cannot tell which sample "
                    "it belongs to; drop empty sub-sequences at the ends of samples")
            return segs, out
        if stride > 0:
            if arg.sub_seq_starts is not None:
                raise ValueError(f"layer {self.name!r} ({self.type_name}): stride={stride} needs "
                                 f"a plain sequence; input 0 ({self.inputs[0].name!r}) is nested")
            self._check_empty(arg.seq_starts)
            return S.window_starts(arg.seq_starts, stride, self.windows_from_end)
        self._check_empty(arg.seq_starts)
        return arg.seq_starts, None

    def _check_empty(self, starts) -> None:
        if not self.allows_empty:
            require_nonempty(self, 0, starts, f"{self.type_name} needs at least one row")



@register_layer("seqlastins")
class SequenceLastInstanceLayer(SequenceAggregate):
    """The last row of each segment (``y_i = x[end_i - 1]``), or the first with
    ``select_first`` (first_seq); then bias and activation. Shapes: (T, D) -> (segments, D).

    An empty segment is a ValueError naming the data layer and sample (PaddlePaddle would read
    a neighbouring sequence's row)."""

    def init(self, layer_map, parameter_map) -> None:
        super().init(layer_map, parameter_map)
        self.windows_from_end = bool(self.attr("select_first", False))

    def forward(self, pass_type: str) -> None:
        super().forward(pass_type)
        segs, out_seq = self.segments()
        x = self.get_input_value(0)
        self._rows = cached_like(segs[:-1] if self.windows_from_end else segs[1:] - 1, x)
        out = self.reserve_output(len(self._rows), self.size)
        S.gather_rows(x, self._rows, out)
        self.finish_forward(out_seq)

    def add_input_grad(self, i, g, dy) -> None:
        S.add_to_rows(g, self._rows, dy)


@register_layer("seqfirstins")
class SequenceFirstInstanceLayer(SequenceLastInstanceLayer):
    """PaddlePaddle's config-level ``seqfirstins``: ``seqlastins`` with ``select_first``."""

    def init(self, layer_map, parameter_map) -> None:
        super().init(layer_map, parameter_map)
        self.windows_from_end = bool(self.attr("select_first", True))


@register_layer("max")
class MaxPoolingLayer(SequenceAggregate):
    """Per-dimension maximum over each segment: ``y_ij = max_t x_tj`` (gradient to the first
    arg-max row). With ``output_max_index`` the output is the absolute batch row of each
    maximum, as a float, and there is no backward. Shapes: (T, D) -> (segments, D). An empty
    segment is a ValueError naming the data layer and sample (PaddlePaddle would seed the
    maximum with the next sequence's first row)."""

    def forward(self, pass_type: str) -> None:
        super().forward(pass_type)
        segs, out_seq = self.segments()
        out = self.reserve_output(len(segs) - 1, self.size)
        x = self.get_input_value(0)
        train = pass_type != PASS_TEST or self.attr("output_max_index", False)
        self._argmax = S.segment_max(x, segs, out, self.scratch("rep", x.shape),
                                     self.scratch("hit", x.shape, np.int32), argmax=train)
        if self.attr("output_max_index", False):
            out[...] = self._argmax
        self.finish_forward(out_seq)

    def backward(self, callback=None) -> None:
        if self.attr("output_max_index", False):
            raise ValueError(f"layer {self.name!r} (max): output_max_index=True outputs row "
                             "indices and has no gradient; do not train through it")
        super().backward(callback)

    def add_input_grad(self, i, g, dy) -> None:
        g[self._argmax, get_array_module(g).arange(self.size)[None, :]] += dy


@register_layer("average")
class AveragePoolingLayer(SequenceAggregate):
    """``y_i = s_i * sum of segment i`` with ``s_i`` = 1/L (``average_strategy='average'``),
    1 (``'sum'``) or 1/sqrt(L) (``'squarerootn'``). An empty segment gives a zero row (then
    bias and activation), as in PaddlePaddle. Shapes: (T, D) -> (segments, D)."""

    allows_empty = True
    STRATEGIES = ("average", "sum", "squarerootn")

    @classmethod
    def infer_size(cls, config, inputs):
        strategy = config.attrs.get("average_strategy", "average")
        if strategy not in cls.STRATEGIES:
            raise ValueError(f"layer {config.name!r} (average): average_strategy must be one of "
                             f"{cls.STRATEGIES}, got {strategy!r}")
        return super().infer_size(config, inputs)

    def _scales(self, lens, dtype):
        strategy = self.attr("average_strategy", "average")
        safe = np.maximum(lens, 1).astype(dtype)
        if strategy == "sum":
            return np.ones_like(safe)
        return 1.0 / (safe if strategy == "average" else np.sqrt(safe))

    def forward(self, pass_type: str) -> None:
        super().forward(pass_type)
        segs, out_seq = self.segments()
        out = self.reserve_output(len(segs) - 1, self.size)
        S.segment_sum(self.get_input_value(0), segs, out)
        self._segs = segs
        self._scale = None  # 'sum': 1 for every segment
        if self.attr("average_strategy", "average") != "sum":
            self._scale = cached_like(self._scales(S.lengths(segs), out.dtype), out)
            out *= self._scale[:, None]
        self.finish_forward(out_seq)

    def add_input_grad(self, i, g, dy) -> None:
        rows = cached_like(S.segment_of_rows(self._segs), g)
        S.add_segment_rows(g, dy, rows, self._scale, self.scratch("dx", g.shape))


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


def level_arg(value: Any, allowed: tuple[str, ...], fn: str, what: str) -> str:
    if value not in allowed:
        raise ValueError(f"{fn}: {what} must be one of {allowed} (AggregateLevel/ExpandLevel "
                         f"constants), got {value!r}")
    return value


def aggregate_attrs(agg_level: Any, stride: int, fn: str) -> dict:
    level = level_arg(agg_level, ("non-seq", "seq"), fn, "agg_level")
    stride = int(stride)
    if stride != -1 and stride <= 0:
        raise ValueError(f"{fn}: stride must be -1 (off) or positive, got {stride}")
    if stride > 0 and level == "seq":
        raise ValueError(f"{fn}: stride={stride} needs agg_level=AggregateLevel.TO_NO_SEQUENCE")
    return {"trans_type": level, "seq_pool_stride": stride}


@layer_function(v1="pooling_layer", types=("max", "average"), prefix="seq_pooling")
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
    attrs = aggregate_attrs(agg_level, stride, "pooling")
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
    attrs = aggregate_attrs(agg_level, stride, fn)
    attrs["select_first"] = first
    return make_layer("seqlastins", as_inputs(input, fn), name=name, name_prefix=fn,
                      bias_attr=False, layer_attr=layer_attr, attrs=attrs)


@layer_function(v1="last_seq", types=("seqlastins",))
def last_seq(input: LayerOutput, name: str | None = None,  # noqa: A002
             agg_level: str = AggregateLevel.TO_NO_SEQUENCE, stride: int = -1,
             layer_attr: Any = None) -> LayerOutput:
    """The last row of each sequence (or sub-sequence, or stride window, the windows starting
    at the front)."""
    return _instance(input, name, agg_level, stride, layer_attr, first=False)


@layer_function(v1="first_seq", types=("seqlastins",))
def first_seq(input: LayerOutput, name: str | None = None,  # noqa: A002
              agg_level: str = AggregateLevel.TO_NO_SEQUENCE, stride: int = -1,
              layer_attr: Any = None) -> LayerOutput:
    """The first row of each sequence (or sub-sequence, or stride window, the windows aligned
    to the end)."""
    return _instance(input, name, agg_level, stride, layer_attr, first=True)
