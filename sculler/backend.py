"""The array module and dtype policy.

Every kernel and layer asks ``get_array_module(x)`` for ``xp`` (numpy or cupy) instead of
branching on a GPU flag; this is the only module that imports cupy. Training runs in
``float32`` by default, gradient checks switch to ``float64`` with :func:`default_dtype`.
"""

from __future__ import annotations

import contextlib
import types
from collections.abc import Iterator
from typing import Any

import numpy as np

_state = {"dtype": np.dtype(np.float32), "use_gpu": False}


def _cupy() -> types.ModuleType | None:
    try:
        import cupy  # noqa: PLC0415
    except ImportError:
        return None
    return cupy


def get_array_module(*arrays: Any) -> types.ModuleType:
    """Return ``cupy`` if any argument is a cupy array, else ``numpy``."""
    for a in arrays:
        if type(a).__module__.startswith("cupy"):
            return _cupy()
    return np


def xp() -> types.ModuleType:
    """The array module new buffers are made with (cupy once ``use_gpu(True)``)."""
    if _state["use_gpu"]:
        return _cupy()
    return np


def use_gpu(flag: bool = True) -> None:
    """Allocate new arrays on the GPU (needs ``pip install sculler[gpu]``)."""
    if flag and _cupy() is None:
        raise RuntimeError(
            "use_gpu=True needs CuPy; install it with `pip install sculler[gpu]`"
        )
    _state["use_gpu"] = bool(flag)


def get_default_dtype() -> np.dtype:
    """The float dtype of new parameters and buffers (float32 unless changed)."""
    return _state["dtype"]


def set_default_dtype(dtype: Any) -> None:
    """Set the float dtype of new parameters and buffers ('float32' or 'float64')."""
    dt = np.dtype(dtype)
    if dt.kind != "f":
        raise TypeError(f"default dtype must be a float type, got {dt}")
    _state["dtype"] = dt


@contextlib.contextmanager
def default_dtype(dtype: Any) -> Iterator[None]:
    """Temporarily switch the default float dtype (gradient checks use float64)."""
    old = _state["dtype"]
    set_default_dtype(dtype)
    try:
        yield
    finally:
        _state["dtype"] = old


def to_numpy(a: Any) -> np.ndarray:
    """Bring an array to host memory as a numpy array."""
    if type(a).__module__.startswith("cupy"):
        return a.get()
    return np.asarray(a)
