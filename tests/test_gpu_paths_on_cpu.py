"""Every test marked ``gpu`` without a GPU: in a subprocess that imports the stand-in ``cupy``
of tests/cupy_stand_in, whose arrays Sculler takes for device arrays and which compiles every
kernel body of sculler.math.cuda as C++ (g++) and runs it over NumPy arrays. So CI walks the
GPU code paths (every gradient-check row on the "GPU" and against the CPU, the fused kernels
against their NumPy twins, eager mode, the demos) on every change. What only CUDA shows
(NVRTC compilation, the device's own arithmetic, speed) is left to bench/gpu_check.sh on a
GPU."""

import json
import os
import pathlib
import shutil
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
STAND_IN = ROOT / "tests" / "cupy_stand_in"


@pytest.fixture(autouse=True)
def _shared_kernel_cache(tmp_path_factory, monkeypatch):
    """One folder of compiled stand-in kernels for every subprocess of the session, so a
    kernel is compiled by g++ once, not once a run."""
    monkeypatch.setenv("CUPY_STAND_IN_CACHE",
                       str(tmp_path_factory.getbasetemp() / "cupy-stand-in-kernels"))


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("g++") is None, reason="no C++ compiler (g++) for the stand-in")
def test_gpu_tests_pass_with_the_cpu_stand_in(tmp_path):
    _pytest_on_stand_in(tmp_path, "-m", "gpu", "tests")


def _pytest_on_stand_in(tmp_path, *args: str, env_extra: dict | None = None,
                        none_skipped: bool = True) -> None:
    """Run pytest with ``args`` in a subprocess whose ``cupy`` is the stand-in; it must pass
    (and, with ``none_skipped``, skip nothing: a skip there is a GPU path not walked)."""
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           *args], cwd=ROOT, env=_stand_in_env(tmp_path, env_extra),
                          capture_output=True, text=True, timeout=1200)
    tail = done.stdout[-4000:] + done.stderr[-2000:]
    assert done.returncode == 0, tail
    assert " passed" in done.stdout, tail
    assert not none_skipped or "skipped" not in done.stdout, tail


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("g++") is None, reason="no C++ compiler (g++) for the stand-in")
def test_the_kernel_tests_pass_with_blocks_threads_and_elements_run_backwards(tmp_path):
    """Every kernel of sculler.math.cuda and cuda_sequences against its NumPy twin once more,
    with the stand-in running blocks, threads and elements from the last
    (``CUPY_STAND_IN_ORDER=reverse``): a kernel whose result depends on the order a GPU does
    not promise (a thread reading an earlier thread's write before a barrier, one block
    reading another's) fails in one of the two orders."""
    _pytest_on_stand_in(tmp_path, "-m", "gpu", "tests/math/test_cuda_kernels.py",
                        env_extra={"CUPY_STAND_IN_ORDER": "reverse"})


# CPU tests that build, train, test, infer or save through paddle.init, so forcing init onto
# the GPU walks whole programs (the layer, math and eager suites build their inputs by hand)
PROGRAM_TESTS = ["tests/programs", "tests/group", "tests/v2", "tests/book", "tests/examples",
                 "tests/core", "tests/config", "tests/proto", "tests/reader",
                 *(f"tests/test_{name}.py" for name in (
                     "cli", "cli_commands", "cli_conveniences", "damaged_files", "write_errors",
                     "event", "minibatch", "model_average", "multi_head_attention", "networks",
                     "optimizer", "optimizer_flat", "summary", "training_logs", "user_mistakes",
                     "bad_inputs", "interrupt", "onnx_export", "onnx_sequence"))]


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("g++") is None, reason="no C++ compiler (g++) for the stand-in")
def test_the_cpu_tests_of_whole_programs_pass_with_every_init_on_the_gpu(tmp_path):
    """The CPU tests that train, test, infer, generate, export and save whole programs
    (``PROGRAM_TESTS``) pass with every ``paddle.init`` put on the stand-in GPU
    (tests/cupy_stand_in/force_gpu.py): programs, not only layers, run on the device as on
    the CPU. (This found a fused ``lstmemory_group`` whose composed bias was a host array.)"""
    _pytest_on_stand_in(tmp_path, "-p", "force_gpu", "-m", "not slow and not gpu",
                        *PROGRAM_TESTS, none_skipped=False)


