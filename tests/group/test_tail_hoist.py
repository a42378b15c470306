"""A recurrent group's tail (step layers that no memory reads, each output row a function of
the same rows of its inputs: a decoder's output projection) runs once over every step's rows
after the frames (sculler/core/recurrent_group.py split_tail): outputs and every gradient
equal the step-by-step run to 1e-12 in float64; a frontier that turns out to be a sequence
falls back to the frames; a trained seq2seq model ends with the same parameters."""

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
STARTS = np.array([0, 3, 4, 9, 11, 18])  # lengths 3, 1, 5, 2, 7


@pytest.fixture(autouse=True)
def fresh_names():
    paddle.layer.reset_names()


def groups(net):
    return [la for la in net.order if isinstance(la, RecurrentGroupLayer)]


def built_group(step) -> RecurrentGroupLayer:
    """The group layer of a network of ``step`` over a dense sequence ``x``, built."""
    x = paddle.layer.data(name="x", type=D.dense_vector_sequence(3))
    out = paddle.layer.recurrent_group(name="g", step=step, input=x)
    return groups(Network(paddle.topology.Topology(out).proto(), ParameterSet()))[0]


def run(outputs, args, hoist: bool, monkeypatch, seed: int = 4):
    """(network, output values, parameter gradients, dense data gradients) with the tail
    hoisted or run in the frames; the gradient of output ``k`` is ``k + 1`` times a fixed
    random array."""
    monkeypatch.setattr(RecurrentGroupLayer, "hoist_tail", hoist)
    monkeypatch.setattr(RecurrentGroupLayer, "fuse_cells", False)
    with backend.default_dtype(np.float64):
        net = Network(paddle.topology.Topology(outputs).proto(), ParameterSet(seed=seed),
                      data_gradients=True)
        outs = net.forward(args, PASS_TRAIN)
        values = [o.value.copy() for o in outs]
        rng = np.random.RandomState(7)
        grads = {layer.name: (k + 1) * rng.uniform(-1, 1, v.shape)
                 for k, (layer, v) in enumerate(zip(outputs, values))}
        net.zero_grad()
        net.backward(output_grads=grads)
    params = {p.name: p.grad.copy() for p in net.used_parameters}
    data = {d.name: d.output.grad.copy() for d in net.data_layers if d.output.grad is not None}
    return net, values, params, data


def assert_same(got, ref):
    for a, b in zip(got[1], ref[1]):
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-12)
    assert set(got[2]) == set(ref[2]) and got[2]
    for part in (2, 3):
        for name in ref[part]:
            np.testing.assert_allclose(got[part][name], ref[part][name], rtol=0, atol=1e-12,
                                       err_msg=name)


@pytest.mark.parametrize("reverse", [False, True])
def test_tail_of_two_layers_and_a_frame_out_link_equal_step_by_step(reverse, monkeypatch):
    x = paddle.layer.data(name="x", type=D.dense_vector_sequence(3))

    def step(ipt):
        mem = paddle.layer.memory(name="h", size=H)
        h = paddle.layer.fc(input=[ipt, mem], size=H, name="h", act=paddle.activation.Tanh())
        hidden = paddle.layer.fc(input=h, size=5, act=paddle.activation.Relu())
        return [paddle.layer.fc(input=[hidden, h], size=6, act=paddle.activation.Softmax()),
                h]

    out, state = paddle.layer.recurrent_group(name="g", step=step, input=x, reverse=reverse)
    rng = np.random.RandomState(1)
    args = {"x": Argument(value=rng.uniform(-1, 1, (18, 3)), seq_starts=STARTS)}
    ref = run([out, state], args, False, monkeypatch)
    got = run([out, state], args, True, monkeypatch)
    group = groups(got[0])[0]
    assert groups(ref[0])[0].tail is None
    assert group.hoisted and len(group.tail.layers) == 2 and group.tail.frontier == ("h@g",)
    assert_same(got, ref)


def test_a_tail_of_mixed_addto_concat_and_slope_intercept_equals_step_by_step(monkeypatch):
    """The v1 configs' output layers: a mixed layer of a full-matrix and a dot-mul projection,
    summed, shifted and joined side by side with the state, all run once."""
    x = paddle.layer.data(name="x", type=D.dense_vector_sequence(3))

    def step(ipt):
        mem = paddle.layer.memory(name="h", size=H)
        h = paddle.layer.fc(input=[ipt, mem], size=H, name="h", act=paddle.activation.Tanh())
        projected = paddle.layer.mixed(
            size=H, input=[paddle.layer.full_matrix_projection(input=h),
                           paddle.layer.dotmul_projection(input=h)],
            act=paddle.activation.Sigmoid(), bias_attr=True)
        summed = paddle.layer.addto(input=[projected, h], act=paddle.activation.Relu())
        shifted = paddle.layer.slope_intercept(input=summed, slope=2.0, intercept=0.5)
        return paddle.layer.concat(input=[shifted, projected])

    out = paddle.layer.recurrent_group(name="g", step=step, input=x)
    rng = np.random.RandomState(4)
    args = {"x": Argument(value=rng.uniform(-1, 1, (18, 3)), seq_starts=STARTS)}
    ref = run([out], args, False, monkeypatch)
    got = run([out], args, True, monkeypatch)
    group = groups(got[0])[0]
    assert group.hoisted and len(group.tail.layers) == 4
    assert_same(got, ref)


def test_mixed_layers_with_sequence_projections_stay_in_the_frames():
    def step(ipt):
        mem = paddle.layer.memory(name="h", size=H)
        h = paddle.layer.fc(input=[ipt, mem], size=H, name="h")
        return paddle.layer.mixed(size=3 * H, input=paddle.layer.context_projection(
            input=h, context_len=3))

    assert built_group(step).tail is None


