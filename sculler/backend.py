"""The array module and dtype policy.

Every kernel and layer asks ``get_array_module(x)`` for ``xp`` (numpy or cupy) instead of
branching on a GPU flag; this is the only module that imports cupy. Training runs in
``float32`` by default, gradient checks switch to ``float64`` with :func:`default_dtype`.
"""

from __future__ import annotations

import collections
import contextlib
import threading
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


def cublas_library() -> types.ModuleType:
    """CuPy's thin wrappers of cuBLAS (``sgemm``, ``dgemv``, ... on raw pointers, each on the
    current stream); importing them through the package loads the cuBLAS library first."""
    from cupy_backends.cuda.libs import cublas  # noqa: PLC0415

    return cublas


def cublas_handle() -> int:
    """The current device's cuBLAS handle (CuPy's)."""
    return _cupy().cuda.device.get_cublas_handle()


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


INSTALL_GPU = ("install CuPy for your CUDA version: `pip install sculler[gpu-cuda12]` (CUDA 12) "
               "or `pip install sculler[gpu-cuda13]` (CUDA 13)")


def gpu_unavailable_reason() -> str | None:
    """Why arrays cannot go to a GPU here (no CuPy, or no usable CUDA device), or None.

    CuPy imports without a GPU, so its presence alone proves nothing: the CUDA runtime must
    also report at least one device."""
    cupy = _cupy()
    if cupy is None:
        return f"CuPy is not installed; {INSTALL_GPU}"
    try:
        count = int(cupy.cuda.runtime.getDeviceCount())
    except Exception as e:  # CUDARuntimeError, or a driver that cannot load
        return (f"CuPy is installed but CUDA reports no usable device "
                f"({type(e).__name__}: {e}); check the NVIDIA driver, or {INSTALL_GPU}")
    if count < 1:
        return "CuPy is installed but CUDA reports 0 devices; check the NVIDIA driver"
    return None


def require_gpu(what: str) -> None:
    """Raise one RuntimeError naming ``what`` and what is missing when no GPU can be used."""
    reason = gpu_unavailable_reason()
    if reason is not None:
        raise RuntimeError(f"{what} needs a CUDA GPU through CuPy: {reason}")


def use_gpu(flag: bool = True) -> None:
    """Allocate new arrays on the GPU; never falls back to the CPU silently (see
    :func:`require_gpu`)."""
    if flag:
        require_gpu("use_gpu=True")
    _state["use_gpu"] = bool(flag)


def gpu_enabled() -> bool:
    """Whether new arrays are allocated on the GPU."""
    return bool(_state["use_gpu"])


@contextlib.contextmanager
def device(gpu: bool) -> Iterator[None]:
    """Temporarily allocate new arrays on the GPU (``gpu=True``) or the CPU."""
    old = _state["use_gpu"]
    use_gpu(gpu)
    try:
        yield
    finally:
        _state["use_gpu"] = old


def to_device(a: Any) -> Any:
    """``a`` as an array of the current device (:func:`xp`); host arrays are copied once (on
    the GPU asynchronously, :func:`to_gpu`)."""
    module = xp()
    if module is not np and module is _cupy():
        return to_gpu(a)
    return module.asarray(a)


def is_gpu_array(a: Any) -> bool:
    """Whether ``a`` is a CuPy (device) array; NumPy arrays, NumPy scalars and Python numbers
    are not."""
    return type(a).__module__.startswith("cupy")


def address(a: Any) -> int:
    """The address of ``a``'s first element, on the host or the GPU (for telling whether
    views are adjacent in one buffer)."""
    return a.data.ptr if is_gpu_array(a) else a.ctypes.data


def current_gpu() -> int:
    """The index of CuPy's current CUDA device (the one new device arrays go to); call
    :func:`require_gpu` first."""
    return int(_cupy().cuda.runtime.getDevice())


