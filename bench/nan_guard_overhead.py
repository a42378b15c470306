"""Cost of the trainer's NaN/Inf guard on a healthy batch: the gradient check
(sculler.core.nan_guard.gradients_finite) against one forward+backward, as a ratio.

Run: python bench/nan_guard_overhead.py  (prints the median ratio over interleaved runs)
"""

import time

import numpy as np

import sculler as paddle
from sculler.core.layer import PASS_TRAIN
from sculler.core.nan_guard import gradients_finite
from sculler.data_feeder import DataFeeder


def main(batch: int = 128, repeats: int = 30) -> None:
    paddle.layer.reset_names()
    x = paddle.layer.data(name="x", type=paddle.data_type.dense_vector(784))
    y = paddle.layer.data(name="y", type=paddle.data_type.integer_value(10))
    h = paddle.layer.fc(input=x, size=512, act=paddle.activation.Relu())
    h = paddle.layer.fc(input=h, size=512, act=paddle.activation.Relu())
    out = paddle.layer.fc(input=h, size=10, act=paddle.activation.Softmax())
    cost = paddle.layer.classification_cost(input=out, label=y)
    params = paddle.parameters.create(cost)
    trainer = paddle.trainer.SGD(cost, params, paddle.optimizer.Momentum(learning_rate=1e-3))
    net = trainer.network
    rng = np.random.RandomState(0)
    data = [(rng.rand(784).astype(np.float32), int(rng.randint(10))) for _ in range(batch)]
    args = DataFeeder(trainer.topology.data_type()).convert(data)
    step, check = [], []
    for _ in range(repeats):
        t = time.perf_counter()
        net.zero_grad()
        net.forward(args, PASS_TRAIN)
        net.total_cost()
        net.backward(None)
        step.append(time.perf_counter() - t)
        t = time.perf_counter()
        assert gradients_finite(net)
        check.append(time.perf_counter() - t)
    ratio = np.median(check) / np.median(step)
    print(f"forward+backward {np.median(step) * 1e3:.2f} ms, gradient check "
          f"{np.median(check) * 1e3:.3f} ms: overhead {ratio:.2%} (batch {batch})")


if __name__ == "__main__":
    for size in (128, 512):
        main(batch=size)
