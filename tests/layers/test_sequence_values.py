"""Sequence layers against direct per-sequence NumPy loops, output layouts and error
messages (zero-length sequences, wrong nesting)."""

import numpy as np
import pytest

from sculler.core.argument import Argument
from sculler.testing import INPUT_DATA, INPUT_HASSUB_SEQUENCE_DATA, INPUT_SEQUENCE_DATA
from sculler.testing.sequences import dense, lengths, nested_starts, run_layer, seq_arg, starts

SEQ, NESTED = INPUT_SEQUENCE_DATA, INPUT_HASSUB_SEQUENCE_DATA
RNG = np.random.RandomState(3)


def segments(starts):
    return list(zip(starts[:-1], starts[1:]))


def loop_windows(s, e, k, from_end):
    """Windows of one sequence, written out one by one."""
    if from_end:
        cuts = list(range(e, s, -k))[::-1]
        return [(max(s, c - k), c) for c in cuts]
    return [(b, min(b + k, e)) for b in range(s, e, k)]


REDUCE = {
    ("seqlastins", False): lambda rows: rows[-1],
    ("seqlastins", True): lambda rows: rows[0],
    ("max", None): lambda rows: rows.max(axis=0),
    ("average", "average"): lambda rows: rows.mean(axis=0),
    ("average", "sum"): lambda rows: rows.sum(axis=0),
    ("average", "squarerootn"): lambda rows: rows.sum(axis=0) / np.sqrt(len(rows)),
}


def settings_of(kind, option):
    if kind == "seqlastins":
        return {"select_first": option}
    if kind == "average":
        return {"average_strategy": option}
    return {}


@pytest.mark.parametrize("kind,option", list(REDUCE))
def test_aggregation_levels_and_strides_match_loops(kind, option):
    reduce = REDUCE[(kind, option)]
    settings = settings_of(kind, option)
    arg = seq_arg(RNG, [3, 1, 5, 2], 4, nested=True)
    x = arg.value
    out = run_layer(kind, settings, [NESTED(4)], [arg])
    want = [reduce(x[s:e]) for s, e in segments(arg.seq_starts)]
    np.testing.assert_allclose(out.value, want, rtol=1e-5)
    assert out.seq_starts is None
    # agg_level=seq: one row per sub-sequence, a sequence per sample
    out = run_layer(kind, dict(settings, trans_type="seq"), [NESTED(4)], [arg])
    np.testing.assert_allclose(out.value, [reduce(x[s:e]) for s, e in
                                           segments(arg.sub_seq_starts)], rtol=1e-5)
    per_sample = [sum(1 for b in arg.sub_seq_starts[:-1] if s <= b < e)
                  for s, e in segments(arg.seq_starts)]
    np.testing.assert_array_equal(out.seq_starts, np.cumsum([0] + per_sample))
    assert out.sub_seq_starts is None
    # stride: windows per sequence (first_seq aligns them to the end)
    plain = seq_arg(RNG, [9, 1, 5, 4], 3)
    from_end = kind == "seqlastins" and option
    out = run_layer(kind, dict(settings, seq_pool_stride=5), [SEQ(3)], [plain])
    wins = [loop_windows(s, e, 5, from_end) for s, e in segments(plain.seq_starts)]
    np.testing.assert_allclose(out.value, [reduce(plain.value[a:b]) for w in wins
                                           for a, b in w], rtol=1e-5)
    np.testing.assert_array_equal(out.seq_starts, np.cumsum([0] + [len(w) for w in wins]))


def test_first_seq_stride_windows_are_aligned_to_the_end():
    arg = Argument(value=np.arange(9.0).reshape(9, 1), seq_starts=np.array([0, 9]))
    out = run_layer("seqlastins", {"select_first": True, "seq_pool_stride": 5}, [SEQ(1)], [arg])
    assert out.value[:, 0].tolist() == [0.0, 4.0]  # windows [0, 4) and [4, 9)
    out = run_layer("seqlastins", {"seq_pool_stride": 5}, [SEQ(1)], [arg])
    assert out.value[:, 0].tolist() == [4.0, 8.0]  # windows [0, 5) and [5, 9)


def test_max_output_max_index_gives_batch_rows():
    arg = Argument(value=np.array([[1.0, 5], [3, 2], [0, 1], [2, 0]]),
                   seq_starts=np.array([0, 2, 4]))
    out = run_layer("max", {"output_max_index": True}, [SEQ(2)], [arg])
    np.testing.assert_array_equal(out.value, [[1, 0], [3, 2]])