def to_gpu(a: Any, what: str = "copying to the GPU") -> Any:
    """``a`` as an array of the current CUDA device: a host array is copied there once
    (asynchronously, :func:`to_gpu_together`), a device array there already is returned as
    it is. Without CuPy, :func:`require_gpu`'s error naming ``what``."""
    cupy = _cupy()
    if cupy is None:
        require_gpu(what)
    if is_gpu_array(a):
        return cupy.asarray(a)
    return to_gpu_together([np.asarray(a)])[0]


def to_place(a: Any, gpu: bool, what: str = "copying to the GPU") -> Any:
    """``a`` on the GPU (``gpu``) or the host, copied only when it is elsewhere (without CuPy,
    :func:`require_gpu`'s error naming ``what``)."""
    if gpu == is_gpu_array(a):
        return a
    return to_gpu(a, what) if gpu else to_numpy(a)


def to_device_of(a: Any, like: Any) -> Any:
    """``a`` on the device ``like`` lives on (host or GPU), copied only when it is not there:
    how state made for an array follows that array to another device."""
    return to_place(a, is_gpu_array(like))


STAGING_ALIGN = 256  # bytes: each array of a joint copy starts at a multiple of this
STAGING_MAX_BYTES = 1 << 26  # larger copies go straight from their own memory
STAGING_BUFFERS = 64  # pinned buffers at most; a copy waits only when all are in flight
STAGING_MIN_BYTES = 1 << 16  # a new pinned buffer's least size
_staging: dict[str, Any] = {"free": [], "busy": collections.deque(), "lock": threading.Lock()}


def _staging_buffer(nbytes: int) -> Any:
    """A pinned host buffer of at least ``nbytes`` that no copy is reading: one whose copy
    has finished (its CUDA event is done: no wait), the smallest that fits; a new one while
    fewer than ``STAGING_BUFFERS`` exist; else the oldest, once its copy has finished (the one
    wait). A buffer too small is replaced by one twice its size or more."""
    free, busy = _staging["free"], _staging["busy"]
    while busy and busy[0][1].done:  # one stream: copies finish in the order they were sent
        free.append(busy.popleft()[0])
    if not free and len(busy) >= STAGING_BUFFERS:
        host, event = busy.popleft()
        event.synchronize()
        free.append(host)
    by_size = sorted(range(len(free)), key=lambda k: free[k].nbytes)
    fits = [k for k in by_size if free[k].nbytes >= nbytes]
    if fits:
        return free.pop(fits[0])
    grown = STAGING_MIN_BYTES
    if free and len(free) + len(busy) >= STAGING_BUFFERS:  # replace the largest free one
        grown = 2 * free.pop(by_size[-1]).nbytes
    import cupyx  # noqa: PLC0415

    return cupyx.empty_pinned(max(nbytes, grown), np.uint8)


