"""Tensor creation: ``to_tensor``, ``zeros``/``ones``/``full``, ``arange``, random, ``seed``.

Float tensors default to the backend's default dtype (float32); dtypes are given as strings
("float32", "int64", ...) or numpy dtypes. Random tensors come from one generator that
``seed(n)`` resets, so runs are reproducible.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from sculler.backend import (
    get_array_module,
    get_default_dtype,
    gpu_enabled,
    is_gpu_array,
    to_place,
    xp,
)
from sculler.eager.device import wants_gpu
from sculler.eager.tensor import Tensor

_rng: list = [None]  # created on first use: numpy.random is not imported until needed


def convert_dtype(dtype: Any, default: Any = None) -> np.dtype:
    """A numpy dtype from a string, numpy dtype or type; None gives ``default`` (or float)."""
    if dtype is None:
        return np.dtype(default) if default is not None else get_default_dtype()
    if isinstance(dtype, str) and dtype.startswith("paddle."):
        dtype = dtype[len("paddle."):]
    try:
        return np.dtype(dtype)
    except TypeError:
        raise TypeError(f"dtype {dtype!r} is not a known dtype; use a string such as "
                        "'float32', 'float64', 'int64' or 'bool'") from None


def seed(n: int) -> None:
    """Reset the random generator behind ``randn``, ``rand``, dropout and initializers."""
    if not isinstance(n, int | np.integer):
        raise TypeError(f"seed must be an int, got {type(n).__name__}")
    _rng[0] = np.random.default_rng(int(n))


def get_rng() -> np.random.Generator:
    if _rng[0] is None:
        _rng[0] = np.random.default_rng()
    return _rng[0]


def _shape(shape: Any) -> tuple:
    if isinstance(shape, Tensor):
        shape = shape.tolist()
    if isinstance(shape, int | np.integer):
        return (int(shape),)
    if not isinstance(shape, Sequence):
        raise TypeError(f"shape must be a list of ints, got {type(shape).__name__}")
    return tuple(int(s.item() if isinstance(s, Tensor) else s) for s in shape)


def to_tensor(data: Any, dtype: Any = None, place: Any = None,
              stop_gradient: bool = True) -> Tensor:
    """A new tensor holding a copy of ``data`` (Python scalars/lists, ndarrays, Tensors).

    Python floats become the default float dtype, Python ints int64; ndarrays keep their
    dtype unless ``dtype`` is given. ``place`` (``paddle.CPUPlace()``, ``paddle.CUDAPlace(0)``
    or "cpu", "gpu", "gpu:N") is where the copy goes; None means the device ``set_device``
    chose.
    """
    gpu = gpu_enabled() if place is None else wants_gpu(place, "to_tensor(place=...)")
    if isinstance(data, Tensor):
        arr = data._array.copy()
    elif is_gpu_array(data):
        arr = data.copy()
    else:
        try:
            arr = np.array(data)
        except ValueError:
            arr = np.empty(0, dtype=object)
        if arr.dtype == object or arr.dtype.kind in "USV":
            raise TypeError(f"to_tensor cannot convert {type(data).__name__} with ragged or "
                            f"non-numeric content (dtype {arr.dtype}); pass a number, a nested "
                            "list of equal lengths or an ndarray")
        if not isinstance(data, np.ndarray | np.generic) and arr.dtype.kind == "f":
            arr = arr.astype(get_default_dtype())
    if dtype is not None:
        arr = arr.astype(convert_dtype(dtype), copy=False)
    t = Tensor._from_array(to_place(arr, gpu, "to_tensor"))
    t.stop_gradient = stop_gradient
    return t


def _filled(shape: Any, value: Any, dtype: Any, like: Tensor | None = None) -> Tensor:
    """A tensor of ``shape`` filled with ``value``, on ``like``'s device (else the device
    ``set_device`` chose)."""
    module = xp() if like is None else get_array_module(like._array)
    return Tensor._from_array(module.full(_shape(shape), value, dtype=convert_dtype(dtype)))


def zeros(shape: Any, dtype: Any = None, name: str | None = None) -> Tensor:
    return _filled(shape, 0, dtype)


def ones(shape: Any, dtype: Any = None, name: str | None = None) -> Tensor:
    return _filled(shape, 1, dtype)


def full(shape: Any, fill_value: Any, dtype: Any = None, name: str | None = None) -> Tensor:
    return _filled(shape, fill_value, dtype)


def zeros_like(x: Tensor, dtype: Any = None, name: str | None = None) -> Tensor:
    """Zeros of x's shape on x's device."""
    return _filled(x.shape, 0, dtype or x.dtype, x)


def ones_like(x: Tensor, dtype: Any = None, name: str | None = None) -> Tensor:
    """Ones of x's shape on x's device."""
    return _filled(x.shape, 1, dtype or x.dtype, x)


def full_like(x: Tensor, fill_value: Any, dtype: Any = None, name: str | None = None) -> Tensor:
    """``fill_value`` in x's shape on x's device."""
    return _filled(x.shape, fill_value, dtype or x.dtype, x)


def eye(num_rows: int, num_columns: int | None = None, dtype: Any = None,
        name: str | None = None) -> Tensor:
    return Tensor._from_array(xp().eye(num_rows, num_columns, dtype=convert_dtype(dtype)))


def arange(start: Any = 0, end: Any = None, step: Any = 1, dtype: Any = None,
           name: str | None = None) -> Tensor:
    """Evenly spaced values in [start, end); int64 for int arguments (as Paddle)."""
    if end is None:
        start, end = 0, start
    ints = all(isinstance(v, int | np.integer) for v in (start, end, step))
    dt = convert_dtype(dtype, default=np.int64 if ints else None)
    return Tensor._from_array(xp().arange(start, end, step).astype(dt))


def linspace(start: float, stop: float, num: int, dtype: Any = None,
             name: str | None = None) -> Tensor:
    return Tensor._from_array(xp().linspace(start, stop, num).astype(convert_dtype(dtype)))


def _random(values: np.ndarray, like: Tensor | None = None) -> Tensor:
    """Host samples on ``like``'s device (else the device ``set_device`` chose)."""
    module = xp() if like is None else get_array_module(like._array)
    return Tensor._from_array(module.asarray(values))