def test_average_of_an_empty_sequence_is_zero_then_bias():
    arg = Argument(value=np.ones((3, 2)), seq_starts=np.array([0, 2, 2, 3]))
    for strategy in ("average", "sum", "squarerootn"):
        out = run_layer("average", {"average_strategy": strategy, "bias": True}, [SEQ(2)],
                        [arg], params={"_test_layer.wbias": [[0.5, -0.5]]})
        np.testing.assert_allclose(out.value[1], [0.5, -0.5])
        assert np.isfinite(out.value).all()


@pytest.mark.parametrize("kind,settings", [
    ("seqlastins", {}), ("seqlastins", {"select_first": True}), ("max", {}),
])
def test_empty_sequence_names_data_layer_and_sample(kind, settings):
    arg = Argument(value=dense(RNG, 4, 2), seq_starts=np.array([0, 2, 2, 4]))
    with pytest.raises(ValueError, match=r"sequence 1 \(sample 1\).*data layer 'words'.*empty"):
        run_layer(kind, settings, [SEQ(2, name="words")], [arg])
    nested = Argument(value=dense(RNG, 4, 2), seq_starts=np.array([0, 2, 4]),
                      sub_seq_starts=np.array([0, 2, 3, 3, 4]))
    with pytest.raises(ValueError, match=r"sub-sequence 2 \(in sample 1\).*data layer 'para'"):
        run_layer(kind, dict(settings, trans_type="seq"), [NESTED(2, name="para")], [nested])


def test_empty_sequence_error_names_the_data_layer_through_other_layers():
    from sculler.core.builder import ModelBuilder
    from sculler.core.layer import PASS_TEST
    from sculler.core.model_config import InputConfig, LayerConfig
    from sculler.core.network import Network
    from sculler.core.parameter import ParameterSet

    b = ModelBuilder()
    b.add_layer(LayerConfig("words", "data", size=2))
    b.add_layer(LayerConfig("hidden", "fc", size=3, inputs=[InputConfig("words")]))
    b.add_layer(LayerConfig("last", "seqlastins", size=3, inputs=[InputConfig("hidden")]))
    net = Network(b.build(["last"], input_layer_names=["words"]), ParameterSet(seed=1))
    arg = Argument(value=dense(RNG, 3, 2), seq_starts=np.array([0, 1, 3, 3]))
    with pytest.raises(ValueError, match=r"sequence 2 \(sample 2\) of input 0 \('hidden', "
                                         r"positions from data layer 'words'\)"):
        net.forward([arg], PASS_TEST)


def test_wrong_nesting_levels_are_clear():
    plain = seq_arg(RNG, [2, 3], 2)
    with pytest.raises(ValueError, match="must be a nested sequence"):
        run_layer("max", {"trans_type": "seq"}, [SEQ(2)], [plain])
    with pytest.raises(ValueError, match="must be a sequence"):
        run_layer("average", {}, [INPUT_DATA(2)], [Argument(value=dense(RNG, 3, 2))])
    nested = seq_arg(RNG, [2, 3], 2, nested=True)
    with pytest.raises(ValueError, match="needs a plain sequence"):
        run_layer("seqlastins", {"seq_pool_stride": 2}, [NESTED(2)], [nested])


def test_average_seq_level_rejects_empty_subsequence_on_a_sample_boundary():
    arg = Argument(value=dense(RNG, 3, 2), seq_starts=np.array([0, 1, 3]),
                   sub_seq_starts=np.array([0, 1, 1, 3]))
    with pytest.raises(ValueError, match="boundary between two samples"):
        run_layer("average", {"trans_type": "seq"}, [NESTED(2)], [arg])
    inner = Argument(value=dense(RNG, 3, 2), seq_starts=np.array([0, 3]),
                     sub_seq_starts=np.array([0, 1, 1, 3]))
    out = run_layer("average", {"trans_type": "seq"}, [NESTED(2)], [inner])
    np.testing.assert_allclose(out.value[1], 0.0)
    assert out.seq_starts.tolist() == [0, 3]