def test_the_stand_in_catches_a_wrong_kernel(tmp_path):
    """The stand-in really runs the kernel body: a body with a wrong sign gives wrong
    numbers (so the test above can fail)."""
    code = (
        "import numpy as np, cupy\n"
        "k = cupy.ElementwiseKernel('T x', 'T y', 'y = -x * 2;', 'wrong')\n"
        "x = cupy.asarray(np.arange(4.0)); y = cupy.empty_like(x); k(x, y)\n"
        "print(y.get().tolist())\n")
    assert _run_on_stand_in(code, tmp_path) == ["[-0.0, -2.0, -4.0, -6.0]"]


def test_the_stand_in_takes_an_elementwise_loop_as_cupy_does(tmp_path):
    """CuPy's rules for an ElementwiseKernel's loop: the non-raw arrays broadcast to its
    shape (an input of shape (1, 3) over (2, 3)); an output of another shape ((3,) against
    a (3, 1) input: a (3, 3) loop) and ``size`` beside a non-raw array are errors."""
    code = (
        "import numpy as np, cupy\n"
        "k = cupy.ElementwiseKernel('T x', 'T y', 'y = x + 1;', 'inc')\n"
        "row, y = cupy.asarray(np.arange(3.0).reshape(1, 3)), cupy.zeros((2, 3))\n"
        "k(row, y)\n"
        "print(y.get().tolist())\n"
        "tries = [lambda: k(cupy.zeros((3, 1)), cupy.zeros(3)),\n"
        "         lambda: k(cupy.zeros(3), cupy.zeros(3), size=3)]\n"
        "for t in tries:\n"
        "    try:\n"
        "        t()\n"
        "        print('ran')\n"
        "    except ValueError as e:\n"
        "        print(str(e).split(': ', 1)[1][:22])\n")
    assert _run_on_stand_in(code, tmp_path) == ["[[1.0, 2.0, 3.0], [1.0, 2.0, 3.0]]",
                                                "Out shape is mismatche", "Specified 'size' can b"]


def test_the_stand_in_refuses_an_input_that_overlaps_its_output(tmp_path):
    """CuPy's element loops do not buffer: ``a[1:] += a[:-1]`` or ``a[1:] = a[:-1]`` race on
    a GPU, where NumPy gives a defined result. The stand-in refuses them; an update in place
    element for element (``a += b``, ``a[:2] *= 2``) is fine."""
    code = (
        "import numpy as np, cupy\n"
        "a, b = cupy.asarray(np.arange(4.0)), cupy.asarray(np.ones(4))\n"
        "def tries():\n"
        "    yield lambda: a.__iadd__(b)\n"
        "    yield lambda: np.multiply(a[:2], 2, out=a[:2])\n"
        "    yield lambda: np.add(a[1:], a[:-1], out=a[1:])\n"
        "    yield lambda: a.__setitem__(slice(1, None), a[:-1])\n"
        "for t in tries():\n"
        "    try:\n"
        "        t()\n"
        "        print('ran')\n"
        "    except ValueError as e:\n"
        "        print('refused')\n"
        "print(a.get().tolist())\n")
    assert _run_on_stand_in(code, tmp_path) == ["ran", "ran", "refused", "refused",
                                                "[2.0, 4.0, 3.0, 4.0]"]


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


def test_reverse_order_shows_a_missing_barrier_before_reading_an_earlier_thread(tmp_path):
    """Without a barrier, a thread that reads what the thread before it wrote gets it when
    the threads run in order, so that bug passes; run from the last thread
    (``CUPY_STAND_IN_ORDER=reverse``), it reads what was there before, as on a GPU it may."""
    code = (
        "import numpy as np, cupy\n"
        "src = '''typedef double T;\n"
        "extern \"C\" __global__ void shift(const T* x, T* y) {\n"
        "  __shared__ T row[4];\n"
        "  int j = threadIdx.x;\n"
        "  row[j] = x[j];\n"
        "  y[j] = row[j > 0 ? j - 1 : 0];\n"
        "  __syncthreads();\n"
        "}'''\n"
        "x = cupy.asarray(np.arange(1.0, 5.0))\n"
        "y = cupy.zeros_like(x)\n"
        "cupy.RawKernel(src, 'shift')((1,), (4,), (x, y))\n"
        "print(y.get().tolist())\n")
    assert _run_on_stand_in(code, tmp_path) == ["[1.0, 1.0, 2.0, 3.0]"]
    assert _run_on_stand_in(code, tmp_path, {"CUPY_STAND_IN_ORDER": "reverse"}) != [
        "[1.0, 1.0, 2.0, 3.0]"]


