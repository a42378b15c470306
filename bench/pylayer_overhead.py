"""Per-call overhead of a tanh PyLayer (forward + backward) in sculler, Paddle and PyTorch.

Each framework runs ``y = Tanh.apply(x); y.backward(dy)`` with the same hand-written
backward ``dy * (1 - y^2)`` on a [2, 3] tensor (pure dispatch overhead) and on a
[1024, 1024] tensor (where the math dominates). Paddle and PyTorch are measured only when
installed (``pip install paddlepaddle==3.3.1 torch==2.13.0``). The contenders run
interleaved, round by round (``--repeat`` rounds), so that a change of the machine's speed
hits all of them. Prints µs per call (the best round of each), its ratio to sculler's, and
the median of the rounds' ratios. Run: ``python bench/pylayer_overhead.py``.
"""

from __future__ import annotations

import argparse
import os
import sys
import timeit
from collections.abc import Callable

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from _load import LoadMeter, paired_ratio, same_threads  # noqa: E402


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=9)
    args = parser.parse_args()
    cases = [("sculler", _sculler_case), ("paddle", _paddle_case), ("torch", _torch_case)]
    for shape, number in (((2, 3), 2000), ((1024, 1024), 10)):
        steps = {}
        for name, make in cases:
            try:
                steps[name] = make(shape)
            except ImportError:
                print(f"{name}: not installed, skipped")
                continue
            steps[name]()  # warm-up
        rounds: dict[str, list[float]] = {name: [] for name in steps}
        with LoadMeter() as m:
            for _ in range(args.repeat):
                for name, step in steps.items():
                    rounds[name].append(timeit.timeit(step, number=number) / number * 1e6)
        base = min(rounds["sculler"])
        print(f"tanh PyLayer forward+backward on {list(shape)} [{m.note}]:")
        for name, us in rounds.items():
            print(f"  {name:8s} {min(us):10.1f} us/call   x{min(us) / base:5.2f} of sculler"
                  f"   (median of rounds x{paired_ratio(us, rounds['sculler']):5.2f})")


if __name__ == "__main__":
    main()
