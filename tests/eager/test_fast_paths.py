"""The eager fast paths keep the general rules: nothing recorded inside a PyLayer, gradients
accumulate, a leaf's gradient never shares memory with another array, fused ops equal the
ops they replace, the eager Momentum step equals the heavy-ball formula."""

import numpy as np
import pytest

import sculler as paddle
import sculler.nn.functional as F
from sculler.autograd import PyLayer
from sculler.eager import engine, ops
from sculler.math import optim as K
from sculler.testing.pylayer_check import TanhPyLayer, check_grad


def _leaf(shape, seed=0, dtype="float64"):
    t = paddle.to_tensor(np.random.default_rng(seed).uniform(-1, 1, shape).astype(dtype))
    t.stop_gradient = False
    return t


# --- PyLayer -----------------------------------------------------------------------------
def test_ops_inside_pylayer_forward_and_backward_are_not_recorded():
    seen = {}

    class Probe(PyLayer):
        @staticmethod
        def forward(ctx, x):
            seen["forward_grad_mode"] = paddle.is_grad_enabled()
            y = paddle.tanh(x)
            seen["inner"] = y
            ctx.save_for_backward(y)
            return y

        @staticmethod
        def backward(ctx, dy):
            seen["backward_grad_mode"] = paddle.is_grad_enabled()
            (y,) = ctx.saved_tensor()
            g = dy * (1 - paddle.square(y))
            seen["inner_grad"] = g
            return g

    x = _leaf([2, 3])
    out = Probe.apply(x)
    assert seen["forward_grad_mode"] is False and paddle.is_grad_enabled()
    assert out is seen["inner"]  # the new tensor itself is linked, not a copy of it
    assert out._node is not None and out._node.inputs == (x,)  # one node, straight to x
    out.backward(paddle.ones([2, 3], dtype="float64"))
    assert seen["backward_grad_mode"] is False and paddle.is_grad_enabled()
    assert seen["inner_grad"].stop_gradient and seen["inner_grad"]._node is None
    np.testing.assert_allclose(x.grad.numpy(), 1 - np.tanh(x.numpy()) ** 2, rtol=1e-12)


def test_pylayer_grads_accumulate_over_two_backward_calls_and_graph_is_freed():
    x = _leaf([2, 3])
    dy = paddle.ones([2, 3], dtype="float64")
    TanhPyLayer.apply(x).backward(dy)
    y = TanhPyLayer.apply(x)
    y.backward(dy, retain_graph=True)
    y.backward(dy)
    np.testing.assert_allclose(x.grad.numpy(), 3 * (1 - np.tanh(x.numpy()) ** 2), rtol=1e-12)
    with pytest.raises(RuntimeError, match="already freed"):
        y.backward(dy)


def test_pylayer_returning_the_incoming_gradient_gives_the_leaf_its_own_copy():
    class Identity(PyLayer):
        @staticmethod
        def forward(ctx, x):
            return x.clone()

        @staticmethod
        def backward(ctx, dy):
            return dy

    x = _leaf([3])
    dy = paddle.to_tensor(np.array([1.0, 2.0, 3.0]))
    Identity.apply(x).backward(dy)
    assert not np.shares_memory(x.grad.numpy(), dy.numpy())
    Identity.apply(x).backward(dy)
    np.testing.assert_array_equal(dy.numpy(), [1.0, 2.0, 3.0])  # accumulation wrote x.grad
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 4.0, 6.0])


def test_pylayer_fast_path_still_checks_the_gradient_shape():
    class Bad(PyLayer):
        @staticmethod
        def forward(ctx, x):
            return paddle.tanh(x)

        @staticmethod
        def backward(ctx, dy):
            return paddle.ones([4], dtype="float64")

    x = _leaf([2, 3])
    with pytest.raises(ValueError, match=r"Bad.backward: gradient 0 has shape \[4\], "
                                         r"expected the input's shape \[2, 3\]"):
        Bad.apply(x).backward(paddle.ones([2, 3], dtype="float64"))


# --- leaf gradients: kept without a copy only when nothing else holds them --------------
def test_add_of_equal_shapes_never_aliases_the_upstream_gradient():
    x, y = _leaf([2, 2]), _leaf([2, 2], seed=1)
    dy = paddle.to_tensor(np.full((2, 2), 0.5))
    for _ in range(2):
        (x + y).backward(dy)
        (x - y).backward(dy)
    np.testing.assert_array_equal(dy.numpy(), np.full((2, 2), 0.5))
    np.testing.assert_array_equal(x.grad.numpy(), np.full((2, 2), 2.0))
    np.testing.assert_array_equal(y.grad.numpy(), np.zeros((2, 2)))
    assert not np.shares_memory(x.grad.numpy(), y.grad.numpy())