def test_the_stand_in_refuses_a_launch_cuda_refuses(tmp_path):
    """An empty grid (a batch with no rows) or a block over 1,024 threads is an error of the
    launch on a GPU; the stand-in raises too instead of running nothing."""
    code = (
        "import numpy as np, cupy\n"
        "k = cupy.RawKernel('extern \"C\" __global__ void noop(double* y) { }', 'noop')\n"
        "y = cupy.zeros(1)\n"
        "for grid, block in (((1,), (1024,)), ((0,), (32,)), ((1,), (1025,))):\n"
        "    try:\n"
        "        k(grid, block, (y,))\n"
        "        print('ran')\n"
        "    except RuntimeError as e:\n"
        "        print(str(e).split(':')[0])\n")
    assert _run_on_stand_in(code, tmp_path) == ["ran", "CUDA_ERROR_INVALID_VALUE",
                                                "CUDA_ERROR_INVALID_VALUE"]


def test_the_stand_in_refuses_a_raw_kernel_scalar_of_another_c_type(tmp_path):
    """CuPy packs a RawKernel's scalar argument by the scalar's own dtype, so an int64 given
    for an ``int`` parameter shifts every argument after it on a GPU, and passes an array as
    its address only, so a float64 array read as ``float*`` is garbage; the stand-in raises."""
    code = (
        "import numpy as np, cupy\n"
        "src = 'extern \"C\" __global__ void r(float* a, int n) { a[threadIdx.x] += n; }'\n"
        "x = cupy.asarray(np.zeros(4, np.float32)); k = cupy.RawKernel(src, 'r')\n"
        "k((1,), (4,), (x, np.int32(2)))\n"
        "print(x.get().tolist())\n"
        "for a, n in ((x, np.int64(2)), (x, np.uint32(2)), (x, 2),\n"
        "             (x.astype(np.float64), np.int32(2))):\n"
        "    try:\n"
        "        k((1,), (4,), (a, n))\n"
        "    except TypeError as e:\n"
        "        print(e)\n")
    out = _run_on_stand_in(code, tmp_path)
    assert out[0] == "[2.0, 2.0, 2.0, 2.0]"
    assert out[1:] == ["r: n is declared int, got a NumPy int64",
                       "r: n is declared int, got a NumPy uint32",
                       "r: pass n as a NumPy scalar of its C type (int), got int",
                       "r: a is declared float*, got a device array of float64"]


def test_the_stand_in_refuses_aliasing_that_is_undefined_on_a_gpu(tmp_path):
    """A RawKernel parameter declared ``__restrict__`` given the memory of one it may write
    (nvcc reads it through the read-only cache: stale values), and a cuBLAS product whose
    output shares memory with an operand (tiles written while still read): both are
    refused. Two read-only views of one array, or disjoint halves of one buffer, run."""
    code = (
        "import numpy as np, cupy\n"
        "from cupy_backends.cuda.libs import cublas\n"
        "src = ('extern \"C\" __global__ void k(const double* __restrict__ w, const double* p,'\n"
        "       ' double* y) { y[threadIdx.x] = w[threadIdx.x] + p[threadIdx.x]; }')\n"
        "k = cupy.RawKernel(src, 'k')\n"
        "buf = cupy.asarray(np.arange(8.0))\n"
        "one = cupy.asarray(np.ones((2, 2)))\n"
        "at = np.array([1.0, 0.0]).ctypes.data\n"
        "def gemm(a, b, c):\n"
        "    cublas.dgemm(1, 0, 0, 2, 2, 2, at, a.data.ptr, 2, b.data.ptr, 2, at + 8,\n"
        "                 c.data.ptr, 2)\n"
        "def tries():\n"
        "    yield lambda: k((1,), (4,), (buf[:4], buf[:4], buf[4:]))\n"
        "    yield lambda: k((1,), (4,), (buf[:4], buf[4:], buf[:4]))\n"
        "    yield lambda: k((1,), (4,), (buf[4:], buf[:4], buf[2:6]))\n"
        "    yield lambda: gemm(one, one, cupy.zeros((2, 2)))\n"
        "    yield lambda: gemm(one, one, one)\n"
        "for t in tries():\n"
        "    try:\n"
        "        t()\n"
        "        print('ran')\n"
        "    except (ValueError, cublas.CUBLASError) as e:\n"
        "        print('refused', str(e)[:32])\n")
    restricted = "refused k: w is declared __restrict__ bu"
    assert _run_on_stand_in(code, tmp_path) == [
        "ran", restricted, restricted, "ran", "refused the output shares memory with an"]


