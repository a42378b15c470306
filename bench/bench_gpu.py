"""Training throughput (samples/s) on one CUDA GPU: Sculler with ``init(use_gpu=True)`` beside
PyTorch on ``cuda``, in one process, on the same batches, for four workloads:

- the MLP 784-1024-1024-10 at batch 256, momentum SGD (``bench_mlp.py``'s model, fed by
  ``array_batches``);
- LeNet-5 at batch 64 (``bench_lenet.py``);
- the LSTM text classifier of ``bench_lstm.py`` (embedding 10k x 128 -> LSTM 128 -> last -> fc
  2, batch 64, lengths 10..100), PyTorch both padded (cuDNN) and packed;
- the attention seq2seq demo's model (``bench_seq2seq.py``), batch 32.

The models, data and PyTorch twins are those scripts' own builders (imported, with their
``use_gpu`` / ``device`` arguments). PyTorch's runs end with ``torch.cuda.synchronize()``;
Sculler's trainer reads every batch's cost back to the host, so its clock sees finished work.
Contenders alternate for ``--rounds`` rounds; the medians and the median of the round-by-round
ratios (Sculler / PyTorch) are printed. A contender that fails is reported and the others go
on; the exit status is then 1. Without CuPy and a CUDA device (or PyTorch with CUDA) it prints
one line saying so and exits 0.

``--profile N`` adds where Sculler's host time goes (cProfile); ``--device-profile N`` runs each
contender once more under ``torch.profiler``, which records every CUDA kernel and copy in the
process through CUPTI (CuPy's as well as PyTorch's), and prints per contender the kernels and
copies, the GPU's busy time against the wall time of the run (a GPU busy for a small part of it
waits on the host), and the N kernels with the most GPU time.

Run: ``PYTHONPATH=. python bench/bench_gpu.py [--rounds 3] [--only mlp lstm] [--profile 25]
[--device-profile 15]`` (``bench/gpu_check.sh`` runs it on the GPU machine).
"""

from __future__ import annotations

import argparse
import collections
import re
import statistics
import sys
import time
import traceback
from collections.abc import Callable

WORKLOADS = ("mlp", "lenet", "lstm", "seq2seq")


def missing_cuda() -> str | None:
    """Why this machine cannot run the comparison, or None."""
    from sculler import backend

    reason = backend.gpu_unavailable_reason()
    if reason is not None:
        return f"Sculler: {reason}"
    try:
        import torch
    except ImportError:
        return "PyTorch is not installed"
    if not torch.cuda.is_available():
        return "PyTorch sees no CUDA device"
    return None


def built_once(make: Callable[[], Callable], warm_up: Callable[[Callable], object],
               rate: Callable[[Callable], float]) -> Callable[[], float]:
    """A contender that builds its trainer ``make()`` and warms it up on its first call only,
    then returns ``rate(trainer)`` (samples/s) on every call."""
    built: list[Callable] = []

    def measure() -> float:
        if not built:
            built.append(make())
            warm_up(built[0])
        return rate(built[0])

    return measure


def mlp(args) -> dict[str, Callable[[], float]]:
    import bench_mlp

    sizes, batch = (784, 1024, 1024, 10), 256
    return {"sculler": lambda: bench_mlp.bench_sculler(sizes, batch, args.mlp_batches,
                                                       use_gpu=True),
            "torch": lambda: bench_mlp.bench_torch(sizes, batch, args.mlp_batches,
                                                   device="cuda")}


def lenet(args) -> dict[str, Callable[[], float]]:
    import bench_lenet

    return {"sculler": lambda: bench_lenet.bench_sculler(args.lenet_batches, 5, use_gpu=True),
            "torch": lambda: bench_lenet.bench_torch(args.lenet_batches, 5, device="cuda")}


