"""Recurrent networks (simple_lstm, bidirectional_lstm, simple_gru2, bidirectional_gru): layer
and parameter names of PaddlePaddle's networks.py, sizes, and what return_seq=False returns."""

import numpy as np
import pytest

import sculler as paddle

L = paddle.layer
N = paddle.networks


@pytest.fixture(autouse=True)
def fresh_names():
    L.reset_names()


def _words():
    return L.data(name="w", type=paddle.data_type.integer_value_sequence(30))


def _layers(out):
    seen, todo = {}, [out]
    while todo:
        node = todo.pop()
        if node.name not in seen:
            seen[node.name] = node
            todo.extend(node.parents)
    return seen


def test_simple_lstm_and_gru2_names_and_parameters():
    emb = L.embedding(input=_words(), size=6)
    lstm = N.simple_lstm(input=emb, size=4)
    gru = N.simple_gru2(input=emb, size=5, name="g", reverse=True)
    layers = _layers(lstm) | _layers(gru)
    assert (lstm.name, lstm.size, gru.name, gru.size) == ("__lstm_0__", 4, "g", 5)
    assert layers["lstm_transform___lstm_0__"].layer_type == "mixed"
    assert layers["lstm_transform___lstm_0__"].size == 16
    assert layers["g_transform"].size == 15 and gru.config.attrs["reversed"] is True
    params = paddle.parameters.create([lstm, gru])
    assert {n: params.get_shape(n) for n in params.names()} == {
        "___embedding_0__.w0": (30, 6),
        "_lstm_transform___lstm_0__.w0": (6, 16),
        "___lstm_0__.w0": (4, 4, 4), "___lstm_0__.wbias": (1, 28),
        "_g_transform.w0": (6, 15),
        "_g.w0": (5, 15), "_g.wbias": (1, 15)}


@pytest.mark.parametrize("network,prefix,kw", [
    (N.bidirectional_lstm, "__bidirectional_lstm_0__", {"fwd_act": paddle.activation.Relu()}),
    (N.bidirectional_gru, "__bidirectional_gru_0__", {"bwd_gate_act": paddle.activation.Tanh()}),
])
def test_bidirectional_last_is_last_fw_and_first_bw(network, prefix, kw):
    emb = L.embedding(input=_words(), size=6)
    last = network(input=emb, size=3, **kw)
    seq = network(input=emb, size=3, name="seq", return_seq=True, **kw)
    layers = _layers(last)
    assert (last.name, last.size, seq.size) == (prefix, 6, 6)
    assert {f"{prefix}_fw", f"{prefix}_bw", f"{prefix}_fw_last", f"{prefix}_bw_last"} <= set(layers)
    assert layers[f"{prefix}_fw_last"].layer_type == "seqlastins"
    assert layers[f"{prefix}_bw"].config.attrs["reversed"] is True
    params = paddle.parameters.create([last, seq])
    rng = np.random.RandomState(1)
    for name in params.names():
        params.set(name, rng.normal(0, 0.5, size=params.get_shape(name)).astype(np.float32))
    for name in params.names():  # the same weights in both networks
        if "seq_" in name:
            params.set(name, params.get(prefix.join(name.split("seq", 1))))
    samples = [([3, 1, 4, 1, 5],), ([9],), ([2, 6, 5],)]
    got = paddle.infer(output_layer=last, parameters=params, input=samples)
    full = paddle.infer(output_layer=seq, parameters=params, input=samples)
    starts = [0, 5, 6, 9]
    want = np.stack([np.concatenate([full[e - 1, :3], full[s, 3:]])
                     for s, e in zip(starts[:-1], starts[1:])])
    np.testing.assert_allclose(got, want, rtol=1e-6)
    assert np.abs(got).max() > 0.01


def test_unknown_directional_keyword_is_named():
    emb = L.embedding(input=_words(), size=6)
    with pytest.raises(TypeError, match=r"fwd_inner_param"):
        N.bidirectional_lstm(input=emb, size=3, fwd_inner_param=None)
