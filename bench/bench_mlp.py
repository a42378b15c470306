"""Training throughput (samples/s) of an MLP: Sculler's v2 trainer vs a hand-written NumPy
reference (same math: relu hidden layers, softmax + cross entropy, momentum SGD, preallocated
buffers), plus PaddlePaddle / PyTorch CPU when importable.

The issue-11 target is judged on that reference, which starts each batch from one ready
(batch, 784) array; the trainer is fed the same way, by ``paddle.minibatch.array_batches``
(``ArrayBatch`` column views, bound without a copy). A second pair of figures, for
information, feeds both sides the minibatches of per-sample ``(row, label)`` tuples that
``paddle.batch`` makes: the trainer gathers them in its feeder, and the NumPy loop gathers
them with one ``np.asarray`` per field and also computes what the trainer reports every
batch (the summed cost, the error count).

Each line ends with the other processes' load during its runs (``bench/_load.py``); above
5 % the figures are flagged UNRELIABLE.

Run: ``PYTHONPATH=. python bench/bench_mlp.py [--batches N] [--repeats R]``: the contenders
run interleaved ``R`` times. The ratios are given for the best run of each and, after them, as
the median of the ratios round by round (a round's runs are a few milliseconds apart and see
the same machine, whose speed on its own drifts by up to 2x over seconds).
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from _load import LoadMeter, paired_ratio, same_threads

import sculler as paddle

CONFIGS = [((784, 128, 64, 10), 128), ((784, 1024, 1024, 10), 256)]


def bench_sculler(sizes, batch, batches, tuples=False, use_gpu=False):
    """The v2 trainer fed ``ArrayBatch`` views of one (batch, 784) array and its labels, or
    with ``tuples`` the per-sample tuples ``paddle.batch`` would yield (on the GPU with
    ``use_gpu``; the trainer reads each batch's cost back, so the clock sees finished work)."""
    paddle.layer.reset_names()
    paddle.init(use_gpu=use_gpu, seed=0)
    x = paddle.layer.data(name="x", type=paddle.data_type.dense_vector(sizes[0]))
    y = paddle.layer.data(name="y", type=paddle.data_type.integer_value(sizes[-1]))
    h = x
    for s in sizes[1:-1]:
        h = paddle.layer.fc(input=h, size=s, act=paddle.activation.Relu())
    out = paddle.layer.fc(input=h, size=sizes[-1], act=paddle.activation.Softmax())
    cost = paddle.layer.classification_cost(input=out, label=y)
    params = paddle.parameters.create(cost)
    tr = paddle.trainer.SGD(cost, params, paddle.optimizer.Momentum(momentum=0.9,
                                                                    learning_rate=1e-4))
    rng = np.random.RandomState(0)
    X = rng.rand(batch, sizes[0]).astype(np.float32)
    Y = rng.randint(0, sizes[-1], batch)
    if tuples:
        data = [[(X[i], int(Y[i])) for i in range(batch)]] * batches
    else:
        data = [paddle.minibatch.ArrayBatch(X, Y)] * batches

    def reader():
        return iter(data)

    tr.train(lambda: iter(data[:2]), show_progress=False)
    t = time.perf_counter()
    tr.train(reader, show_progress=False)
    return batch * batches / (time.perf_counter() - t)


def bench_numpy(sizes, batch, batches, like_trainer=False):
    """The hand-written loop; with ``like_trainer`` it also stacks each batch from per-sample
    tuples and computes what the trainer reports every batch: the summed cost and the
    classification errors."""
    rng = np.random.RandomState(0)
    Ws = [(rng.randn(a, b) / np.sqrt(a)).astype(np.float32) for a, b in zip(sizes, sizes[1:])]
    bs = [np.zeros((1, b), np.float32) for b in sizes[1:]]
    mW = [np.zeros_like(w) for w in Ws]
    mb = [np.zeros_like(b) for b in bs]
    gW = [np.empty_like(w) for w in Ws]
    acts = [np.empty((batch, s), np.float32) for s in sizes]
    grads = [np.empty((batch, s), np.float32) for s in sizes]
    X = rng.rand(batch, sizes[0]).astype(np.float32)
    Y = rng.randint(0, sizes[-1], batch)
    rows = np.arange(batch)
    lr, mu = 1e-4, 0.9
    minibatch = [(X[i], int(Y[i])) for i in range(batch)]  # what the trainer's reader yields
    labels = Y
    t = time.perf_counter()
    for _ in range(batches):
        if like_trainer:
            acts[0] = np.asarray([sample[0] for sample in minibatch])
            labels = np.asarray([sample[1] for sample in minibatch])
        else:
            acts[0][...] = X  # the feeder's copy
        for i, (w, b) in enumerate(zip(Ws, bs)):
            np.matmul(acts[i], w, out=acts[i + 1])
            acts[i + 1] += b
            if i < len(Ws) - 1:
                np.maximum(acts[i + 1], 0, out=acts[i + 1])
        p = acts[-1]
        p -= p.max(axis=1, keepdims=True)
        np.exp(p, out=p)
        p /= p.sum(axis=1, keepdims=True)
        if like_trainer:
            cost = -float(np.log(p[rows, labels]).sum())
            errors = int(np.count_nonzero(p.argmax(axis=1) != labels))
            assert np.isfinite(cost) and errors >= 0
        g = grads[-1]
        np.copyto(g, p)
        g[rows, labels] -= 1.0
        for i in range(len(Ws) - 1, -1, -1):
            np.matmul(acts[i].T, grads[i + 1], out=gW[i])
            gb = grads[i + 1].sum(axis=0, keepdims=True)
            if i > 0:
                np.matmul(grads[i + 1], Ws[i].T, out=grads[i])
                grads[i] *= acts[i] > 0
            mW[i] *= mu
            mW[i] -= lr * gW[i]
            Ws[i] += mW[i]
            mb[i] *= mu
            mb[i] -= lr * gb
            bs[i] += mb[i]
    return batch * batches / (time.perf_counter() - t)


def bench_torch(sizes, batch, batches, device="cpu"):
    try:
        import torch
    except ImportError:
        return None
    same_threads(torch)
    layers = []
    for a, b in zip(sizes, sizes[1:]):
        layers += [torch.nn.Linear(a, b), torch.nn.ReLU()]
    model = torch.nn.Sequential(*layers[:-1]).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=1e-4, momentum=0.9)
    X = torch.rand(batch, sizes[0], device=device)
    Y = torch.randint(0, sizes[-1], (batch,), device=device)

    def step():
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(X), Y, reduction="sum").backward()
        opt.step()

    if device != "cpu":
        for _ in range(5):  # warm-up: cuBLAS handles, kernel selection
            step()
        torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(batches):
        step()
    if device != "cpu":
        torch.cuda.synchronize()
    return batch * batches / (time.perf_counter() - t)


