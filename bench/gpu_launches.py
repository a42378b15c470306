"""What each training batch of ``bench_gpu.py``'s four workloads asks of a GPU, counted on a
machine without one: device operations (launches), host-to-device and device-to-host copies,
the bytes they move, and the copies that make the host wait for the GPU (waits).

On the GPU these small models are bound by the host: each CuPy call costs 10-30 us of Python
(``bench/gpu_overheads.py``) and each device-to-host copy waits for the GPU to finish. So the
counts per batch predict most of the difference to PyTorch, and a change that lowers them can
be judged here before a GPU is lent. The counts come from the CuPy stand-in of the tests
(``tests/cupy_stand_in``): it runs Sculler's GPU code on the CPU and tallies each ufunc,
kernel, gather or scatter, copy and CuPy function on device arrays as one launch (a close
approximation: CuPy fuses none of these, and an allocation is counted apart).
``host ms`` is Sculler's own Python a batch: the time in the trainer's passes less the time
spent inside the stand-in. It is an upper bound: the stand-in's NumPy work leaves cold caches
and garbage behind that Sculler's next lines pay for. ``narrow ms`` is the same time for the
same batches with the layers made narrow (widths of 4-8, LeNet-5 at batch 2: the same layers,
steps and launches, next to no NumPy work), which leaves little to pay for: closer to the host
time on a GPU, where the device does the arithmetic. On a GPU a batch's host time is about
that plus 10-30 us a launch.

Run: ``python bench/gpu_launches.py [--batches 3] [--only lenet seq2seq] [--where 20]``
(``--where N``: the N lines of Sculler that ask for the most launches a batch) (it puts the
stand-in on the path itself; with a real CuPy installed it counts nothing and says so).
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import importlib
import os
import pathlib
import sys
import time
from collections.abc import Iterator

ROOT = pathlib.Path(__file__).resolve().parent.parent
KINDS = ("launch", "alloc", "h2d", "d2h", "wait", "h2d_bytes", "d2h_bytes", "host_s")


MLP_SIZES = (784, 1024, 1024, 10)  # as bench_gpu.py times it
# what narrow() sets, by module: the same layers, steps and launches, next to no NumPy work
NARROW = {__name__: {"MLP_SIZES": (8, 8, 8, 10)}, "bench_lenet": {"BATCH": 2},
          "bench_lstm": {"EMB": 4, "HIDDEN": 4},
          "bench_seq2seq": {"WORD": 4, "ENC": 4, "DEC": 4}}


@contextlib.contextmanager
def narrow() -> Iterator[None]:
    """The benchmarks' models made narrow (``NARROW``) while in the block, then restored to
    the values they had."""
    modules = {name: sys.modules.get(name) or importlib.import_module(name) for name in NARROW}
    saved = {(m, attr): getattr(modules[m], attr) for m, attrs in NARROW.items()
             for attr in attrs}
    try:
        for m, attrs in NARROW.items():
            for attr, value in attrs.items():
                setattr(modules[m], attr, value)
        yield
    finally:
        for (m, attr), value in saved.items():
            setattr(modules[m], attr, value)


def workloads(batches: int) -> dict:
    """Per workload, a maker of ``run``: ``run(k)`` trains ``k`` batches of it on the
    (stand-in) GPU, with the models' sizes at the time of the call (see :func:`narrow`)."""
    import bench_lenet
    import bench_lstm
    import bench_mlp
    import bench_seq2seq

    mlp_sizes = MLP_SIZES
    lstm_data = bench_lstm.make_batches(batches + 2)
    demo = bench_seq2seq.load_demo()
    pairs = demo.make_pairs(bench_seq2seq.BATCH * (batches + 2), seed=0)
    s2s_batches = [pairs[i:i + bench_seq2seq.BATCH]
                   for i in range(0, len(pairs), bench_seq2seq.BATCH)]

    def lstm() -> object:
        run = bench_lstm.sculler_trainer(use_gpu=True)
        return lambda k: run(lstm_data[:k])

    def seq2seq() -> object:
        run = bench_seq2seq.make_sculler(demo, s2s_batches, use_gpu=True)
        return run

    return {
        "mlp": lambda: lambda k: bench_mlp.bench_sculler(mlp_sizes, 256, k, use_gpu=True),
        "lenet": lambda: lambda k: bench_lenet.bench_sculler(k, 0, use_gpu=True),
        "lstm": lstm,
        "seq2seq": seq2seq,
    }