def test_expand_both_levels_match_loops():
    target = seq_arg(RNG, [2, 3, 1], 1, nested=True)
    data = Argument(value=dense(RNG, 3, 2))
    out = run_layer("expand", {}, [INPUT_DATA(2), NESTED(1)], [data, target])
    want = np.concatenate([np.repeat(data.value[n:n + 1], e - s, axis=0)
                           for n, (s, e) in enumerate(segments(target.seq_starts))])
    np.testing.assert_allclose(out.value, want)
    assert out.seq_starts is target.seq_starts and out.sub_seq_starts is target.sub_seq_starts
    subs = len(target.sub_seq_starts) - 1
    per_sample = np.searchsorted(target.sub_seq_starts, target.seq_starts)
    data = Argument(value=dense(RNG, subs, 2), seq_starts=per_sample)
    out = run_layer("expand", {"trans_type": "seq"}, [SEQ(2), NESTED(1)], [data, target])
    want = np.concatenate([np.repeat(data.value[j:j + 1], e - s, axis=0)
                           for j, (s, e) in enumerate(segments(target.sub_seq_starts))])
    np.testing.assert_allclose(out.value, want)
    with pytest.raises(ValueError, match="needs one per sequence of expand_as"):
        run_layer("expand", {}, [INPUT_DATA(2), NESTED(1)],
                  [Argument(value=dense(RNG, 2, 2)), target])


def test_seq_concat_and_reshape_match_loops():
    a, b = seq_arg(RNG, [2, 0, 3], 2), seq_arg(RNG, [1, 2, 0], 2)
    out = run_layer("seqconcat", {}, [SEQ(2), SEQ(2)], [a, b])
    want = np.concatenate([np.concatenate([a.value[sa:ea], b.value[sb:eb]]) for (sa, ea), (sb, eb)
                           in zip(segments(a.seq_starts), segments(b.seq_starts))])
    np.testing.assert_allclose(out.value, want)
    assert out.seq_starts.tolist() == [0, 3, 5, 8]
    x = seq_arg(RNG, [2, 4], 3)
    out = run_layer("seqreshape", {"size": 2}, [SEQ(3)], [x])
    np.testing.assert_allclose(out.value, x.value.reshape(-1, 2))
    assert out.seq_starts.tolist() == [0, 3, 9]
    with pytest.raises(ValueError, match="sequence 0 .* do not divide"):
        run_layer("seqreshape", {"size": 4}, [SEQ(3)], [seq_arg(RNG, [1, 4], 3)])


def test_sequence_softmax_normalises_each_subsequence_of_a_nested_input():
    arg = seq_arg(RNG, [3, 4], 2, nested=True)
    w = np.array([[0.7], [-1.2]])
    out = run_layer("fc", {"size": 1, "active_type": "sequence_softmax", "bias": False},
                    [NESTED(2)], [arg], params={"_test_layer.w0": w})
    z = arg.value @ w
    for s, e in segments(arg.sub_seq_starts):
        np.testing.assert_allclose(out.value[s:e], np.exp(z[s:e]) / np.exp(z[s:e]).sum(),
                                   rtol=1e-5)
    plain = Argument(value=arg.value, seq_starts=arg.seq_starts)
    out = run_layer("fc", {"size": 1, "active_type": "sequence_softmax", "bias": False},
                    [SEQ(2)], [plain], params={"_test_layer.w0": w})
    for s, e in segments(plain.seq_starts):
        np.testing.assert_allclose(out.value[s:e].sum(), 1.0, rtol=1e-5)


def ids(*values):
    return Argument(ids=np.array(values, dtype=np.int64))


def test_sub_seq_matches_loop_and_checks_bounds():
    from sculler.testing import INPUT_LABEL

    x = seq_arg(RNG, [4, 2, 5], 2)
    off, size = [1, 0, 2], [2, 2, 3]
    inputs = [SEQ(2), INPUT_LABEL(9), INPUT_LABEL(9)]
    out = run_layer("subseq", {}, inputs, [x, ids(*off), ids(*size)])
    want = np.concatenate([x.value[s + o:s + o + n] for (s, _), o, n in
                           zip(segments(x.seq_starts), off, size)])
    np.testing.assert_allclose(out.value, want)
    assert out.seq_starts.tolist() == [0, 2, 4, 7]
    with pytest.raises(ValueError, match=r"offset 1 and size 2 do not fit sequence 1 .*sample 1"):
        run_layer("subseq", {}, inputs, [x, ids(0, 1, 0), ids(1, 2, 1)])
    with pytest.raises(ValueError, match="has 2 rows, expected 3"):
        run_layer("subseq", {}, inputs, [x, ids(0, 1), ids(1, 2)])


