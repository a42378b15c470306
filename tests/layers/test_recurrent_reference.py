"""Recurrent layers (lstmemory, gated_recurrent, recurrent): equivalence with torch.nn.LSTM and
with direct per-step NumPy implementations of PaddlePaddle's formulas
(reference/sequence_layers.md section 4), and their configuration errors. Their gradient checks
over sequence layouts and activations are rows of tests/layers/grad_table.py."""

import numpy as np
import pytest

from sculler import backend
from sculler.core.argument import Argument
from sculler.core.layer import PASS_TEST
from sculler.core.network import Network
from sculler.core.parameter import ParameterSet
from sculler.testing import INPUT_DATA, INPUT_SEQUENCE_DATA, check_layer_grad
from sculler.testing.grad_check import TestConfig, build_test_model


def run_layer(layer_type, settings, x, lengths, weight, bias):
    """Forward one layer in float64 on packed ``x`` with the given parameter values."""
    with backend.default_dtype(np.float64):
        model = build_test_model(TestConfig(dict(settings), [INPUT_SEQUENCE_DATA(x.shape[1])],
                                            bias=bias is not None or False), layer_type)
        net = Network(model, ParameterSet(seed=0))
        net.parameters["_test_layer.w0"].value.reshape(-1)[...] = weight.reshape(-1)
        if bias is not None:
            net.parameters["_test_layer.wbias"].value.reshape(-1)[...] = bias
        starts = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
        return net.forward([Argument(value=x, seq_starts=starts)], PASS_TEST)[0].value.copy()


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def lstm_reference(x, lengths, w, b, reverse):
    """Per sequence, per step, PaddlePaddle's LSTM formulas (gates [c~ | i | f | o])."""
    hs = w.shape[0]
    out, start = np.zeros((x.shape[0], hs)), 0
    for n in lengths:
        h, c = np.zeros(hs), np.zeros(hs)
        steps = range(start + n - 1, start - 1, -1) if reverse else range(start, start + n)
        for r in steps:
            g = x[r] + b[:4 * hs] + h @ w
            a = np.tanh(g[:hs])
            i = sigmoid(g[hs:2 * hs] + c * b[4 * hs:5 * hs])
            f = sigmoid(g[2 * hs:3 * hs] + c * b[5 * hs:6 * hs])
            c = a * i + c * f
            o = sigmoid(g[3 * hs:] + c * b[6 * hs:])
            h = o * np.tanh(c)
            out[r] = h
        start += n
    return out


def gru_reference(x, lengths, flat_w, b, reverse):
    """Per sequence, per step, PaddlePaddle's GRU: W_g = first 2H^2 values (H x 2H), W_c =
    last H^2 (H x H); the candidate multiplies r * h_prev."""
    hs = b.size // 3
    w_gate = flat_w[:2 * hs * hs].reshape(hs, 2 * hs)
    w_cand = flat_w[2 * hs * hs:].reshape(hs, hs)
    out, start = np.zeros((x.shape[0], hs)), 0
    for n in lengths:
        h = np.zeros(hs)
        steps = range(start + n - 1, start - 1, -1) if reverse else range(start, start + n)
        for r in steps:
            zr = sigmoid(x[r, :2 * hs] + b[:2 * hs] + h @ w_gate)
            z, reset = zr[:hs], zr[hs:]
            cand = np.tanh(x[r, 2 * hs:] + b[2 * hs:] + (reset * h) @ w_cand)
            h = (1 - z) * h + z * cand
            out[r] = h
        start += n
    return out


def rnn_reference(x, lengths, w, b, reverse):
    out, start = np.zeros_like(x), 0
    for n in lengths:
        y = np.zeros(x.shape[1])
        steps = range(start + n - 1, start - 1, -1) if reverse else range(start, start + n)
        for r in steps:
            y = np.tanh(x[r] + b + y @ w)
            out[r] = y
        start += n
    return out


def random_case(rng, gates, hs=5, num_seqs=7):
    """Random lengths 1..8 (and one empty sequence, which takes part in no step)."""
    lengths = rng.randint(1, 9, size=num_seqs)
    lengths[3] = 0
    x = rng.uniform(-1, 1, size=(int(lengths.sum()), gates * hs))
    return lengths, x


# (layer type, gates, weight shape, bias size, per-step reference); lstmemory's bias holds
# nonzero peepholes
REFERENCES = [
    ("lstmemory", 4, (5, 20), 35, lstm_reference),
    ("gated_recurrent", 3, (75,), 15, gru_reference),
    ("recurrent", 1, (5, 5), 5, rnn_reference),
]


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("layer_type,gates,weight_shape,bias_size,reference", REFERENCES)
def test_matches_numpy_reference(layer_type, gates, weight_shape, bias_size, reference,
                                 reverse):
    rng = np.random.RandomState(4)
    lengths, x = random_case(rng, gates)
    w, b = rng.normal(0, 0.5, size=weight_shape), rng.normal(0, 0.5, size=bias_size)
    got = run_layer(layer_type, {"active_type": "tanh", "reversed": reverse}, x, lengths, w, b)
    np.testing.assert_allclose(got, reference(x, lengths, w, b, reverse), atol=1e-12)


