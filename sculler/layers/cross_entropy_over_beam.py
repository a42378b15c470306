"""The globally normalised cost over a beam search (PaddlePaddle's ``cross_entropy_over_beam``,
learning to search): ``BeamInput`` triples, one per search step, and the cost layer.

Step ``t`` of the search gives, per sample, candidate scores (input ``3t``, width 1: a sequence
at step 0, a nested sequence after it with one sub-sequence per path kept at step ``t-1``),
the candidates kept (input ``3t+1``: one row of ``beam_size`` row indices per (sub-)sequence,
relative to its start, -1 where none, as ``kmax_seq_score`` writes them) and the gold candidate
(input ``3t+2``: one id per sample, relative to the sub-sequence that extends the gold path).

The paths of the beam at the last step ``T`` (the last step, or the step where the gold
candidate first falls off the beam, in which case the gold path joins them as one more path)
score ``S_p = sum_{t <= T} score_t[row of p at step t]``; the cost is
``-log(exp(S_gold) / sum_p exp(S_p))`` per sample, and ``dscore_t[r] = sum_{p through r}
(softmax_p - [p = gold])``.

Sub-sequence ``k`` of step ``t+1`` extends the ``k``-th kept (not -1) candidate of step ``t``,
counted row by row, as ``sub_nested_seq`` builds it and as PaddlePaddle finds the gold path's
row. (PaddlePaddle's C++ traces the other paths back by the flat position ``k`` instead, which
is the same only while no -1 comes before a kept candidate.)
"""

from __future__ import annotations

from typing import Any

import numpy as np

from sculler.backend import get_array_module, to_device_of, to_numpy
from sculler.core.expression import LayerOutput, make_layer
from sculler.core.faces import layer_function
from sculler.core.layer import Layer, register_layer
from sculler.layers.sequence import require_sequences


class BeamInput:
    """One search step of :func:`cross_entropy_over_beam`: ``candidate_scores`` (width 1),
    ``selected_candidates`` (the kept candidates, ``beam_size`` wide) and ``gold`` (ids)."""

    def __init__(self, candidate_scores: LayerOutput, selected_candidates: LayerOutput,
                 gold: LayerOutput) -> None:
        for what, value in (("candidate_scores", candidate_scores),
                            ("selected_candidates", selected_candidates), ("gold", gold)):
            if not isinstance(value, LayerOutput):
                raise TypeError(f"BeamInput: {what} must be a layer, got {value!r}")
        if candidate_scores.size != 1:
            raise ValueError(f"BeamInput: candidate_scores {candidate_scores.name!r} must have "
                             f"width 1 (one score per candidate), got {candidate_scores.size}")
        self.candidate_scores = candidate_scores
        self.selected_candidates = selected_candidates
        self.gold = gold


layer_function(v1="BeamInput", v2="BeamInput", kind="plain")(BeamInput)


def _kept(table: np.ndarray) -> np.ndarray:
    """Flat positions of the kept (not -1) entries of a candidate table, in order: entry
    ``k`` of this list is the parent of sub-sequence ``k`` at the next step."""
    return np.flatnonzero(table.reshape(-1) != -1)


