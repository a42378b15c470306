"""bench/bench_book.py --quick runs the four book models (PyTorch beside them when
importable) and prints a throughput line, and a ratio line per model when PyTorch runs."""

import importlib.util
import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_bench_book_quick_prints_a_line_per_model():
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    done = subprocess.run([sys.executable, "bench_book.py", "--quick"], cwd=ROOT / "bench",
                          env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.splitlines()
    with_torch = importlib.util.find_spec("torch") is not None
    for name in ("resnet", "textcnn", "word2vec", "seq2seq"):
        assert any(line.startswith(f"{name}: batch ") and "samples/s sculler" in line
                   for line in lines), done.stdout
        ratio = [line for line in lines if line.startswith(f"{name} sculler/torch: ")]
        assert len(ratio) == (1 if with_torch else 0), done.stdout
        if with_torch:
            assert "load" in ratio[0] and float(ratio[0].split()[2]) > 0