def randn(shape: Any, dtype: Any = None, name: str | None = None) -> Tensor:
    """Standard normal samples."""
    return _random(get_rng().standard_normal(_shape(shape)).astype(convert_dtype(dtype)))


def rand(shape: Any, dtype: Any = None, name: str | None = None) -> Tensor:
    """Uniform samples in [0, 1)."""
    return _random(get_rng().random(_shape(shape)).astype(convert_dtype(dtype)))


def uniform(shape: Any, dtype: Any = None, min: float = -1.0, max: float = 1.0,  # noqa: A002
            seed: int = 0, name: str | None = None) -> Tensor:
    """Uniform samples in [min, max)."""
    return _random(get_rng().uniform(min, max, _shape(shape)).astype(convert_dtype(dtype)))


def normal(mean: float = 0.0, std: float = 1.0, shape: Any = None,
           name: str | None = None) -> Tensor:
    return _random(get_rng().normal(mean, std, _shape(shape or [1])).astype(get_default_dtype()))


def randint(low: int = 0, high: int | None = None, shape: Any = (1,), dtype: Any = None,
            name: str | None = None) -> Tensor:
    """Integers in [low, high) (in [0, low) when high is None)."""
    if high is None:
        low, high = 0, low
    return _random(get_rng().integers(low, high, _shape(shape)).astype(
        convert_dtype(dtype, default=np.int64)))


def randperm(n: int, dtype: Any = "int64", name: str | None = None) -> Tensor:
    return _random(get_rng().permutation(n).astype(convert_dtype(dtype)))


def randn_like(x: Tensor, dtype: Any = None, name: str | None = None) -> Tensor:
    """Standard normal samples of x's shape on x's device."""
    return _random(get_rng().standard_normal(x.shape).astype(convert_dtype(dtype or x.dtype)),
                   x)


def rand_like(x: Tensor, dtype: Any = None, name: str | None = None) -> Tensor:
    """Uniform samples in [0, 1) of x's shape on x's device."""
    return _random(get_rng().random(x.shape).astype(convert_dtype(dtype or x.dtype)), x)
