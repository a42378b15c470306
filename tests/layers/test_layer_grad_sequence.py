"""Gradient-check table for the sequence layers: every layer x every input kind it accepts
(plain and nested sequences, length-1 sequences, one sequence, many lengths, both agg_levels,
strides). Inputs that must agree with each other come from ``make_inputs`` factories."""

import numpy as np
import pytest

from sculler.core.argument import Argument
from sculler.testing import (
    INPUT_DATA,
    INPUT_DATA_TARGET,
    INPUT_HASSUB_SEQUENCE_DATA,
    INPUT_LABEL,
    INPUT_SEQUENCE_DATA,
    check_layer_grad,
)
from sculler.testing.sequences import dense, lengths, nested_starts, seq_arg, starts

MODES = ("many", "one", "ones")


def seq(width, mode="many", nested=False):
    """One (nested) sequence input with ``mode`` lengths."""
    def make(batch, rng):
        return [seq_arg(rng, lengths(batch, rng, mode), width, nested)]
    make.__name__ = f"{'nested' if nested else 'seq'}:{mode}"
    return make


def expand_inputs(width, nested_target, from_seq=False):
    """[data, expand_as]: data has one row per (sub-)sequence of expand_as."""
    def make(batch, rng):
        target = seq_arg(rng, lengths(batch, rng, "many"), 2, nested=nested_target)
        if from_seq:
            per_seq = np.searchsorted(target.sub_seq_starts, target.seq_starts)
            data = seq_arg(rng, np.diff(per_seq), width)
        else:
            data = Argument(value=dense(rng, target.num_sequences, width))
        return [data, target]
    make.__name__ = f"expand:{'nested' if nested_target else 'seq'}:{'seq' if from_seq else ''}"
    return make


def concat_inputs(width, with_empty):
    def make(batch, rng):
        la = lengths(batch, rng, "many")
        lb = [int(v) for v in rng.randint(0 if with_empty else 1, 4, size=len(la))]
        lb[-1] = max(lb[-1], 1)  # b has rows to check
        return [seq_arg(rng, la, width), seq_arg(rng, lb, width)]
    make.__name__ = f"seqconcat:{'empty' if with_empty else 'full'}"
    return make


def plain_rows(width):
    def make(batch, rng):
        return [Argument(value=dense(rng, batch, width))]
    make.__name__ = "rows"
    return make


def even_lengths(width):
    def make(batch, rng):
        rows = max(2, batch - batch % 2)
        return [seq_arg(rng, lengths(rows, rng, "even"), width)]
    make.__name__ = "seq:even"
    return make


def subseq_inputs(width, mode):
    def make(batch, rng):
        x = seq_arg(rng, lengths(batch, rng, mode), width)
        lens = np.diff(x.seq_starts)
        off = np.array([rng.randint(0, n) for n in lens])
        size = np.array([rng.randint(1, n - o + 1) for n, o in zip(lens, off)])
        return [x, Argument(ids=off), Argument(ids=size)]
    make.__name__ = f"subseq:{mode}"
    return make


def slice_inputs(width, nested, which=("starts", "ends"), k=2):
    """Random inclusive slices, k per (sub-)sequence, the last of some rows cut by -1."""
    def make(batch, rng):
        x = seq_arg(rng, lengths(batch, rng, "many"), width, nested=nested)
        segs = x.sub_seq_starts if nested else x.seq_starts
        lens = np.diff(segs)
        begin = np.array([[rng.randint(0, n) for _ in range(k)] for n in lens], float)
        end = np.array([[rng.randint(b, n) for b in row] for row, n in zip(begin, lens)], float)
        cut = rng.rand(len(lens)) < 0.3
        begin[cut, -1] = end[cut, -1] = -1
        mats = {"starts": begin, "ends": end}
        return [x] + [Argument(value=mats[w]) for w in which]
    make.__name__ = f"seq_slice:{'nested' if nested else 'seq'}:{'+'.join(which)}"
    return make


def nested_select_inputs(width):
    def make(batch, rng):
        x = seq_arg(rng, lengths(batch, rng, "many"), width, nested=True)
        per = np.searchsorted(x.sub_seq_starts, x.seq_starts)
        sel = np.full((x.num_sequences, 2), -1.0)
        for n, count in enumerate(np.diff(per)):
            pick = rng.permutation(count)[:2]
            sel[n, :len(pick)] = pick
        return [x, Argument(value=sel)]
    make.__name__ = "sub_nested_seq"
    return make