def test_linear_gradients_are_kept_and_accumulate():
    x = _leaf([4, 3], seed=2)
    layer = paddle.nn.Linear(3, 2)
    for p in layer.parameters():
        p._array = p._array.astype(np.float64)
    dy = paddle.to_tensor(np.ones((4, 2)))
    layer(x).backward(dy)
    first = {n: p.grad.numpy().copy() for n, p in layer.named_parameters()}
    layer(x).backward(dy)
    for n, p in layer.named_parameters():
        np.testing.assert_allclose(p.grad.numpy(), 2 * first[n], rtol=1e-12)
        assert not np.shares_memory(p.grad.numpy(), dy.numpy())
    np.testing.assert_allclose(layer.bias.grad.numpy(), [8.0, 8.0])
    np.testing.assert_array_equal(dy.numpy(), np.ones((4, 2)))


def test_owned_gradient_that_is_not_contiguous_is_copied():
    x = _leaf([3, 2])
    w = _leaf([4, 3], seed=1)
    paddle.matmul(x, w, transpose_x=True, transpose_y=True).sum().backward()
    assert x.grad.numpy().flags.c_contiguous and w.grad.numpy().flags.c_contiguous
    np.testing.assert_allclose(x.grad.numpy(), np.tile(w.numpy().sum(0), (2, 1)).T,
                               rtol=1e-12)


# --- fused / fast ops equal the ops they replace ----------------------------------------
@pytest.mark.parametrize("shape", [[5, 3], [2, 4, 3], [3]])
def test_linear_matches_matmul_plus_bias_and_finite_differences(shape):
    x = _leaf(shape)
    w, b = _leaf([3, 4], seed=1), _leaf([4], seed=2)
    want = ops.add(ops.matmul(x, w), b).numpy()
    np.testing.assert_allclose(F.linear(x, w, b).numpy(), want, rtol=1e-14)
    check_grad(F.linear, x, w, b, label="linear")
    check_grad(F.linear, x, w, label="linear_no_bias")


def test_linear_promotes_like_matmul_then_add():
    x = paddle.to_tensor(np.ones((2, 3), np.float32))
    w = paddle.to_tensor(np.ones((3, 2), np.float32))
    b = paddle.to_tensor(np.array([0.1, 0.2]))  # float64 bias
    assert F.linear(x, w, b).dtype == np.float64


def test_cross_entropy_with_ignored_rows_matches_finite_differences():
    labels = paddle.to_tensor(np.array([0, -100, 2, 1, -100]))
    x = _leaf([5, 3])
    for reduction in ("mean", "sum", "none"):
        check_grad(lambda t, r=reduction: F.cross_entropy(t, labels, reduction=r), x,
                   label=f"cross_entropy_{reduction}")
    loss = F.cross_entropy(x, labels, reduction="none").numpy()
    assert loss[1] == 0 and loss[4] == 0 and (loss[[0, 2, 3]] > 0).all()


def test_relu_fast_path_equals_maximum_and_returns_a_new_array():
    a = np.array([[-np.inf, -1.0, 0.0, 2.5, np.nan, np.inf]] * 3, dtype=np.float32)
    x = paddle.to_tensor(a)
    y = paddle.nn.functional.relu(x)
    np.testing.assert_array_equal(y.numpy(), np.maximum(a, 0))
    y.numpy()[...] = 7.0  # must not write into any cached array
    np.testing.assert_array_equal(paddle.nn.functional.relu(x).numpy(), np.maximum(a, 0))
    wide = np.random.default_rng(0).standard_normal(70000).astype(np.float32)
    np.testing.assert_array_equal(ops.relu(paddle.to_tensor(wide)).numpy(), np.maximum(wide, 0))


@pytest.mark.parametrize("dtype", ["float32", "float64", "int64"])
def test_python_scalars_combine_with_tensors_as_numpy_does(dtype):
    a = np.array([[0.25, -1.5], [3.0, 0.0]]).astype(dtype)
    t = paddle.to_tensor(a)
    for got, want in ((1 - t, 1 - a), (t * 0.1, a * 0.1), (t + 3, a + 3), (2.5 * t, 2.5 * a),
                      (t * -0.0, a * -0.0), (t - 1e300 if dtype == "float64" else t, None)):
        if want is None:
            continue
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got.numpy(), want)
        np.testing.assert_array_equal(np.signbit(got.numpy()), np.signbit(want))
    for cached in ops._SCALARS.values():
        assert not cached.flags.writeable


