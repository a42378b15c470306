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
    code = (
        "import numpy as np, cupy\n"
        "k = cupy.ElementwiseKernel('T x', 'T y', 'y = -x * 2;', 'wrong')\n"
        "x = cupy.asarray(np.arange(4.0)); y = cupy.empty_like(x); k(x, y)\n"
        "print(y.get().tolist())\n")
    assert _run_on_stand_in(code, tmp_path) == ["[-0.0, -2.0, -4.0, -6.0]"]


def test_the_stand_in_runs_raw_kernels_with_their_barriers(tmp_path):
    """A RawKernel's block shares its ``__shared__`` arrays and meets at ``__syncthreads()``:
    reversing a row through shared memory is right with the barrier and wrong without it (so
    a kernel that forgets one fails its test here as it would on a GPU)."""
    code = (
        "import numpy as np, cupy\n"
        "src = '''typedef double T;\n"
        "extern \"C\" __global__ void flip(const T* x, T* y, long long n) {\n"
        "  __shared__ T row[8];\n"
        "  long long j = threadIdx.x, b = blockIdx.x;\n"
        "  row[j] = x[b * n + j];\n"
        "  BARRIER\n"
        "  y[b * n + j] = row[n - 1 - j];\n"
        "}'''\n"
        "x = cupy.asarray(np.arange(8.0).reshape(2, 4))\n"
        "for barrier in ('__syncthreads();', ''):\n"
        "    y = cupy.zeros_like(x)\n"
        "    flip = cupy.RawKernel(src.replace('BARRIER', barrier), 'flip')\n"
        "    flip((2,), (4,), (x, y, np.int64(4)))\n"
        "    print(y.get().tolist())\n")
    out = _run_on_stand_in(code, tmp_path)
    assert out[0] == "[[3.0, 2.0, 1.0, 0.0], [7.0, 6.0, 5.0, 4.0]]"
    assert out[1] != out[0]


def _run_on_stand_in(code: str, tmp_path) -> list[str]:
    """The lines ``code`` prints, run by Python with the stand-in as ``cupy`` (the test is
    skipped where there is no g++ to compile its kernels)."""
    if shutil.which("g++") is None:
        pytest.skip("no C++ compiler (g++) for the stand-in")
    env = {**os.environ, "PYTHONPATH": str(STAND_IN), "TMPDIR": str(tmp_path)}
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          timeout=120, check=True).stdout.splitlines()
