"""Compile every CUDA kernel Sculler builds with CuPy's own NVRTC path, on a machine without a
GPU: what the CuPy stand-in of the tests (g++) cannot show is whether NVRTC accepts the code.

Two steps, the first with the project's Python, the second with a real CuPy and NVRTC (no GPU
or driver needed; CuPy's compile runs fully, only loading the result needs a device)::

    CUPY_STAND_IN_KERNELS=/tmp/kernels.jsonl PYTHONPATH=tests/cupy_stand_in:. \\
        python -m pytest -q -m gpu tests          # records each kernel the gpu tests run
    python -m venv /tmp/nvrtc && /tmp/nvrtc/bin/pip install cupy-cuda13x nvidia-cuda-nvrtc
    /tmp/nvrtc/bin/python bench/nvrtc_check.py /tmp/kernels.jsonl [--arch 90]

A RawKernel's code is compiled as CuPy's ``RawKernel`` compiles it (no CuPy headers). An
ElementwiseKernel is compiled from the source CuPy generates for it: the CuPy headers, a
``typedef`` per type placeholder, ``CArray`` parameters (``const`` for inputs), scalars by
value, a ``CIndexer``, and the body in CuPy's grid-stride loop with a reference per non-raw
array argument. Exit status 1 if any kernel fails, with NVRTC's log.

ptxas reports each kernel's registers a thread and static shared memory. A RawKernel whose
registers would not let a block of 1024 threads (the widest Sculler launches: CRF, CTC) run,
or whose shared memory passes 48 KB, is named: on the GPU its launch would fail.
"""

from __future__ import annotations

import argparse
import json
import os
import sys


def elementwise_source(k: dict) -> str:
    """The CUDA source CuPy generates for the recorded ElementwiseKernel call ``k``."""
    params, refs = [], []
    for p in k["params"]:
        const = "const " if p["input"] else ""
        if p["ndim"] is None:
            params.append(f"{const}{p['type']} {p['name']}")
        elif p["raw"]:
            params.append(f"{const}CArray<{p['type']}, {p['ndim']}> {p['name']}")
        else:
            params.append(f"{const}CArray<{p['type']}, 1> _raw_{p['name']}")
            refs.append(f"{const}{p['type']} &{p['name']} = _raw_{p['name']}[_ind.get()];")
    params.append("CIndexer<1> _ind")
    typedefs = "".join(f"typedef {c} {t};\n" for t, c in k["types"].items())
    return (typedefs + f'extern "C" __global__ void {k["name"]}({", ".join(params)}) {{\n'
            "  CUPY_FOR(i, _ind.size()) {\n    _ind.set(i);\n    " + "\n    ".join(refs)
            + "\n" + k["operation"] + ";\n  }\n}\n")


def compile_all(kernels: list[dict], arch: str) -> list[tuple[str, str]]:
    """(name, reason) of each kernel NVRTC rejects, that did not reach NVRTC, or whose
    resources would fail a launch."""
    import io
    import re

    from cupy._core import core
    from cupy.cuda import compiler

    # no device to ask: compile for ``arch``, to a cubin (SASS), as CuPy does for a known GPU
    compiler._get_arch = lambda: arch
    compiler._get_arch_for_options_for_nvrtc = lambda a=None: (f"-arch=sm_{arch}", "cubin")
    compiled = []
    nvrtc_compile = compiler._NVRTCProgram.compile

    def counted(self, *args, **kwargs):
        result = nvrtc_compile(self, *args, **kwargs)
        compiled.append(True)
        return result

    compiler._NVRTCProgram.compile = counted
    failures = []
    for k in kernels:
        raw = k["kind"] == "raw"
        source = k["code"] if raw else elementwise_source(k)
        compiled.clear()
        log = io.StringIO()
        try:
            core.compile_with_cache(source, options=("--ptxas-options=-v",), backend="nvrtc",
                                    prepend_cupy_headers=not raw, log_stream=log)
        except compiler.CompileException as e:
            failures.append((k["name"], str(e)))
            continue
        except Exception as e:  # after the compile, loading the cubin needs a driver
            if not compiled:
                failures.append((k["name"], f"not compiled: {type(e).__name__}: {e}"))
                continue
        if not compiled:
            failures.append((k["name"], "not compiled (a cached result?)"))
            continue
        regs = max(map(int, re.findall(r"Used (\d+) registers", log.getvalue())), default=0)
        smem = max(map(int, re.findall(r"(\d+) bytes smem", log.getvalue())), default=0)
        RESOURCES.append((k["name"], regs, smem))
        if raw and (-(-regs // 8) * 8 * 1024 > 65536 or smem > 48 * 1024):
            failures.append((k["name"], f"{regs} registers a thread, {smem} bytes of static "
                                        "shared memory: too many for a 1024-thread block"))
    return failures


RESOURCES: list[tuple[str, int, int]] = []  # (kernel, registers a thread, static shared bytes)


BROKEN = {"kind": "elementwise", "name": "nvrtc_check_broken", "types": {"T": "float"},
          "operation": "y = no_such_function(x)",
          "params": [{"raw": False, "type": "float", "name": "x", "input": True, "ndim": 1},
                     {"raw": False, "type": "float", "name": "y", "input": False, "ndim": 1}]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("kernels", help="the JSON lines CUPY_STAND_IN_KERNELS recorded")
    ap.add_argument("--arch", default="90", help="compute capability (90: H100, H200)")
    args = ap.parse_args()
    os.environ.setdefault("CUPY_CACHE_IN_MEMORY", "1")
    with open(args.kernels) as f:
        kernels = list({line: json.loads(line) for line in f if line.strip()}.values())
    if not compile_all([BROKEN], args.arch):
        print("a kernel that cannot compile passed: this check is not reaching NVRTC")
        return 2
    failures = compile_all(kernels, args.arch)
    for name, log in failures:
        print(f"--- {name} ---\n{log}\n")
    n_raw = sum(k["kind"] == "raw" for k in kernels)
    if RESOURCES:
        name, regs, _ = max(RESOURCES, key=lambda r: r[1])
        big, _, smem = max(RESOURCES, key=lambda r: r[2])
        print(f"most registers: {regs} a thread ({name}); most static shared memory: {smem} "
              f"bytes ({big})")
    print(f"{len(kernels) - len(failures)} of {len(kernels)} kernels compile with NVRTC for "
          f"sm_{args.arch} ({n_raw} RawKernels, {len(kernels) - n_raw} ElementwiseKernel "
          f"calls)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
