"""Where splitting elementwise work over threads starts to pay: one NumPy call against
``sculler.math.parallel.run`` on ``threads()`` pieces, for float32 arrays of growing size.

Prints, per size, the microseconds of each and their ratio for an in-place ``tanh`` (compute
bound), the tanh and relu gradients (memory bound, several passes) and a momentum update;
then the smallest size from which the split is faster for every kernel: the value to give
``PARALLEL_MIN_ELEMENTS`` (or ``SCULLER_PARALLEL_MIN``). Figures taken while other processes
keep the CPUs busy (see the load column) say nothing about an idle machine.

Run: ``python bench/elementwise_threshold.py``
"""

from __future__ import annotations

import os
import sys
import timeit

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from _load import LoadMeter  # noqa: E402

from sculler.math import activation as K  # noqa: E402
from sculler.math import (
    optim,  # noqa: E402
    parallel,  # noqa: E402
)


def _momentum(v, g, m, t):
    optim.momentum_step(v, g, m, 0.01, 0.9, 0.0, t)


KERNELS = {
    "tanh": (lambda x: np.tanh(x, out=x), 1),
    "tanh_grad": (K.tanh_grad_, 2),
    "relu_grad": (K.relu_grad_, 2),
    "momentum": (_momentum, 4),
}


def measure(fn, arrays, split: bool, number: int) -> float:
    def call():
        if split:
            parallel.run(fn, arrays)
        else:
            fn(*arrays)

    call()
    return min(timeit.repeat(call, number=number, repeat=5)) / number * 1e6


def main() -> None:
    rng = np.random.default_rng(0)
    old = parallel.PARALLEL_MIN_ELEMENTS
    parallel.PARALLEL_MIN_ELEMENTS = 1
    parallel._cpu_to_spare = lambda: True  # measure the split even on a busy machine
    wins: dict[str, list[int]] = {k: [] for k in KERNELS}
    print(f"{parallel.threads()} threads; us per call: one call / split (ratio)")
    for exp in range(12, 23, 2):
        n = 1 << exp
        number = max(5, (1 << 22) // n)
        cells = []
        with LoadMeter() as m:
            for name, (fn, k) in KERNELS.items():
                arrays = [rng.random(n, dtype=np.float32) for _ in range(k)]
                one = measure(fn, arrays, False, number)
                two = measure(fn, arrays, True, number)
                if two < one:
                    wins[name].append(n)
                cells.append(f"{name} {one:8.1f}/{two:8.1f} ({one / two:4.2f})")
        print(f"n=2^{exp:<3d} " + "  ".join(cells) + f"  [{m.note}]", flush=True)
    parallel.PARALLEL_MIN_ELEMENTS = old
    firsts = [min(v) if v else None for v in wins.values()]
    if all(firsts):
        print(f"split pays for every kernel from {max(firsts)} elements "
              f"(current PARALLEL_MIN_ELEMENTS = {old})")
    else:
        print("splitting never paid for some kernel in this run (a loaded machine?)")


if __name__ == "__main__":
    main()
