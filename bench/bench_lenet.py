"""LeNet-5 training throughput (samples/s): Sculler (v2 API) vs PaddlePaddle and PyTorch (CPU).

Network: conv 5x5x20 - maxpool 2 - conv 5x5x50 - maxpool 2 - fc 500 relu - fc 10 softmax on
1x28x28 random inputs, batch 64, cross entropy, momentum SGD; every framework takes each batch
as a slice of the same ready arrays (Sculler through ``paddle.minibatch.array_batches``). Each
framework trains the same number of batches after a short warm-up, the three interleaved
``--repeats`` times; the ratios are printed for the best run of each (the headline figure)
and for the medians of the runs paired round by round (one round's three runs see the same
machine), so that a single lucky or unlucky run shows. A peer that cannot be imported is
skipped with a message. Each ratio carries the other processes' load during the run
(``bench/_load.py``); above 5 % it is flagged UNRELIABLE, and so is each round whose own load
was. Run: ``PYTHONPATH=. python bench/bench_lenet.py [--batches N] [--repeats R]``
"""

from __future__ import annotations

import argparse
import os
import time
import warnings

import numpy as np
from _load import LoadMeter, paired_ratio, same_threads

BATCH, CLASSES = 64, 10


def data(batches: int):
    rng = np.random.RandomState(0)
    x = rng.rand(BATCH * batches, 784).astype(np.float32)
    y = rng.randint(0, CLASSES, BATCH * batches)
    return x, y


def bench_sculler(batches: int, warmup: int, use_gpu: bool = False) -> float:
    import sculler as paddle

    paddle.layer.reset_names()
    paddle.init(use_gpu=use_gpu, seed=0)
    img = paddle.layer.data(name="img", type=paddle.data_type.dense_vector(784),
                            height=28, width=28)
    lab = paddle.layer.data(name="label", type=paddle.data_type.integer_value(CLASSES))
    h = paddle.layer.img_conv(input=img, filter_size=5, num_filters=20,
                              act=paddle.activation.Linear())
    h = paddle.layer.img_pool(input=h, pool_size=2, stride=2)
    h = paddle.layer.img_conv(input=h, filter_size=5, num_filters=50,
                              act=paddle.activation.Linear())
    h = paddle.layer.img_pool(input=h, pool_size=2, stride=2)
    h = paddle.layer.fc(input=h, size=500, act=paddle.activation.Relu())
    out = paddle.layer.fc(input=h, size=CLASSES, act=paddle.activation.Softmax())
    cost = paddle.layer.classification_cost(input=out, label=lab)
    params = paddle.parameters.create(cost)
    tr = paddle.trainer.SGD(cost, params, paddle.optimizer.Momentum(momentum=0.9,
                                                                    learning_rate=1e-3 / BATCH))
    x, y = data(batches)
    # fed as the peers are: each batch a slice of the ready arrays (ArrayBatch views)
    reader = paddle.minibatch.array_batches(x, y, batch_size=BATCH)
    tr.train(lambda: iter(list(reader())[:warmup]), show_progress=False)
    t = time.perf_counter()
    tr.train(reader, show_progress=False)
    return BATCH * batches / (time.perf_counter() - t)


def bench_torch(batches: int, warmup: int, device: str = "cpu") -> float | None:
    try:
        import torch
    except ImportError:
        print("torch not importable: skipped")
        return None
    same_threads(torch)
    torch.manual_seed(0)
    nn = torch.nn
    model = nn.Sequential(nn.Conv2d(1, 20, 5), nn.MaxPool2d(2), nn.Conv2d(20, 50, 5),
                          nn.MaxPool2d(2), nn.Flatten(), nn.Linear(800, 500), nn.ReLU(),
                          nn.Linear(500, CLASSES)).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3 / BATCH, momentum=0.9)
    x, y = data(batches)
    xs = torch.from_numpy(x).reshape(batches, BATCH, 1, 28, 28).to(device)
    ys = torch.from_numpy(y).reshape(batches, BATCH).to(device)

    def step(b):
        opt.zero_grad()
        nn.functional.cross_entropy(model(xs[b]), ys[b], reduction="sum").backward()
        opt.step()

    for b in range(warmup):
        step(b)
    if device != "cpu":
        torch.cuda.synchronize()
    t = time.perf_counter()
    for b in range(batches):
        step(b)
    if device != "cpu":
        torch.cuda.synchronize()
    return BATCH * batches / (time.perf_counter() - t)


def bench_paddle(batches: int, warmup: int) -> float | None:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            import paddle
    except ImportError:
        print("paddle not importable: skipped")
        return None
    paddle.set_device("cpu")
    same_threads(paddle)
    paddle.seed(0)
    nn = paddle.nn
    model = nn.Sequential(nn.Conv2D(1, 20, 5), nn.MaxPool2D(2), nn.Conv2D(20, 50, 5),
                          nn.MaxPool2D(2), nn.Flatten(), nn.Linear(800, 500), nn.ReLU(),
                          nn.Linear(500, CLASSES))
    opt = paddle.optimizer.Momentum(learning_rate=1e-3 / BATCH, momentum=0.9,
                                    parameters=model.parameters())
    x, y = data(batches)
    xs = paddle.to_tensor(x.reshape(batches, BATCH, 1, 28, 28))
    ys = paddle.to_tensor(y.reshape(batches, BATCH, 1).astype(np.int64))

    def step(b):
        loss = nn.functional.cross_entropy(model(xs[b]), ys[b], reduction="sum")
        loss.backward()
        opt.step()
        opt.clear_grad()

    for b in range(warmup):
        step(b)
    t = time.perf_counter()
    for b in range(batches):
        step(b)
    return BATCH * batches / (time.perf_counter() - t)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batches", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    print(f"LeNet-5, batch {BATCH}, {args.batches} batches, {os.cpu_count()} CPUs; "
          f"{args.repeats} interleaved rounds (samples/s)")
    runs = {"sculler": bench_sculler, "paddle": bench_paddle, "torch": bench_torch}
    speeds: dict[str, list[float]] = {name: [] for name in runs}
    round_loads = []
    with LoadMeter() as m:
        for _ in range(args.repeats):  # contenders interleaved: a load change hits all
            with LoadMeter() as round_load:
                for name, fn in runs.items():
                    v = fn(args.batches, args.warmup)
                    if v is not None:
                        speeds[name].append(v)
            round_loads.append(round_load.note)
    best = {name: max(v) if v else None for name, v in speeds.items()}
    for name, v in speeds.items():
        if v:
            print(f"  {name:8s} " + " ".join(f"{s:8.0f}" for s in v), flush=True)
    print("  rounds' load: " + ", ".join(round_loads))
    s = best["sculler"]
    for peer in ("paddle", "torch"):
        if best[peer]:
            paired = paired_ratio(speeds["sculler"], speeds[peer])
            print(f"sculler/{peer}: {s / best[peer]:.2f} (best runs), {paired:.2f} (median of "
                  f"the rounds' ratios)  [{m.note}]")


if __name__ == "__main__":
    main()