def to_gpu_together(arrays: list[np.ndarray]) -> list[Any]:
    """Host arrays on the current GPU through one copy: packed into a pinned host buffer,
    sent by one asynchronous copy on the current stream, and viewed there as arrays of their
    own dtypes and shapes (each starting ``STAGING_ALIGN``-aligned in one device buffer).

    A copy from pageable memory makes the host wait for every kernel queued before it; this
    one returns at once, and the kernels that read the arrays queue after it on the same
    stream. A pinned buffer is filled only once its previous copy has finished (a CUDA
    event), and up to ``STAGING_BUFFERS`` of them are kept, so the several copies of a
    training batch (the batch, a recurrent layer's index arrays, a new offsets array) never
    wait for each other (:func:`_staging_buffer`). Above ``STAGING_MAX_BYTES`` in all (a data
    set moved at once, say) each array is copied from its own memory instead."""
    cupy = _cupy()
    offsets, total = [], 0
    for a in arrays:
        offsets.append(total)
        total += -(-a.nbytes // STAGING_ALIGN) * STAGING_ALIGN
    if total == 0 or total > STAGING_MAX_BYTES:
        return [cupy.asarray(a) for a in arrays]
    with _staging["lock"]:
        host = _staging_buffer(total)
        for a, at in zip(arrays, offsets):
            host[at:at + a.nbytes].view(a.dtype).reshape(a.shape)[...] = a
        device = cupy.empty(total, np.uint8)
        stream = cupy.cuda.get_current_stream()
        device.set(host[:total], stream=stream)
        event = cupy.cuda.Event(disable_timing=True)
        event.record(stream)
        _staging["busy"].append((host, event))
    return [device[at:at + a.nbytes].view(a.dtype).reshape(a.shape)
            for a, at in zip(arrays, offsets)]


GPU_COPY_CACHE_ENTRIES = 256
GPU_COPY_CACHE_MAX_BYTES = 1 << 16
_gpu_copies: collections.OrderedDict = collections.OrderedDict()


def cached_on_gpu(a: Any) -> Any:
    """A small host array (segment offsets, gather rows, per-segment scales) on the current
    GPU, copied once per distinct content: the frames of a recurrent group ask for the same
    offsets many times a batch, and each copy is a call of its own. An LRU of
    ``GPU_COPY_CACHE_ENTRIES`` arrays up to ``GPU_COPY_CACHE_MAX_BYTES`` each, keyed by
    device, dtype, shape and bytes; copies go through :func:`to_gpu_together`. The result is
    shared: read it, never write it. A device array is returned as it is."""
    if is_gpu_array(a):
        return a
    a = np.asarray(a)
    if a.nbytes > GPU_COPY_CACHE_MAX_BYTES:
        return to_gpu_together([a])[0]
    key = _copy_key(a)
    hit = _gpu_copies.get(key)
    if hit is not None:
        _gpu_copies.move_to_end(key)
        return hit
    hit = to_gpu_together([a])[0]
    _keep_copy(key, hit)
    return hit


def _copy_key(a: np.ndarray) -> tuple:
    """The key of host array ``a``'s copy on the current GPU: device, dtype, shape, bytes."""
    return (_cupy().cuda.runtime.getDevice(), a.dtype.str, a.shape, a.tobytes())


def _keep_copy(key: tuple, device: Any) -> None:
    """Keep ``device`` as the newest copy under ``key``, dropping the oldest beyond
    ``GPU_COPY_CACHE_ENTRIES``."""
    _gpu_copies[key] = device
    _gpu_copies.move_to_end(key)
    if len(_gpu_copies) > GPU_COPY_CACHE_ENTRIES:
        _gpu_copies.popitem(last=False)


def remember_on_gpu(host: np.ndarray, device: Any) -> None:
    """Let :func:`cached_on_gpu` answer ``host``'s content with ``device``, a copy of it
    already on the current GPU (sent with others in one :func:`to_gpu_together`), so that
    the first use does not copy it again. Read-only from then on, as every cached copy."""
    host = np.asarray(host)
    if host.nbytes <= GPU_COPY_CACHE_MAX_BYTES:
        _keep_copy(_copy_key(host), device)


def cached_like(a: Any, like: Any) -> Any:
    """Small host array ``a`` on the device ``like`` lives on: :func:`cached_on_gpu` there (shared,
    read-only), ``a`` itself on the host."""
    return cached_on_gpu(a) if is_gpu_array(like) else a


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


def einsum_into(subscripts: str, *operands: Any, out: Any) -> Any:
    """``einsum`` written into ``out`` on either device: NumPy's ``out=`` where the arrays are
    on the host (no temporary), an assignment on the GPU (CuPy's einsum takes no ``out``)."""
    if is_gpu_array(out):
        out[...] = _cupy().einsum(subscripts, *operands)
        return out
    return np.einsum(subscripts, *operands, out=out)


def to_numpy(a: Any) -> np.ndarray:
    """Bring an array to host memory as a numpy array."""
    if is_gpu_array(a):
        return a.get()
    return np.asarray(a)