def count(name: str, make: object, batches: int) -> dict[str, float]:
    """The stand-in's counts per batch of workload ``name``: those of a run of ``batches`` + 2
    batches less those of a run of 2, both after a first run of 2, so building, warming up
    and the first batches' allocations are not counted, and the buffers and caches the
    first run leaves are there for both. (``bench_mlp``'s run of k batches warms up on 2
    more.)
    ``host_s`` is the time inside the trainer's passes less the stand-in's time there."""
    import cupy

    import sculler.trainer

    run_pass = sculler.trainer.SGD._run_pass

    def timed(self, *args, **kwargs):
        start, inside = time.perf_counter(), cupy.counts["stand_in_s"]
        try:
            return run_pass(self, *args, **kwargs)
        finally:
            cupy.counts["host_s"] += (time.perf_counter() - start
                                      - (cupy.counts["stand_in_s"] - inside))

    sculler.trainer.SGD._run_pass = timed
    try:
        run = make()
        run(2)
        cupy.counts.clear()
        run(2)
        base = dict(cupy.counts)
        cupy.counts.clear()
        run(batches + 2)
        more = dict(cupy.counts)
    finally:
        sculler.trainer.SGD._run_pass = run_pass
    return {k: (more.get(k, 0) - base.get(k, 0)) / batches for k in KINDS}


class _LaunchSites(collections.Counter):
    """The stand-in's ``counts``, that also tallies each launch by the innermost line of
    Sculler that asked for it (in ``sites``)."""

    sites: collections.Counter = collections.Counter()

    def __setitem__(self, key: str, value: float) -> None:
        if key == "launch" and value > self.get(key, 0):
            frame = sys._getframe(1)
            while frame is not None and f"{os.sep}sculler{os.sep}" not in frame.f_code.co_filename:
                frame = frame.f_back
            if frame is not None:
                path = frame.f_code.co_filename.split(f"{os.sep}sculler{os.sep}")[-1]
                _LaunchSites.sites[f"{path}:{frame.f_lineno} {frame.f_code.co_name}"] += \
                    value - self.get(key, 0)
        super().__setitem__(key, value)


def where(name: str, make: object, batches: int, top: int) -> None:
    """Print the ``top`` lines of Sculler that ask for the most launches a batch."""
    import cupy

    run = make()
    cupy.counts.__class__ = _LaunchSites
    try:
        _LaunchSites.sites.clear()
        run(2)
        base = collections.Counter(_LaunchSites.sites)
        _LaunchSites.sites.clear()
        run(batches + 2)  # less the run of 2, as count() does
        sites = _LaunchSites.sites - base
    finally:
        cupy.counts.__class__ = collections.Counter
    print(f"  {name}: launches a batch by the line of Sculler that asks")
    for site, n in sites.most_common(top):
        print(f"  {n / batches:8.1f}  {site}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--batches", type=int, default=3)
    ap.add_argument("--only", nargs="*", default=None,
                    choices=("mlp", "lenet", "lstm", "seq2seq"))
    ap.add_argument("--where", type=int, default=0, metavar="N",
                    help="also list the N lines of Sculler that ask for the most launches")
    args = ap.parse_args()
    sys.path[:0] = [str(ROOT / "tests" / "cupy_stand_in"), str(ROOT), str(ROOT / "bench")]
    import cupy

    if not hasattr(cupy, "counts"):
        print("a real CuPy is installed: this script counts through the stand-in only")
        return 0
    print(f"per training batch ({args.batches} batches, less a run of 2), on the stand-in")
    print(f"{'workload':10s} {'launches':>9s} {'allocs':>7s} {'h2d':>6s} {'d2h':>6s} "
          f"{'waits':>6s} {'h2d KB':>9s} {'d2h KB':>9s} {'host ms':>8s} {'narrow ms':>9s}")
    for name, make in workloads(args.batches).items():
        if args.only and name not in args.only:
            continue
        c = count(name, make, args.batches)
        with narrow():
            thin = count(name, workloads(args.batches)[name], args.batches)
        if thin["launch"] != c["launch"]:
            raise AssertionError(f"{name}: narrow, {thin['launch']} launches, not {c['launch']}")
        print(f"{name:10s} {c['launch']:9.0f} {c['alloc']:7.0f} {c['h2d']:6.0f} {c['d2h']:6.0f} "
              f"{c['wait']:6.0f} {c['h2d_bytes'] / 1024:9.1f} {c['d2h_bytes'] / 1024:9.1f} "
              f"{1e3 * c['host_s']:8.2f} {1e3 * thin['host_s']:9.2f}", flush=True)
        if args.where:
            where(name, make, args.batches, args.where)
    return 0


if __name__ == "__main__":
    sys.exit(main())