def test_the_stand_ins_cublas_reads_its_arguments_as_a_real_blas_does(tmp_path):
    """The stand-in's ``sgemm``/``dgemm``/``sgemv``/``dgemv`` against NumPy's own OpenBLAS
    called column-major with the same raw arguments (cuBLAS follows the reference BLAS:
    column-major, ``op`` flags, leading dimensions, increments), over random shapes,
    padded leading dimensions, flags and scalars. The tests of ``cuda_blas`` check it
    against NumPy through the stand-in; this checks the stand-in against a BLAS, so the
    two cannot share a misreading of cuBLAS."""
    from sculler.math.cblas import numpy_openblas

    lib = numpy_openblas()
    if lib is None or not hasattr(lib, "scipy_cblas_dgemm64_"):
        pytest.skip("NumPy's OpenBLAS with 64-bit CBLAS symbols is not found")
    code = """
import ctypes, numpy as np
from cupy_backends.cuda.libs import cublas
from sculler.math.cblas import numpy_openblas

lib, rng, worst = numpy_openblas(), np.random.RandomState(0), 0.0
COL_MAJOR, NO_TRANS = 102, 111  # CBLAS's codes; cuBLAS's are 0 and 1 (N, T)


def routine(name, real):
    fn = getattr(lib, "scipy_cblas_" + name + "64_")
    flags, dims = (3, 3) if name.endswith("gemm") else (2, 2)  # order, op(s); m, n(, k)
    fn.argtypes = [ctypes.c_int] * flags + [ctypes.c_int64] * dims + [
        real, ctypes.c_void_p, ctypes.c_int64, ctypes.c_void_p, ctypes.c_int64, real,
        ctypes.c_void_p, ctypes.c_int64]
    return fn


def compare(mine, ref):
    global worst
    worst = max(worst, float(np.abs(mine - ref).max() / (1 + np.abs(ref).max())))


for dtype, char, real in ((np.float32, "s", ctypes.c_float), (np.float64, "d", ctypes.c_double)):
    blas_gemm, blas_gemv = routine(char + "gemm", real), routine(char + "gemv", real)
    gemm, gemv = getattr(cublas, char + "gemm"), getattr(cublas, char + "gemv")
    for case in range(150):
        m, n, k = (int(v) for v in rng.randint(1, 7, size=3))
        ta, tb, t = (int(v) for v in rng.randint(0, 2, size=3))
        lda = (k if ta else m) + int(rng.randint(0, 3))
        ldb = (n if tb else k) + int(rng.randint(0, 3))
        ldc = m + int(rng.randint(0, 3))
        a = rng.randn(lda * (m if ta else k)).astype(dtype)
        b = rng.randn(ldb * (k if tb else n)).astype(dtype)
        c = rng.randn(ldc * n).astype(dtype)
        ref = c.copy()
        scalars = np.array([rng.randn(), rng.choice([0.0, 1.0, rng.randn()])], dtype)
        at = scalars.ctypes.data
        gemm(1, ta, tb, m, n, k, at, a.ctypes.data, lda, b.ctypes.data, ldb,
             at + scalars.itemsize, c.ctypes.data, ldc)
        blas_gemm(COL_MAJOR, NO_TRANS + ta, NO_TRANS + tb, m, n, k, scalars[0], a.ctypes.data,
                  lda, b.ctypes.data, ldb, scalars[1], ref.ctypes.data, ldc)
        compare(c, ref)
        ldm = m + int(rng.randint(0, 3))
        mat = rng.randn(ldm * n).astype(dtype)
        incx, incy = (int(v) for v in rng.randint(1, 3, size=2))
        x = rng.randn(incx * (m if t else n)).astype(dtype)
        y = rng.randn(incy * (n if t else m)).astype(dtype)
        ref = y.copy()
        gemv(1, t, m, n, at, mat.ctypes.data, ldm, x.ctypes.data, incx,
             at + scalars.itemsize, y.ctypes.data, incy)
        blas_gemv(COL_MAJOR, NO_TRANS + t, m, n, scalars[0], mat.ctypes.data, ldm,
                  x.ctypes.data, incx, scalars[1], ref.ctypes.data, incy)
        compare(y, ref)
print(worst < 1e-5, worst)
"""
    assert _run_on_stand_in(code, tmp_path)[0].startswith("True")


