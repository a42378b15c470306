"""Host time per call of the CuPy operations Sculler's GPU path is built from (microseconds,
median of 5 repeats of 200 calls, synchronised at the end of each repeat): what a launch
costs in Python, which decides what is worth fusing. Needs CuPy and a CUDA device.

Run: ``python bench/gpu_overheads.py``
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

import numpy as np


def per_call_us(fn: Callable[[], object], calls: int = 200, repeats: int = 5) -> float:
    import cupy

    fn()
    cupy.cuda.Device().synchronize()
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        for _ in range(calls):
            fn()
        cupy.cuda.Device().synchronize()
        times.append((time.perf_counter() - t) / calls * 1e6)
    return statistics.median(times)


def main() -> None:
    import cupy

    f32 = np.float32
    x = cupy.random.rand(256, 784, dtype=f32)
    w = cupy.random.rand(784, 1024, dtype=f32)
    out = cupy.empty((256, 1024), f32)
    h = cupy.random.rand(64, 128, dtype=f32)
    w4 = cupy.random.rand(4, 128, 128, dtype=f32)
    w_flat = cupy.random.rand(128, 512, dtype=f32)
    prod4 = cupy.empty((4, 64, 128), f32)
    prod = cupy.empty((64, 512), f32)
    small = cupy.random.rand(64, 128, dtype=f32)
    host = np.random.rand(256, 784).astype(f32)
    scalar = cupy.zeros((), f32)
    add = cupy.ElementwiseKernel("T a, T b", "T c", "c = a * b + c", "overhead_fma")
    from sculler.math import cuda_blas

    gates = cupy.random.rand(64, 384, dtype=f32)
    dw = cupy.empty((128, 128), f32)
    cases = {
        "sculler cuda_blas.gemm (256,784)@(784,1024)": lambda: cuda_blas.gemm(x, w, out),
        "sculler cuda_blas.gemm h^T @ gates[:, 256:] +=": lambda: cuda_blas.gemm(
            h.T, gates[:, 256:], dw, 1.0),
        "matmul (256,784)@(784,1024) out=": lambda: cupy.matmul(x, w, out=out),
        "dot (256,784)@(784,1024) out=": lambda: x.dot(w, out=out),
        "matmul (64,128)@(128,512) out=": lambda: cupy.matmul(h, w_flat, out=prod),
        "matmul batched (64,128)@(4,128,128) out=": lambda: cupy.matmul(h, w4, out=prod4),
        "small += small": lambda: small.__iadd__(small),
        "ElementwiseKernel (64,128)": lambda: add(small, small, small),
        "cupy.asarray host (256,784) f32": lambda: cupy.asarray(host),
        "0-d .get()": lambda: scalar.get(),
        "sum (256,1024) axis=0": lambda: out.sum(axis=0),
    }
    print(f"CuPy {cupy.__version__}: host microseconds per call")
    for name, fn in cases.items():
        print(f"  {name:45s} {per_call_us(fn):8.1f}", flush=True)


if __name__ == "__main__":
    main()
