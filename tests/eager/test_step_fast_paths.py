"""Fast paths of an eager training step give the values of the general code they bypass:
cross entropy on narrow C-ordered rows (row max by argmax, row sums as a GEMV, label
entries by flat offsets) against the general path and a float64 formula; the chain walk of
the backward (``engine.chain_backward``) against the dependency-counting walk, and
activation backwards that overwrite a gradient only when the engine owns it."""

import numpy as np
import pytest

import sculler as paddle
import sculler.nn.functional as F
from sculler.autograd import PyLayer
from sculler.eager import engine


def _reference(x, labels, ignore_index, reduction):
    x = x.astype(np.float64)
    keep = labels != ignore_index
    safe = np.where(keep, labels, 0)
    logp = x - x.max(1, keepdims=True)
    logp -= np.log(np.exp(logp).sum(1, keepdims=True))
    loss = -logp[np.arange(len(x)), safe] * keep
    grad = np.exp(logp)
    grad[np.arange(len(x)), safe] -= 1
    grad *= keep[:, None]
    if reduction == "mean":
        return loss.sum() / max(keep.sum(), 1), grad / max(keep.sum(), 1)
    if reduction == "sum":
        return loss.sum(), grad
    return loss, grad


def _loss_and_grad(x_array, labels, reduction, ignore_index=-100, contiguous=True):
    # a transposed copy read through a transposed view is not C-contiguous: general path
    arr = x_array if contiguous else np.ascontiguousarray(x_array.T).T
    x = paddle.to_tensor(arr)
    x.stop_gradient = False
    loss = F.cross_entropy(x, paddle.to_tensor(labels), reduction=reduction,
                           ignore_index=ignore_index)
    loss.backward(paddle.ones(loss.shape, dtype=str(x_array.dtype)))
    return loss.numpy(), x.grad.numpy()


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("ignore_index", [-100, 2])
def test_cross_entropy_fast_path_equals_general_path_and_formula(reduction, ignore_index):
    rng = np.random.default_rng(3)
    x = (rng.standard_normal((9, 5)) * 4).astype(np.float32)
    labels = rng.integers(0, 5, 9)
    labels[[1, 4]] = 2
    fast = _loss_and_grad(x, labels, reduction, ignore_index)
    general = _loss_and_grad(x, labels, reduction, ignore_index, contiguous=False)
    want = _reference(x, labels, ignore_index, reduction)
    for got_fast, got_general, expected in zip(fast, general, want):
        np.testing.assert_allclose(got_fast, got_general, rtol=2e-6, atol=1e-6)
        np.testing.assert_allclose(got_fast, expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("upstream", [None, 1.0, 2.5, -0.0])
def test_summed_cross_entropy_gradient_scales_by_the_upstream_gradient(upstream):
    rng = np.random.default_rng(6)
    x = paddle.to_tensor(rng.standard_normal((5, 4)).astype(np.float32))
    x.stop_gradient = False
    labels = rng.integers(0, 4, 5)
    loss = F.cross_entropy(x, paddle.to_tensor(labels), reduction="sum")
    loss.backward(None if upstream is None else paddle.to_tensor(np.float32(upstream)))
    want = _reference(x.numpy(), labels, -100, "sum")[1] * (1.0 if upstream is None
                                                             else upstream)
    np.testing.assert_allclose(x.grad.numpy(), want, rtol=1e-5, atol=1e-6)


def test_cross_entropy_fast_path_keeps_nan_rows_and_label_shapes():
    x = np.array([[0.0, 1.0, 2.0], [np.nan, 0.0, 1.0], [5.0, 5.0, 5.0]], np.float32)
    labels = np.array([[2], [0], [1]])  # [N, 1] labels: 'none' keeps that shape
    loss, grad = _loss_and_grad(x, labels, "none")
    assert loss.shape == (3, 1)
    assert np.isnan(loss[1, 0]) and np.isnan(grad[1]).all()
    np.testing.assert_allclose(loss[[0, 2], 0], [np.log(1 + np.exp(-1) + np.exp(-2)),
                                                 np.log(3)], rtol=1e-6)


@pytest.mark.parametrize("bad", [-1, 3, -100])
def test_cross_entropy_out_of_range_labels_still_raise(bad):
    x = paddle.to_tensor(np.zeros((2, 3), np.float32))
    with pytest.raises(ValueError, match=r"labels must lie in \[0, 3\)"):
        F.cross_entropy(x, paddle.to_tensor(np.array([0, bad])), ignore_index=7)


def test_cross_entropy_int32_labels_take_the_general_path_with_equal_values():
    rng = np.random.default_rng(4)
    x = rng.standard_normal((6, 4)).astype(np.float32)
    labels = rng.integers(0, 4, 6)
    for a, b in zip(_loss_and_grad(x, labels, "sum"),
                    _loss_and_grad(x, labels.astype(np.int32), "sum")):
        np.testing.assert_allclose(a, b, rtol=2e-6, atol=1e-6)


# --- the chain walk and in-place activation gradients -------------------------------------
def _general_walk(monkeypatch):
    monkeypatch.setattr(engine, "chain_backward", lambda t, g, r: False)
    monkeypatch.setattr(engine, "single_node_backward", lambda t, g, r: False)


def _mlp_grads(act, dtype="float32"):
    paddle.seed(5)
    layers = [paddle.nn.Linear(4, 6), paddle.nn.Linear(6, 6), paddle.nn.Linear(6, 3)]
    x = paddle.to_tensor(np.random.default_rng(5).standard_normal((8, 4)).astype(dtype))
    for p in (p for layer in layers for p in layer.parameters()):
        p._array = p._array.astype(dtype)
    h = x
    for layer in layers[:-1]:
        h = act(layer(h))
    loss = F.cross_entropy(layers[-1](h), paddle.to_tensor(np.arange(8) % 3))
    loss.backward()
    return [p.grad.numpy() for layer in layers for p in layer.parameters()]


@pytest.mark.parametrize("act", [F.relu, F.tanh, F.sigmoid, paddle.exp])
def test_chain_walk_with_in_place_activation_gradients_equals_the_general_walk(
        act, monkeypatch):
    calls = []
    chain = engine.chain_backward
    monkeypatch.setattr(engine, "chain_backward",
                        lambda t, g, r: calls.append(1) or chain(t, g, r))
    fast = _mlp_grads(act)
    assert calls  # the MLP's graph is a chain
    monkeypatch.undo()
    _general_walk(monkeypatch)
    for a, b in zip(fast, _mlp_grads(act)):
        np.testing.assert_array_equal(a, b)


def test_chain_walk_declines_graphs_with_a_shared_node_and_leaves_them_untouched():
    x = paddle.to_tensor(np.linspace(-1, 1, 6).reshape(2, 3))
    x.stop_gradient = False
    h = F.relu(x * 2.0)
    y = h * h  # h feeds one node twice: not a chain
    assert not engine.chain_backward(y, np.ones((2, 3)), False)
    assert y._node.fn is not None and h._node.fn is not None
    y.backward(paddle.ones([2, 3], dtype="float64"))
    np.testing.assert_allclose(x.grad.numpy(), 8 * x.numpy() * (x.numpy() > 0))


def test_in_place_activation_gradient_never_writes_into_an_array_it_does_not_own():
    seen = {}

    class Keep(PyLayer):  # returns (and keeps) the gradient it gets: not owned upstream
        @staticmethod
        def forward(ctx, x):
            return x * 1.0

        @staticmethod
        def backward(ctx, dy):
            seen["dy"], seen["copy"] = dy._array, dy._array.copy()
            return dy

    x = paddle.to_tensor(np.array([[-1.0, 2.0, -3.0], [4.0, -5.0, 6.0]], np.float32))
    x.stop_gradient = False
    w = paddle.to_tensor(np.array([1.5, -2.0, 3.0], np.float32))
    (Keep.apply(F.relu(F.relu(x))) * w).sum().backward()
    np.testing.assert_array_equal(seen["dy"], seen["copy"])  # relu did not overwrite it
    np.testing.assert_array_equal(x.grad.numpy(), np.tile(w.numpy(), (2, 1)) * (x.numpy() > 0))
    g = np.full((2, 3), 2.0, np.float32)
    x.clear_grad()
    F.relu(F.tanh(x)).backward(paddle.to_tensor(g))  # the caller's gradient: not owned
    np.testing.assert_array_equal(g, np.full((2, 3), 2.0, np.float32))


def test_chain_walk_frees_the_graph_and_keeps_it_with_retain_graph():
    x = paddle.to_tensor(np.array([0.5, -0.25]))
    x.stop_gradient = False
    y = F.relu(F.tanh(x * 3.0))
    y.backward(paddle.ones([2], dtype="float64"), retain_graph=True)
    y.backward(paddle.ones([2], dtype="float64"))
    want = 2 * 3 * (1 - np.tanh(1.5) ** 2)
    np.testing.assert_allclose(x.grad.numpy(), [want, 0.0])
    with pytest.raises(RuntimeError, match="already freed"):
        y.backward(paddle.ones([2], dtype="float64"))


def test_multi_output_nodes_and_paddle_grad_take_the_general_walk():
    x = paddle.to_tensor(np.array([[1.0, -2.0, 3.0, -4.0]]))
    x.stop_gradient = False
    left, right = paddle.split(F.relu(x * 2.0), 2, axis=1)
    y = F.tanh(left)  # a chain down to split's two-output node
    assert not engine.chain_backward(y, np.ones((1, 2)), False)
    y.backward(paddle.ones([1, 2], dtype="float64"))
    np.testing.assert_allclose(x.grad.numpy(), [[2 * (1 - np.tanh(2.0) ** 2), 0, 0, 0]])
    w = paddle.to_tensor(np.array([[0.5], [-1.0], [2.0], [1.5]]))
    w.stop_gradient = False
    out = F.relu(F.relu(x) @ w)
    (dw,) = paddle.grad(out, [w])  # captured: .grad untouched, same values
    assert w.grad is None
    np.testing.assert_allclose(dw.numpy(), np.maximum(x.numpy(), 0).T)
