"""Every sequence data type through the feeder and ``infer``: dense, ids, sparse binary and
sparse float sequences and their nested (``*_sub_sequence``) variants.

``infer`` returns what PaddlePaddle's v2 ``infer`` does for a sequence output: the rows of all
samples' sequences concatenated in sample order, ``(total rows, width)``, with no sequence
positions; a non-sequence output has one row per sample."""

import numpy as np
import pytest

import sculler as paddle
from sculler import data_type as dt
from sculler.data_feeder import DataFeeder

L, P = paddle.layer, paddle.pooling


@pytest.fixture(autouse=True)
def fresh_names():
    paddle.layer.reset_names()


RNG = np.random.RandomState(5)
DENSE_SEQ = [[RNG.rand(3).tolist() for _ in range(n)] for n in (2, 1, 4)]
IDS_SEQ = [[1, 4, 2], [0], [3, 3]]
SPARSE_SEQ = [[[0, 2], [1]], [[3]], [[], [0, 1, 3]]]
FLOAT_SEQ = [[[(0, 0.5), (2, -1.0)]], [[(1, 2.0)], [(3, 0.25)]], [[(0, 1.5)]]]
DENSE_SUB = [[[RNG.rand(3).tolist()] * 2, [RNG.rand(3).tolist()]], [[RNG.rand(3).tolist()]]]
IDS_SUB = [[[1, 2], [3]], [[0], [], [4, 4, 1]]]
SPARSE_SUB = [[[[0], [2, 3]]], [[[1]], [[0, 1]]]]
FLOAT_SUB = [[[[(0, 1.0)]], [[(2, 0.5)], [(1, -2.0)]]], [[[(3, 4.0)]]]]


def to_dense(row, width=4):
    v = np.zeros(width)
    for item in row:
        if isinstance(item, tuple):
            v[item[0]] = item[1]
        else:
            v[item] = 1.0
    return v


def flat(samples, depth):
    """Rows of the samples in order (depth 1: sequences, 2: nested)."""
    if depth == 1:
        return [row for s in samples for row in s]
    return [row for s in samples for sub in s for row in sub]


CASES = [
    ("dense", dt.dense_vector_sequence(3), DENSE_SEQ, 1, np.asarray),
    ("ids", dt.integer_value_sequence(5), IDS_SEQ, 1, None),
    ("sparse_binary", dt.sparse_binary_vector_sequence(4), SPARSE_SEQ, 1, to_dense),
    ("sparse_float", dt.sparse_float_vector_sequence(4), FLOAT_SEQ, 1, to_dense),
    ("dense_sub", dt.dense_vector_sub_sequence(3), DENSE_SUB, 2, np.asarray),
    ("ids_sub", dt.integer_value_sub_sequence(5), IDS_SUB, 2, None),
    ("sparse_binary_sub", dt.sparse_binary_vector_sub_sequence(4), SPARSE_SUB, 2, to_dense),
    ("sparse_float_sub", dt.sparse_float_vector_sub_sequence(4), FLOAT_SUB, 2, to_dense),
]


@pytest.mark.parametrize("name,tp,samples,depth,dense_of", CASES, ids=[c[0] for c in CASES])
def test_feeder_packs_every_sequence_type(name, tp, samples, depth, dense_of):
    arg = DataFeeder([("x", tp)]).convert([(s,) for s in samples])["x"]
    if depth == 1:
        lens = [len(s) for s in samples]
        assert arg.sub_seq_starts is None
    else:
        lens = [sum(len(sub) for sub in s) for s in samples]
        sub_lens = [len(sub) for s in samples for sub in s]
        np.testing.assert_array_equal(arg.sub_seq_starts, np.cumsum([0] + sub_lens))
    np.testing.assert_array_equal(arg.seq_starts, np.cumsum([0] + lens))
    rows = flat(samples, depth)
    if dense_of is None:
        np.testing.assert_array_equal(arg.ids, rows)
    else:
        value = arg.value.toarray() if arg.is_sparse else arg.value
        np.testing.assert_allclose(value, np.array([dense_of(r) for r in rows]), rtol=1e-6)


def features(tp, x):
    """Dense features of a data layer: ids through an embedding, sparse through an fc."""
    if tp.type == dt.DataType.Index:
        return L.embedding(input=x, size=2, param_attr=paddle.attr.Param(name="table"))
    return L.fc(input=x, size=2, act=paddle.activation.Linear(), bias_attr=False,
                param_attr=paddle.attr.Param(name="proj"))


