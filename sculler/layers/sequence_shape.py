"""Layers that re-arrange sequences: ``expand``, ``seqconcat`` and ``seqreshape``.

Each builds one index array per batch (which input row lands on which output row) and copies
with fancy indexing; backward adds the output gradient back through the same map.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from sculler.backend import cached_like, get_array_module
from sculler.core.expression import (
    LayerOutput,
    as_inputs,
    make_layer,
)
from sculler.core.faces import layer_function
from sculler.core.layer import equal_widths, register_layer
from sculler.layers.sequence import ExpandLevel, SequenceLayer, level_arg, require_sequences
from sculler.math import segment as S


@register_layer("expand")
class ExpandLayer(SequenceLayer):
    """Repeat the rows of input 0 over the (sub-)sequences of input 1 (``expand_as``).

    ``trans_type="non-seq"`` (FROM_NO_SEQUENCE): input 0 has one row per top-level sequence
    of ``expand_as``; row n fills every row of sequence n. ``trans_type="seq"``
    (FROM_SEQUENCE): ``expand_as`` is nested and input 0 is a sequence with one row per
    sub-sequence; row j fills sub-sequence j. The output has ``expand_as``'s rows and
    positions: ``y_t = x[src_t] (+ b)``; no activation is applied (as in PaddlePaddle).
    Backward: ``dx_j = sum of dy over the rows copied from j`` (zero for an empty target).
    """

    min_inputs = max_inputs = 2

    @classmethod
    def infer_size(cls, config, inputs):
        if config.attrs.get("trans_type", "non-seq") not in ("non-seq", "seq"):
            raise ValueError(f"layer {config.name!r} (expand): trans_type (expand_level) must "
                             f"be 'non-seq' or 'seq', got {config.attrs['trans_type']!r}")
        if config.active_type not in ("", "linear", None):
            raise ValueError(f"layer {config.name!r} (expand) applies no activation, got "
                             f"active_type {config.active_type!r}")
        return inputs[0].size

    def _targets(self) -> np.ndarray:
        """The segments of ``expand_as`` that input 0's rows fill, one per row of input 0."""
        from_seq = self.attr("trans_type", "non-seq") == "seq"
        target = require_sequences(self, 1, nested=True if from_seq else None,
                                   what=", expand_level=FROM_SEQUENCE" if from_seq else "")
        data = self.get_input(0)
        if from_seq:
            require_sequences(self, 0, nested=False, what=", expand_level=FROM_SEQUENCE")
            if data.num_sequences != target.num_sequences:
                raise ValueError(
                    f"layer {self.name!r} (expand): input 0 ({self.inputs[0].name!r}) has "
                    f"{data.num_sequences} sequences, expand_as ({self.inputs[1].name!r}) has "
                    f"{target.num_sequences}")
            segs = target.sub_seq_starts
        else:
            segs = target.seq_starts
        if data.batch_size != len(segs) - 1:
            unit = "sub-sequence" if from_seq else "sequence"
            raise ValueError(
                f"layer {self.name!r} (expand): input 0 ({self.inputs[0].name!r}) has "
                f"{data.batch_size} rows; it needs one per {unit} of expand_as "
                f"({self.inputs[1].name!r}), which has {len(segs) - 1}")
        return segs

    def forward(self, pass_type: str) -> None:
        super().forward(pass_type)
        self._segs = self._targets()
        x = self.get_input_value(0)
        self._src = cached_like(S.segment_of_rows(self._segs), x)
        out = self.reserve_output(len(self._src), self.size)
        S.gather_rows(x, self._src, out)
        target = self.get_input(1)
        self.finish_forward(target.seq_starts, target.sub_seq_starts)  # act is linear

    def add_input_grad(self, i, g, dy) -> None:
        if i == 0:  # expand_as gives only its shape
            S.add_segment_sums(g, dy, self._segs, self.scratch("dx", g.shape))