# --- eager Momentum ---------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_eager_momentum_step_matches_the_heavy_ball_kernel(dtype):
    rng = np.random.default_rng(0)
    w0 = rng.standard_normal((6, 5)).astype(dtype)
    p = paddle.Parameter(w0.copy(), name="p_momentum_test", learning_rate=0.5)
    opt = paddle.optimizer.Momentum(learning_rate=0.2, momentum=0.9, parameters=[p])
    w, v, tmp = w0.copy(), np.zeros_like(w0), np.empty_like(w0)
    for _ in range(3):
        g = rng.standard_normal(w0.shape).astype(dtype)
        p.grad = paddle.Tensor(g.copy())
        opt.step()
        K.heavy_ball(w, g, v, 0.2 * 0.5, 0.9, tmp)
        opt.clear_grad()
        assert p.grad is None
    tol = 1e-6 if dtype == np.float32 else 1e-14
    np.testing.assert_allclose(p.numpy(), w, rtol=tol, atol=tol)
    np.testing.assert_allclose(opt.state_dict()["p_momentum_test.moment"], v, rtol=tol)


def test_eager_momentum_updates_a_non_contiguous_parameter_in_place():
    w0 = np.arange(12.0).reshape(3, 4)
    p = paddle.Tensor(w0.copy().T, stop_gradient=False, name="p_view")  # a transposed view
    opt = paddle.optimizer.Momentum(learning_rate=0.5, momentum=0.9, parameters=[p])
    p.grad = paddle.Tensor(np.ones((4, 3)))
    view = p._array
    opt.step()
    assert p._array is view
    np.testing.assert_allclose(p.numpy(), w0.T - 0.5)


def test_single_node_backward_is_used_and_multi_node_graphs_are_not():
    x = _leaf([3])
    y = TanhPyLayer.apply(x)
    assert engine.single_node_backward(y, np.ones(3), False)
    z = TanhPyLayer.apply(TanhPyLayer.apply(x))
    assert not engine.single_node_backward(z, np.ones(3), False)
    assert z._node.fn is not None  # untouched: run_backward does the walk


def test_linear_layer_reads_replaced_weight_and_bias():
    layer = paddle.nn.Linear(3, 2)
    x = paddle.ones([4, 3])
    before = layer(x).numpy()
    layer.bias = paddle.ones([2])  # a plain Tensor, no longer a Parameter
    np.testing.assert_allclose(layer(x).numpy() - before, 1.0, rtol=1e-6)
    layer.weight = paddle.zeros([3, 2])
    np.testing.assert_array_equal(layer(x).numpy(), np.ones((4, 2)))
    assert paddle.nn.Linear(3, 2, bias_attr=False)(x).shape == [4, 2]


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32"])
def test_operators_equal_the_ops_and_record_only_when_needed(dtype):
    rng = np.random.default_rng(3)
    a = paddle.to_tensor((rng.standard_normal((3, 4)) * 4).astype(dtype))
    b = paddle.to_tensor((rng.standard_normal((4,)) * 4).astype(dtype))
    pairs = [(a, b), (b, a), (a, 2), (2, a), (a, 0.5), (0.5, a), (a, -0.0), (True, a)]
    for op, fn in ((lambda x, y: x + y, paddle.add), (lambda x, y: x - y, paddle.subtract),
                   (lambda x, y: x * y, paddle.multiply)):
        for x, y in pairs:
            got = op(x, y)
            want = op(x.numpy() if isinstance(x, paddle.Tensor) else x,
                      y.numpy() if isinstance(y, paddle.Tensor) else y)
            assert got.dtype == want.dtype, (x, y)
            np.testing.assert_array_equal(got.numpy(), want)
            assert got.stop_gradient and got._node is None
            np.testing.assert_array_equal(fn(x, y).numpy(), want)
    if dtype == "int32":
        return
    w = _leaf([4], dtype=dtype)
    for got in (a * w, w * a, 1 - w, w + 2.0, w - a):
        assert not got.stop_gradient and got._node is not None
    with paddle.no_grad():
        assert (a * w)._node is None and (1 - w)._node is None


# --- the BLAS heavy ball of the eager Momentum step ---------------------------------------
def test_linear_takes_array_operands_and_broadcast_biases_like_matmul_plus_add():
    w = paddle.to_tensor(np.arange(6.0).reshape(3, 2))
    x = np.ones((4, 3))
    np.testing.assert_array_equal(F.linear(x, w).numpy(), x @ w.numpy())
    b2 = paddle.to_tensor(np.array([[1.0, 2.0]]))  # [1, out]: the general broadcast path
    np.testing.assert_array_equal(F.linear(paddle.to_tensor(x), w, b2).numpy(),
                                  x @ w.numpy() + b2.numpy())