def feature_rows(tp, params, rows, dense_of):
    if tp.type == dt.DataType.Index:
        return params.get("table")[np.asarray(rows, dtype=int)]
    return np.array([dense_of(r) for r in rows]) @ params.get("proj")


@pytest.mark.parametrize("name,tp,samples,depth,dense_of", CASES, ids=[c[0] for c in CASES])
def test_infer_returns_paddle_layout_for_every_sequence_type(name, tp, samples, depth,
                                                             dense_of):
    x = L.data(name="x", type=tp)
    feat = features(tp, x)
    total = L.pooling(input=feat, pooling_type=P.Sum())
    per_sub = L.pooling(input=feat, pooling_type=P.Sum(),
                        agg_level=paddle.layer.AggregateLevel.TO_SEQUENCE) if depth == 2 else None
    params = paddle.parameters.create(total)
    inputs = [(s,) for s in samples]
    outs = [feat, total] + ([per_sub] if per_sub is not None else [])
    got = paddle.infer(output_layer=outs, parameters=params, input=inputs,
                       flatten_result=False)  # one array per output layer
    rows = feature_rows(tp, params, flat(samples, depth), dense_of)
    # a sequence output: every row of every sample, in order, no padding
    np.testing.assert_allclose(got[0], rows, rtol=1e-5, atol=1e-6)
    lens = [len(s) if depth == 1 else sum(len(sub) for sub in s) for s in samples]
    starts = np.cumsum([0] + lens)
    np.testing.assert_allclose(got[1], [rows[a:b].sum(axis=0) for a, b in
                                        zip(starts[:-1], starts[1:])], rtol=1e-5, atol=1e-6)
    if per_sub is not None:
        sub_lens = [len(sub) for s in samples for sub in s]
        sub_starts = np.cumsum([0] + sub_lens)
        np.testing.assert_allclose(got[2], [rows[a:b].sum(axis=0) for a, b in
                                            zip(sub_starts[:-1], sub_starts[1:])],
                                   rtol=1e-5, atol=1e-6)
    # chunked inference gives the same concatenation
    again = paddle.inference.Inference(outs, params, batch_size=2).infer(
        inputs, flatten_result=False)
    for a, b in zip(got, again):
        np.testing.assert_allclose(a, b, rtol=1e-6)


def test_infer_id_field_of_a_sequence_output_is_flat():
    x = L.data(name="x", type=dt.dense_vector_sequence(3))
    prob = L.fc(input=x, size=3, act=paddle.activation.Softmax())
    params = paddle.parameters.create(prob)
    got = paddle.infer(output_layer=prob, parameters=params, input=[(s,) for s in DENSE_SEQ],
                       field=["value", "id"])
    assert got[0].shape == (7, 3) and got[1].shape == (7,)
    np.testing.assert_array_equal(got[1], got[0].argmax(axis=1))


@pytest.mark.parametrize("make", [
    lambda f: L.last_seq(input=f), lambda f: L.first_seq(input=f),
    lambda f: L.pooling(input=f, pooling_type=P.Max()),
])
def test_zero_length_sequence_in_infer_names_data_layer_and_sample(make):
    words = L.data(name="words", type=dt.integer_value_sequence(5))
    out = make(L.embedding(input=words, size=2))
    params = paddle.parameters.create(out)
    with pytest.raises(ValueError, match=r"sample 2\).*data layer 'words'.*empty"):
        paddle.infer(output_layer=out, parameters=params, input=[([1, 2],), ([3],), ([],)])
    nested = L.data(name="para", type=dt.integer_value_sub_sequence(5))
    out = L.last_seq(input=L.embedding(input=nested, size=2),
                     agg_level=paddle.layer.AggregateLevel.TO_SEQUENCE)
    params = paddle.parameters.create(out)
    with pytest.raises(ValueError, match=r"sub-sequence 2 \(in sample 1\).*data layer 'para'"):
        paddle.infer(output_layer=out, parameters=params, input=[([[1], [2]],), ([[], [3]],)])


def test_average_pooling_accepts_empty_sequences_and_gives_zero():
    words = L.data(name="words", type=dt.integer_value_sequence(5))
    out = L.pooling(input=L.embedding(input=words, size=2), pooling_type=P.Avg())
    params = paddle.parameters.create(out)
    got = paddle.infer(output_layer=out, parameters=params, input=[([1, 2],), ([],), ([3],)])
    np.testing.assert_allclose(got[1], 0.0)
    np.testing.assert_allclose(got[2], params.get("___embedding_0__.w0")[3], rtol=1e-6)
