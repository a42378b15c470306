"""A recurrent group whose step is exactly a known cell (gru_group's gru_step, lstmemory_group's
lstm_step) runs as the fused whole-sequence layer (sculler/layers/group_fusion.py): outputs
and every gradient equal the step-by-step run to 1e-12 in float64, forward and reversed;
other groups keep the general path; the seq2seq encoder makes far fewer Python calls."""

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
        out = net.forward(args, PASS_TRAIN)[0]
        assert np.array_equal(out.seq_starts, args["x"].seq_starts)
        out = out.value.copy()
        net.zero_grad()
        net.backward(output_grads={layer.name: dy})
    grads = {p.name: p.grad.copy() for p in net.used_parameters}
    data = {d.name: d.output.grad.copy() for d in net.data_layers}
    return net, out, grads, data


def fused_and_steps(layer, width: int, seed: int, monkeypatch):
    """run()'s results step by step and fused, on random sequences ``x`` of ``width``."""
    rng = np.random.RandomState(seed)
    args = {"x": Argument(value=rng.uniform(-1, 1, (STARTS[-1], width)),
                          seq_starts=np.array(STARTS))}
    dy = rng.uniform(-1, 1, (STARTS[-1], H))
    return run(layer, args, dy, False, monkeypatch), run(layer, args, dy, True, monkeypatch)


def groups(net):
    return [la for la in net.order if isinstance(la, RecurrentGroupLayer)]


def assert_same(got, ref):
    np.testing.assert_allclose(got[1], ref[1], rtol=0, atol=1e-12)
    assert set(got[2]) == set(ref[2])
    for name in ref[2]:
        np.testing.assert_allclose(got[2][name], ref[2][name], rtol=0, atol=1e-12)
    for name in ref[3]:
        np.testing.assert_allclose(got[3][name], ref[3][name], rtol=0, atol=1e-12)


@pytest.mark.parametrize("reverse", [False, True])
def test_simple_gru_fused_equals_step_by_step(reverse, monkeypatch):
    x = paddle.layer.data(name="x", type=D.dense_vector_sequence(5))
    gru = paddle.networks.simple_gru(input=x, size=H, reverse=reverse,
                                     gru_bias_attr=paddle.attr.Param(initial_std=0.3))
    ref, got = fused_and_steps(gru, 5, 0, monkeypatch)
    assert [g.fused is None for g in groups(ref[0])] == [True]
    assert [g.fused_batch for g in groups(got[0])] == [True]
    assert not groups(got[0])[0].frames  # no step network was built
    assert len(ref[2]) == 3  # the transform, the GRU weight and its bias
    assert_same(got, ref)


def test_gru_group_with_relu_and_no_bias_fused_equals_step_by_step(monkeypatch):
    x = paddle.layer.data(name="x", type=D.dense_vector_sequence(3 * H))
    gru = paddle.networks.gru_group(input=x, gru_bias_attr=False, act=paddle.activation.Relu(),
                                    gate_act=paddle.activation.Tanh())
    ref, got = fused_and_steps(gru, 3 * H, 1, monkeypatch)
    assert groups(got[0])[0].fused_batch
    assert_same(got, ref)


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize(("gate_bias", "peepholes"), [(False, True), (True, True), (False, False)])
def test_lstmemory_group_fused_equals_step_by_step(reverse, gate_bias, peepholes, monkeypatch):
    bias = paddle.attr.Param(initial_std=0.3)  # non-zero: the gate bias and peepholes count
    x = paddle.layer.data(name="x", type=D.dense_vector_sequence(4 * H))
    lstm = paddle.networks.lstmemory_group(
        input=x, reverse=reverse, input_proj_bias_attr=bias if gate_bias else False,
        lstm_bias_attr=bias if peepholes else False,
        param_attr=paddle.attr.Param(initial_std=0.5))
    ref, got = fused_and_steps(lstm, 4 * H, 2, monkeypatch)
    assert groups(ref[0])[0].fused is None and groups(got[0])[0].fused_batch
    assert not groups(got[0])[0].frames
    assert len(ref[2]) == 1 + gate_bias + peepholes
    assert_same(got, ref)