def loop_slices(x, segs, begins, ends):
    """Per (sub-)sequence and column: inclusive slices until the first -1."""
    out = []
    for (s, _), brow, erow in zip(segments(segs), begins, ends):
        for b, f in zip(brow, erow):
            if b == -1 or f == -1:
                break
            out.append(x[s + int(b):s + int(f) + 1])
    return out


def test_seq_slice_plain_and_nested_match_loops():
    from sculler.testing import INPUT_DATA_TARGET as IDX

    x = seq_arg(RNG, [4, 3], 2)
    b, e = np.array([[0.0, 2], [1, -1]]), np.array([[1.0, 3], [2, -1]])
    out = run_layer("seq_slice", {}, [SEQ(2), IDX(2), IDX(2)],
                    [x, Argument(value=b), Argument(value=e)])
    parts = loop_slices(x.value, x.seq_starts, b, e)
    np.testing.assert_allclose(out.value, np.concatenate(parts))
    assert out.seq_starts.tolist() == [0, 2, 4, 6] and out.sub_seq_starts is None
    # only ends (starts mean 0), nested: each slice a sub-sequence of its sample
    nested = Argument(value=x.value, seq_starts=x.seq_starts,
                      sub_seq_starts=np.array([0, 1, 4, 5, 7]))
    ends = np.array([[0.0], [1], [0], [-1]])
    out = run_layer("seq_slice", {"select_first": False}, [NESTED(2), IDX(1)],
                    [nested, Argument(value=ends)])
    parts = loop_slices(x.value, nested.sub_seq_starts, np.zeros_like(ends), ends)
    np.testing.assert_allclose(out.value, np.concatenate(parts))
    assert out.sub_seq_starts.tolist() == [0, 1, 3, 4]
    assert out.seq_starts.tolist() == [0, 3, 4]
    with pytest.raises(ValueError, match=r"slice \[2, 5\] is empty or outside"):
        run_layer("seq_slice", {}, [SEQ(2), IDX(1), IDX(1)],
                  [x, Argument(value=np.array([[2.0], [0]])),
                   Argument(value=np.array([[5.0], [0]]))])


def test_kmax_seq_score_and_sub_nested_seq_match_loops():
    from sculler.testing import INPUT_DATA_TARGET as IDX

    scores = Argument(value=np.array([[0.1], [0.9], [0.5], [0.3], [0.7]]),
                      seq_starts=np.array([0, 3, 4, 5]), sub_seq_starts=None)
    out = run_layer("kmax_seq_score", {"beam_size": 2}, [SEQ(1)], [scores])
    np.testing.assert_array_equal(out.value, [[1, 2], [0, -1], [0, -1]])
    scores.seq_starts = np.array([0, 3, 3, 5])  # an empty sequence gets only padding
    out = run_layer("kmax_seq_score", {"beam_size": 3}, [SEQ(1)], [scores])
    np.testing.assert_array_equal(out.value, [[1, 2, 0], [-1, -1, -1], [1, 0, -1]])
    assert out.seq_starts is None
    x = seq_arg(RNG, [3, 4], 2, nested=True)
    subs = x.sub_seq_starts
    per = np.searchsorted(subs, x.seq_starts)
    sel = np.full((2, 3), -1.0)
    sel[0, :1] = [per[1] - per[0] - 1]
    sel[1, :2] = [per[2] - per[1] - 1, 0]
    out = run_layer("sub_nested_seq", {}, [NESTED(2), IDX(3)], [x, Argument(value=sel)])
    want = []
    for n in range(2):
        for j in sel[n]:
            if j == -1:
                break
            g = per[n] + int(j)
            want.append(x.value[subs[g]:subs[g + 1]])
    np.testing.assert_allclose(out.value, np.concatenate(want))
    assert out.seq_starts[-1] == len(out.value) and len(out.seq_starts) == 3
    with pytest.raises(ValueError, match="selected index 9 is not a sub-sequence of sample 0"):
        run_layer("sub_nested_seq", {}, [NESTED(2), IDX(1)],
                  [x, Argument(value=np.array([[9.0], [0]]))])


