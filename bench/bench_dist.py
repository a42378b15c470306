"""Distributed training throughput and recovery on a local Ray cluster.

Prints samples/s for local training, 1 trainer + 1 pserver and 2 trainers + 2 pservers (sync)
on the 784-1024-1024-10 MLP and on a 2,000,000 x 64 sparse embedding model, the bytes sent
per step, and the time a pserver kill costs. Contenders are interleaved over ``--rounds`` and
the medians printed, with the machine's load (from /proc/stat) during the run. On a 2-core
machine every process shares the same two cores: the figures show the overhead of the
distributed path, not scaling. BLAS runs one thread per process everywhere (Ray's workers
default to it), so local and distributed runs compare like for like.

    python bench/bench_dist.py [--rounds 3] [--batches 30]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"  # before numpy is imported

import numpy as np  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import sculler as paddle  # noqa: E402
from sculler.distributed import Cluster  # noqa: E402


def cpu_times() -> tuple[int, int]:
    with open("/proc/stat") as fh:
        vals = [int(v) for v in fh.readline().split()[1:]]
    idle = vals[3] + vals[4]
    return sum(vals) - idle, sum(vals)


def mlp():
    paddle.layer.reset_names()
    paddle.init(seed=1)
    x = paddle.layer.data(name="x", type=paddle.data_type.dense_vector(784))
    y = paddle.layer.data(name="y", type=paddle.data_type.integer_value(10))
    h = paddle.layer.fc(input=x, size=1024, act=paddle.activation.Relu())
    h = paddle.layer.fc(input=h, size=1024, act=paddle.activation.Relu())
    pred = paddle.layer.fc(input=h, size=10, act=paddle.activation.Softmax())
    return paddle.layer.classification_cost(input=pred, label=y)


def mlp_batches(n: int, size: int = 128) -> list:
    rng = np.random.RandomState(0)
    return [[(rng.randn(784).astype(np.float32), int(rng.randint(10))) for _ in range(size)]
            for _ in range(n)]


def sparse_model(rows: int = 2_000_000):
    paddle.layer.reset_names()
    paddle.init(seed=1)
    w = paddle.layer.data(name="w", type=paddle.data_type.integer_value(rows))
    y = paddle.layer.data(name="y", type=paddle.data_type.integer_value(2))
    emb = paddle.layer.embedding(input=w, size=64, param_attr=paddle.attr.Param(
        sparse_update=True, initial_std=0.0))
    pred = paddle.layer.fc(input=emb, size=2, act=paddle.activation.Softmax())
    return paddle.layer.classification_cost(input=pred, label=y)


def sparse_batches(n: int, size: int = 512, rows: int = 2_000_000) -> list:
    rng = np.random.RandomState(0)
    return [[(int(i), int(i % 2)) for i in rng.randint(rows, size=size)] for _ in range(n)]


def run_local(cost, params, batches) -> float:
    opt = paddle.optimizer.Momentum(learning_rate=1e-4)
    sgd = paddle.trainer.SGD(cost=cost, parameters=params, update_equation=opt)
    stamps = []
    sgd.train(lambda: iter(batches), num_passes=1, show_progress=False,
              event_handler=lambda e: isinstance(e, paddle.event.EndIteration)
              and stamps.append(time.perf_counter()))
    return rate(stamps, batches)


def rate(stamps: list[float], batches: list) -> float:
    """Samples per second after the first step (start-up excluded)."""
    return (len(stamps) - 1) * len(batches[0]) / (stamps[-1] - stamps[0])


def run_cluster(cost, params, batches, trainers: int, pservers: int,
                kill_at: int | None = None) -> dict:
    opt = paddle.optimizer.Momentum(learning_rate=1e-4)
    stamps, pushed, pulled, kill = [], [], [], []
    every = 1000 if kill_at is None else max(1, kill_at - 2)  # a kill loses 2 steps
    with Cluster(num_trainers=trainers, num_pservers=pservers, mode="sync",
                 checkpoint_every=every, rpc_timeout_s=300) as cluster:
        def handler(e):
            if isinstance(e, paddle.event.EndIteration):
                now = time.perf_counter()
                if not stamps or e.step != stamps[-1][0]:
                    stamps.append((e.step, now))
                pushed.append(e.pushed_bytes)
                pulled.append(e.pulled_bytes)
                if kill_at is not None and e.step == kill_at and not kill:
                    cluster.kill_pserver(0)
                    kill.append(time.perf_counter())

        cluster.train(cost, params, opt, lambda: iter(batches), num_passes=1,
                      event_handler=handler)
    times = [t for _, t in stamps]
    steps = np.diff(times)
    out = {"samples_s": (len(pushed) - trainers) * len(batches[0]) / (times[-1] - times[0]),
           "pushed": float(np.mean(pushed)), "pulled": float(np.mean(pulled))}
    if kill:
        after = [t for t in times if t > kill[0]]
        out["recovery_s"] = after[0] - kill[0] - float(np.median(steps))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--batches", type=int, default=24)
    args = ap.parse_args()
    import ray

    home = tempfile.mkdtemp(prefix="bench-dist-")
    os.environ["HOME"] = home
    os.environ["PYTHONPATH"] = os.pathsep.join(
        p for p in (ROOT, os.environ.get("PYTHONPATH")) if p)
    ray.init(num_cpus=2, include_dashboard=False, logging_level="ERROR",
             _temp_dir=os.path.join(home, "ray"), log_to_driver=False)
    busy0, total0 = cpu_times()
    results: dict[str, list] = {}
    for model, build, data in (("mlp 784-1024-1024-10", mlp, mlp_batches(args.batches)),
                               ("sparse 2M x 64", sparse_model,
                                sparse_batches(args.batches))):
        cost = build()
        params = paddle.parameters.create(cost)
        for _ in range(args.rounds):  # interleaved contenders
            results.setdefault((model, "local"), []).append(
                {"samples_s": run_local(cost, params, data)})
            for t in (1, 2):
                results.setdefault((model, f"{t} trainer(s) + {t} pserver(s)"), []).append(
                    run_cluster(cost, params, data, t, t))
        results.setdefault((model, "recovery"), []).append(
            run_cluster(cost, params, data, 2, 2, kill_at=args.batches // 4))
    busy1, total1 = cpu_times()
    ray.shutdown()
    print(f"machine: {os.cpu_count()} cores, load during the run "
          f"{(busy1 - busy0) / max(total1 - total0, 1):.0%} busy, loadavg "
          f"{open('/proc/loadavg').read().split()[:3]}")
    for (model, who), runs in results.items():
        sps = statistics.median(r["samples_s"] for r in runs)
        line = f"{model:22s} {who:28s} {sps:9.1f} samples/s"
        if "pushed" in runs[0]:
            line += (f"  pushed {statistics.median(r['pushed'] for r in runs) / 1e3:9.1f} kB"
                     f"  pulled {statistics.median(r['pulled'] for r in runs) / 1e3:9.1f} kB"
                     " per trainer step")
        if "recovery_s" in runs[0]:
            line += f"  pserver kill costs {runs[0]['recovery_s']:.2f} s"
        print(line)


if __name__ == "__main__":
    main()
