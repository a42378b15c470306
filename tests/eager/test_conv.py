"""Eager conv/pool ops: gradients by finite differences, values against the engine kernels'
direct definitions, and a small CNN that learns the digits."""

import numpy as np
import pytest

import sculler as paddle
import sculler.nn.functional as F
from sculler.testing.pylayer_check import check_grad


def t(shape, seed, stop_gradient=False):
    return paddle.to_tensor(np.random.RandomState(seed).randn(*shape),
                            stop_gradient=stop_gradient)


@pytest.mark.parametrize("kwargs", [
    dict(), dict(stride=2, padding=1), dict(dilation=2), dict(groups=2, padding=(1, 0)),
])
def test_conv2d_gradient(kwargs):
    groups = kwargs.get("groups", 1)
    x, w, b = t((2, 4, 7, 6), 0), t((4, 4 // groups, 3, 3), 1), t((4,), 2)
    check_grad(lambda x, w, b: F.conv2d(x, w, b, **kwargs), x, w, b, label="conv2d")


def test_conv2d_matches_a_direct_loop():
    x, w = t((1, 2, 5, 4), 3), t((3, 2, 2, 3), 4)
    y = F.conv2d(x, w, stride=1, padding=0).numpy()
    xa, wa = x.numpy(), w.numpy()
    ref = np.zeros((1, 3, 4, 2))
    for f in range(3):
        for i in range(4):
            for j in range(2):
                ref[0, f, i, j] = (xa[0, :, i:i + 2, j:j + 3] * wa[f]).sum()
    np.testing.assert_allclose(y, ref, rtol=1e-10)


@pytest.mark.parametrize("op, kwargs", [
    (F.max_pool2d, dict(kernel_size=2)),
    (F.max_pool2d, dict(kernel_size=3, stride=2, padding=1, ceil_mode=True)),
    (F.avg_pool2d, dict(kernel_size=2, stride=1)),
    (F.avg_pool2d, dict(kernel_size=3, stride=2, padding=1, exclusive=False)),
])
def test_pool_gradient(op, kwargs):
    check_grad(lambda x: op(x, **kwargs), t((2, 3, 7, 5), 5), label=op.__name__)


def test_shape_error_names_both_shapes():
    with pytest.raises(ValueError, match=r"input \[1, 3, 5, 5\] and weight \[2, 2, 3, 3\]"):
        F.conv2d(t((1, 3, 5, 5), 0), t((2, 2, 3, 3), 1))


@pytest.mark.slow
def test_small_cnn_learns_digits():
    from sculler.dataset import digits

    x_train, y_train = digits.load_arrays("train")
    x_test, y_test = digits.load_arrays("test")
    paddle.seed(0)
    model = paddle.nn.Sequential(
        paddle.nn.Conv2D(1, 8, 3, padding=1), paddle.nn.ReLU(), paddle.nn.MaxPool2D(2),
        paddle.nn.Flatten(), paddle.nn.Linear(8 * 4 * 4, 10))
    opt = paddle.optimizer.Adam(learning_rate=0.01, parameters=model.parameters())
    loss_fn = paddle.nn.CrossEntropyLoss()
    rng = np.random.RandomState(0)
    for _epoch in range(8):
        order = rng.permutation(len(x_train))
        for start in range(0, len(order), 64):
            idx = order[start:start + 64]
            x = paddle.to_tensor(x_train[idx].reshape(-1, 1, 8, 8))
            loss = loss_fn(model(x), paddle.to_tensor(y_train[idx]))
            loss.backward()
            opt.step()
            opt.clear_grad()
    with paddle.no_grad():
        pred = model(paddle.to_tensor(x_test.reshape(-1, 1, 8, 8))).argmax(axis=1).numpy()
    assert (pred == y_test).mean() >= 0.95
