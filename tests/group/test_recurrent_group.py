"""recurrent_group: forward against direct NumPy loops, network gradient checks (memories,
boot layer and bias, static inputs, reverse, nested input), parameter sharing, inc_update."""

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


@pytest.fixture(autouse=True)
def fresh_names():
    paddle.layer.reset_names()


def seq_data(name, dim):
    return paddle.layer.data(name=name, type=D.dense_vector_sequence(dim))


def simple_rnn(x, reverse=False, name="rnn"):
    def step(x_t):
        h_prev = paddle.layer.memory(name="h", size=4)
        return paddle.layer.fc(input=[x_t, h_prev], size=4, name="h")

    return paddle.layer.recurrent_group(step=step, input=x, reverse=reverse, name=name)


def run(layer, args, seed=3):
    with backend.default_dtype(np.float64):
        topo = paddle.topology.Topology(layer)
        params = ParameterSet(seed=seed)
        net = Network(topo.proto(), params)
        out = net.forward(args, PASS_TEST)[0]
    return out, params


@pytest.mark.parametrize("reverse", [False, True])
def test_forward_equals_numpy_loop(reverse):
    x = seq_data("x", 3)
    h = simple_rnn(x, reverse)
    rng = np.random.RandomState(0)
    starts = np.array([0, 2, 7, 8, 11])
    xv = rng.uniform(-1, 1, (11, 3))
    out, params = run(h, {"x": Argument(value=xv, seq_starts=starts)})
    w0, w1 = params["_h@rnn.w0"].value, params["_h@rnn.w1"].value
    b = params["_h@rnn.wbias"].value
    b += 0.0
    expect = np.zeros((11, 4))
    for s, e in zip(starts[:-1], starts[1:]):
        h_prev = np.zeros(4)
        rows = range(e - 1, s - 1, -1) if reverse else range(s, e)
        for r in rows:
            h_prev = np.tanh(xv[r] @ w0 + h_prev @ w1 + b[0])
            expect[r] = h_prev
    np.testing.assert_allclose(out.value, expect, rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(out.seq_starts, starts)


def test_grad_one_memory_and_reverse():
    x = seq_data("x", 3)
    cost = paddle.layer.fc(input=simple_rnn(x, reverse=True), size=2)
    assert check_network_grad(cost).max_error < 1e-6


def test_grad_two_memories_boot_layer_and_boot_bias():
    x = seq_data("x", 3)
    boot_src = paddle.layer.data(name="b", type=D.dense_vector(2))
    boot = paddle.layer.fc(input=boot_src, size=4, act=paddle.activation.Tanh())

    def step(x_t):
        h_prev = paddle.layer.memory(name="h", size=4, boot_layer=boot)
        c_prev = paddle.layer.memory(name="c", size=3, boot_bias=paddle.attr.Param(
            initial_std=0.5), boot_bias_active_type=paddle.activation.Tanh())
        c = paddle.layer.fc(input=[x_t, c_prev], size=3, name="c",
                            act=paddle.activation.Sigmoid())
        return paddle.layer.fc(input=[x_t, h_prev, c], size=4, name="h")

    h = paddle.layer.recurrent_group(step=step, input=x, name="g2")
    report = check_network_grad(paddle.layer.fc(input=h, size=2))
    assert "parameter _c+delay1@g2.wbias" in report.errors
    assert "input b" in report.errors
    assert report.max_error < 1e-6


def test_grad_static_inputs_row_and_sequence():
    x = seq_data("x", 3)
    enc = seq_data("enc", 2)
    row = paddle.layer.data(name="row", type=D.dense_vector(2))

    def step(x_t, enc_s, row_s):
        h_prev = paddle.layer.memory(name="h", size=3)
        h = paddle.layer.fc(input=[x_t, h_prev, row_s], size=3, name="h")
        # a step output that is a sequence (the whole static sequence, transformed) makes
        # the out-link a nested sequence: one sub-sequence per step
        return h, paddle.layer.fc(input=enc_s, size=2, name="e")

    h, e = paddle.layer.recurrent_group(
        step=step, input=[x, paddle.layer.StaticInput(enc), paddle.layer.StaticInput(row)],
        name="gs")
    assert (h.name, e.name) == ("h", "e")
    report = check_network_grad([paddle.layer.fc(input=h, size=2),
                                 paddle.layer.fc(input=e, size=1)])
    assert report.max_error < 1e-6 and "input row" in report.errors
    assert "input enc" in report.errors
    x_arg = Argument(value=np.ones((3, 3)), seq_starts=np.array([0, 1, 3]))
    enc_arg = Argument(value=np.ones((5, 2)), seq_starts=np.array([0, 4, 5]))
    out, _ = run(e, {"x": x_arg, "enc": enc_arg, "row": Argument(value=np.ones((2, 2)))})
    # sample 0: one step seeing 4 rows; sample 1: two steps seeing 1 row each
    np.testing.assert_array_equal(out.seq_starts, [0, 4, 6])
    np.testing.assert_array_equal(out.sub_seq_starts, [0, 4, 5, 6])


def test_grad_sequence_static_input_through_inner_group():
    """A static sequence seen whole at every step, consumed by an inner group whose last
    value (an inner memory) feeds the outer step's output."""
    x = seq_data("x", 3)
    enc = seq_data("enc", 2)

    def step(x_t, enc_s):
        h_prev = paddle.layer.memory(name="h", size=3)
        inner = paddle.layer.recurrent_group(step=lambda e: paddle.layer.fc(
            input=[e], size=3, name="ei"), input=enc_s, name="inner")
        return paddle.layer.fc(input=[x_t, h_prev], size=3, name="h"), inner

    h, inner = paddle.layer.recurrent_group(step=step, input=[x, paddle.layer.StaticInput(enc)],
                                            name="outer")
    report = check_network_grad([paddle.layer.fc(input=h, size=2),
                                 paddle.layer.fc(input=inner, size=1)])
    assert report.max_error < 1e-6 and "parameter _ei@inner@outer.w0" in report.errors


def test_grad_nested_input_inner_group():
    """Nested in-link: each step sees one sub-sequence, run by an inner group; the out-link
    is a nested sequence aligned with the input."""
    x = paddle.layer.data(name="x", type=D.dense_vector_sub_sequence(3))

    def outer_step(sub):
        def inner_step(x_t):
            h_prev = paddle.layer.memory(name="ih", size=4)
            return paddle.layer.fc(input=[x_t, h_prev], size=4, name="ih")

        return paddle.layer.recurrent_group(step=inner_step, input=sub, name="inner")

    y = paddle.layer.recurrent_group(step=outer_step, input=paddle.layer.SubsequenceInput(x),
                                     name="outer")
    rng = np.random.RandomState(2)
    sub = np.array([0, 2, 3, 4, 7, 9])
    arg = Argument(value=rng.uniform(-1, 1, (9, 3)), seq_starts=np.array([0, 3, 7, 9]),
                   sub_seq_starts=sub)
    out, params = run(y, {"x": arg})
    np.testing.assert_array_equal(out.seq_starts, [0, 3, 7, 9])
    np.testing.assert_array_equal(out.sub_seq_starts, sub)
    w0, w1 = params["_ih@inner@outer.w0"].value, params["_ih@inner@outer.w1"].value
    for s, e in zip(sub[:-1], sub[1:]):
        h = np.zeros(4)
        for r in range(s, e):
            h = np.tanh(arg.value[r] @ w0 + h @ w1)
            np.testing.assert_allclose(out.value[r], h, rtol=1e-12, atol=1e-12)
    report = check_network_grad(paddle.layer.fc(input=y, size=2), inputs={"x": arg})
    assert report.max_error < 1e-6


def test_nested_input_non_sequence_step_output_gives_sequence():
    x = paddle.layer.data(name="x", type=D.dense_vector_sub_sequence(2))
    w = paddle.layer.data(name="w", type=D.dense_vector(2))

    def step(sub, w_s):
        m = paddle.layer.memory(name="m", size=2)
        return paddle.layer.fc(input=[w_s, m], size=2, name="m")

    y = paddle.layer.recurrent_group(step=step, input=[x, paddle.layer.StaticInput(w)], name="n")
    arg = Argument(value=np.zeros((6, 2)), seq_starts=np.array([0, 3, 6]),
                   sub_seq_starts=np.array([0, 2, 3, 4, 6]))
    out, _ = run(y, {"x": arg, "w": Argument(value=np.ones((2, 2)))})
    np.testing.assert_array_equal(out.seq_starts, [0, 2, 4])
    assert out.sub_seq_starts is None and out.value.shape == (4, 2)


def test_shared_parameter_with_outside_layer_and_single_inc_update():
    x = seq_data("x", 3)
    shared = paddle.attr.Param(name="shared_w")

    def step(x_t):
        h_prev = paddle.layer.memory(name="h", size=3)
        return paddle.layer.fc(input=[x_t, h_prev], size=3, name="h",
                               param_attr=[shared, None])

    h = paddle.layer.recurrent_group(step=step, input=x, name="sh")
    outside = paddle.layer.fc(input=x, size=3, param_attr=shared)
    cost = paddle.layer.fc(input=[h, outside], size=1)
    report = check_network_grad(cost)
    assert "parameter shared_w" in report.errors and report.max_error < 1e-6
    with backend.default_dtype(np.float64):
        net = Network(paddle.topology.Topology(cost).proto(), ParameterSet(seed=1))
        calls = []
        arg = Argument(value=np.ones((5, 3)), seq_starts=np.array([0, 2, 5]))
        net.forward({"x": arg})
        net.backward(lambda p: calls.append(p.name), output_grads={cost.name: np.ones((5, 1))})
    assert sorted(calls) == sorted(set(calls)) and "shared_w" in calls
    assert len(calls) == len(net.used_parameters)


def test_errors():
    x = seq_data("x", 3)
    y = seq_data("y", 3)
    with pytest.raises(ValueError, match="made outside the step"):
        paddle.layer.recurrent_group(step=lambda x_t: paddle.layer.fc(input=[x_t, y], size=2),
                                     input=x)
    with pytest.raises(ValueError, match="does not define"):
        paddle.layer.recurrent_group(step=lambda x_t: paddle.layer.fc(
            input=[x_t, paddle.layer.memory(name="nope", size=2)], size=2), input=x)
    g = paddle.layer.recurrent_group(step=lambda a, b: paddle.layer.fc(input=[a, b], size=2),
                                     input=[x, y])
    args = {"x": Argument(value=np.zeros((3, 3)), seq_starts=np.array([0, 1, 3])),
            "y": Argument(value=np.zeros((3, 3)), seq_starts=np.array([0, 2, 3]))}
    with pytest.raises(ValueError, match="mismatched sequence length"):
        run(g, args)


def test_error_clipping_threshold_clips_output_gradient():
    x = paddle.layer.data(name="x", type=D.dense_vector(3))
    y = paddle.layer.fc(input=x, size=2, act=paddle.activation.Linear(), bias_attr=False,
                        layer_attr=paddle.attr.Extra(error_clipping_threshold=0.05))
    with backend.default_dtype(np.float64):
        net = Network(paddle.topology.Topology(y).proto(), ParameterSet(seed=1),
                      data_gradients=True)
        xv = np.ones((2, 3))
        net.forward({"x": Argument(value=xv)})
        dy = np.array([[0.01, -1.0], [2.0, 0.03]])
        net.backward(output_grads={y.name: dy})
        w = net.parameters[f"_{y.name}.w0"]
        clipped = np.clip(dy, -0.05, 0.05)
        np.testing.assert_allclose(net.data_layers[0].output.grad, clipped @ w.value.T)
        np.testing.assert_allclose(w.grad, xv.T @ clipped)


def test_memory_name_with_set_input_and_target_inlink():
    x = seq_data("x", 3)
    y = paddle.layer.data(name="y", type=D.dense_vector_sub_sequence(2))

    def step(x_t, y_sub):
        m = paddle.layer.memory(name=None, memory_name="acc", size=2)
        h = paddle.layer.fc(input=[x_t, m], size=2, name="acc_layer")
        m.set_input(h)
        return h, paddle.layer.fc(input=y_sub, size=2, name="per_sub")

    h, per_sub = paddle.layer.recurrent_group(step=step, input=[x, y], targetInlink=y,
                                              name="tg")
    x_arg = Argument(value=np.ones((3, 3)), seq_starts=np.array([0, 2, 3]))
    y_arg = Argument(value=np.ones((5, 2)), seq_starts=np.array([0, 3, 5]),
                     sub_seq_starts=np.array([0, 1, 3, 5]))
    out, _ = run(per_sub, {"x": x_arg, "y": y_arg})
    np.testing.assert_array_equal(out.sub_seq_starts, [0, 1, 3, 5])
    report = check_network_grad([paddle.layer.fc(input=h, size=1),
                                 paddle.layer.fc(input=per_sub, size=1)],
                                inputs={"x": x_arg, "y": y_arg})
    assert "parameter _acc_layer@tg.w1" in report.errors and report.max_error < 1e-6
    with pytest.raises(ValueError, match="targetInlink"):
        paddle.layer.recurrent_group(step=lambda a: a, input=x, targetInlink=y)


def test_non_sequence_in_link_acts_as_static():
    row = paddle.layer.data(name="row", type=D.dense_vector(2))
    x = seq_data("x", 3)

    def step(r, x_t):
        h_prev = paddle.layer.memory(name="h", size=2)
        return paddle.layer.fc(input=[r, x_t, h_prev], size=2, name="h")

    h = paddle.layer.recurrent_group(step=step, input=[row, x], name="ns")
    report = check_network_grad(paddle.layer.fc(input=h, size=1))
    assert "input row" in report.errors and report.max_error < 1e-6


def test_grad_sequence_valued_memory_booted_from_a_sequence():
    x = seq_data("x", 3)
    boot = seq_data("boot", 2)

    def step(x_t):
        m = paddle.layer.memory(name="m", size=2, boot_layer=boot)  # a sequence per sample
        new_m = paddle.layer.fc(input=m, size=2, name="m", act=paddle.activation.Tanh())
        pooled = paddle.layer.pooling(input=new_m, pooling_type=paddle.pooling.Sum())
        return paddle.layer.fc(input=[x_t, pooled], size=2, name="out")

    out = paddle.layer.recurrent_group(step=step, input=x, name="sm")
    report = check_network_grad(paddle.layer.fc(input=out, size=1))
    assert "input boot" in report.errors and report.max_error < 1e-6


def test_gradients_and_values_follow_packed_parameters():
    """A trainer packs parameters (ParameterSet.pack moves their arrays): the frames must then
    read and write the packed arrays, and give the same gradients."""
    x = seq_data("x", 3)
    cost = paddle.layer.fc(input=simple_rnn(x), size=1)
    with backend.default_dtype(np.float64):
        ps = ParameterSet(seed=2)
        net = Network(paddle.topology.Topology(cost).proto(), ps)
        arg = Argument(value=np.random.RandomState(0).randn(5, 3), seq_starts=np.array([0, 2, 5]))

        def grads():
            net.forward({"x": arg})
            net.zero_grad()
            net.backward(output_grads={cost.name: np.ones((5, 1))})
            return {p.name: p.grad.copy() for p in net.used_parameters}

        before = grads()
        ps.pack(net.used_parameters)
        after = grads()
        assert ps["_h@rnn.w0"].packed
        for name, g in before.items():
            np.testing.assert_allclose(after[name], g, rtol=1e-12, err_msg=name)
        out0 = net.forward({"x": arg})[0].value.copy()
        ps["_h@rnn.w0"].value[...] += 0.1
        assert not np.allclose(net.forward({"x": arg})[0].value, out0)
