"""v2 wrappers and v1 helpers of lstmemory / grumemory / recurrent: PaddlePaddle's auto names,
parameter names and shapes, engine attrs, errors, and a parameter tar round trip."""

import io

import numpy as np
import pytest

import sculler as paddle
from sculler.config.config_parser import config_scope, finish_config

L = paddle.layer
A = paddle.activation


@pytest.fixture(autouse=True)
def fresh_names():
    L.reset_names()


def _seq(name, dim):
    return L.data(name=name, type=paddle.data_type.dense_vector_sequence(dim))


def test_names_sizes_and_parameter_shapes():
    x = _seq("x", 12)
    lstm = L.lstmemory(input=x)
    gru = L.grumemory(input=x, reverse=True, act=A.Relu(), gate_act=A.Tanh())
    rnn = L.recurrent(input=x, bias_attr=False)
    assert [(o.name, o.layer_type, o.size) for o in (lstm, gru, rnn)] == [
        ("__lstmemory_0__", "lstmemory", 3), ("__gru_0__", "gated_recurrent", 4),
        ("__recurrent_layer_0__", "recurrent", 12)]
    assert lstm.config.attrs == {"active_gate_type": "sigmoid", "active_state_type": "tanh",
                                 "reversed": False}
    assert (gru.activation, gru.config.attrs["active_gate_type"], gru.config.attrs["reversed"]) \
        == ("relu", "tanh", True)
    params = paddle.parameters.create([lstm, gru, rnn])
    assert {n: params.get_shape(n) for n in params.names()} == {
        "___lstmemory_0__.w0": (3, 3, 4), "___lstmemory_0__.wbias": (1, 21),
        "___gru_0__.w0": (4, 12), "___gru_0__.wbias": (1, 12),
        "___recurrent_layer_0__.w0": (12, 12)}


def test_errors_name_the_argument():
    x = _seq("x", 12)
    with pytest.raises(ValueError, match=r"lstmemory: size=4 does not match .* width 12"):
        L.lstmemory(input=x, size=4)
    assert L.lstmemory(input=x, size=3).size == 3
    with pytest.raises(ValueError, match=r"multiple of 4"):
        L.lstmemory(input=_seq("y", 10))
    with pytest.raises(TypeError, match=r"gate_act must be an activation"):
        L.grumemory(input=x, gate_act="sigmoid")
    with pytest.raises(ValueError, match=r"active_gate_type 'softmax' is not supported"):
        L.grumemory(input=x, gate_act=A.Softmax())


def test_v1_helpers_build_the_same_layers():
    from sculler.config import helpers as H

    with config_scope() as ctx:
        x = H.data_layer(name="x", size=12)
        H.lstmemory(input=x, reverse=True)
        H.grumemory(input=x, name="g")
        H.recurrent_layer(input=x, act=H.ReluActivation())
        model = finish_config(ctx)
    layers = {lc.name: lc for lc in model.layers}
    assert layers["__lstmemory_0__"].attrs["reversed"] is True
    assert (layers["g"].type, layers["g"].size) == ("gated_recurrent", 4)
    assert layers["__recurrent_layer_0__"].active_type == "relu"
    assert {p.name: p.dims for p in model.parameters}["_g.w0"] == [4, 12]


def _model():
    x = _seq("x", 5)
    proj = L.fc(input=x, size=12, act=A.Linear(), bias_attr=False)
    lstm = L.lstmemory(input=proj, name="lstm")
    gru = L.grumemory(input=L.fc(input=x, size=9, act=A.Linear()), name="gru", reverse=True)
    return L.concat(input=[lstm, gru, L.recurrent(input=x, name="rnn")])


def test_tar_round_trip_gives_identical_outputs():
    out = _model()
    params = paddle.parameters.create(out)
    rng = np.random.RandomState(0)
    for name in params.names():  # nonzero biases and peepholes too
        params.set(name, rng.normal(0, 0.5, size=params.get_shape(name)).astype(np.float32))
    samples = [([rng.uniform(-1, 1, 5).tolist() for _ in range(n)],) for n in (3, 1, 6, 2)]
    before = paddle.infer(output_layer=out, parameters=params, input=samples)
    buf = io.BytesIO()
    params.to_tar(buf)
    buf.seek(0)
    loaded = paddle.parameters.Parameters.from_tar(buf)
    assert loaded.get_shape("_lstm.w0") == (3, 3, 4)
    after = paddle.infer(output_layer=out, parameters=loaded, input=samples)
    assert before.shape == (12, 3 + 3 + 5)
    np.testing.assert_array_equal(before, after)
    assert np.abs(before).max() > 0.05