@register_layer("cross_entropy_over_beam")
class CrossEntropyOverBeamLayer(Layer):
    """Globally normalised cross entropy over the paths of a beam search (see the module
    docstring). Inputs: triples ``(scores, selected candidates, gold)``, one per step; output:
    one cost per sample; gradient to the score inputs only."""

    is_cost = True
    min_inputs = 3

    @classmethod
    def infer_size(cls, config, inputs):
        if len(inputs) % 3:
            raise ValueError(f"layer {config.name!r} (cross_entropy_over_beam): inputs come in "
                             "triples (scores, selected candidates, gold), got "
                             f"{len(inputs)} inputs")
        beam = inputs[1].size
        for t in range(len(inputs) // 3):
            scores, kept = inputs[3 * t], inputs[3 * t + 1]
            if scores.size != 1:
                raise ValueError(f"layer {config.name!r} (cross_entropy_over_beam): step {t} "
                                 f"scores {scores.name!r} must have width 1, got {scores.size}")
            if kept.size != beam:
                raise ValueError(f"layer {config.name!r} (cross_entropy_over_beam): step {t} "
                                 f"selected candidates {kept.name!r} are {kept.size} wide, "
                                 f"step 0's are {beam}; every step has one beam size")
        return 1

    def _steps(self):
        """Per step: (scores, sub-sequence starts, candidate table, gold ids, sub-sequence
        range of each sample)."""
        who = f"layer {self.name!r} (cross_entropy_over_beam)"
        steps, n = [], None
        for t in range(len(self.inputs) // 3):
            arg = require_sequences(self, 3 * t, nested=t > 0)
            starts = np.asarray(arg.sub_seq_starts if t else arg.seq_starts)
            seq = np.asarray(arg.seq_starts)
            n = len(seq) - 1 if n is None else n
            if len(seq) - 1 != n:
                raise ValueError(f"{who}: step {t} scores hold {len(seq) - 1} samples, step 0's "
                                 f"{n}")
            table = to_numpy(self.get_input_value(3 * t + 1))
            if table.shape[0] != len(starts) - 1:
                raise ValueError(f"{who}: step {t} selected candidates have {table.shape[0]} "
                                 f"rows, one per (sub-)sequence of the scores needs "
                                 f"{len(starts) - 1}")
            gold = self.get_input(3 * t + 2).ids
            if gold is None or len(gold) != n:
                raise ValueError(f"{who}: step {t} gold ({self.inputs[3 * t + 2].name!r}) must "
                                 f"be one id per sample ({n}), got "
                                 f"{self.get_input(3 * t + 2).describe()}")
            first = np.searchsorted(starts, seq, side="left")
            steps.append((to_numpy(self.get_input_value(3 * t)).reshape(-1), starts, table,
                          to_numpy(gold).astype(np.int64), first))
        return steps, n

    def _paths(self, steps, j: int):
        """Sample ``j``'s paths: ``rows[t][p]`` is the score row of path ``p`` at step ``t``
        (t <= T); returns ``(rows, gold path index)``."""
        who = f"layer {self.name!r} (cross_entropy_over_beam), sample {j}"
        beam = steps[0][2].shape[1]
        local = []  # per step: (sub-sequence starts, candidate table) of this sample
        for _, starts, table, _, first in steps:
            lo, hi = first[j], first[j + 1]
            local.append((starts[lo:hi + 1], table[lo:hi]))
        gold_row, gold_pos, last, fell = 0, None, len(steps) - 1, False
        gold_rows, table_prev = [], None
        for t, (starts, table) in enumerate(local):
            if t:
                gold_row = int(np.count_nonzero(table_prev.reshape(-1)[:gold_pos] != -1))
            if gold_row >= table.shape[0]:
                raise ValueError(f"{who}: step {t} has {table.shape[0]} sub-sequences, the gold "
                                 f"path needs sub-sequence {gold_row}")
            gold_rows.append(gold_row)
            gold_id = int(steps[t][3][j])
            if not 0 <= gold_id < starts[gold_row + 1] - starts[gold_row]:
                raise ValueError(f"{who}: step {t} gold id {gold_id} is outside its "
                                 f"sub-sequence of {starts[gold_row + 1] - starts[gold_row]} "
                                 "candidates")
            hit = np.flatnonzero(table[gold_row] == gold_id)
            if hit.size == 0:
                last, fell = t, True
                break
            gold_pos = gold_row * beam + int(hit[0])
            table_prev = table
        # the kept candidates of step `last`, traced back step by step
        starts, table = local[last]
        pos = _kept(table)
        rows = [None] * (last + 1)
        for t in range(last, -1, -1):
            starts, table = local[t]
            sub = pos // beam
            rows[t] = starts[sub] + table.reshape(-1)[pos].astype(np.int64)
            if t:
                pos = _kept(local[t - 1][1])[sub]
        if fell:
            gold_path = len(rows[last])
            for t in range(last + 1):
                starts = local[t][0]
                rows[t] = np.append(rows[t], starts[gold_rows[t]] + int(steps[t][3][j]))
        else:
            gold_path = int(np.count_nonzero(local[last][1].reshape(-1)[:gold_pos] != -1))
        return rows, gold_path

    def forward(self, pass_type: str) -> None:
        super().forward(pass_type)
        steps, n = self._steps()
        out = self.reserve_output(n, 1)
        self.output.seq_starts = self.output.sub_seq_starts = None
        self._saved = []
        costs = np.empty(n)
        for j in range(n):
            rows, gold = self._paths(steps, j)
            total = sum(steps[t][0][r] for t, r in enumerate(rows))
            shifted = np.exp(total - total.max())
            softmax = shifted / shifted.sum()
            costs[j] = -np.log(softmax[gold])
            self._saved.append((rows, gold, softmax))
        out[:, 0] = to_device_of(costs, out)
        self.forward_activation()

    def backward(self, callback=None) -> None:
        self.backward_activation()
        dcost = to_numpy(self.output.grad).reshape(-1)
        grads = {}
        for t in range(len(self.inputs) // 3):
            g = self.get_input_grad(3 * t)
            if g is not None:
                grads[t] = np.zeros(g.shape[0])
        for j, (rows, gold, softmax) in enumerate(self._saved):
            d = softmax.copy()
            d[gold] -= 1.0
            for t, r in enumerate(rows):
                if t in grads:
                    np.add.at(grads[t], r, dcost[j] * d)
        for t, g in grads.items():
            buf = self.get_input_grad(3 * t)
            buf += get_array_module(buf).asarray(g.reshape(buf.shape), dtype=buf.dtype)


@layer_function(v1="cross_entropy_over_beam", types=("cross_entropy_over_beam",))
def cross_entropy_over_beam(input: Any, name: str | None = None) -> LayerOutput:  # noqa: A002
    """Globally normalised cost of a beam search: ``-log softmax_p(S_p)[gold]`` over the beam's
    paths at the last step (or where the gold path fell off, the gold path added), ``S_p`` the
    sum of the path's candidate scores. ``input``: one :class:`BeamInput` or a list, one per
    search step."""
    beams = [input] if isinstance(input, BeamInput) else input
    if not isinstance(beams, (list, tuple)) or not beams or not all(
            isinstance(b, BeamInput) for b in beams):
        raise TypeError("cross_entropy_over_beam: input must be a BeamInput or a non-empty list "
                        f"of BeamInput, got {input!r}")
    inputs = [layer for b in beams
              for layer in (b.candidate_scores, b.selected_candidates, b.gold)]
    return make_layer("cross_entropy_over_beam", inputs, name=name,
                      name_prefix="cross_entropy_over_beam", bias_attr=False)
