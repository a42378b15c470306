"""Write ``cupy/api.json``: the public names of the real CuPy the stand-in imitates (its
functions with their parameter names, its ndarray's attributes and its ufuncs' methods), so
that the stand-in refuses, as CuPy would, a function CuPy lacks or a keyword it does not take;
and the functions and ndarray methods CuPy's documentation says may synchronize the device
(they read a value back to size their result or to check their input: ``bincount``,
``unique``, ``nonzero``), which the stand-in counts as waits.

Run with a CuPy installed (no GPU needed), e.g. in the venv bench/nvrtc_check.py describes:
``python tests/cupy_stand_in/record_cupy_api.py [OUT]`` (default ``cupy/api.json``).
"""

from __future__ import annotations

import importlib
import inspect
import json
import pathlib
import sys

MODULES = ("cupy", "cupy.linalg", "cupy.random", "cupy.fft", "cupy.lib.stride_tricks",
           "cupyx", "cupyx.scipy.sparse")


def parameters(fn: object) -> list[str] | None:
    """Names ``fn`` takes (``**`` for any keyword), or None where Cython hides them."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return None
    return [("**" if p.kind is p.VAR_KEYWORD else p.name) for p in sig.parameters.values()
            if p.kind is not p.VAR_POSITIONAL]


def synchronizes(fn: object) -> bool:
    """Whether CuPy documents ``fn`` as one that may synchronize the device (some only for
    some arguments: ``where`` without ``x`` and ``y``, ``average`` with weights)."""
    return "may synchronize" in " ".join((getattr(fn, "__doc__", None) or "").split())


def main() -> None:
    here = str(pathlib.Path(__file__).resolve().parent)
    sys.path[:] = [p for p in sys.path if str(pathlib.Path(p or ".").resolve()) != here]
    import cupy  # the real one, not the stand-in beside this file
    from cupy._core import flags

    api: dict = {"version": cupy.__version__, "modules": {}}
    for name in MODULES:
        module = importlib.import_module(name)
        api["modules"][name] = {
            attr: parameters(getattr(module, attr)) if callable(getattr(module, attr)) else None
            for attr in dir(module) if not attr.startswith("_")}
    api["synchronizing"] = {
        name: sorted(attr for attr in dir(importlib.import_module(name))
                     if not attr.startswith("_") and callable(getattr(importlib.import_module(
                         name), attr)) and synchronizes(getattr(importlib.import_module(name),
                                                                  attr)))
        for name in MODULES}
    api["synchronizing"]["ndarray"] = sorted(
        a for a in dir(cupy.ndarray)
        if not a.startswith("__") and synchronizes(getattr(cupy.ndarray, a)))
    api["ndarray"] = sorted(a for a in dir(cupy.ndarray) if not a.startswith("__"))
    api["ufunc_methods"] = sorted(m for m in ("at", "reduce", "accumulate", "reduceat", "outer")
                                  if hasattr(cupy.add, m))
    api["flags"] = sorted(a for a in dir(flags.Flags) if not a.startswith("_"))
    out = pathlib.Path(sys.argv[1] if len(sys.argv) > 1
                       else pathlib.Path(__file__).parent / "cupy" / "api.json")
    out.write_text(json.dumps(api, indent=1, sort_keys=True) + "\n")
    print(f"{out}: CuPy {api['version']}, "
          f"{sum(len(v) for v in api['modules'].values())} names")


if __name__ == "__main__":
    main()