SEQ, NESTED = INPUT_SEQUENCE_DATA, INPUT_HASSUB_SEQUENCE_DATA
INDEX = INPUT_DATA_TARGET  # dense but not differentiated: index matrices


def aggregate_rows(layer_type, extra):
    rows = []
    for mode in MODES:
        rows.append((layer_type, dict(extra), [SEQ(3)], seq(3, mode), False))
        rows.append((layer_type, dict(extra), [NESTED(3)], seq(3, mode, nested=True), False))
    rows.append((layer_type, dict(extra, trans_type="seq"), [NESTED(3)],
                 seq(3, "many", nested=True), False))
    rows.append((layer_type, dict(extra, trans_type="seq"), [NESTED(3)],
                 seq(3, "one", nested=True), False))
    rows.append((layer_type, dict(extra, seq_pool_stride=2), [SEQ(3)], seq(3, "many"), False))
    rows.append((layer_type, dict(extra, seq_pool_stride=3), [SEQ(2)], seq(2, "one"), False))
    rows.append((layer_type, dict(extra, bias=True, active_type="tanh"), [SEQ(3)],
                 seq(3, "many"), False))
    return rows


SEQUENCE = (
    aggregate_rows("seqlastins", {})
    + aggregate_rows("seqlastins", {"select_first": True})
    + [("seqfirstins", dict(seq_pool_stride=2), [SEQ(2)], seq(2, "many"), False)]
    + aggregate_rows("max", {})
    + aggregate_rows("average", {})
    + aggregate_rows("average", {"average_strategy": "sum"})
    + aggregate_rows("average", {"average_strategy": "squarerootn"})
    + [
        ("expand", dict(), [INPUT_DATA(3), SEQ(2)], expand_inputs(3, False), False),
        ("expand", dict(), [INPUT_DATA(3), NESTED(2)], expand_inputs(3, True), False),
        ("expand", dict(trans_type="seq", bias=True), [SEQ(3), NESTED(2)],
         expand_inputs(3, True, from_seq=True), False),
        ("seqconcat", dict(), [SEQ(3), SEQ(3)], concat_inputs(3, False), True),
        ("seqconcat", dict(active_type="tanh"), [SEQ(2), SEQ(2)], concat_inputs(2, True), True),
        ("seqreshape", dict(size=2), [SEQ(4)], seq(4, "many"), True),
        ("seqreshape", dict(size=4, bias=True), [SEQ(2)], even_lengths(2), True),
        ("seqreshape", dict(size=3), [INPUT_DATA(6)], plain_rows(6), True),
        ("seqreshape", dict(size=1), [NESTED(3)], seq(3, "many", nested=True), True),
        ("fc", dict(size=1, active_type="sequence_softmax"), [SEQ(3)], seq(3, "many"), True),
        ("fc", dict(size=1, active_type="sequence_softmax"), [NESTED(3)],
         seq(3, "many", nested=True), True),
        ("fc", dict(size=1, active_type="sequence_softmax"), [SEQ(3)], seq(3, "ones"), True),
        ("subseq", dict(), [SEQ(3), INPUT_LABEL(9), INPUT_LABEL(9)], subseq_inputs(3, "many"),
         True),
        ("subseq", dict(bias=True, active_type="tanh"), [SEQ(2), INPUT_LABEL(9),
                                                          INPUT_LABEL(9)],
         subseq_inputs(2, "one"), True),
        ("seq_slice", dict(), [SEQ(2), INDEX(2), INDEX(2)],
         slice_inputs(2, False), True),
        ("seq_slice", dict(), [NESTED(2), INDEX(2), INDEX(2)],
         slice_inputs(2, True), True),
        ("seq_slice", dict(select_first=True), [SEQ(2), INDEX(2)],
         slice_inputs(2, False, ("starts",)), True),
        ("seq_slice", dict(select_first=False), [NESTED(2), INDEX(2)],
         slice_inputs(2, True, ("ends",)), True),
        ("sub_nested_seq", dict(), [NESTED(3), INDEX(2)], nested_select_inputs(3), True),
        ("kmax_seq_score", dict(beam_size=2), [SEQ(1)], seq(1, "many"), False),
    ]
)


