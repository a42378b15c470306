"""Before/after figures of Sculler itself, interleaved in one run: this checkout against a git
revision (default ``main``), each case alternating between the two in fresh processes so that
a change in the machine's load hits both. Prints the median of each side, the ratio and the
other processes' load (see ``bench/_load.py``) of each run.

The CPU seconds of each case's whole run (median) are printed too: with ``--threads 1`` the
same work on one thread, a measure that a busy machine disturbs much less than wall time.

Run: ``python bench/compare_revisions.py [--rev main] [--rounds 3] [--threads N] [case ...]``;
cases:
``lenet``, ``mlp_small``, ``mlp_big``, ``pylayer_tiny``, ``pylayer_big``, ``eager_mlp``,
``import``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

# each case prints one JSON object {"value": float, "other": float | None}; higher is better
# for throughputs ("/s"), lower for times ("us", "s")
CASES = {
    "lenet": ("samples/s", "import bench_lenet as b; v = b.bench_sculler(20, 3)"),
    "mlp_small": ("samples/s", "import bench_mlp as b; "
                  "v = b.bench_sculler((784, 128, 64, 10), 128, 60)"),
    "mlp_big": ("samples/s", "import bench_mlp as b; "
                "v = b.bench_sculler((784, 1024, 1024, 10), 256, 12)"),
    "pylayer_tiny": ("us", "import pylayer_overhead as b, timeit; step = b._sculler_case((2, 3)); "
                     "v = min(timeit.repeat(step, number=2000, repeat=5)) / 2000 * 1e6"),
    "pylayer_big": ("us", "import pylayer_overhead as b, timeit; "
                    "step = b._sculler_case((1024, 1024)); "
                    "v = min(timeit.repeat(step, number=10, repeat=5)) / 10 * 1e6"),
    "eager_mlp": ("us", "import bench_eager_mlp as b; v = b.step_time(b.sculler_step(), 30)"),
    "import": ("s", "import subprocess, sys, time; ts = []\n"
               "for _ in range(7):\n"
               "    t = time.perf_counter()\n"
               "    subprocess.run([sys.executable, '-c', 'import sculler'], check=True)\n"
               "    ts.append(time.perf_counter() - t)\n"
               "base = []\n"
               "for _ in range(7):\n"
               "    t = time.perf_counter()\n"
               "    subprocess.run([sys.executable, '-c', 'import numpy'], check=True)\n"
               "    base.append(time.perf_counter() - t)\n"
               "v = min(ts) - min(base) + 0.0\n"),
}

RUNNER = """
import json, sys, time, warnings
warnings.simplefilter("ignore")
sys.path.insert(0, {bench!r})
from _load import LoadMeter
with LoadMeter() as m:
    cpu = time.process_time()
{body}
    cpu = time.process_time() - cpu
print(json.dumps({{"value": v, "other": m.other, "cpu": cpu}}))
"""


def export(rev: str, dest: str) -> str:
    """``sculler/`` of ``rev`` unpacked under ``dest`` (for PYTHONPATH)."""
    archive = subprocess.run(["git", "-C", ROOT, "archive", rev, "sculler"], check=True,
                             capture_output=True).stdout
    path = os.path.join(dest, "tree")
    os.makedirs(path)
    with tempfile.TemporaryFile() as f:
        f.write(archive)
        f.seek(0)
        with tarfile.open(fileobj=f) as tar:
            tar.extractall(path, filter="data")
    return path


def run_case(case: str, tree: str, threads: int | None) -> dict:
    body = "\n".join("    " + line for line in CASES[case][1].splitlines())
    code = RUNNER.format(bench=HERE, body=body)
    env = dict(os.environ, PYTHONPATH=tree)
    if threads:
        env.update(OPENBLAS_NUM_THREADS=str(threads), OMP_NUM_THREADS=str(threads),
                   SCULLER_NUM_THREADS=str(threads))
    out = subprocess.run([sys.executable, "-c", code], env=env, cwd=HERE, check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rev", default="main")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=None,
                    help="BLAS/elementwise threads (1: CPU seconds become a load-robust "
                         "second measure of the same work)")
    ap.add_argument("cases", nargs="*", default=list(CASES))
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        trees = {"before": export(args.rev, tmp), "after": ROOT}
        for case in args.cases:
            unit = CASES[case][0]
            got: dict[str, list[dict]] = {"before": [], "after": []}
            for _ in range(args.rounds):
                for side in ("before", "after"):
                    got[side].append(run_case(case, trees[side], args.threads))
            med = {s: statistics.median(r["value"] for r in got[s]) for s in got}
            cpu = {s: statistics.median(r["cpu"] for r in got[s]) for s in got}
            loads = [r["other"] for s in got for r in got[s] if r["other"] is not None]
            worst = max(loads) if loads else None
            gain = med["after"] / med["before"] if unit == "samples/s" else (
                med["before"] / med["after"])
            flag = "" if worst is not None and worst < 0.05 else "  UNRELIABLE (load)"
            load = "?" if worst is None else f"{worst:.0%}"
            print(f"{case:13s} before {med['before']:10.4g} {unit:9s} after "
                  f"{med['after']:10.4g} {unit:9s} speed-up x{gain:4.2f}  "
                  f"CPU s {cpu['before']:.3g} -> {cpu['after']:.3g} "
                  f"(x{cpu['before'] / cpu['after']:4.2f})  "
                  f"(max other load {load}){flag}", flush=True)


if __name__ == "__main__":
    main()