def test_the_stand_in_refuses_what_cupy_lacks(tmp_path):
    """Names, keywords and array attributes are those of the real CuPy recorded in
    cupy/api.json: a NumPy function CuPy has no twin of, a keyword its function does not
    take, ``flags.writeable`` and ``.ctypes`` fail here as they would on a GPU."""
    code = (
        "import numpy as np, cupy\n"
        "a = cupy.asarray(np.arange(6.0))\n"
        "print(cupy.take(a, cupy.asarray(np.array([4, 1])), axis=0).get().tolist())\n"
        "tries = [lambda: cupy.geomspace, lambda: np.insert(a, 0, 1.0),\n"
        "         lambda: cupy.sum(a, initial=0.0), lambda: np.sum(a, initial=0.0),\n"
        "         lambda: a.ctypes, lambda: setattr(a.flags, 'writeable', False)]\n"
        "for t in tries:\n"
        "    try:\n"
        "        t()\n"
        "        print('taken')\n"
        "    except (AttributeError, TypeError) as e:\n"
        "        print(type(e).__name__)\n")
    out = _run_on_stand_in(code, tmp_path)
    assert out == ["[4.0, 1.0]", "AttributeError", "TypeError", "TypeError", "TypeError",
                   "AttributeError", "AttributeError"]


def test_the_stand_in_counts_the_waits_cupy_hides(tmp_path):
    """CuPy's functions that read a value back to size their result (``bincount`` reads the
    ids' maximum, ``unique`` and ``nonzero`` a count, ``a[mask]`` the mask's count) wait for
    the GPU; so does waiting for an event recorded after work the host has not waited for.
    The stand-in counts each as a wait, and none for ``where(c, x, y)`` or a finished event."""
    code = (
        "import numpy as np, cupy\n"
        "a = cupy.asarray(np.array([3, 1, 3, 0]))\n"
        "rows = cupy.asarray(np.array([1, 0]))\n"
        "def waits(f):\n"
        "    before = cupy.counts['wait']\n"
        "    f()\n"
        "    return cupy.counts['wait'] - before\n"
        "print(waits(lambda: cupy.bincount(a, minlength=5)), waits(lambda: cupy.unique(a)),\n"
        "      waits(lambda: a.nonzero()), waits(lambda: np.nonzero(a)),\n"
        "      waits(lambda: a[a > 1]), waits(lambda: a.__setitem__(a > 1, 0)),\n"
        "      waits(lambda: cupy.where(a > 1)), waits(lambda: cupy.where(a > 1, a, 0)),\n"
        "      waits(lambda: a + 1), waits(lambda: a[rows]))\n"
        "e = cupy.cuda.Event()\n"
        "a += 1\n"
        "e.record()\n"
        "print(e.done, waits(e.synchronize), e.done, waits(e.synchronize))\n"
        "e.record()\n"
        "a += 1\n"
        "print(waits(lambda: a.get()), e.done, waits(e.synchronize))\n")
    out = _run_on_stand_in(code, tmp_path)
    assert out == ["1 1 1 1 1 1 1 0 0 0", "False 1 True 0", "1 True 0"]


def test_the_recorded_cupy_api_is_the_installed_cupys(tmp_path):
    """cupy/api.json is what record_cupy_api.py reads from a real CuPy (no GPU needed)."""
    try:
        from cupy._core import core  # noqa: F401 (a real CuPy, not the stand-in)
    except ImportError:
        pytest.skip("needs a real CuPy: bench/nvrtc_check.py says how to install one")
    out = tmp_path / "api.json"
    subprocess.run([sys.executable, str(STAND_IN / "record_cupy_api.py"), str(out)], check=True,
                   timeout=120)
    recorded = json.loads((STAND_IN / "cupy" / "api.json").read_text())
    assert json.loads(out.read_text()) == recorded


