"""Sparse fc: scipy.sparse CSR kernels (sculler.math.sparse now) vs the hand-written NumPy ones
they replaced (kept here only for this comparison), side by side in one run.

Workload: a sparse binary input of dimension 100,000 with ~50 nonzeros per row, batch 128, an
fc of 128 units. Reported: (1) the two kernels an fc uses per batch, ``Y = X W`` forward and
the row gradient ``X^T dY``; (2) a whole training step (fc 128 relu -> fc 10 softmax ->
cross entropy, sparse row updates) with the fc's kernels swapped. Contenders are interleaved,
medians of ``--repeats`` rounds; the machine's load (from /proc/stat) is printed.

Run: ``PYTHONPATH=. python bench/bench_sparse.py [--repeats 7]``
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

import sculler as paddle
import sculler.layers.fc as fc_module
from sculler.backend import get_array_module
from sculler.math.sparse import CsrMatrix, csr_matmul, csr_t_matmul_rows

DIM, NNZ, BATCH, SIZE = 100_000, 50, 128, 128


def old_csr_matmul(x: CsrMatrix, w, out, beta: float = 0.0):
    """The replaced forward: gather the touched rows of W, then segment sums."""
    xp = get_array_module(w)
    gathered = w[x.indices]
    if x.data is not None:
        gathered *= x.data[:, None]
    if beta == 0.0:
        out[...] = 0
    elif beta != 1.0:
        out *= beta
    nonempty = np.flatnonzero(np.diff(x.indptr))
    if nonempty.size:
        out[nonempty] += xp.add.reduceat(gathered, xp.asarray(x.indptr[nonempty]), axis=0)
    return out


def old_csr_t_matmul_rows(x: CsrMatrix, dy):
    """The replaced row gradient: scatter-add of every entry's dY row."""
    xp = get_array_module(dy)
    rows, inverse = np.unique(x.indices, return_inverse=True)
    contrib = dy[x.row_ids]
    if x.data is not None:
        contrib = contrib * x.data[:, None]
    grad_rows = xp.zeros((rows.size, dy.shape[1]), dtype=dy.dtype)
    xp.add.at(grad_rows, inverse, contrib)
    return rows, grad_rows


KERNELS = {"numpy (before)": (old_csr_matmul, old_csr_t_matmul_rows),
           "scipy.sparse (now)": (csr_matmul, csr_t_matmul_rows)}


def sample_rows(rng: np.random.RandomState, n: int) -> list[list[int]]:
    return [sorted(rng.choice(DIM, rng.randint(NNZ - 10, NNZ + 11), replace=False).tolist())
            for _ in range(n)]


def cpu_busy() -> tuple[int, int]:
    with open("/proc/stat") as f:
        fields = [int(v) for v in f.readline().split()[1:]]
    idle = fields[3] + fields[4]
    return sum(fields) - idle, sum(fields)


def time_kernels(matmul, t_matmul_rows, x, w, out, dy, reps: int) -> float:
    start = time.perf_counter()
    for _ in range(reps):
        matmul(x, w, out)
        t_matmul_rows(x, dy)
    return (time.perf_counter() - start) / reps


def make_trainer():
    paddle.init(seed=0)
    paddle.layer.reset_names()
    x = paddle.layer.data(name="x", type=paddle.data_type.sparse_binary_vector(DIM))
    y = paddle.layer.data(name="y", type=paddle.data_type.integer_value(10))
    h = paddle.layer.fc(input=x, size=SIZE, act=paddle.activation.Relu(),
                        param_attr=paddle.attr.Param(sparse_update=True))
    out = paddle.layer.fc(input=h, size=10, act=paddle.activation.Softmax())
    cost = paddle.layer.classification_cost(input=out, label=y)
    params = paddle.parameters.create(cost)
    return paddle.trainer.SGD(cost, params, paddle.optimizer.Momentum(learning_rate=1e-3))


def time_training(trainer, batches: list, kernels) -> float:
    fc_module.csr_matmul, fc_module.csr_t_matmul_rows = kernels
    try:
        start = time.perf_counter()
        trainer.train(lambda: iter(batches), show_progress=False)
        return BATCH * len(batches) / (time.perf_counter() - start)
    finally:
        fc_module.csr_matmul, fc_module.csr_t_matmul_rows = KERNELS["scipy.sparse (now)"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--batches", type=int, default=20, help="training batches per round")
    args = ap.parse_args()
    rng = np.random.RandomState(0)
    x = CsrMatrix.from_rows(sample_rows(rng, BATCH), DIM, with_values=False)
    w = (rng.randn(DIM, SIZE) * 0.01).astype(np.float32)
    dy = rng.randn(BATCH, SIZE).astype(np.float32)
    outs = {name: np.zeros((BATCH, SIZE), np.float32) for name in KERNELS}
    for name, (matmul, _) in KERNELS.items():
        matmul(x, w, outs[name])
    ref_rows, ref_grad = old_csr_t_matmul_rows(x, dy)
    new_rows, new_grad = csr_t_matmul_rows(x, dy)
    np.testing.assert_allclose(*outs.values(), rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(ref_rows, new_rows)
    np.testing.assert_allclose(ref_grad, new_grad, rtol=1e-5, atol=1e-6)

    labels = rng.randint(0, 10, BATCH * args.batches)
    samples = [(r, int(labels[i])) for i, r in enumerate(sample_rows(rng, BATCH * args.batches))]
    batches = [samples[i:i + BATCH] for i in range(0, len(samples), BATCH)]
    trainers = {name: make_trainer() for name in KERNELS}
    for name, kernels in KERNELS.items():
        time_training(trainers[name], batches[:2], kernels)

    kernel_s: dict[str, list[float]] = {n: [] for n in KERNELS}
    train_sps: dict[str, list[float]] = {n: [] for n in KERNELS}
    busy0, total0 = cpu_busy()
    for _ in range(args.repeats):
        for name, kernels in KERNELS.items():
            kernel_s[name].append(time_kernels(*kernels, x, w, outs[name], dy, reps=20))
            train_sps[name].append(time_training(trainers[name], batches, kernels))
    busy1, total1 = cpu_busy()
    load = (busy1 - busy0) / max(total1 - total0, 1)

    print(f"sparse binary input {DIM:,} wide, ~{NNZ} nonzeros/row, batch {BATCH}, fc {SIZE}; "
          f"medians of {args.repeats} interleaved rounds; machine CPU busy {load:.0%} "
          "(all cores, this run included)")
    print(f"{'':24}{'fwd + row grad (ms)':>22}{'train (samples/s)':>20}")
    for name in KERNELS:
        print(f"{name:24}{statistics.median(kernel_s[name]) * 1e3:22.3f}"
              f"{statistics.median(train_sps[name]):20,.0f}")
    before, now = (statistics.median(kernel_s[n]) for n in KERNELS)
    t_before, t_now = (statistics.median(train_sps[n]) for n in KERNELS)
    print(f"speed-up: kernels {before / now:.2f}x, training step {t_now / t_before:.2f}x")


if __name__ == "__main__":
    main()