def lstm(args) -> dict[str, Callable[[], float]]:
    import bench_lstm

    data = bench_lstm.make_batches(args.lstm_batches)
    trainers = {"sculler": lambda: bench_lstm.sculler_trainer(use_gpu=True),
                "torch-padded": lambda: bench_lstm.torch_trainer(False, device="cuda"),
                "torch-packed": lambda: bench_lstm.torch_trainer(True, device="cuda")}

    def rate(run: Callable) -> float:
        t = time.perf_counter()
        run(data)
        return bench_lstm.BATCH * len(data) / (time.perf_counter() - t)

    # warm-up: buffers, kernel compilation, cuDNN plans
    return {name: built_once(make, lambda run: run(data[:2]), rate)
            for name, make in trainers.items()}


def seq2seq(args) -> dict[str, Callable[[], float]]:
    import bench_seq2seq

    demo = bench_seq2seq.load_demo()
    n = args.seq2seq_batches
    pairs = demo.make_pairs(bench_seq2seq.BATCH * n, seed=0)
    batches = [pairs[i:i + bench_seq2seq.BATCH] for i in range(0, len(pairs),
                                                                bench_seq2seq.BATCH)]
    makers = {"sculler": lambda: bench_seq2seq.make_sculler(demo, batches, use_gpu=True),
              "torch": lambda: bench_seq2seq.make_torch(demo, batches, device="cuda")}

    return {name: built_once(make, lambda run: run(3), lambda run: run(n))
            for name, make in makers.items()}


def profile(name: str, contender: Callable[[], float], lines: int) -> None:
    """One more run of ``contender`` under cProfile: the ``lines`` functions with the most
    time of their own (where the time goes on the host, launches and waits included)."""
    import cProfile
    import pstats

    prof = cProfile.Profile()
    prof.enable()
    contender()
    prof.disable()
    for order in ("tottime", "cumulative"):
        print(f"  -- profile of sculler on {name} (by {order}) --", flush=True)
        pstats.Stats(prof, stream=sys.stdout).sort_stats(order).print_stats(lines)


# CUDA runtime and driver calls that make the host wait for the GPU: synchronizations, and
# copies that are not asynchronous (a copy back waits for the kernels queued before it)
BLOCKING_CALL = re.compile(r"Synchronize|^cu(da)?Memcpy(?!.*Async)")


def device_time(events: list, wall_s: float, lines: int) -> list[str]:
    """Report lines for the ``torch.profiler`` ``events`` of one run of ``wall_s`` seconds:
    kernels and copies (the CUDA device's events), the GPU time they sum to and the time the
    GPU was busy with any of them (their intervals' union), against the wall time; the CUDA
    calls the host waited in (:data:`BLOCKING_CALL`: their number and time, as CUPTI records
    them); then the ``lines`` kernels or copies with the most GPU time (milliseconds, calls,
    name)."""
    from torch.autograd import DeviceType

    spans, by_name = [], collections.defaultdict(lambda: [0.0, 0])
    blocked = collections.defaultdict(lambda: [0.0, 0])
    for event in events:
        if event.device_type != DeviceType.CUDA:
            if BLOCKING_CALL.search(event.name):
                blocked[event.name][0] += event.time_range.end - event.time_range.start
                blocked[event.name][1] += 1
            continue
        start, end = event.time_range.start, event.time_range.end
        spans.append((start, end))
        by_name[event.name][0] += end - start
        by_name[event.name][1] += 1
    if not spans:
        return ["no CUDA kernel or copy recorded (CUPTI unavailable to torch.profiler?)"]
    busy, reach = 0.0, -float("inf")
    for start, end in sorted(spans):
        busy += max(0.0, end - max(start, reach))
        reach = max(reach, end)
    copies = sum(calls for name, (_, calls) in by_name.items() if name.startswith("Mem"))
    lines_out = [f"{len(spans) - copies:,} kernels + {copies:,} copies/sets, "
                 f"{sum(t for t, _ in by_name.values()) / 1e3:.1f} ms of GPU time; GPU busy "
                 f"{busy / 1e3:.1f} ms of {wall_s * 1e3:.1f} ms wall "
                 f"({100 * busy / 1e3 / (wall_s * 1e3):.0f} %)"]
    lines_out.append("host waited in " + (", ".join(
        f"{calls:,} {name} ({t / 1e3:.1f} ms)" for name, (t, calls) in sorted(blocked.items()))
        or "no synchronizing CUDA call"))
    ranked = sorted(by_name.items(), key=lambda item: -item[1][0])[:lines]
    lines_out += [f"{t / 1e3:9.2f} ms {calls:7,d}x  {name[:100]}" for name, (t, calls) in ranked]
    return lines_out


