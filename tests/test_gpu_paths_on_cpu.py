"""Every test marked ``gpu`` without a GPU: in a subprocess that imports the stand-in ``cupy``
of tests/cupy_stand_in, whose arrays Sculler takes for device arrays and which compiles every
kernel body of sculler.math.cuda as C++ (g++) and runs it over NumPy arrays. So CI walks the
GPU code paths (every gradient-check row on the "GPU" and against the CPU, the fused kernels
against their NumPy twins, eager mode, the demos) on every change. What only CUDA shows
(NVRTC compilation, the device's own arithmetic, speed) is left to bench/gpu_check.sh on a
GPU."""

import os
import pathlib
import shutil
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
STAND_IN = ROOT / "tests" / "cupy_stand_in"


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("g++") is None, reason="no C++ compiler (g++) for the stand-in")
def test_gpu_tests_pass_with_the_cpu_stand_in(tmp_path):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(STAND_IN), str(ROOT)]),
           "TMPDIR": str(tmp_path)}
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "-m", "gpu", "tests"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=1200)
    tail = done.stdout[-4000:] + done.stderr[-2000:]
    assert done.returncode == 0, tail
    assert " passed" in done.stdout and "skipped" not in done.stdout, tail


def test_the_stand_in_catches_a_wrong_kernel(tmp_path):
    """The stand-in really runs the kernel body: a body with a wrong sign gives wrong
    numbers (so the test above can fail)."""
    if shutil.which("g++") is None:
        pytest.skip("no C++ compiler (g++) for the stand-in")
    code = (
        "import numpy as np, cupy\n"
        "k = cupy.ElementwiseKernel('T x', 'T y', 'y = -x * 2;', 'wrong')\n"
        "x = cupy.asarray(np.arange(4.0)); y = cupy.empty_like(x); k(x, y)\n"
        "print(y.get().tolist())\n")
    env = {**os.environ, "PYTHONPATH": str(STAND_IN), "TMPDIR": str(tmp_path)}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=120, check=True).stdout
    assert out.strip() == "[-0.0, -2.0, -4.0, -6.0]"
