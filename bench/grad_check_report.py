"""Worst gradient-check error per layer type over the project's gradient-check tables.

Runs the table tests (tests/layers/test_layer_grad*.py and the py_layer / example checks)
with ``check_layer_grad`` recording each report, then prints one line per layer type:
the number of configurations checked and the worst relative error. Not a test.

Run: ``PYTHONPATH=. python bench/grad_check_report.py``
"""

from __future__ import annotations

import collections
import glob
import os

import pytest

import sculler.testing as testing
from sculler.testing import grad_check

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")


def main() -> None:
    worst: dict[str, float] = collections.defaultdict(float)
    count: collections.Counter = collections.Counter()
    original = grad_check.check_layer_grad

    def recording(config, layer_type, *args, **kwargs):
        report = original(config, layer_type, *args, **kwargs)
        worst[layer_type] = max(worst[layer_type], report.max_error)
        count[layer_type] += 1
        return report

    testing.check_layer_grad = recording
    files = sorted(glob.glob(os.path.join(ROOT, "tests", "layers", "test_layer_grad*.py")))
    files += [os.path.join(ROOT, "tests", "eager", "test_py_layer_in_topology.py"),
              os.path.join(ROOT, "tests", "examples", "test_lsoftmax.py")]
    pytest.main(["-q", "-p", "no:cacheprovider", "-m", "not slow", *files])
    print(f"\n{'layer type':42s} {'configs':>7s} {'worst rel. error':>17s}")
    for name in sorted(worst):
        print(f"{name:42s} {count[name]:7d} {worst[name]:17.2e}")
    print(f"{len(worst)} layer types, {sum(count.values())} configurations, worst "
          f"{max(worst.values()):.2e}")


if __name__ == "__main__":
    main()
