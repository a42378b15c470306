"""Layers that select parts of sequences: ``subseq``, ``seq_slice``, ``sub_nested_seq`` and
``kmax_seq_score``.

The selections are read from other inputs (ids or dense index matrices, one row per sequence),
turned into one gather index per batch, and backward scatters the output gradient back
(adding, since slices may overlap). Indices are bounds-checked: a bad one is a ValueError
naming the sequence, never a read of a neighbouring sequence's rows.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from sculler.backend import get_array_module, to_numpy
from sculler.core.expression import (
    LayerOutput,
    as_inputs,
    make_layer,
)
from sculler.core.faces import layer_function
from sculler.core.layer import Layer, register_layer
from sculler.layers.sequence import SequenceLayer, require_sequences
from sculler.math import segment as S
from sculler.math.sparse import add_rows


def _index_rows(layer: Layer, i: int, rows: int, what: str) -> np.ndarray:
    """Input ``i`` as a host int matrix with ``rows`` rows (ids or an integral dense matrix)."""
    arg = layer.get_input(i)
    raw = arg.ids.reshape(-1, 1) if arg.ids is not None else arg.value
    if raw is None or arg.is_sparse:
        raise ValueError(f"layer {layer.name!r} ({layer.type_name}): input {i} "
                         f"({layer.inputs[i].name!r}, {what}) must hold ids or dense indices, got "
                         f"{arg.describe()}")
    m = to_numpy(raw)
    if m.shape[0] != rows:
        raise ValueError(f"layer {layer.name!r} ({layer.type_name}): input {i} "
                         f"({layer.inputs[i].name!r}, {what}) has {m.shape[0]} rows, expected "
                         f"{rows} (one per sequence)")
    ints = np.rint(m).astype(np.int64)
    if not np.array_equal(ints, m):
        raise ValueError(f"layer {layer.name!r} ({layer.type_name}): input {i} "
                         f"({layer.inputs[i].name!r}, {what}) must hold whole numbers")
    return ints


def _fail(layer: Layer, msg: str, k: int) -> None:
    raise ValueError(f"layer {layer.name!r} ({layer.type_name}): {msg} (sample {k})")


class _Gather(SequenceLayer):
    """Output rows are input-0 rows ``self._rows``; backward adds the gradient back (the
    other inputs are indices and get none)."""

    def emit(self, rows: np.ndarray, seq_starts, sub_seq_starts=None) -> None:
        x = self.get_input_value(0)
        self._rows = get_array_module(x).asarray(rows)
        out = self.reserve_output(len(rows), self.size)
        S.gather_rows(x, self._rows, out)
        self.finish_forward(seq_starts, sub_seq_starts)

    def add_input_grad(self, i, g, dy) -> None:
        if i == 0:  # overlapping slices or a repeated selection pick a row twice
            add_rows(g, self._rows, dy)

    @classmethod
    def infer_size(cls, config, inputs):
        return inputs[0].size


@register_layer("subseq")
class SubSequenceLayer(_Gather):
    """Rows ``[offset_n, offset_n + size_n)`` of each sequence n (inputs: sequence, offsets,
    sizes; offsets and sizes hold one id per sequence). Output: a sequence of lengths size_n,
    then bias and activation. Out-of-range offsets/sizes are a ValueError (PaddlePaddle does
    not check them)."""

    min_inputs = max_inputs = 3

    def forward(self, pass_type: str) -> None:
        super().forward(pass_type)
        arg = require_sequences(self, 0, nested=False)
        n, starts = arg.num_sequences, np.asarray(arg.seq_starts)
        off = _index_rows(self, 1, n, "offsets")[:, 0]
        size = _index_rows(self, 2, n, "sizes")[:, 0]
        bad = np.flatnonzero((off < 0) | (size < 0) | (off + size > S.lengths(starts)))
        if bad.size:
            k = int(bad[0])
            _fail(self, f"offset {off[k]} and size {size[k]} do not fit sequence {k} of "
                        f"{int(S.lengths(starts)[k])} rows", k)
        self.emit(S.ranges(starts[:-1] + off, size), S.starts_from_lengths(size))


@register_layer("seq_slice")
class SequenceSliceLayer(_Gather):
    """Slices ``[begin, end]`` (inclusive, relative to each (sub-)sequence) of input 0.

    Inputs: the sequence, then ``starts`` and/or ``ends`` (dense, one row per sequence, or per
    sub-sequence of a nested input, K columns; ``select_first`` says which one a single extra
    input is). Missing starts mean 0, missing ends the last row; -1 ends a row's list. A plain
    input gives one top-level sequence per slice; a nested one gives one sub-sequence per
    slice, grouped under the slice's sample.
    """

    min_inputs, max_inputs = 2, 3

    def forward(self, pass_type: str) -> None:
        super().forward(pass_type)
        arg = require_sequences(self, 0)
        nested = arg.sub_seq_starts is not None
        segs = np.asarray(arg.sub_seq_starts if nested else arg.seq_starts)
        count, lens = len(segs) - 1, S.lengths(segs)
        given = ([1, 2] if len(self.inputs) == 3 else
                 [1, None] if self.attr("select_first", True) else [None, 1])
        mats = [None if i is None else _index_rows(self, i, count, what)
                for i, what in zip(given, ("starts", "ends"))]
        k = next(m.shape[1] for m in mats if m is not None)
        valid = np.ones((count, k), dtype=bool)
        for m in mats:
            if m is not None:
                if m.shape[1] != k:
                    raise ValueError(f"layer {self.name!r} (seq_slice): starts and ends have "
                                     f"{mats[0].shape[1]} and {mats[1].shape[1]} columns")
                valid &= np.cumprod(m != -1, axis=1).astype(bool)
        seg, _ = np.nonzero(valid)
        begin = mats[0][valid] if mats[0] is not None else np.zeros(seg.size, np.int64)
        end = mats[1][valid] if mats[1] is not None else lens[seg] - 1
        bad = np.flatnonzero((begin < 0) | (end < begin) | (end >= lens[seg]))
        if bad.size:
            j = int(bad[0])
            sample = int(np.searchsorted(arg.seq_starts, segs[seg[j]], side="right") - 1)
            _fail(self, f"slice [{begin[j]}, {end[j]}] is empty or outside (sub-)sequence "
                        f"{int(seg[j])} of {int(lens[seg[j]])} rows", min(sample, count - 1))
        size = end - begin + 1
        out_starts = S.starts_from_lengths(size)
        rows = S.ranges(segs[seg] + begin, size)
        if not nested:
            self.emit(rows, out_starts)
            return
        per_sample = S.degrade(arg.seq_starts, segs)
        sample_of_slice = np.searchsorted(per_sample, seg, side="right") - 1
        slices = np.bincount(sample_of_slice, minlength=arg.num_sequences)
        self.emit(rows, out_starts[S.starts_from_lengths(slices)], out_starts)


@register_layer("sub_nested_seq")
class SubNestedSequenceLayer(_Gather):
    """The sub-sequences of each sample chosen by ``selected_indices`` (N x K dense, indices of
    sub-sequences inside the sample, in the wanted order, -1 ends a row). Output: a nested
    sequence, one sample per input sample."""

    min_inputs = max_inputs = 2

    def forward(self, pass_type: str) -> None:
        super().forward(pass_type)
        arg = require_sequences(self, 0, nested=True)
        sel = _index_rows(self, 1, arg.num_sequences, "selected_indices")
        valid = np.cumprod(sel != -1, axis=1).astype(bool)
        sample, _ = np.nonzero(valid)
        per_sample = S.degrade(arg.seq_starts, arg.sub_seq_starts)
        local = sel[valid]
        have = np.diff(per_sample)[sample]
        bad = np.flatnonzero((local < 0) | (local >= have))
        if bad.size:
            j = int(bad[0])
            _fail(self, f"selected index {local[j]} is not a sub-sequence of sample "
                        f"{int(sample[j])}, which has {int(have[j])}", int(sample[j]))
        chosen = per_sample[sample] + local
        subs = np.asarray(arg.sub_seq_starts)
        size = S.lengths(subs)[chosen]
        out_sub = S.starts_from_lengths(size)
        counts = np.bincount(sample, minlength=arg.num_sequences)
        self.emit(S.ranges(subs[chosen], size), out_sub[S.starts_from_lengths(counts)], out_sub)


@register_layer("kmax_seq_score")
class KmaxSequenceScoreLayer(Layer):
    """Per (sub-)sequence, the rows of the ``beam_size`` highest scores, relative to its start
    and best first (lower row first on ties), padded with -1. Input: a width-1 score
    sequence; output: (sequences, or sub-sequences if nested) x beam_size, as floats, no
    sequence positions and no gradient."""

    max_inputs = 1

    @classmethod
    def infer_size(cls, config, inputs):
        if inputs[0].size != 1:
            raise ValueError(f"layer {config.name!r} (kmax_seq_score): input {inputs[0].name!r}"
                             f" must have width 1 (one score per row), got {inputs[0].size}")
        beam = int(config.attrs.get("beam_size", 1))
        if beam <= 0:
            raise ValueError(f"layer {config.name!r} (kmax_seq_score): beam_size must be "
                             f"positive, got {beam}")
        return beam

    def forward(self, pass_type: str) -> None:
        super().forward(pass_type)
        arg = require_sequences(self, 0)
        segs = np.asarray(arg.sub_seq_starts if arg.sub_seq_starts is not None
                          else arg.seq_starts)
        score = to_numpy(arg.value).reshape(-1)
        seg = S.segment_of_rows(segs)
        order = np.lexsort((np.arange(score.size), -score, seg))
        rank = np.arange(score.size) - segs[seg[order]]
        keep = rank < self.size
        table = np.full((len(segs) - 1, self.size), -1.0)
        table[seg[order][keep], rank[keep]] = (order - segs[seg[order]])[keep]
        out = self.reserve_output(len(segs) - 1, self.size)
        out[...] = get_array_module(out).asarray(table)
        self.output.seq_starts = self.output.sub_seq_starts = None

    def backward(self, callback=None) -> None:
        """No gradient: the output is a choice of rows."""


@layer_function(v1="sub_seq_layer", types=("subseq",), prefix="sub_seq")
def sub_seq(input: LayerOutput, offsets: LayerOutput, sizes: LayerOutput,  # noqa: A002
            act: Any = None, bias_attr: Any = None, name: str | None = None) -> LayerOutput:
    """Rows ``[offset_n, offset_n + size_n)`` of each sequence n; ``offsets`` and ``sizes``
    hold one integer per sequence (``integer_value`` data or ids). Default act Linear, no
    bias unless ``bias_attr`` asks."""
    return make_layer("subseq", as_inputs([input, offsets, sizes], "sub_seq"), name=name,
                      name_prefix="sub_seq", act=act, bias_attr=bias_attr or False)


@layer_function(v1="seq_slice_layer", types=("seq_slice",))
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


@layer_function(v1="sub_nested_seq_layer", types=("sub_nested_seq",))
def sub_nested_seq(input: LayerOutput, selected_indices: LayerOutput,  # noqa: A002
                   name: str | None = None) -> LayerOutput:
    """The sub-sequences of each sample listed in ``selected_indices`` (N x K, -1 ends a
    row), in that order: a nested sequence. Typically fed by ``kmax_seq_score``."""
    return make_layer("sub_nested_seq", as_inputs([input, selected_indices], "sub_nested_seq"),
                      name=name, name_prefix="sub_nested_seq", bias_attr=False)


@layer_function(v1="kmax_seq_score_layer", types=("kmax_seq_score",))
def kmax_seq_score(input: LayerOutput, name: str | None = None,  # noqa: A002
                   beam_size: int = 1) -> LayerOutput:
    """Row indices (relative to each (sub-)sequence, best first, -1 padded) of the
    ``beam_size`` highest width-1 scores; width ``beam_size``, no gradient."""
    return make_layer("kmax_seq_score", as_inputs(input, "kmax_seq_score"), name=name,
                      bias_attr=False, attrs={"beam_size": int(beam_size)})
