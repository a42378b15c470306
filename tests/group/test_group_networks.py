"""Group networks: gru_group == grumemory and lstmemory_group == lstmemory on the same
parameters (forward and gradients, float64), gru_step_naive == gru_step, gradient checks of
lstmemory_group (cell state through get_output) and of attention inside a decoder group."""

import numpy as np
import pytest

import sculler as paddle
from sculler import backend
from sculler.core.argument import Argument
from sculler.core.layer import PASS_TEST
from sculler.core.network import Network
from sculler.core.parameter import ParameterSet
from sculler.testing import check_network_grad

D = paddle.data_type
H = 4


@pytest.fixture(autouse=True)
def fresh_names():
    paddle.layer.reset_names()


def seq_arg(rng, dim, starts):
    return Argument(value=rng.uniform(-1, 1, (starts[-1], dim)), seq_starts=np.array(starts))


def forward_backward(layer, params, args, dy):
    """Output value, the gradient of every parameter and the data gradients for dL/dy."""
    net = Network(paddle.topology.Topology(layer).proto(), params, data_gradients=True)
    out = net.forward(args, PASS_TEST)[0].value.copy()
    net.zero_grad()
    net.backward(output_grads={layer.name: dy})
    grads = {p.name: p.grad.copy() for p in net.used_parameters}
    data = {d.name: d.output.grad.copy() for d in net.data_layers}
    return out, grads, data


