"""One eager training step of a 3-layer MLP (784-512-256-10, relu, batch 128, summed cross
entropy, momentum SGD: forward, backward, ``step()``, ``clear_grad()``): Sculler's eager mode
against PyTorch 2.13 and PaddlePaddle 3.3.1 dygraph when importable.

Prints the median microseconds per step of each (contenders interleaved, several rounds),
the ratio ``torch / sculler`` (above 1: Sculler is faster), the median of the per-round
ratios (each round's contenders run seconds apart, so a drift of the machine between rounds
moves both) and the other processes' load during the run (figures taken under load are
flagged). Run: ``python bench/bench_eager_mlp.py``
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import warnings
from collections.abc import Callable

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from _load import LoadMeter, same_threads  # noqa: E402

SIZES, BATCH = (784, 512, 256, 10), 128


def _data():
    rng = np.random.default_rng(0)
    return (rng.random((BATCH, SIZES[0]), dtype=np.float32),
            rng.integers(0, SIZES[-1], BATCH).astype(np.int64))


def sculler_step() -> Callable[[], None]:
    import sculler as paddle

    paddle.seed(0)
    layers = [paddle.nn.Linear(a, b) for a, b in zip(SIZES, SIZES[1:])]
    params = [p for layer in layers for p in layer.parameters()]
    opt = paddle.optimizer.Momentum(learning_rate=1e-4, momentum=0.9, parameters=params)
    xs, ys = _data()
    x, y = paddle.to_tensor(xs), paddle.to_tensor(ys)

    def step() -> None:
        h = x
        for layer in layers[:-1]:
            h = paddle.nn.functional.relu(layer(h))
        loss = paddle.nn.functional.cross_entropy(layers[-1](h), y, reduction="sum")
        loss.backward()
        opt.step()
        opt.clear_grad()

    return step


def torch_step() -> Callable[[], None]:
    import torch

    same_threads(torch)
    torch.manual_seed(0)
    mods = []
    for a, b in zip(SIZES, SIZES[1:]):
        mods += [torch.nn.Linear(a, b), torch.nn.ReLU()]
    model = torch.nn.Sequential(*mods[:-1])
    opt = torch.optim.SGD(model.parameters(), lr=1e-4, momentum=0.9)
    xs, ys = _data()
    x, y = torch.from_numpy(xs), torch.from_numpy(ys)

    def step() -> None:
        torch.nn.functional.cross_entropy(model(x), y, reduction="sum").backward()
        opt.step()
        opt.zero_grad()

    return step


def paddle_step() -> Callable[[], None]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import paddle
    paddle.set_device("cpu")
    same_threads(paddle)
    paddle.seed(0)
    mods = []
    for a, b in zip(SIZES, SIZES[1:]):
        mods += [paddle.nn.Linear(a, b), paddle.nn.ReLU()]
    model = paddle.nn.Sequential(*mods[:-1])
    opt = paddle.optimizer.Momentum(learning_rate=1e-4, momentum=0.9,
                                    parameters=model.parameters())
    xs, ys = _data()
    x, y = paddle.to_tensor(xs), paddle.to_tensor(ys)

    def step() -> None:
        paddle.nn.functional.cross_entropy(model(x), y, reduction="sum").backward()
        opt.step()
        opt.clear_grad()

    return step


def step_time(step: Callable[[], None], n: int) -> float:
    """Median microseconds of ``n`` steps after three warm-up steps."""
    for _ in range(3):
        step()
    times = []
    for _ in range(n):
        t = time.perf_counter()
        step()
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--rounds", type=int, default=7)
    args = ap.parse_args()
    makers = {"sculler": sculler_step, "torch": torch_step, "paddle": paddle_step}
    steps = {}
    for name, make in makers.items():
        try:
            steps[name] = make()
        except ImportError:
            print(f"{name}: not installed, skipped")
    got: dict[str, list[float]] = {name: [] for name in steps}
    with LoadMeter() as m:
        for _ in range(args.rounds):
            for name, step in steps.items():
                got[name].append(step_time(step, args.steps))
    med = {name: statistics.median(v) for name, v in got.items()}
    print(f"eager MLP {'-'.join(map(str, SIZES))} batch {BATCH}, us per training step "
          f"(median of {args.rounds} rounds) [{m.note}]")
    for name, us in med.items():
        line = f"  {name:8s} {us:9.0f} us   {name}/sculler time x{us / med['sculler']:.2f}"
        if name != "sculler":
            ratios = [a / b for a, b in zip(got[name], got["sculler"])]
            line += (f"   (per round: median x{statistics.median(ratios):.2f}, "
                     f"{min(ratios):.2f}-{max(ratios):.2f})")
        print(line)

if __name__ == "__main__":
    main()