def attention_decoder():
    """The seq2seq chapter's decoder (simple_attention, gru_step, softmax projection)."""
    src = paddle.layer.data(name="src", type=D.integer_value_sequence(20))
    emb = paddle.layer.embedding(input=src, size=6)
    enc = paddle.layer.fc(input=emb, size=H, act=paddle.activation.Tanh())
    proj = paddle.layer.fc(input=enc, size=H, bias_attr=False)
    boot = paddle.layer.fc(input=paddle.layer.first_seq(input=enc), size=H,
                           act=paddle.activation.Tanh(), bias_attr=False)
    trg = paddle.layer.embedding(
        input=paddle.layer.data(name="trg", type=D.integer_value_sequence(20)), size=6)

    def step(enc_vec, enc_proj, word):
        mem = paddle.layer.memory(name="dec", size=H, boot_layer=boot)
        context = paddle.networks.simple_attention(encoded_sequence=enc_vec,
                                                   encoded_proj=enc_proj, decoder_state=mem)
        inputs = paddle.layer.fc(input=[context, word], size=3 * H, bias_attr=False)
        gru = paddle.layer.gru_step(name="dec", input=inputs, output_mem=mem, size=H)
        return paddle.layer.fc(input=gru, size=20, act=paddle.activation.Softmax())

    return paddle.layer.recurrent_group(
        name="decoder", step=step, input=[paddle.layer.StaticInput(input=enc),
                                          paddle.layer.StaticInput(input=proj), trg])


def test_attention_decoder_equals_step_by_step(monkeypatch):
    rng = np.random.RandomState(2)
    trg_starts = np.array([0, 4, 6, 13, 14, 19])
    args = {"src": Argument(ids=rng.randint(0, 20, 18), seq_starts=STARTS),
            "trg": Argument(ids=rng.randint(0, 20, 19), seq_starts=trg_starts)}
    ref = run([attention_decoder()], args, False, monkeypatch)
    paddle.layer.reset_names()
    got = run([attention_decoder()], args, True, monkeypatch)
    group = groups(got[0])[0]
    assert group.hoisted and group.tail.frontier == ("dec@decoder",)
    assert_same(got, ref)


def test_a_frontier_of_sequences_runs_the_tail_in_the_frames(monkeypatch):
    """The tail reads an expand over a static sequence: its step rows are sequences, so the
    batch runs the tail in each frame, with the same results."""
    x = paddle.layer.data(name="x", type=D.dense_vector_sequence(3))
    ctx = paddle.layer.data(name="ctx", type=D.dense_vector_sequence(H))

    def step(ipt, seq):
        mem = paddle.layer.memory(name="s", size=H)
        s = paddle.layer.fc(input=[ipt, mem], size=H, name="s", act=paddle.activation.Tanh())
        spread = paddle.layer.expand(input=s, expand_as=seq)
        return paddle.layer.fc(input=[spread], size=2, act=paddle.activation.Tanh())

    out = paddle.layer.recurrent_group(name="g", step=step,
                                       input=[x, paddle.layer.StaticInput(input=ctx)])
    rng = np.random.RandomState(3)
    ctx_starts = np.array([0, 2, 3, 6, 8, 9])
    args = {"x": Argument(value=rng.uniform(-1, 1, (18, 3)), seq_starts=STARTS),
            "ctx": Argument(value=rng.uniform(-1, 1, (9, H)), seq_starts=ctx_starts)}
    ref = run([out], args, False, monkeypatch)
    got = run([out], args, True, monkeypatch)
    group = groups(got[0])[0]
    assert group.tail is not None and not group.hoisted
    assert_same(got, ref)


def test_memories_and_dropout_stay_in_the_frames():
    def step(ipt):
        mem = paddle.layer.memory(name="m", size=H)
        m = paddle.layer.fc(input=[ipt, mem], size=H, name="m")
        dropped = paddle.layer.fc(input=m, size=2, layer_attr=paddle.attr.Extra(drop_rate=0.5))
        return [paddle.layer.fc(input=m, size=2), dropped]

    tail = built_group(step).tail
    assert tail is not None and tail.layers == {"__fc_layer_1__@g"}  # not m, not the dropout


def trained(hoist: bool, monkeypatch) -> dict:
    """Parameters after two float32 Adam batches of the seq2seq demo's model."""
    from bench_seq2seq import load_demo  # noqa: PLC0415

    monkeypatch.setattr(RecurrentGroupLayer, "hoist_tail", hoist)
    paddle.layer.reset_names()
    paddle.init(seed=0)
    demo = load_demo()
    cost = demo.seq2seq(is_generating=False)
    params = paddle.parameters.create(cost)
    trainer = paddle.trainer.SGD(cost, params, paddle.optimizer.Adam(learning_rate=0.01))
    samples = demo.make_pairs(16, 3)
    feeding = {"source_words": 0, "target_language_word": 1, "target_language_next_word": 2}
    trainer.train(paddle.batch(lambda: iter(samples), 8), num_passes=1, feeding=feeding)
    return {name: params.get(name).copy() for name in params.names()}


def test_seq2seq_training_equal_with_the_tail_hoisted(monkeypatch):
    monkeypatch.syspath_prepend(str(__import__("pathlib").Path(__file__).parents[2] / "bench"))
    steps, hoisted = trained(False, monkeypatch), trained(True, monkeypatch)
    assert set(steps) == set(hoisted) and len(steps) > 10
    for name in steps:
        np.testing.assert_allclose(hoisted[name], steps[name], rtol=1e-4, atol=1e-5,
                                   err_msg=name)
