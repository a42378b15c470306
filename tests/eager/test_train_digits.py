"""Eager training end to end: an MLP with a PyLayer tanh and a hand-written SGD loop."""

import numpy as np
import pytest

import sculler as paddle
from sculler.testing.pylayer_check import TanhPyLayer as PyTanh

load_digits = pytest.importorskip("sklearn.datasets").load_digits


class MLP(paddle.nn.Layer):
    def __init__(self):
        super().__init__()
        self.fc1 = paddle.nn.Linear(64, 64)
        self.fc2 = paddle.nn.Linear(64, 10)

    def forward(self, x):
        return self.fc2(PyTanh.apply(self.fc1(x)))


@pytest.mark.slow
def test_mlp_with_pylayer_tanh_reaches_95_percent_on_digits():
    digits = load_digits()
    x = (digits.data / 8.0 - 1.0).astype(np.float32)
    y = digits.target.astype(np.int64)
    perm = np.random.RandomState(0).permutation(1797)
    train, test = perm[:1437], perm[1437:]
    paddle.seed(0)
    model = MLP()
    loss_fn = paddle.nn.CrossEntropyLoss()
    rng = np.random.RandomState(1)
    lr = 0.1
    for _epoch in range(15):
        order = rng.permutation(train)
        for start in range(0, len(order), 32):
            idx = order[start:start + 32]
            loss = loss_fn(model(paddle.to_tensor(x[idx])), paddle.to_tensor(y[idx]))
            loss.backward()
            with paddle.no_grad():
                for p in model.parameters():
                    p._array -= lr * p.grad._array
                    p.clear_grad()
    assert loss.dtype == np.float32
    model.eval()
    with paddle.no_grad():
        logits = model(paddle.to_tensor(x[test]))
    acc = float((logits.argmax(axis=1).numpy() == y[test]).mean())
    print(f"digits test accuracy {acc:.4f}")
    assert acc >= 0.95, f"test accuracy {acc:.3f}"


@pytest.mark.slow
@pytest.mark.parametrize("make_opt", [
    lambda ps: paddle.optimizer.Momentum(learning_rate=0.05, momentum=0.9, parameters=ps),
    lambda ps: paddle.optimizer.Adam(learning_rate=0.01, parameters=ps),
], ids=["momentum", "adam"])
def test_eager_optimizers_train_the_pylayer_mlp(make_opt):
    """The same MLP with sculler.optimizer's step()/clear_grad(), Paddle 2.x style."""
    from sculler.dataset import digits

    x_train, y_train = digits.load_arrays("train")
    x_test, y_test = digits.load_arrays("test")
    paddle.seed(0)
    model = MLP()
    opt = make_opt(model.parameters())
    loss_fn = paddle.nn.CrossEntropyLoss()
    rng = np.random.RandomState(1)
    for _epoch in range(10):
        order = rng.permutation(len(x_train))
        for start in range(0, len(order), 32):
            idx = order[start:start + 32]
            loss = loss_fn(model(paddle.to_tensor(x_train[idx])), paddle.to_tensor(y_train[idx]))
            loss.backward()
            opt.step()
            opt.clear_grad()
    with paddle.no_grad():
        pred = model(paddle.to_tensor(x_test)).argmax(axis=1).numpy()
    acc = float((pred == y_test).mean())
    assert acc >= 0.95, f"test accuracy {acc:.3f}"