def bench_paddle(sizes, batch, batches):
    """PaddlePaddle 3.x dygraph (``pip install paddlepaddle==3.3.1``), same model and update."""
    try:
        import paddle
    except ImportError:
        return None
    paddle.set_device("cpu")
    same_threads(paddle)
    layers = []
    for a, b in zip(sizes, sizes[1:]):
        layers += [paddle.nn.Linear(a, b), paddle.nn.ReLU()]
    model = paddle.nn.Sequential(*layers[:-1])
    opt = paddle.optimizer.Momentum(learning_rate=1e-4, momentum=0.9,
                                    parameters=model.parameters())
    rng = np.random.RandomState(0)
    X = paddle.to_tensor(rng.rand(batch, sizes[0]).astype(np.float32))
    Y = paddle.to_tensor(rng.randint(0, sizes[-1], batch).astype(np.int64))
    for _ in range(2):  # warm-up
        paddle.nn.functional.cross_entropy(model(X), Y, reduction="sum").backward()
        opt.clear_grad()
    t = time.perf_counter()
    for _ in range(batches):
        loss = paddle.nn.functional.cross_entropy(model(X), Y, reduction="sum")
        loss.backward()
        opt.step()
        opt.clear_grad()
    return batch * batches / (time.perf_counter() - t)


def ratios(mine: list[float], theirs: list[float]) -> str:
    """``best / paired``: the ratio of the best runs, and the median of the round-by-round
    ratios."""
    return f"{max(mine) / max(theirs):.2f} / {paired_ratio(mine, theirs):.2f}"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--batches", type=int, default=30)
    ap.add_argument("--repeats", type=int, default=7)
    args = ap.parse_args()
    for sizes, batch in CONFIGS:
        bench_numpy(sizes, batch, 2)  # warm-up (BLAS threads, page faults)
        runs = {"sculler": bench_sculler, "numpy": bench_numpy, "torch": bench_torch,
                "paddle": bench_paddle,
                "sculler_tuples": lambda *a: bench_sculler(*a, tuples=True),
                "numpy_like_trainer": lambda *a: bench_numpy(*a, like_trainer=True)}
        speeds: dict[str, list[float]] = {name: [] for name in runs}
        with LoadMeter() as m:
            for _ in range(args.repeats):  # interleaved: a load change hits all
                for name, fn in runs.items():
                    v = fn(sizes, batch, args.batches)
                    if v is not None:
                        speeds[name].append(v)
        best = {k: max(v) if v else None for k, v in speeds.items()}

        def ratio(peer: str, mine: str = "sculler", speeds: dict = speeds) -> str:
            return ratios(speeds[mine], speeds[peer])

        s, n, t, p = best["sculler"], best["numpy"], best["torch"], best["paddle"]
        name = "-".join(map(str, sizes))
        line = f"MLP {name} batch {batch} (ratios: best runs / median of rounds): sculler " \
               f"{s:,.0f}/s, numpy ref {n:,.0f}/s, sculler/numpy {ratio('numpy')} (both fed " \
               f"per-sample tuples, numpy also computing the cost and error the trainer " \
               f"reports: sculler {best['sculler_tuples']:,.0f}/s, numpy " \
               f"{best['numpy_like_trainer']:,.0f}/s, " \
               f"{ratio('numpy_like_trainer', 'sculler_tuples')})"
        if p is not None:
            line += f", paddle {p:,.0f}/s, sculler/paddle {ratio('paddle')}"
        if t is not None:
            line += f", torch {t:,.0f}/s, sculler/torch {ratio('torch')}"
        print(line + f" [{m.note}]", flush=True)


if __name__ == "__main__":
    main()
