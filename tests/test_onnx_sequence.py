"""ONNX export over one sequence: onnxruntime's outputs equal paddle.infer's (1e-5) on a batch
of one sequence for lstmemory (peepholes, bias, reverse), grumemory, recurrent, whole-sequence
pooling and sequence_softmax; nested sequences, stride pooling and other sequence layers are
refused by name."""

from __future__ import annotations

import numpy as np
import pytest

import sculler as paddle
from sculler.onnx import UnsupportedLayerError, export

ort = pytest.importorskip("onnxruntime")
pytest.importorskip("onnx")

A, L, P, DT = paddle.activation, paddle.layer, paddle.pooling, paddle.data_type
RNG = np.random.RandomState(0)


def randomize(params, seed: int = 0) -> None:
    """Every parameter random, peepholes and biases included (batch_norm's moving variance,
    ``.w2``, positive)."""
    rng = np.random.RandomState(seed)
    for name in params.names():
        value = rng.randn(*params.get_shape(name)) * 0.5
        params.set(name, (np.abs(value) if name.endswith(".w2") else value).astype(np.float32))


def check(outputs, feeds: dict[str, np.ndarray], tmp_path, seed: int = 0):
    """Export ``outputs`` and compare onnxruntime with paddle.infer on ONE sample whose fields
    are ``feeds`` (a sequence field is its (T, dim) rows or (T,) ids)."""
    params = paddle.parameters.create(outputs)
    randomize(params, seed)
    path = tmp_path / "model.onnx"
    export(outputs, params, path)
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    got = session.run(None, feeds)
    order = [name for name, _ in paddle.topology.Topology(outputs).data_type()]
    want = paddle.infer(output_layer=outputs, parameters=params,
                        input=[tuple(feeds[n] for n in order)], flatten_result=False)
    want = want if isinstance(want, list) else [want]
    for o, g, w in zip(outputs, got, want):
        assert g.shape == w.shape, o.name
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5, err_msg=o.name)
    return session


def sequence(name: str, dim: int):
    return L.data(name=name, type=DT.dense_vector_sequence(dim))


@pytest.mark.parametrize("reverse", [False, True])
def test_fc_lstm_last_seq_softmax(reverse, tmp_path):
    paddle.layer.reset_names()
    x = sequence("x", 5)
    proj = L.fc(input=x, size=4 * 6, act=A.Linear())
    lstm = L.lstmemory(input=proj, reverse=reverse, name="lstm")
    last = L.last_seq(input=lstm)
    first = L.first_seq(input=lstm)
    out = L.fc(input=[last, first], size=3, act=A.Softmax(), name="out")
    session = check([out, lstm], {"x": RNG.randn(7, 5).astype(np.float32)}, tmp_path)
    assert [i.shape for i in session.get_inputs()] == [["T", 5]]
    assert [o.shape for o in session.get_outputs()] == [["batch", 3], ["T", 6]]


def test_lstm_activations_and_no_bias(tmp_path):
    paddle.layer.reset_names()
    x = sequence("x", 4)
    proj = L.fc(input=x, size=4 * 3, act=A.Linear(), bias_attr=False)
    relu = L.lstmemory(input=proj, act=A.Relu(), gate_act=A.Sigmoid(), state_act=A.Relu())
    plain = L.lstmemory(input=proj, bias_attr=False, reverse=True)
    check([relu, plain], {"x": RNG.randn(5, 4).astype(np.float32)}, tmp_path, seed=2)


def test_embedding_lstm_max_pooling_and_one_step(tmp_path):
    paddle.layer.reset_names()
    words = L.data(name="words", type=DT.integer_value_sequence(30))
    emb = L.embedding(input=words, size=8)
    lstm = paddle.networks.simple_lstm(input=emb, size=5)
    pooled = L.pooling(input=lstm, pooling_type=P.Max())
    out = L.fc(input=pooled, size=2, act=A.Softmax())
    for length in (6, 1):
        check([out], {"words": RNG.randint(0, 30, length).astype(np.int64)}, tmp_path)


@pytest.mark.parametrize("reverse", [False, True])
def test_grumemory_and_recurrent(reverse, tmp_path):
    paddle.layer.reset_names()
    x = sequence("x", 4)
    gru = paddle.networks.simple_gru2(input=x, size=5, reverse=reverse, act=A.Relu())
    out = L.fc(input=L.first_seq(input=gru), size=2)
    rnn = L.recurrent(input=L.fc(input=x, size=3), reverse=reverse, act=A.Sigmoid())
    plain = L.recurrent(input=x, bias_attr=False)
    check([out, gru, rnn, plain], {"x": RNG.randn(6, 4).astype(np.float32)}, tmp_path,
          seed=3)


