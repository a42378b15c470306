"""Parameters reuse the gradient array that ``clear_grad()`` dropped (``engine.spare_grad``):
the same buffer step after step, the same values as new arrays, and never a buffer that a
caller still holds (a kept gradient, its numpy view or a slice of it keeps its values)."""

import weakref

import numpy as np
import pytest

import sculler as paddle
import sculler.nn.functional as F
from sculler.autograd import PyLayer
from sculler.eager import engine
from sculler.eager.tensor import Parameter


def _mlp(seed=0, dtype="float32"):
    paddle.seed(seed)
    layers = [paddle.nn.Linear(a, b) for a, b in ((6, 5), (5, 3))]
    for p in (p for layer in layers for p in layer.parameters()):
        p._array = p._array.astype(dtype)
    rng = np.random.default_rng(seed)
    x = paddle.to_tensor(rng.standard_normal((4, 6)).astype(dtype))
    y = paddle.to_tensor(rng.integers(0, 3, 4))
    return layers, x, y


def _loss(layers, x, y):
    return F.cross_entropy(layers[1](F.relu(layers[0](x))), y, reduction="sum")


def _params(layers):
    return [p for layer in layers for p in layer.parameters()]


def _train(layers, x, y, steps, clear):
    opt = paddle.optimizer.Momentum(learning_rate=0.1, momentum=0.9,
                                    parameters=_params(layers))
    grads = []
    for _ in range(steps):
        _loss(layers, x, y).backward()
        grads.append([p.grad.numpy().copy() for p in _params(layers)])
        opt.step()
        clear(opt)
    return grads


def _drop_without_spare(opt):
    for p in opt._eager_params():
        p.grad = None  # no clear_grad: nothing is kept for reuse


def test_clear_grad_keeps_the_array_and_the_next_backward_writes_into_it():
    layers, x, y = _mlp()
    params = _params(layers)
    _loss(layers, x, y).backward()
    first = [weakref.ref(p.grad._array) for p in params]
    for p in params:
        p.clear_grad()
    assert all(p.grad is None for p in params)
    for _ in range(3):
        _loss(layers, x, y).backward()
        assert all(p.grad._array is r() for p, r in zip(params, first))  # same buffers
        for p in params:
            p.clear_grad()


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_reused_buffers_give_the_values_of_new_arrays(dtype):
    a, x, y = _mlp(dtype=dtype)
    b, _, _ = _mlp(dtype=dtype)
    reused = _train(a, x, y, 4, lambda opt: opt.clear_grad())
    fresh = _train(b, x, y, 4, _drop_without_spare)
    for step_r, step_f in zip(reused, fresh):
        for gr, gf in zip(step_r, step_f):
            np.testing.assert_array_equal(gr, gf)
    for pa, pb in zip(_params(a), _params(b)):
        np.testing.assert_array_equal(pa.numpy(), pb.numpy())


@pytest.mark.parametrize("keep", ["tensor", "numpy", "slice"])
def test_a_gradient_the_caller_kept_is_never_overwritten(keep):
    layers, x, y = _mlp()
    w = layers[0].weight
    _loss(layers, x, y).backward()
    held = {"tensor": lambda g: g, "numpy": lambda g: g.numpy(),
            "slice": lambda g: g._array[1:]}[keep](w.grad)
    before = np.array(held._array if keep == "tensor" else held, copy=True)
    w.clear_grad()
    x2 = paddle.to_tensor(np.ones((4, 6), np.float32))
    _loss(layers, x2, y).backward()
    now = held._array if keep == "tensor" else held
    np.testing.assert_array_equal(now, before)  # the kept gradient kept its values
    assert not np.shares_memory(w.grad._array, now)


def test_weight_used_twice_sums_both_contributions_into_the_reused_buffer():
    lin = paddle.nn.Linear(3, 3)
    rng = np.random.default_rng(1)
    x = paddle.to_tensor(rng.standard_normal((2, 3)).astype("float32"))
    lin(lin(x)).sum().backward()
    buf = weakref.ref(lin.weight.grad._array)
    expected = lin.weight.grad.numpy().copy()
    lin.weight.clear_grad()
    lin(lin(x)).sum().backward()
    assert lin.weight.grad._array is buf()
    np.testing.assert_allclose(lin.weight.grad.numpy(), expected, rtol=1e-6)


def test_a_copied_gradient_goes_into_the_spare_without_aliasing_the_incoming_one():
    class Identity(PyLayer):  # returns the incoming gradient itself: the leaf must copy it
        @staticmethod
        def forward(ctx, x):
            return x * 1.0

        @staticmethod
        def backward(ctx, dy):
            return dy

    p = Parameter(np.zeros((2, 3)))
    Identity.apply(p).backward(paddle.ones([2, 3], dtype="float64"))
    buf = weakref.ref(p.grad._array)
    p.clear_grad()
    dy = paddle.full([2, 3], 2.0, dtype="float64")
    Identity.apply(p).backward(dy)
    assert p.grad._array is buf()
    np.testing.assert_array_equal(p.grad.numpy(), np.full((2, 3), 2.0))
    assert not np.shares_memory(p.grad._array, dy._array)


def test_no_spare_after_set_to_zero_or_for_another_dtype():
    layers, x, y = _mlp()
    w = layers[0].weight
    _loss(layers, x, y).backward()
    w.clear_grad(set_to_zero=True)
    assert w._spare_grad is None and not w.grad.numpy().any()
    w.grad = None
    _loss(layers, x, y).backward()
    w.clear_grad()
    spare = weakref.ref(w._spare_grad)
    x64 = paddle.to_tensor(x.numpy().astype("float64"))
    out = F.linear(x64, w, layers[0].bias)  # a float64 product: not written into float32
    out.sum().backward()
    assert w.grad._array is not spare() and w.grad.dtype == np.float32
    np.testing.assert_allclose(w.grad.numpy(), np.tile(x64.numpy().sum(0)[:, None], (1, 5)),
                               rtol=1e-6)


def test_spare_grad_declines_while_a_gradient_is_present_or_shapes_differ():
    p = Parameter(np.zeros(3, np.float32))
    p._spare_grad = np.zeros(3, np.float32)
    p.grad = paddle.to_tensor(np.ones(3, np.float32))
    assert engine.spare_grad(p, p._array) is None  # accumulation, not a first write
    p.grad = None
    assert engine.spare_grad(p, np.zeros(4, np.float32)) is None
    assert engine.spare_grad(p, np.zeros(3, np.float64)) is None
    got = engine.spare_grad(p, p._array)
    assert got is not None and p._spare_grad is None  # handed over once
    assert engine.spare_grad(p, p._array) is None