def test_gru_weight_is_not_column_slices():
    """Reading the weight as columns [z | r | c] of one H x 3H matrix gives other outputs."""
    rng = np.random.RandomState(6)
    lengths, x = random_case(rng, 3)
    w, b = rng.normal(0, 0.5, size=75), np.zeros(15)
    got = run_layer("gated_recurrent", {"active_type": "tanh"}, x, lengths, w, b)
    as_columns = w.reshape(5, 15)
    wrong = np.concatenate([as_columns[:, :10].reshape(-1), as_columns[:, 10:].reshape(-1)])
    assert np.abs(got - gru_reference(x, lengths, wrong, b, False)).max() > 1e-3


def test_length_one_lstm_is_gate_product():
    """A length-1 sequence: c = act(g_c) gate(g_i), h = gate(g_o + c p_o) tanh(c)."""
    rng = np.random.RandomState(8)
    x = rng.uniform(-1, 1, size=(1, 8))
    w, b = rng.normal(size=(2, 8)), rng.normal(size=14)
    g = x[0] + b[:8]
    c = np.tanh(g[:2]) * sigmoid(g[2:4])
    want = sigmoid(g[6:8] + c * b[12:14]) * np.tanh(c)
    for reverse in (False, True):
        got = run_layer("lstmemory", {"active_type": "tanh", "reversed": reverse}, x, [1], w, b)
        np.testing.assert_allclose(got[0], want, atol=1e-14)


@pytest.mark.parametrize("reverse", [False, True])
def test_lstm_equals_torch_lstm(reverse):
    torch = pytest.importorskip("torch")
    rng = np.random.RandomState(9)
    hs, lengths = 6, rng.randint(1, 12, size=9)
    x = rng.uniform(-2, 2, size=(int(lengths.sum()), 4 * hs))
    w = rng.normal(0, 0.4, size=(hs, 4 * hs))
    b = np.concatenate([rng.normal(0, 0.4, size=4 * hs), np.zeros(3 * hs)])
    got = run_layer("lstmemory", {"active_type": "tanh", "reversed": reverse}, x, lengths, w, b)

    # torch's gates are [i | f | g | o]; ours [c~ | i | f | o]: column blocks 1, 2, 0, 3
    perm = np.concatenate([np.arange(k * hs, (k + 1) * hs) for k in (1, 2, 0, 3)])
    lstm = torch.nn.LSTM(4 * hs, hs, dtype=torch.float64)
    with torch.no_grad():
        lstm.weight_ih_l0.copy_(torch.from_numpy(np.eye(4 * hs)[perm]))
        lstm.weight_hh_l0.copy_(torch.from_numpy(w[:, perm].T.copy()))
        lstm.bias_ih_l0.copy_(torch.from_numpy(b[:4 * hs][perm]))
        lstm.bias_hh_l0.zero_()
    starts = np.concatenate([[0], np.cumsum(lengths)])
    seqs = [torch.from_numpy(x[s:e][::-1].copy() if reverse else x[s:e])
            for s, e in zip(starts[:-1], starts[1:])]
    packed = torch.nn.utils.rnn.pack_sequence(seqs, enforce_sorted=False)
    padded, _ = torch.nn.utils.rnn.pad_packed_sequence(lstm(packed)[0], batch_first=True)
    want = np.concatenate([padded[k, :n].detach().numpy()[::-1] if reverse
                           else padded[k, :n].detach().numpy() for k, n in enumerate(lengths)])
    np.testing.assert_allclose(got, want, atol=1e-6, rtol=0)
    assert np.abs(got - want).max() < 1e-12


def test_sigmoid_clamps_like_paddle():
    """Gate sigmoid clamps its argument to [-40, 13] (hl_cpu_functions.cc)."""
    x = np.array([[-100.0, -40.0, 0.0, 13.0, 50.0]])
    from sculler.math.rnn import cell_activation

    cell_activation("sigmoid").forward(x)
    np.testing.assert_allclose(x, sigmoid(np.array([[-40.0, -40.0, 0.0, 13.0, 13.0]])))


# ---- configuration errors ------------------------------------------------------------------

def test_bad_width_and_activation_are_named():
    with pytest.raises(ValueError, match=r"multiple of 4"):
        build_test_model(TestConfig({}, [INPUT_SEQUENCE_DATA(10)]), "lstmemory")
    with pytest.raises(ValueError, match=r"size 4 does not match"):
        build_test_model(TestConfig({"size": 4}, [INPUT_SEQUENCE_DATA(12)]), "lstmemory")
    with pytest.raises(ValueError, match=r"active_gate_type 'softmax'"):
        build_test_model(TestConfig({"active_gate_type": "softmax"}, [INPUT_SEQUENCE_DATA(9)]),
                         "gated_recurrent")


def test_non_sequence_input_is_rejected():
    with backend.default_dtype(np.float64):
        net = Network(build_test_model(TestConfig({}, [INPUT_SEQUENCE_DATA(8)]), "lstmemory"))
        with pytest.raises(ValueError, match=r"must be a dense sequence"):
            net.forward([Argument(value=np.zeros((3, 8)))], PASS_TEST)


def test_step_layer_rejects_bad_activation():
    with pytest.raises(ValueError, match="gate_act .softmax. is not supported"):
        check_layer_grad(dict(size=2, active_gate_type="softmax",
                              inputs=[INPUT_DATA(6), INPUT_DATA(2)]), "gru_step")


def test_step_layer_rejects_bad_width():
    with pytest.raises(ValueError, match="3\\*size wide"):
        check_layer_grad(dict(size=2, inputs=[INPUT_DATA(5), INPUT_DATA(2)]), "gru_step")