def test_seqfirstins_is_first_seq_and_expand_needs_nested_target_from_sequence():
    arg = seq_arg(RNG, [3, 2], 2)
    out = run_layer("seqfirstins", {}, [SEQ(2)], [arg])
    np.testing.assert_allclose(out.value, arg.value[[0, 3]])
    data = seq_arg(RNG, [1, 1], 2)
    with pytest.raises(ValueError, match=r"expand_level=FROM_SEQUENCE.*must be a nested"):
        run_layer("expand", {"trans_type": "seq"}, [SEQ(2), SEQ(2)], [data, arg])


@pytest.mark.parametrize("length,start", [(3, -1), (4, -2), (2, 1), (5, -4)])
def test_context_projection_with_trainable_padding_matches_loop(length, start):
    """Slot j of row t reads row t+start+j of the same sequence, else a padding row
    (before the start: begin_pad + s; after the end: begin_pad + s - L)."""
    arg = Argument(value=dense(RNG, 6, 2), seq_starts=np.array([0, 1, 1, 4, 6]))
    begin, end = max(0, -start), max(0, start + length - 1)
    pad = dense(RNG, begin + end, 2)
    attrs = {"proj": "context", "context_len": length, "context_start": start,
             "trainable_padding": True}
    out = run_layer("mixed", {}, [SEQ(2, attrs=attrs)], [arg],
                    params={"_test_layer.w0": pad} if begin + end else None)
    want = np.zeros((6, 2 * length))
    for s, e in segments(arg.seq_starts):
        for t in range(s, e):
            for j in range(length):
                pos = t - s + start + j
                if pos < 0:
                    row = pad[begin + pos]
                elif pos >= e - s:
                    row = pad[begin + pos - (e - s)]
                else:
                    row = arg.value[s + pos]
                want[t, 2 * j:2 * j + 2] = row
    np.testing.assert_allclose(out.value, want, rtol=1e-6)


def test_helpers_make_the_layouts_they_say():
    rng = np.random.RandomState(0)
    assert lengths(7, rng, "one") == [7]
    assert lengths(3, rng, "ones") == [1, 1, 1]
    assert all(n % 2 == 0 for n in lengths(10, rng, "even"))
    s = starts([2, 3])
    subs = nested_starts([2, 3], rng)
    assert set(s.tolist()) <= set(subs.tolist()) and subs[-1] == 5


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


@pytest.mark.parametrize("length,start", [(3, -1), (4, -2), (2, 1), (5, -4), (1, 0)])
def test_context_projection_backward_matches_row_by_row_loop(length, start):
    """The backward adds each tap as one masked slice (a shift maps distinct rows to distinct
    rows); around sequences of length 1, empty sequences and the batch ends it must give the
    scatter-add a row-by-row loop gives: slot j of row t sends its gradient to row
    t+start+j of the same sequence, or to the padding row it read."""
    from sculler.core.layer import PASS_TRAIN
    from sculler.core.network import Network
    from sculler.core.parameter import ParameterSet
    from sculler.testing.grad_check import TestConfig, build_test_model

    seq_starts = np.array([0, 1, 1, 4, 6, 7, 7])
    x = Argument(value=dense(RNG, 7, 2), seq_starts=seq_starts)
    attrs = {"proj": "context", "context_len": length, "context_start": start,
             "trainable_padding": True}
    net = Network(build_test_model(TestConfig(inputs=[SEQ(2, attrs=attrs)]), "mixed"),
                  ParameterSet(seed=1), data_gradients=True)
    dy = dense(RNG, 7, 2 * length)
    net.forward([x], PASS_TRAIN)
    net.backward(output_grads={"test_layer": dy})
    begin, end = max(0, -start), max(0, start + length - 1)
    dx, dpad = np.zeros((7, 2), dy.dtype), np.zeros((begin + end, 2), dy.dtype)
    for j in range(length):  # tap by tap, as the scatter-add summed
        for s, e in segments(seq_starts):
            for t in range(s, e):
                pos = t - s + start + j
                if pos < 0:
                    dpad[begin + pos] += dy[t, 2 * j:2 * j + 2]
                elif pos >= e - s:
                    dpad[begin + pos - (e - s)] += dy[t, 2 * j:2 * j + 2]
                else:
                    dx[s + pos] += dy[t, 2 * j:2 * j + 2]
    np.testing.assert_array_equal(net.data_layers[0].output.grad, dx)
    if begin + end:
        (pad,) = [p for p in net.used_parameters if p.name.endswith(".w0")]
        np.testing.assert_array_equal(pad.grad, dpad)
