"""Wall time of ``import sculler`` against the interpreter's start and ``import numpy``.

Each of ``python -c pass``, ``python -c "import numpy"`` and ``python -c "import sculler"``
runs ``--runs`` times, interleaved, from the repository root with bytecode cached (the
package is compiled first and ``PYTHONDONTWRITEBYTECODE`` is dropped from the children's
environment: without a cache every import compiles all modules again). Prints the medians and
the imports' time beyond the interpreter's start (the issue-11 target: ``import sculler``
under 0.12 s). Run: ``python bench/import_time.py [--runs 15]``
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

from _load import LoadMeter

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
CASES = {"interpreter": "pass", "numpy": "import numpy", "sculler": "import sculler"}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=15)
    args = ap.parse_args()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    subprocess.run([sys.executable, "-m", "compileall", "-q", "sculler"], cwd=ROOT, env=env,
                   stdout=subprocess.DEVNULL, check=True)
    times: dict[str, list[float]] = {name: [] for name in CASES}
    with LoadMeter() as m:
        for _ in range(args.runs):
            for name, code in CASES.items():
                t = time.perf_counter()
                subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, check=True)
                times[name].append(time.perf_counter() - t)
    med = {name: statistics.median(v) for name, v in times.items()}
    start = med["interpreter"]
    print(f"medians of {args.runs} runs [{m.note}]: interpreter {start:.3f} s; beyond it "
          f"import numpy {med['numpy'] - start:.3f} s, import sculler "
          f"{med['sculler'] - start:.3f} s")


if __name__ == "__main__":
    main()