def device_profile(name: str, contenders: dict[str, Callable[[], float]], lines: int) -> None:
    """One more run of each contender under ``torch.profiler`` with CUDA activity: the
    :func:`device_time` report of each (the profiler's own overhead inflates the wall time)."""
    from torch.profiler import ProfilerActivity, profile

    for who, contender in contenders.items():
        try:
            with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
                start = time.perf_counter()
                contender()
                wall = time.perf_counter() - start
            report = device_time(prof.events(), wall, lines)
        except Exception as exc:  # a profile that fails must not stop the benchmark
            report = [f"profile failed: {type(exc).__name__}: {exc}"]
        print(f"  -- GPU time of {who} on {name}: {report[0]}", flush=True)
        for line in report[1:]:
            print(f"    {line}", flush=True)


def measure(name: str, contenders: dict[str, Callable[[], float]], rounds: int) -> bool:
    """Print one workload's medians and ratios; False when a contender failed."""
    rates: dict[str, list[float]] = {k: [] for k in contenders}
    failed: dict[str, str] = {}
    for _ in range(rounds):
        for who, rate in contenders.items():
            if who in failed:
                continue
            try:
                rates[who].append(rate())
            except Exception as exc:  # one failing contender must not hide the others
                failed[who] = f"{type(exc).__name__}: {exc}"
                traceback.print_exc(file=sys.stderr)
    line = []
    for who, r in rates.items():
        line.append(f"{who} FAILED ({failed[who]})" if who in failed
                    else f"{who} {statistics.median(r):,.0f}/s")
    mine = rates.get("sculler") if "sculler" not in failed else None
    for who, theirs in rates.items():
        if who != "sculler" and mine and who not in failed:
            ratio = statistics.median(a / b for a, b in zip(mine, theirs))
            line.append(f"sculler/{who} {ratio:.2f}")
    print(f"  {name}: " + "; ".join(line), flush=True)
    return not failed


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--only", nargs="*", choices=WORKLOADS, default=None)
    ap.add_argument("--mlp-batches", type=int, default=100)
    ap.add_argument("--lenet-batches", type=int, default=50)
    ap.add_argument("--lstm-batches", type=int, default=5)
    ap.add_argument("--seq2seq-batches", type=int, default=10)
    ap.add_argument("--profile", type=int, default=0, metavar="LINES",
                    help="after each workload, profile one more Sculler run and print the "
                         "LINES functions with the most own time")
    ap.add_argument("--device-profile", type=int, default=0, metavar="LINES",
                    help="after each workload, run each contender once more under "
                         "torch.profiler and print its GPU busy time and the LINES kernels "
                         "with the most GPU time")
    args = ap.parse_args()
    reason = missing_cuda()
    if reason is not None:
        print(f"bench_gpu: skipped, CUDA/CuPy not available ({reason})")
        return 0
    import cupy
    import torch

    device = torch.cuda.get_device_name(0)
    print(f"GPU training throughput on {device}: CuPy {cupy.__version__}, PyTorch "
          f"{torch.__version__}, {args.rounds} rounds", flush=True)
    builders = {"mlp": mlp, "lenet": lenet, "lstm": lstm, "seq2seq": seq2seq}
    ok = True
    for name in args.only or WORKLOADS:
        contenders = builders[name](args)
        ok = measure(name, contenders, args.rounds) and ok
        if args.profile:
            profile(name, contenders["sculler"], args.profile)
        if args.device_profile:
            device_profile(name, contenders, args.device_profile)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
