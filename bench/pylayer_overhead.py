"""Per-call overhead of a tanh PyLayer (forward + backward) in sculler, Paddle and PyTorch.

Each framework runs ``y = Tanh.apply(x); y.backward(dy)`` with the same hand-written
backward ``dy * (1 - y^2)`` on a [2, 3] tensor (pure dispatch overhead) and on a
[1024, 1024] tensor (where the math dominates). Paddle and PyTorch are measured only when
installed (``pip install paddlepaddle==3.3.1 torch==2.13.0``). Prints µs per call (best
of several repeats) and the ratio to sculler. Run: ``python bench/pylayer_overhead.py``.
"""

from __future__ import annotations

import argparse
import os
import sys
import timeit
from collections.abc import Callable

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from _load import LoadMeter, same_threads  # noqa: E402


def _sculler_case(shape: tuple) -> Callable[[], None]:
    import sculler as paddle
    from sculler.testing.pylayer_check import TanhPyLayer as Tanh

    x = paddle.to_tensor(np.random.default_rng(0).standard_normal(shape).astype(np.float32),
                         stop_gradient=False)
    dy = paddle.ones(list(shape))

    def step() -> None:
        Tanh.apply(x).backward(dy)
        x.grad = None

    return step


def _paddle_case(shape: tuple) -> Callable[[], None]:
    import paddle
    from paddle.autograd import PyLayer

    class Tanh(PyLayer):
        @staticmethod
        def forward(ctx, x):
            y = paddle.tanh(x)
            ctx.save_for_backward(y)
            return y

        @staticmethod
        def backward(ctx, dy):
            (y,) = ctx.saved_tensor()
            return dy * (1 - paddle.square(y))

    paddle.set_device("cpu")
    same_threads(paddle)
    x = paddle.to_tensor(np.random.default_rng(0).standard_normal(shape).astype(np.float32),
                         stop_gradient=False)
    dy = paddle.ones(list(shape))

    def step() -> None:
        Tanh.apply(x).backward(dy)
        x.clear_gradient()

    return step


def _torch_case(shape: tuple) -> Callable[[], None]:
    import torch

    class Tanh(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            y = torch.tanh(x)
            ctx.save_for_backward(y)
            return y

        @staticmethod
        def backward(ctx, dy):
            (y,) = ctx.saved_tensors
            return dy * (1 - y * y)

    same_threads(torch)
    x = torch.from_numpy(np.random.default_rng(0).standard_normal(shape).astype(np.float32))
    x.requires_grad_(True)
    dy = torch.ones(shape)

    def step() -> None:
        Tanh.apply(x).backward(dy)
        x.grad = None

    return step


def _time(step: Callable[[], None], number: int, repeat: int) -> float:
    step()
    return min(timeit.repeat(step, number=number, repeat=repeat)) / number * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    cases = [("sculler", _sculler_case), ("paddle", _paddle_case), ("torch", _torch_case)]
    for shape, number in (((2, 3), 2000), ((1024, 1024), 10)):
        results = {}
        with LoadMeter() as m:
            for name, make in cases:
                try:
                    step = make(shape)
                except ImportError:
                    print(f"{name}: not installed, skipped")
                    continue
                results[name] = _time(step, number, args.repeat)
        base = results["sculler"]
        print(f"tanh PyLayer forward+backward on {list(shape)} [{m.note}]:")
        for name, us in results.items():
            print(f"  {name:8s} {us:10.1f} us/call   x{us / base:5.2f} of sculler")


if __name__ == "__main__":
    main()