def trained(cell: str, fuse: bool, monkeypatch, use_gpu: bool = False) -> dict:
    """Parameters after two float32 batches of the v2 trainer (Adam) on a GRU or LSTM group
    (every one of them moved), on the CPU or the GPU."""
    monkeypatch.setattr(RecurrentGroupLayer, "fuse_cells", fuse)
    paddle.layer.reset_names()
    paddle.init(seed=0, use_gpu=use_gpu)
    words = paddle.layer.data(name="w", type=D.integer_value_sequence(30))
    emb = paddle.layer.embedding(input=words, size=6)
    bias = paddle.attr.Param(initial_std=0.3)
    if cell == "gru":
        seq = paddle.networks.simple_gru(input=emb, size=H, reverse=True, gru_bias_attr=bias)
    else:
        proj = paddle.layer.fc(input=emb, size=4 * H, act=paddle.activation.Linear())
        seq = paddle.networks.lstmemory_group(input=proj, input_proj_bias_attr=bias,
                                              lstm_bias_attr=bias)
    pooled = paddle.layer.pooling(input=seq, pooling_type=paddle.pooling.Max())
    out = paddle.layer.fc(input=pooled, size=3, act=paddle.activation.Softmax())
    label = paddle.layer.data(name="y", type=D.integer_value(3))
    cost = paddle.layer.classification_cost(input=out, label=label)
    params = paddle.parameters.create(cost)
    trainer = paddle.trainer.SGD(cost, params, paddle.optimizer.Adam(learning_rate=0.05))
    rng = np.random.RandomState(5)
    samples = [(list(rng.randint(0, 30, rng.randint(1, 9))), int(rng.randint(3)))
               for _ in range(16)]
    before = {name: params.get(name).copy() for name in params.names()}
    trainer.train(paddle.batch(lambda: iter(samples), 8), num_passes=1)
    after = {name: params.get(name).copy() for name in params.names()}
    assert all(not np.array_equal(before[n], after[n]) for n in after), "a parameter never moved"
    return after


@pytest.mark.parametrize("cell", ["gru", "lstm"])
def test_trainer_updates_equal_with_fused_groups(cell, monkeypatch):
    steps, fused = trained(cell, False, monkeypatch), trained(cell, True, monkeypatch)
    assert set(steps) == set(fused) and len(steps) >= 5
    for name in steps:
        np.testing.assert_allclose(fused[name], steps[name], rtol=1e-4, atol=1e-5,
                                   err_msg=name)


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
    lstm_in = paddle.layer.data(name="lstm_in", type=D.dense_vector_sequence(4 * H))
    dropped = paddle.networks.lstmemory_group(
        input=lstm_in, name="dropped", lstm_layer_attr=paddle.attr.Extra(drop_rate=0.5))
    topology = paddle.topology.Topology([booted, naive, extra, dropped])
    net = Network(topology.proto(), ParameterSet())
    assert [g.fused for g in groups(net)] == [None, None, None, None]


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


@pytest.mark.gpu
@pytest.mark.parametrize("cell", ["gru", "lstm"])
def test_fused_groups_train_on_the_gpu_as_on_the_cpu(cell, monkeypatch):
    """A GRU or LSTM group fused into one recurrent layer trains on the GPU (the LSTM's
    composed ``[gate bias | peepholes]`` lives there too) to the CPU's parameters."""
    try:
        on_gpu = trained(cell, True, monkeypatch, use_gpu=True)
    finally:
        paddle.init(use_gpu=False)
    on_cpu = trained(cell, True, monkeypatch)
    assert set(on_gpu) == set(on_cpu)
    for name, want in on_cpu.items():
        np.testing.assert_allclose(on_gpu[name], want, rtol=1e-4, atol=1e-6, err_msg=name)