@pytest.mark.parametrize("reverse", [False, True])
def test_gru_group_equals_grumemory(reverse):
    x = paddle.layer.data(name="x", type=D.dense_vector_sequence(5))
    proj = paddle.layer.fc(input=x, size=3 * H, act=paddle.activation.Linear(), bias_attr=False)
    w, b = paddle.attr.Param(name="gru_w"), paddle.attr.Param(name="gru_b", initial_std=0.3)
    whole = paddle.layer.grumemory(input=proj, reverse=reverse, param_attr=w, bias_attr=b)
    group = paddle.networks.gru_group(input=proj, reverse=reverse, gru_param_attr=w,
                                      gru_bias_attr=b)
    rng = np.random.RandomState(0)
    with backend.default_dtype(np.float64):
        params = ParameterSet(seed=4)
        args = {"x": seq_arg(rng, 5, [0, 3, 4, 9, 11])}
        dy = rng.uniform(-1, 1, (11, H))
        ref = forward_backward(whole, params, args, dy)
        got = forward_backward(group, params, args, dy)
    np.testing.assert_allclose(got[0], ref[0], rtol=1e-9, atol=1e-12)
    assert set(got[1]) == set(ref[1]) == {"gru_w", "gru_b", f"_{proj.name}.w0"}
    for name in ref[1]:
        np.testing.assert_allclose(got[1][name], ref[1][name], rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(got[2]["x"], ref[2]["x"], rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("with_gate_bias", [False, True])
def test_lstmemory_group_equals_lstmemory(with_gate_bias):
    """lstmemory's 7H bias = [4H gate bias | 3H peepholes]; the group has the peepholes on
    lstm_step and the gate bias (off by default) on <name>_input_recurrent."""
    x = paddle.layer.data(name="x", type=D.dense_vector_sequence(3))
    proj = paddle.layer.fc(input=x, size=4 * H, act=paddle.activation.Linear(), bias_attr=False)
    whole = paddle.layer.lstmemory(input=proj, name="whole")
    group = paddle.networks.lstmemory_group(
        input=proj, name="grp", input_proj_bias_attr=True if with_gate_bias else None)
    g = "@grp_recurrent_group"
    rng = np.random.RandomState(1)
    with backend.default_dtype(np.float64):
        params = ParameterSet(seed=5)
        args = {"x": seq_arg(rng, 3, [0, 4, 5, 8])}
        dy = rng.uniform(-1, 1, (8, H))
        Network(paddle.topology.Topology([whole, group]).proto(), params)
        bias7 = params["_whole.wbias"].value.reshape(-1)
        bias7[:] = rng.uniform(-0.5, 0.5, 7 * H)
        # lstmemory's (H, H, 4) weight is a flat H x 4H matrix in the gate order [a|i|f|o]
        params[f"_grp_input_recurrent{g}.w1"].value.reshape(-1)[:] = (
            params["_whole.w0"].value.reshape(-1))
        params["_grp@grp_recurrent_group.wbias"].value.reshape(-1)[:] = bias7[4 * H:]
        if with_gate_bias:
            params["_grp_input_recurrent@grp_recurrent_group.wbias"].value.reshape(-1)[:] = (
                bias7[: 4 * H])
        else:
            bias7[: 4 * H] = 0
        ref = forward_backward(whole, params, args, dy)
        got = forward_backward(group, params, args, dy)
    np.testing.assert_allclose(got[0], ref[0], rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(got[1][f"_grp_input_recurrent{g}.w1"].reshape(-1),
                               ref[1]["_whole.w0"].reshape(-1), rtol=1e-9, atol=1e-12)
    peep = got[1]["_grp@grp_recurrent_group.wbias"].reshape(-1)
    np.testing.assert_allclose(peep, ref[1]["_whole.wbias"].reshape(-1)[4 * H:], rtol=1e-9,
                               atol=1e-12)
    if with_gate_bias:
        gate = got[1]["_grp_input_recurrent@grp_recurrent_group.wbias"].reshape(-1)
        np.testing.assert_allclose(gate, ref[1]["_whole.wbias"].reshape(-1)[: 4 * H],
                                   rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(got[2]["x"], ref[2]["x"], rtol=1e-9, atol=1e-12)


def test_gru_step_naive_equals_gru_step():
    x = paddle.layer.data(name="x", type=D.dense_vector_sequence(3 * H))
    fast = paddle.networks.gru_group(input=x, name="fast", gru_bias_attr=False)
    naive = paddle.networks.gru_group(input=x, name="slow", naive=True)
    rng = np.random.RandomState(2)
    with backend.default_dtype(np.float64):
        params = ParameterSet(seed=6)
        topo = paddle.topology.Topology([fast, naive])
        net = Network(topo.proto(), params)
        wg = params["_fast@fast_recurrent_group.w0"].value.reshape(-1)
        gate = wg[: 2 * H * H].reshape(H, 2 * H)
        cand = wg[2 * H * H:].reshape(H, H)
        g = "@slow_recurrent_group"
        params[f"_slow_update{g}.w1"].value[...] = gate[:, :H]
        params[f"_slow_reset{g}.w1"].value[...] = gate[:, H:]
        params[f"_slow_output_candidate{g}.w1"].value[...] = cand
        outs = net.forward({"x": seq_arg(rng, 3 * H, [0, 2, 7])}, PASS_TEST)
    np.testing.assert_allclose(outs[1].value, outs[0].value, rtol=1e-12, atol=1e-12)


def test_grad_lstmemory_group_and_gru_naive():
    x = paddle.layer.data(name="x", type=D.dense_vector_sequence(8))
    lstm = paddle.networks.lstmemory_group(input=x, name="l", reverse=True)
    gru = paddle.networks.simple_gru(input=x, size=3, name="g", naive=True)
    cost = paddle.layer.fc(input=[lstm, gru], size=2)
    report = check_network_grad(cost)
    assert "parameter _l@l_recurrent_group.wbias" in report.errors
    assert report.max_error < 1e-6


def attention_decoder(src, trg, dec_size=3, group="decoder"):
    enc = paddle.networks.simple_gru(input=src, size=3, name="enc")
    enc_proj = paddle.layer.fc(input=enc, size=dec_size, act=paddle.activation.Linear(),
                               bias_attr=False)
    boot = paddle.layer.fc(input=paddle.layer.first_seq(input=enc), size=dec_size,
                           act=paddle.activation.Tanh(), bias_attr=False)

    def step(enc_vec, enc_p, word):
        mem = paddle.layer.memory(name="gru_decoder", size=dec_size, boot_layer=boot)
        context = paddle.networks.simple_attention(encoded_sequence=enc_vec,
                                                   encoded_proj=enc_p, decoder_state=mem)
        dot = paddle.networks.dot_product_attention(encoded_sequence=enc_vec,
                                                    attended_sequence=enc_p,
                                                    transformed_state=mem)
        inputs = paddle.layer.fc(input=[context, dot, word], size=3 * dec_size,
                                 act=paddle.activation.Linear(), bias_attr=False)
        out = paddle.layer.gru_step(name="gru_decoder", input=inputs, output_mem=mem,
                                    size=dec_size)
        return paddle.layer.fc(input=out, size=5, act=paddle.activation.Softmax())

    return paddle.layer.recurrent_group(
        name=group, step=step,
        input=[paddle.layer.StaticInput(enc), paddle.layer.StaticInput(enc_proj), trg])


def test_grad_attention_decoder_group():
    src = paddle.layer.data(name="src", type=D.dense_vector_sequence(2))
    trg = paddle.layer.data(name="trg", type=D.dense_vector_sequence(2))
    probs = attention_decoder(src, trg)
    lbl = paddle.layer.data(name="lbl", type=D.integer_value_sequence(5))
    cost = paddle.layer.classification_cost(input=probs, label=lbl)
    rng = np.random.RandomState(3)
    inputs = {"src": seq_arg(rng, 2, [0, 3, 4, 6]), "trg": seq_arg(rng, 2, [0, 2, 5, 6]),
              "lbl": Argument(ids=rng.randint(0, 5, 6), seq_starts=np.array([0, 2, 5, 6]))}
    report = check_network_grad(cost, inputs=inputs)
    assert "parameter ___simple_attention_0___softmax@decoder.w0" in report.errors
    assert report.max_error < 1e-5
