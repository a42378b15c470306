"""Worst gradient-check error per layer type over the gradient-check table.

Runs every row of ``tests/layers/grad_table.py`` (``CASES``, the rows
tests/layers/test_layer_grad.py runs) through the same harness, ``run_row``, and prints one
line per layer type: the number of configurations checked and the worst relative error. A row
whose check fails is counted and named at the end. Not a test.

Run: ``PYTHONPATH=. python bench/grad_check_report.py``
"""

from __future__ import annotations

import collections
import os
import sys

from sculler.testing import GradientCheckError

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests",
                                "layers"))
import grad_table  # noqa: E402 - the table lives with the tests


def main() -> None:
    worst: dict[str, float] = collections.defaultdict(float)
    count: collections.Counter = collections.Counter()
    failed: list[str] = []
    for row in grad_table.CASES:
        count[row.layer_type] += 1
        try:
            report = grad_table.run_row(row)
        except GradientCheckError as err:
            failed.append(f"{row.id}: {err}")
            worst[row.layer_type] = float("inf")
            continue
        worst[row.layer_type] = max(worst[row.layer_type], report.max_error)
    print(f"{'layer type':42s} {'configs':>7s} {'worst rel. error':>17s}")
    for name in sorted(worst):
        print(f"{name:42s} {count[name]:7d} {worst[name]:17.2e}")
    print(f"{len(worst)} layer types, {sum(count.values())} configurations, worst "
          f"{max(worst.values()):.2e} (bound {grad_table.RTOL:g})")
    for line in failed:
        print("FAILED", line)


if __name__ == "__main__":
    main()