@pytest.mark.parametrize("opset", [13, 18])
def test_average_sum_sqrtn_and_max_pooling_with_bias(opset, tmp_path):
    paddle.layer.reset_names()
    x = sequence("x", 3)
    hidden = L.mixed(size=4, act=A.Tanh(), bias_attr=True,
                     input=[L.full_matrix_projection(x, size=4)])
    norm = L.batch_norm(input=hidden)
    pools = [L.pooling(input=norm, pooling_type=kind, bias_attr=True)
             for kind in (P.Avg(), P.Sum(), P.SquareRootN(), P.Max())]
    params = paddle.parameters.create(pools)
    randomize(params)
    path = tmp_path / "model.onnx"
    export(pools, params, path, opset=opset)
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    xv = RNG.randn(5, 3).astype(np.float32)
    want = paddle.infer(output_layer=pools, parameters=params, input=[(xv,)],
                        flatten_result=False)
    for got, w in zip(session.run(None, {"x": xv}), want):
        np.testing.assert_allclose(got, w, rtol=1e-5, atol=1e-5)


def test_sequence_softmax_over_the_rows(tmp_path):
    paddle.layer.reset_names()
    x = sequence("x", 4)
    att = L.fc(input=x, size=1, act=A.SequenceSoftmax(), name="attention")
    session = check([att], {"x": RNG.randn(6, 4).astype(np.float32)}, tmp_path)
    (weights,) = session.run(None, {"x": RNG.randn(3, 4).astype(np.float32)})
    assert weights.shape == (3, 1) and np.isclose(weights.sum(), 1.0)


def refused(outputs, tmp_path) -> str:
    params = paddle.parameters.create(outputs)
    with pytest.raises(UnsupportedLayerError) as info:
        export(outputs, params, tmp_path / "m.onnx")
    assert not (tmp_path / "m.onnx").exists()
    return str(info.value)


def test_nested_stride_and_other_sequence_layers_are_refused_by_name(tmp_path):
    paddle.layer.reset_names()
    nested = L.data(name="nested", type=DT.dense_vector_sub_sequence(3))
    inner = L.pooling(input=nested, pooling_type=P.Avg(), name="per_sub",
                      agg_level=paddle.layer.AggregateLevel.TO_SEQUENCE)
    x = sequence("x", 4)
    strided = L.last_seq(input=x, stride=2, name="strided")
    indexed = L.pooling(input=x, pooling_type=P.Max(output_max_index=True), name="argmax")
    expanded = L.expand(input=L.first_seq(input=x), expand_as=x, name="expanded")
    msg = refused([inner, strided, indexed, expanded], tmp_path)
    assert "'nested' (data layer" in msg and "'per_sub' (type average): agg_level" in msg
    assert "'strided' (type seqlastins): stride pooling" in msg
    assert "'argmax' (type max): output_max_index" in msg
    assert "'expanded' (type expand): no ONNX conversion" in msg


def test_bad_cells_and_misplaced_sequence_layers_are_refused_by_name(tmp_path):
    paddle.layer.reset_names()
    x = sequence("x", 4)
    proj = L.fc(input=x, size=8, act=A.Linear())
    linear_cell = L.lstmemory(input=proj, state_act=A.Linear(), name="linear_cell")
    tanh_gate = L.grumemory(input=L.fc(input=x, size=6), gate_act=A.Tanh(), name="tanh_gate")
    v = L.data(name="v", type=DT.dense_vector(8))
    on_vector = L.lstmemory(input=v, name="on_vector")
    mixing = L.addto(input=[proj, v], name="mixing")
    wide = L.fc(input=x, size=2, act=A.SequenceSoftmax(), name="wide")
    msg = refused([linear_cell, tanh_gate, on_vector, mixing, wide], tmp_path)
    assert "'linear_cell' (type lstmemory): cell activation active_state_type='linear'" in msg
    assert "'tanh_gate' (type gated_recurrent): active_gate_type='tanh'" in msg
    assert "'on_vector' (type lstmemory): input 'v' is not a sequence" in msg
    assert "'mixing' (type addto): mixes sequence and non-sequence inputs" in msg
    assert "'wide' (type fc): activation 'sequence_softmax' needs a width-1 sequence" in msg
