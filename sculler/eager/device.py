"""Where eager tensors live: places (``CPUPlace``, ``CUDAPlace``), ``set_device`` and
``get_device`` (Paddle 2.x ``paddle.device``).

There is one switch for the device new arrays are made on, the backend's ``use_gpu``:
``set_device("gpu")`` is ``init(use_gpu=True)`` for eager mode, so ``to_tensor``, ``zeros``,
``randn``, ... and new ``nn`` parameters all follow it. Sculler uses one CUDA device, CuPy's
current one (device 0 unless a program selects another with ``cupy.cuda.Device(n).use()``),
and never copies between the host and the device behind the user's back: a tensor moves only
through ``to_tensor(..., place=...)``, ``Tensor.cuda()``/``.cpu()`` or ``Layer.to(...)``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from sculler.backend import (
    current_gpu,
    gpu_enabled,
    gpu_unavailable_reason,
    is_gpu_array,
    require_gpu,
    use_gpu,
)

DEVICE_FORMS = "'cpu', 'gpu' or 'gpu:N' (N the index of the current CUDA device)"


class Place:
    """A device descriptor: the CPU, a CUDA device ``gpu:N`` or page-locked host memory.

    Places are values: two places are equal when they name the same device, whichever
    class made them (``paddle.CPUPlace() == tensor.place`` for a host tensor).
    """

    __slots__ = ("_kind", "_index")

    def __init__(self, kind: str, index: int | None = None) -> None:
        self._kind = kind
        self._index = index

    def is_cpu_place(self) -> bool:
        return self._kind == "cpu"

    def is_gpu_place(self) -> bool:
        return self._kind == "gpu"

    def is_cuda_pinned_place(self) -> bool:
        return self._kind == "gpu_pinned"

    def gpu_device_id(self) -> int:
        """The CUDA device index of a GPU place (-1 for the others, as Paddle)."""
        return self._index if self._kind == "gpu" else -1

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Place):
            return NotImplemented
        return self._kind == other._kind and self._index == other._index

    def __hash__(self) -> int:
        return hash((self._kind, self._index))

    def __repr__(self) -> str:
        where = self._kind if self._index is None else f"{self._kind}:{self._index}"
        return f"Place({where})"


class CPUPlace(Place):
    """The host: tensors hold NumPy arrays."""

    __slots__ = ()

    def __init__(self) -> None:
        super().__init__("cpu")


class CUDAPlace(Place):
    """CUDA device ``id``: tensors hold CuPy arrays on it."""

    __slots__ = ()

    def __init__(self, id: int) -> None:  # noqa: A002 - Paddle's argument name
        if isinstance(id, bool) or not isinstance(id, int):
            raise TypeError(f"CUDAPlace: id must be an int (the CUDA device index), got "
                            f"{type(id).__name__} {id!r}")
        if id < 0:
            raise ValueError(f"CUDAPlace: id must be >= 0 (a CUDA device index), got {id}")
        super().__init__("gpu", id)


class CUDAPinnedPlace(Place):
    """Page-locked host memory (a descriptor only: Sculler keeps host tensors in ordinary
    memory, so no tensor can be put there)."""

    __slots__ = ()

    def __init__(self) -> None:
        super().__init__("gpu_pinned")


_CPU = CPUPlace()


def place_of(array: Any) -> Place:
    """The place of an array: its CUDA device for a CuPy array, else the CPU."""
    if is_gpu_array(array):
        return CUDAPlace(int(array.device.id))
    return _CPU


def _parse(device: str, what: str) -> Place:
    """The place a device string names; "gpu" is the current CUDA device (which needs one)."""
    text = device.lower()
    if text == "cpu":
        return CPUPlace()
    if text == "gpu":
        require_gpu(what)
        return CUDAPlace(current_gpu())
    kind, sep, index = text.partition(":")
    if kind == "gpu" and sep and index.isdigit():
        return CUDAPlace(int(index))
    raise ValueError(f"{what}: device must be {DEVICE_FORMS}, got {device!r}")


def as_place(value: Any, what: str) -> Place:
    """A Place from a Place or a device string (see :data:`DEVICE_FORMS`)."""
    if isinstance(value, Place):
        return value
    if isinstance(value, str):
        return _parse(value, what)
    raise TypeError(f"{what}: expected a place (paddle.CPUPlace(), paddle.CUDAPlace(i)) or "
                    f"one of {DEVICE_FORMS}, got {type(value).__name__} {value!r}")


def wants_gpu(value: Any, what: str) -> bool:
    """Whether ``value`` (a Place or a device string) names the GPU, after checking that it
    can be used: a CUDA place needs CuPy and a device (the backend's one clear error) and
    must be the current CUDA device, the one Sculler uses."""
    place = as_place(value, what)
    if place.is_cpu_place():
        return False
    if place.is_cuda_pinned_place():
        raise ValueError(f"{what}: CUDAPinnedPlace() is not a place tensors can live on in "
                         "Sculler (host tensors use ordinary memory); use paddle.CPUPlace() "
                         "or paddle.CUDAPlace(0)")
    require_gpu(what)
    current = current_gpu()
    if place.gpu_device_id() != current:
        raise ValueError(f"{what}: {place} is not the current CUDA device (gpu:{current}); "
                         "Sculler uses one device, CuPy's current one: select another with "
                         "cupy.cuda.Device(N).use() before creating tensors")
    return True


def check_same_device(op: str, *arrays: Any) -> None:
    """One clear error when an op is given arrays on two devices (a NumPy array and a CuPy
    array): Sculler never copies between the host and the GPU implicitly. Python numbers
    and NumPy scalars go with either. Ops call this only where the operands' types differ,
    so the common case costs one type comparison."""
    on_gpu = [is_gpu_array(a) for a in arrays]
    on_host = [isinstance(a, np.ndarray) and not gpu for a, gpu in zip(arrays, on_gpu)]
    if any(on_gpu) and any(on_host):
        where = ", ".join(f"input {i} on {place_of(a)}" for i, a in enumerate(arrays)
                          if on_gpu[i] or on_host[i])
        raise ValueError(f"{op}: the inputs are on different devices ({where}); move one "
                         "with Tensor.cuda() or Tensor.cpu(), or create both after "
                         "paddle.set_device(...)")


def set_device(device: str) -> Place:
    """Make ``device`` ("cpu", "gpu" or "gpu:N") where new eager tensors and parameters are
    created, and return its place. The switch is the backend's ``use_gpu`` (the one
    ``init(use_gpu=...)`` sets); tensors that exist already stay where they are. On a bad
    value nothing changes."""
    if not isinstance(device, str):
        raise TypeError(f"set_device: device must be a string, one of {DEVICE_FORMS}, got "
                        f"{type(device).__name__} {device!r}")
    gpu = wants_gpu(device, "set_device")
    use_gpu(gpu)
    return CUDAPlace(current_gpu()) if gpu else CPUPlace()


def get_device() -> str:
    """Where new tensors are created: "cpu" or "gpu:N"."""
    return f"gpu:{current_gpu()}" if gpu_enabled() else "cpu"


def is_compiled_with_cuda() -> bool:
    """Whether tensors can go to a GPU here: CuPy imports and CUDA reports a device."""
    return gpu_unavailable_reason() is None