@register_layer("seqconcat")
class SequenceConcatLayer(SequenceLayer):
    """Per sample, the rows of ``a`` then the rows of ``b``: ``y_n = [a_n; b_n]``, positions
    ``starts_a + starts_b``. Both inputs are sequences of one width with the same number of
    sequences; only top-level positions are used (a nested input is read as its top level and
    the output is a plain sequence). Empty parts are fine."""

    min_inputs = max_inputs = 2

    @classmethod
    def infer_size(cls, config, inputs):
        return equal_widths(config, inputs)

    def forward(self, pass_type: str) -> None:
        super().forward(pass_type)
        a, b = require_sequences(self, 0), require_sequences(self, 1)
        if a.num_sequences != b.num_sequences:
            raise ValueError(f"layer {self.name!r} (seqconcat): input 0 ({self.inputs[0].name!r})"
                             f" has {a.num_sequences} sequences, input 1 "
                             f"({self.inputs[1].name!r}) has {b.num_sequences}")
        for i in (0, 1):
            self.check_input_width(i, self.size)
        sa, sb = np.asarray(a.seq_starts), np.asarray(b.seq_starts)
        xp = get_array_module(a.value)
        # row r of a (sequence n) goes to r + sb[n]; row r of b goes to r + sa[n + 1]
        self._rows = [xp.asarray(np.arange(sa[-1]) + np.repeat(sb[:-1], S.lengths(sa))),
                      xp.asarray(np.arange(sb[-1]) + np.repeat(sa[1:], S.lengths(sb)))]
        out = self.reserve_output(int(sa[-1] + sb[-1]), self.size)
        for i in (0, 1):
            out[self._rows[i]] = self.get_input_value(i)
        self.finish_forward(sa + sb)

    def add_input_grad(self, i, g, dy) -> None:
        g += S.gather_rows(dy, self._rows[i], self.scratch("dx", g.shape))


@register_layer("seqreshape")
class SequenceReshapeLayer(SequenceLayer):
    """Read each sequence's rows as rows of width ``size`` (the row-major data unchanged): L
    rows of width M become L*M/size rows; positions scale by M/size (both levels of a nested
    input). A non-sequence input counts as sequences of one row, and the output then carries
    sequence positions. Each (sub-)sequence's L*M must divide by ``size``."""

    max_inputs = 1

    def forward(self, pass_type: str) -> None:
        super().forward(pass_type)
        arg = self.get_input(0)
        x = arg.value
        m, n = x.shape[1], self.size
        levels = [arg.seq_starts, arg.sub_seq_starts]
        if levels[0] is None:
            levels[0] = np.arange(x.shape[0] + 1, dtype=np.int64)
        scaled = []
        for starts in levels:
            if starts is None:
                scaled.append(None)
                continue
            bad = np.flatnonzero(S.lengths(starts) * m % n)
            if bad.size:
                k = int(bad[0])
                raise ValueError(
                    f"layer {self.name!r} (seqreshape): sequence {k} of input 0 "
                    f"({self.inputs[0].name!r}) has {int(S.lengths(starts)[k])} rows of width "
                    f"{m}; {int(S.lengths(starts)[k]) * m} values do not divide into rows of "
                    f"width {n}")
            scaled.append(np.asarray(starts) * m // n)
        out = self.reserve_output(x.shape[0] * m // n, n)
        out[...] = x.reshape(out.shape)
        self.finish_forward(*scaled)

    def add_input_grad(self, i, g, dy) -> None:
        g += dy.reshape(g.shape)


@layer_function(v1="expand_layer", types=("expand",))
def expand(input: LayerOutput, expand_as: LayerOutput, name: str | None = None,  # noqa: A002
           bias_attr: Any = False, expand_level: str = ExpandLevel.FROM_NO_SEQUENCE,
           layer_attr: Any = None) -> LayerOutput:
    """Repeat each row of ``input`` over the matching sequence (``FROM_NO_SEQUENCE``) or
    sub-sequence (``FROM_SEQUENCE``) of ``expand_as``; the output has ``expand_as``'s
    positions. No activation."""
    level = level_arg(expand_level, ("non-seq", "seq"), "expand", "expand_level")
    return make_layer("expand", as_inputs([input, expand_as], "expand"), name=name,
                      name_prefix="expand_layer", bias_attr=bias_attr, layer_attr=layer_attr,
                      attrs={"trans_type": level})


@layer_function(v1="seq_concat_layer", types=("seqconcat",), prefix="seqconcat")
def seq_concat(a: LayerOutput, b: LayerOutput, act: Any = None, name: str | None = None,
               layer_attr: Any = None, bias_attr: Any = None) -> LayerOutput:
    """Per sample, the rows of ``a`` followed by the rows of ``b`` (one width); default act
    Identity, no bias."""
    return make_layer("seqconcat", as_inputs([a, b], "seq_concat"), name=name,
                      name_prefix="seqconcat", act=act, bias_attr=bias_attr or False,
                      layer_attr=layer_attr)


@layer_function(v1="seq_reshape_layer", types=("seqreshape",), prefix="seqreshape")
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
