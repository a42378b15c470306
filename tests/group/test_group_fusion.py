"""A recurrent group whose step is exactly a gru_step over the in-link and its own memory runs
as the fused whole-sequence GRU (sculler/layers/group_fusion.py): outputs and every gradient
equal the step-by-step run to 1e-12 in float64, forward and reversed; other groups keep the
general path; the seq2seq encoder makes far fewer Python calls."""

import cProfile
import pstats

import numpy as np
import pytest

import sculler as paddle
from sculler import backend
from sculler.core.argument import Argument
from sculler.core.layer import PASS_TRAIN
from sculler.core.network import Network
from sculler.core.parameter import ParameterSet
from sculler.layers.recurrent_group import RecurrentGroupLayer

D = paddle.data_type
H = 4
STARTS = [0, 3, 4, 9, 11, 18]  # lengths 3, 1, 5, 2, 7


@pytest.fixture(autouse=True)
def fresh_names():
    paddle.layer.reset_names()


def run(layer, args, dy, fuse: bool, monkeypatch):
    """(network, output, parameter gradients, data gradients) with fusion on or off."""
    monkeypatch.setattr(RecurrentGroupLayer, "fuse_cells", fuse)
    with backend.default_dtype(np.float64):
        net = Network(paddle.topology.Topology(layer).proto(), ParameterSet(seed=4),
                      data_gradients=True)
        out = net.forward(args, PASS_TRAIN)[0].value.copy()
        net.zero_grad()
        net.backward(output_grads={layer.name: dy})
    grads = {p.name: p.grad.copy() for p in net.used_parameters}
    data = {d.name: d.output.grad.copy() for d in net.data_layers}
    return net, out, grads, data


def groups(net):
    return [la for la in net.order if isinstance(la, RecurrentGroupLayer)]


def assert_same(got, ref):
    np.testing.assert_allclose(got[1], ref[1], rtol=0, atol=1e-12)
    assert set(got[2]) == set(ref[2]) and len(ref[2]) >= 3
    for name in ref[2]:
        np.testing.assert_allclose(got[2][name], ref[2][name], rtol=0, atol=1e-12)
    for name in ref[3]:
        np.testing.assert_allclose(got[3][name], ref[3][name], rtol=0, atol=1e-12)


@pytest.mark.parametrize("reverse", [False, True])
def test_simple_gru_fused_equals_step_by_step(reverse, monkeypatch):
    x = paddle.layer.data(name="x", type=D.dense_vector_sequence(5))
    gru = paddle.networks.simple_gru(input=x, size=H, reverse=reverse,
                                     gru_bias_attr=paddle.attr.Param(initial_std=0.3))
    rng = np.random.RandomState(0)
    args = {"x": Argument(value=rng.uniform(-1, 1, (STARTS[-1], 5)),
                          seq_starts=np.array(STARTS))}
    dy = rng.uniform(-1, 1, (STARTS[-1], H))
    ref = run(gru, args, dy, False, monkeypatch)
    got = run(gru, args, dy, True, monkeypatch)
    assert [g.fused is None for g in groups(ref[0])] == [True]
    assert [g.fused_batch for g in groups(got[0])] == [True]
    assert not groups(got[0])[0].frames  # no step network was built
    assert_same(got, ref)


def test_gru_group_with_relu_and_no_bias_fused_equals_step_by_step(monkeypatch):
    x = paddle.layer.data(name="x", type=D.dense_vector_sequence(3 * H))
    gru = paddle.networks.gru_group(input=x, gru_bias_attr=False, act=paddle.activation.Relu(),
                                    gate_act=paddle.activation.Tanh())
    rng = np.random.RandomState(1)
    args = {"x": Argument(value=rng.uniform(-1, 1, (STARTS[-1], 3 * H)),
                          seq_starts=np.array(STARTS))}
    dy = rng.uniform(-1, 1, (STARTS[-1], H))
    ref = run(gru, args, dy, False, monkeypatch)
    got = run(gru, args, dy, True, monkeypatch)
    assert groups(got[0])[0].fused_batch
    np.testing.assert_allclose(got[1], ref[1], rtol=0, atol=1e-12)
    for name in ref[2]:
        np.testing.assert_allclose(got[2][name], ref[2][name], rtol=0, atol=1e-12)
    np.testing.assert_allclose(got[3]["x"], ref[3]["x"], rtol=0, atol=1e-12)


def test_other_groups_keep_the_general_path():
    x = paddle.layer.data(name="x", type=D.dense_vector_sequence(3 * H))
    boot = paddle.layer.data(name="boot", type=D.dense_vector(H))
    booted = paddle.networks.gru_group(input=x, memory_boot=boot, name="booted")
    naive = paddle.networks.gru_group(input=x, name="naive", naive=True)

    def extra_layer_step(ipt):
        mem = paddle.layer.memory(name="extra", size=H)
        gru = paddle.layer.gru_step(name="extra", input=ipt, output_mem=mem, size=H)
        return paddle.layer.fc(input=gru, size=H, act=paddle.activation.Tanh())

    extra = paddle.layer.recurrent_group(name="extra_group", step=extra_layer_step, input=x)
    net = Network(paddle.topology.Topology([booted, naive, extra]).proto(), ParameterSet())
    assert [g.fused for g in groups(net)] == [None, None, None]


def test_nested_in_link_runs_step_by_step():
    """Each step of a nested in-link is a sub-sequence: the general path runs (and refuses a
    gru_step over a sub-sequence, as without fusion)."""
    x = paddle.layer.data(name="x", type=D.dense_vector_sub_sequence(3 * H))
    gru = paddle.networks.gru_group(input=x, name="nested")
    net = Network(paddle.topology.Topology(gru).proto(), ParameterSet(seed=1))
    arg = Argument(value=np.random.RandomState(2).uniform(-1, 1, (6, 3 * H)),
                   seq_starts=np.array([0, 6]), sub_seq_starts=np.array([0, 2, 6]))
    with pytest.raises(ValueError, match="different batch sizes"):
        net.forward({"x": arg}, PASS_TRAIN)
    group = groups(net)[0]
    assert group.fused is not None and not group.fused_batch and group.frames


def encoder_calls(fuse: bool, monkeypatch) -> int:
    """Python function calls of one forward+backward of the book's bidirectional encoder."""
    monkeypatch.setattr(RecurrentGroupLayer, "fuse_cells", fuse)
    paddle.layer.reset_names()
    src = paddle.layer.data(name="src", type=D.integer_value_sequence(50))
    emb = paddle.layer.embedding(input=src, size=8)
    fwd = paddle.networks.simple_gru(input=emb, size=H)
    bwd = paddle.networks.simple_gru(input=emb, size=H, reverse=True)
    enc = paddle.layer.concat(input=[fwd, bwd])
    net = Network(paddle.topology.Topology(enc).proto(), ParameterSet(seed=0))
    starts = np.array([0, 10, 30, 42])
    ids = np.random.RandomState(3).randint(0, 50, starts[-1])
    dy = np.ones((starts[-1], 2 * H), dtype=np.float32)

    def batch():
        net.forward({"src": Argument(ids=ids, seq_starts=starts)}, PASS_TRAIN)
        net.zero_grad()
        net.backward(output_grads={enc.name: dy})

    batch()  # first batch builds the frames
    prof = cProfile.Profile()
    prof.runcall(batch)
    return pstats.Stats(prof).total_calls


def test_fused_encoder_makes_fewer_python_calls(monkeypatch):
    steps = encoder_calls(False, monkeypatch)
    fused = encoder_calls(True, monkeypatch)
    assert fused * 2 < steps, (fused, steps)
