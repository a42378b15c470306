"""Time the LeNet-5 image kernels forward+backward, beside torch CPU when it is installed.

Shapes: batch 64, 1x28x28 -> conv 5x5x20 -> max pool 2 -> conv 5x5x50 -> max pool 2
(float32, no bias or activation: only the kernels of sculler/math). Prints ms per batch.

    PYTHONPATH=. python bench/bench_conv_kernels.py [--repeat 20] [--threads N]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from sculler.math.conv import conv2d_backward_data, conv2d_backward_filter, conv2d_forward
from sculler.math.pool import max_pool2d_backward, max_pool2d_forward


def lenet_numpy(x, w1, w2):
    """One forward+backward pass; returns the two filter gradients."""
    h1 = conv2d_forward(x, w1)
    p1, i1 = max_pool2d_forward(h1, 2, 2)
    h2 = conv2d_forward(p1, w2)
    p2, i2 = max_pool2d_forward(h2, 2, 2)
    dp2 = np.ones_like(p2)
    dh2 = max_pool2d_backward(dp2, i2, h2.shape, 2, 2)
    dw2 = conv2d_backward_filter(p1, dh2, w2.shape)
    dp1 = conv2d_backward_data(dh2, w2, p1.shape)
    dh1 = max_pool2d_backward(dp1, i1, h1.shape, 2, 2)
    dw1 = conv2d_backward_filter(x, dh1, w1.shape)
    return dw1, dw2


def lenet_torch(torch, x, w1, w2):
    f = torch.nn.functional
    w1.grad = w2.grad = None
    p2 = f.max_pool2d(f.conv2d(f.max_pool2d(f.conv2d(x, w1), 2, 2), w2), 2, 2)
    p2.backward(torch.ones_like(p2))
    return w1.grad, w2.grad


def timeit(fn, repeat: int) -> float:
    fn()  # warm up
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return 1e3 * float(np.median(times))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0: torch default)")
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    x = rng.standard_normal((64, 1, 28, 28)).astype(np.float32)
    w1 = (0.1 * rng.standard_normal((20, 1, 5, 5))).astype(np.float32)
    w2 = (0.1 * rng.standard_normal((50, 20, 5, 5))).astype(np.float32)
    ms = timeit(lambda: lenet_numpy(x, w1, w2), args.repeat)
    print(f"sculler numpy  LeNet-5 conv/pool fwd+bwd, batch 64: {ms:8.2f} ms/batch")
    try:
        import torch
    except ImportError:
        print("torch not installed: no comparison")
        return
    if args.threads:
        torch.set_num_threads(args.threads)
    tx = torch.from_numpy(x)
    tw1 = torch.from_numpy(w1.copy()).requires_grad_()
    tw2 = torch.from_numpy(w2.copy()).requires_grad_()
    g1, g2 = lenet_torch(torch, tx, tw1, tw2)
    d1, d2 = lenet_numpy(x, w1, w2)
    err = max(np.abs(d1 - g1.numpy()).max() / np.abs(d1).max(),
              np.abs(d2 - g2.numpy()).max() / np.abs(d2).max())
    tms = timeit(lambda: lenet_torch(torch, tx, tw1, tw2), args.repeat)
    label = f"torch {torch.__version__} CPU, {torch.get_num_threads()} threads:"
    print(f"{label:51s} {tms:8.2f} ms/batch")
    print(f"sculler / torch time ratio {ms / tms:.2f}x; max relative dw difference {err:.1e}")


if __name__ == "__main__":
    main()