def proj(kind, **attrs):
    return {"proj": kind, **attrs}


CONTEXT = [
    ("mixed", dict(), [NESTED(3, attrs=proj("context", context_len=3, context_start=-1,
                                            trainable_padding=True))],
     seq(3, "many", nested=True), False),
    ("mixed", dict(), [SEQ(2, attrs=proj("context", context_len=4, context_start=-2,
                                         trainable_padding=True))], seq(2, "ones"), False),
    ("mixed", dict(), [SEQ(2, attrs=proj("context", context_len=5, context_start=-2,
                                         trainable_padding=True))], seq(2, "one"), False),
    ("mixed", dict(), [SEQ(2, attrs=proj("context", context_len=3, context_start=0))],
     seq(2, "many"), False),
]


CONCAT2 = [
    ("concat2", dict(), [INPUT_LABEL(7, attrs=proj("table", size=3), param={"name": "_proj"}),
                         INPUT_LABEL(7, attrs=proj("table", size=3), param={"name": "_proj"}),
                         INPUT_DATA(2, attrs=proj("full_matrix", size=4))], None, True),
    ("concat2", dict(bias=True, active_type="tanh"),
     [SEQ(2, attrs=proj("context", context_len=3, context_start=-1, trainable_padding=True)),
      SEQ(3, attrs=proj("identity")), SEQ(3, attrs=proj("dotmul"))], None, True),
]


def _id(case):
    layer_type, settings, inputs, make, _ = case
    extras = ",".join(f"{k}={v}" for k, v in settings.items())
    return f"{layer_type}[{extras}|{getattr(make, '__name__', 'random')}]"


ROWS = SEQUENCE + CONTEXT + CONCAT2


@pytest.mark.parametrize("case", ROWS, ids=[_id(c) for c in ROWS])
@pytest.mark.parametrize("batch", [1, 9])
def test_sequence_layer_gradient(case, batch):
    layer_type, settings, inputs, make, use_weight = case
    report = check_layer_grad({**settings, "inputs": inputs, "make_inputs": make}, layer_type,
                              batch, use_weight=use_weight)
    assert report.errors, "the check compared no gradient"
    assert report.max_error < 1e-6


def test_helpers_make_the_layouts_they_say():
    rng = np.random.RandomState(0)
    assert lengths(7, rng, "one") == [7]
    assert lengths(3, rng, "ones") == [1, 1, 1]
    assert all(n % 2 == 0 for n in lengths(10, rng, "even"))
    s = starts([2, 3])
    subs = nested_starts([2, 3], rng)
    assert set(s.tolist()) <= set(subs.tolist()) and subs[-1] == 5


@pytest.mark.parametrize("layer_type,settings", [
    ("max", {}), ("average", {"average_strategy": "squarerootn"}), ("seqlastins", {}),
    ("seqreshape", {"size": 2}), ("seqlastins", {"trans_type": "seq"}),
])
def test_transposed_inputs(layer_type, settings):
    """Non-contiguous (transposed) input values, the harness's own random sequences."""
    kind = NESTED if settings.get("trans_type") == "seq" else SEQ
    report = check_layer_grad({**settings, "inputs": [kind(4)]}, layer_type, 9, trans=True,
                              use_weight=True)
    assert report.max_error < 1e-6


def test_max_pooling_gradient_goes_to_the_first_tied_row():
    from sculler.core.layer import PASS_TRAIN
    from sculler.core.network import Network
    from sculler.core.parameter import ParameterSet
    from sculler.testing.grad_check import TestConfig, build_test_model

    net = Network(build_test_model(TestConfig(inputs=[SEQ(2)]), "max"), ParameterSet(),
                  data_gradients=True)
    x = Argument(value=np.array([[0.0, 1.0], [0.0, 1.0], [0.0, 3.0]]),
                 seq_starts=np.array([0, 3]))
    net.forward([x], PASS_TRAIN)
    net.backward(output_grads={"test_layer": np.array([[1.0, 1.0]])})
    np.testing.assert_array_equal(net.data_layers[0].output.grad, [[1, 0], [0, 0], [0, 1]])