def test_the_stand_in_records_each_kernel_it_runs_for_the_nvrtc_check(tmp_path):
    """With CUPY_STAND_IN_KERNELS set, each distinct kernel run is written down once, with
    what bench/nvrtc_check.py needs to compile it as CuPy would; the source it generates for
    an ElementwiseKernel declares inputs const (so NVRTC rejects a body that writes one)."""
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        import nvrtc_check
    finally:
        sys.path.remove(str(ROOT / "bench"))
    record = tmp_path / "kernels.jsonl"
    code = (
        "import numpy as np, cupy\n"
        "k = cupy.ElementwiseKernel('T x, raw T w, int64 n', 'T y', 'y = x * w[i % n];', 'ew')\n"
        "x = cupy.asarray(np.arange(4.0, dtype=np.float32)); y = cupy.empty_like(x)\n"
        "k(x, x, 2, y); k(x, x, 3, y)\n"
        "src = 'extern \"C\" __global__ void r(float* a) { a[threadIdx.x] += 1; }'\n"
        "cupy.RawKernel(src, 'r')((1,), (4,), (x,))\n"
        "print(y.get().tolist(), x.get().tolist())\n")
    out = _run_on_stand_in(code, tmp_path, {"CUPY_STAND_IN_KERNELS": str(record)})
    assert out == ["[0.0, 1.0, 4.0, 0.0] [1.0, 2.0, 3.0, 4.0]"]  # y = x * x[i % 3]
    kernels = [json.loads(line) for line in record.read_text().splitlines()]
    assert [k["kind"] for k in kernels] == ["elementwise", "raw"]  # the second call: same
    assert kernels[1]["code"].startswith('extern "C" __global__ void r(')
    source = nvrtc_check.elementwise_source(kernels[0])
    assert "typedef float T;" in source
    assert "const CArray<float, 1> _raw_x" in source and "const CArray<float, 1> w" in source
    assert "const long long n" in source and "CArray<float, 1> _raw_y" in source
    assert "float &y = _raw_y[_ind.get()];" in source and "y = x * w[i % n];" in source


def test_nvrtc_compiles_the_kernels_the_stand_in_recorded(tmp_path):
    """On a machine with a real CuPy and NVRTC (no GPU needed): the recorded kernels compile,
    and a body that writes an input does not."""
    try:
        from cupy._core import core  # noqa: F401 (a real CuPy, not the stand-in)
    except ImportError:
        pytest.skip("needs a real CuPy with NVRTC: bench/nvrtc_check.py says how to install one")
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        import nvrtc_check
    finally:
        sys.path.remove(str(ROOT / "bench"))
    good = {"kind": "elementwise", "name": "scale", "types": {"T": "float"},
            "operation": "y = 2 * x",
            "params": [{"raw": False, "type": "float", "name": "x", "input": True, "ndim": 1},
                       {"raw": False, "type": "float", "name": "y", "input": False, "ndim": 1}]}
    bad = {**good, "name": "writes_input", "operation": "x = y"}
    assert [name for name, _ in nvrtc_check.compile_all([good, bad], "90")] == ["writes_input"]


def _run_on_stand_in(code: str, tmp_path, env_extra: dict | None = None) -> list[str]:
    """The lines ``code`` prints, run by Python with the stand-in as ``cupy`` (the test is
    skipped where there is no g++ to compile its kernels)."""
    if shutil.which("g++") is None:
        pytest.skip("no C++ compiler (g++) for the stand-in")
    return subprocess.run([sys.executable, "-c", code], env=_stand_in_env(tmp_path, env_extra),
                          capture_output=True, text=True, timeout=120,
                          check=True).stdout.splitlines()


def _stand_in_env(tmp_path, env_extra: dict | None) -> dict:
    """The environment of a subprocess whose ``cupy`` is the stand-in (and whose
    ``sculler`` is this checkout's), with its temporary files under ``tmp_path``."""
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(STAND_IN), str(ROOT)]),
            "TMPDIR": str(tmp_path), **(env_extra or {})}
