"""A stand-in for CuPy on machines without a GPU, for tests only.

Put ``tests/cupy_stand_in`` first on ``PYTHONPATH`` (tests/math/test_cuda_kernels_on_cpu.py
does) and ``import cupy`` finds this module:

- arrays are NumPy arrays of a subclass whose module name starts with ``cupy``, so Sculler
  takes its GPU paths; ``.get()`` copies one to a plain NumPy array;
- ``ElementwiseKernel`` compiles the kernel body as C++ with g++ and runs it over the arrays,
  one loop iteration per element, with raw parameters as pointers, over the loop CuPy's
  rules give (non-raw arrays broadcast, outputs of that shape, ``size`` only with raw ones).
  A strided argument is copied to a contiguous one and back, which is how CuPy indexes raw
  arrays logically;
- ``RawKernel`` compiles CUDA C++ with g++ too, under a prelude that makes ``__global__``,
  ``__shared__``, ``threadIdx``/``blockIdx``/``blockDim``/``gridDim`` and
  ``__syncthreads()`` mean on the CPU what they mean on a GPU: the blocks run one after
  another, the threads of a block as coroutines (each started on its own stack with
  ``makecontext``, switched with ``_setjmp``/``_longjmp``) that each run to the next barrier
  in turn, ``__shared__`` arrays shared by them (one-dimensional grids and blocks,
  static shared memory). A kernel without ``__syncthreads()`` runs its threads one after
  another, without coroutines. A thread reading what a later thread writes before the next
  barrier shows as a wrong result, every time; with ``CUPY_STAND_IN_ORDER=reverse`` the
  blocks, the threads and an ElementwiseKernel's elements run from the last, which shows
  the other direction (a thread reading what an earlier one writes) and any result that
  depends on the order of blocks;
- a ufunc or a store whose input overlaps its output other than element for element
  (``a[1:] += a[:-1]``) is refused: NumPy buffers it, CuPy's threads race on it;
- ``empty`` and ``empty_like`` fill their arrays as CuPy's memory pool may hand them out,
  with what was there: NaN, a large integer, True (``CUPY_STAND_IN_POISON=0``: NumPy's);
- ``cuda.runtime`` reports one device;
- ``counts`` tallies what would cost host time on a GPU: ``launch`` (a ufunc, a kernel, a
  gather or scatter, a copy or a CuPy function on device arrays), ``h2d`` and ``d2h`` (copies
  between host and device; reading a device scalar with ``float``, ``int``, ``bool`` or
  ``.item()`` is one), with their bytes in ``h2d_bytes`` and ``d2h_bytes``, and ``wait``:
  the copies that make the host wait for the kernels queued before them (every copy back,
  and a copy over from pageable memory; not ``set`` from pinned memory on a stream), the
  CuPy functions its documentation says may synchronize (``bincount``, ``unique``,
  ``nonzero``, ``where`` with one argument; recorded from a real CuPy in ``api.json``) and
  boolean-mask indexing, which read a count or a maximum back first, and waiting for a CUDA
  event (or a stream, or the device) recorded after work the host has not waited for. An
  event is ``done`` once the host has waited past it: a model of the queue that takes every
  kernel to be still running until a wait.
  ``bench/gpu_launches.py`` reads them per batch. ``stand_in_s`` is the time spent inside the
  stand-in (its NumPy work, kernels and bookkeeping), so that the caller's own host time is
  the wall time less it.

With ``CUPY_STAND_IN_CACHE=DIR`` set, compiled kernels are kept in ``DIR`` and shared by every
process that sets it (the test runs of tests/test_gpu_paths_on_cpu.py share one).

With ``CUPY_STAND_IN_KERNELS=FILE`` set, each distinct kernel it runs (a RawKernel's code, an
ElementwiseKernel's parameters, body and argument types) is appended to ``FILE`` as a JSON line,
for ``bench/nvrtc_check.py`` to compile with CuPy's own NVRTC path on a machine without a GPU.

Every kernel of sculler.math.cuda can be checked this way against its NumPy twin. What only
CUDA shows (speed) needs a GPU: bench/gpu_check.sh.
"""

from __future__ import annotations

import collections
import ctypes
import functools
import hashlib
import json
import os
import subprocess
import tempfile
import time
import types
from typing import Any

import numpy as np

__version__ = "stand-in"

_C_TYPES = {np.dtype(np.float64): "double", np.dtype(np.float32): "float",
            np.dtype(np.int64): "long long", np.dtype(np.int32): "int",
            np.dtype(np.int16): "short", np.dtype(np.int8): "signed char",
            np.dtype(np.bool_): "bool"}
_FIXED = {"int64": np.dtype(np.int64), "int32": np.dtype(np.int32),
          "float64": np.dtype(np.float64), "float32": np.dtype(np.float32),
          "bool": np.dtype(np.bool_)}
_CTYPES_SCALAR = {"double": ctypes.c_double, "float": ctypes.c_float,
                  "long long": ctypes.c_longlong, "int": ctypes.c_int,
                  "short": ctypes.c_short, "signed char": ctypes.c_byte, "bool": ctypes.c_bool}


with open(os.path.join(os.path.dirname(__file__), "api.json")) as _f:
    API = json.load(_f)  # the real CuPy's names (tests/cupy_stand_in/record_cupy_api.py)
_NUMPY_TO_CUPY = {"numpy": "cupy", "numpy.linalg": "cupy.linalg", "numpy.fft": "cupy.fft",
                  "numpy.random": "cupy.random",
                  "numpy.lib.stride_tricks": "cupy.lib.stride_tricks"}


def _check_call(module: str, name: str, kwargs: dict) -> None:
    """What CuPy ``API["version"]`` says of ``module.name(**kwargs)``: AttributeError for a
    name it lacks, TypeError for a keyword the function does not take."""
    names = API["modules"].get(module, {})
    if name not in names:
        raise AttributeError(f"module {module!r} has no attribute {name!r} (CuPy "
                             f"{API['version']}; the stand-in refuses what CuPy lacks)")
    params = names[name]
    if params is not None and "**" not in params:
        extra = sorted(set(kwargs) - set(params))
        if extra:
            raise TypeError(f"{module}.{name}() got unexpected keyword arguments {extra} "
                            f"(CuPy {API['version']} takes {params})")


def _address(a: np.ndarray) -> int:
    return a.__array_interface__["data"][0]


class _Flags:
    """CuPy's ``ndarray.flags``: contiguity and ownership only (no ``writeable``)."""

    __slots__ = ("c_contiguous", "f_contiguous", "owndata", "fnc", "forc")

    def __init__(self, flags: Any) -> None:
        self.c_contiguous, self.f_contiguous = flags.c_contiguous, flags.f_contiguous
        self.owndata = flags.owndata
        self.fnc = self.f_contiguous and not self.c_contiguous
        self.forc = self.f_contiguous or self.c_contiguous

    def __getitem__(self, key: str) -> bool:
        return {"C_CONTIGUOUS": self.c_contiguous, "F_CONTIGUOUS": self.f_contiguous,
                "OWNDATA": self.owndata}[key]


class _Counts(collections.Counter):
    """``counts``, which also keeps the stand-in's model of the GPU's queue (``_queue``):
    ``tail``, the work queued so far (every launch and copy over, never reset), and
    ``synced``, how much of it the host has waited for (all of it at each counted wait). A
    CUDA event recorded at ``tail`` is known to be done once ``synced`` reaches it."""

    def __setitem__(self, key: str, value: Any) -> None:
        grew = value - self.get(key, 0)
        if grew > 0 and key in ("launch", "h2d"):
            _queue["tail"] += grew
        elif grew > 0 and key == "wait":
            _queue["synced"] = _queue["tail"]
        super().__setitem__(key, value)


_queue = {"tail": 0, "synced": 0}
_inside_function = [False]  # a NumPy function on device arrays is running (one launch)
counts: collections.Counter = _Counts()
_depth = [0]
SYNCHRONIZING = API["synchronizing"]  # CuPy's functions that may read a value back first


def _timed(fn: Any) -> Any:
    """``fn``, its time added to ``counts["stand_in_s"]`` (outermost calls only)."""

    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        if _depth[0]:
            return fn(*args, **kwargs)
        _depth[0] = 1
        start = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            counts["stand_in_s"] += time.perf_counter() - start
            _depth[0] = 0

    return call


def _d2h(nbytes: int) -> None:
    """A copy back of ``nbytes``: the host waits for the kernels queued before it."""
    counts["d2h"] += 1
    counts["wait"] += 1
    counts["d2h_bytes"] += nbytes


def _reads_back(module: str, name: str, args: tuple = (), kwargs: dict | None = None) -> None:
    """Count the read-back (a copy back, a wait) of a CuPy function its documentation says
    may synchronize the device: it reads a count or a maximum to size its result (``unique``,
    ``nonzero``, ``bincount``, ``where`` without ``x`` and ``y``) or checks its input there."""
    if name not in SYNCHRONIZING.get(module, ()):
        return
    if name == "where" and (len(args) > 1 or set(kwargs or ()) & {"x", "y"}):
        return  # where(condition, x, y) is one kernel
    _d2h(8)  # the count or the maximum


def _masks(key: Any) -> bool:
    """Whether an index has a boolean array: CuPy reads the mask's count back to size the
    result (``a[mask]``) or the values it takes (``a[mask] = v``)."""
    keys = key if isinstance(key, tuple) else (key,)
    return any(isinstance(k, np.ndarray) and k.dtype == np.bool_ for k in keys)


def _host(a: Any) -> Any:
    return a.view(np.ndarray) if isinstance(a, ndarray) else a


class ndarray(np.ndarray):  # noqa: N801 (CuPy's name)
    """A NumPy array that Sculler takes for a device array."""

    @_timed
    def get(self) -> np.ndarray:
        _d2h(self.nbytes)
        return np.array(self)

    @_timed
    def set(self, arr: np.ndarray, stream: Any = None) -> None:
        """Copy host ``arr`` in (CuPy: asynchronous with a ``stream`` and pinned memory)."""
        if arr.shape != self.shape or arr.dtype != self.dtype:
            raise ValueError(f"set: {arr.shape} {arr.dtype} into {self.shape} {self.dtype}")
        counts["h2d"] += 1
        counts["h2d_bytes"] += arr.nbytes
        counts["wait"] += stream is None
        np.copyto(self.view(np.ndarray), arr)

    @property
    @_timed
    def data(self) -> Any:  # CuPy's MemoryPointer: only .ptr is used
        return types.SimpleNamespace(ptr=_address(self))

    @property
    def device(self) -> Any:  # CuPy's Device: the stand-in has device 0
        return _Device(0)

    @property
    def flags(self) -> _Flags:
        return _Flags(np.ndarray.flags.__get__(self))

    @_timed
    def __array_ufunc__(self, ufunc: np.ufunc, method: str, *inputs: Any, **kwargs: Any) -> Any:
        _no_host_arrays(ufunc.__name__, *inputs, *kwargs.get("out", ()))
        if method != "__call__" and method not in API["ufunc_methods"]:
            raise AttributeError(f"cupy.ufunc has no method {method!r}")
        _check_call("cupy", ufunc.__name__, {})
        counts["launch"] += 1
        out = kwargs.get("out")
        if out is not None:
            if method == "__call__":
                _no_overlap(ufunc.__name__, inputs, out)
            kwargs["out"] = tuple(_host(o) for o in out)
        result = getattr(ufunc, method)(*(_host(i) for i in inputs), **kwargs)
        if out is not None:
            return out[0] if len(out) == 1 else out
        return _device(result)

    @_timed
    def reshape(self, *shape: Any, **kwargs: Any) -> Any:
        """A view where NumPy (and CuPy) can make one; else a copy, which CuPy launches."""
        result = np.ndarray.reshape(self, *shape, **kwargs)
        if result.size and not np.may_share_memory(result, self):
            counts["launch"] += 1
        return result

    def __array_function__(self, func: Any, types: Any, args: Any, kwargs: Any) -> Any:
        """A NumPy function called on device arrays (``np.take(a, rows, out=g)``): CuPy runs
        its own, one launch unless it only reshapes or asks about the arrays (a function
        NumPy calls inside another, ``concatenate`` in ``stack``, is part of that one)."""
        if _depth[0]:
            return super().__array_function__(func, types, args, kwargs)
        module = _NUMPY_TO_CUPY.get(func.__module__)
        if module is None or func.__name__ not in API["modules"].get(module, {}):
            raise TypeError(f"no implementation found for '{func.__module__}.{func.__name__}'"
                            f" on types that implement __array_function__ (CuPy "
                            f"{API['version']} has no {func.__name__})")
        _check_call(module, func.__name__, kwargs)
        if func not in _NO_LAUNCH:
            counts["launch"] += 1
        _host_arrays_copied(*args, *kwargs.values())
        _reads_back(module, func.__name__, args, kwargs)
        _inside_function[0] = True
        try:
            return _timed(lambda: _device(super(ndarray, self).__array_function__(
                func, types, args, kwargs)))()
        finally:
            _inside_function[0] = False

    @_timed
    def __getitem__(self, key: Any) -> Any:
        if not _basic(key):
            counts["launch"] += 1
            _host_arrays_copied(*(key if isinstance(key, tuple) else (key,)))
            if _masks(key):
                _reads_back("cupy", "nonzero")
        return _device(super().__getitem__(key))

    @_timed
    def __setitem__(self, key: Any, value: Any) -> None:
        if not _same_view(self, key, value):  # CuPy skips that copy (``a[:n] += b``'s store)
            counts["launch"] += 1
            if _basic(key) and isinstance(value, ndarray):
                _no_overlap("setitem", (value,), (np.ndarray.__getitem__(self, key),))
        if not _basic(key):
            _host_arrays_copied(*(key if isinstance(key, tuple) else (key,)))
            if _masks(key):
                _reads_back("cupy", "nonzero")
        if isinstance(value, np.ndarray) and not isinstance(value, ndarray) and value.ndim:
            counts["h2d"] += 1  # CuPy would copy a host array over first
            counts["h2d_bytes"] += value.nbytes
            counts["wait"] += 1
        super().__setitem__(key, value)

    def _counted(name: str, kind: str) -> Any:  # noqa: N805 (a method factory)
        """NumPy's method ``name``, counted as a ``launch`` or as a ``read`` back."""
        method = getattr(np.ndarray, name)

        @_timed
        @functools.wraps(method)
        def call(self: ndarray, *args: Any, **kwargs: Any) -> Any:
            if _inside_function[0]:  # NumPy's function calling the method: counted there
                return method(self, *args, **kwargs)
            if kind == "launch":
                counts["launch"] += 1
                _reads_back("ndarray", name)
                return _device(method(self, *args, **kwargs))
            _d2h(self.nbytes)
            return method(self, *args, **kwargs)

        return call

    copy = _counted("copy", "launch")
    dot = _counted("dot", "launch")
    argsort = _counted("argsort", "launch")
    sort = _counted("sort", "launch")
    flatten = _counted("flatten", "launch")
    searchsorted = _counted("searchsorted", "launch")
    put = _counted("put", "launch")
    astype = _counted("astype", "launch")
    take = _counted("take", "launch")
    repeat = _counted("repeat", "launch")
    fill = _counted("fill", "launch")
    argmax = _counted("argmax", "launch")
    argmin = _counted("argmin", "launch")
    cumsum = _counted("cumsum", "launch")
    nonzero = _counted("nonzero", "launch")
    compress = _counted("compress", "launch")
    item = _counted("item", "read")
    tolist = _counted("tolist", "read")
    __float__ = _counted("__float__", "read")
    __int__ = _counted("__int__", "read")
    __bool__ = _counted("__bool__", "read")
    __index__ = _counted("__index__", "read")
    del _counted


def _lacking(name: str) -> property:
    def refuse(self: ndarray) -> Any:
        raise AttributeError(f"'cupy.ndarray' object has no attribute {name!r} (CuPy "
                             f"{API['version']})")
    return property(refuse)


for _name in dir(np.ndarray):  # what NumPy's ndarray has and CuPy's lacks raises
    if not _name.startswith("_") and _name not in API["ndarray"] and _name != "flags":
        setattr(ndarray, _name, _lacking(_name))


def _no_host_arrays(what: str, *values: Any) -> None:
    """CuPy's TypeError for a host (NumPy) array among a ufunc's or a kernel's arguments: it
    takes device arrays and scalars only."""
    for a in values:
        if isinstance(a, np.ndarray) and not isinstance(a, ndarray) and a.ndim:
            raise TypeError(f"{what}: Unsupported type {type(a)} (a host array; CuPy takes "
                            "device arrays and scalars)")


def _shares_memory(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether ``a`` and ``b`` share an element (where that is too hard to settle exactly,
    whether their extents overlap)."""
    if not np.may_share_memory(a, b):
        return False
    try:
        return bool(np.shares_memory(a, b, max_work=10 ** 5))
    except np.exceptions.TooHardError:
        return True


def _no_overlap(what: str, inputs: tuple, outs: tuple) -> None:
    """CuPy's elementwise loops read input element ``i`` and write output element ``i`` in
    parallel, with no buffering: an input that overlaps an output other than element for
    element (``a[1:] += a[:-1]``) races there, where NumPy buffers it. Refused here."""
    for o in outs:
        if not isinstance(o, np.ndarray):
            continue
        for i in inputs:
            if not isinstance(i, np.ndarray) or i is o or not _shares_memory(i, o):
                continue
            same = (_address(i) == _address(o) and i.strides == o.strides
                    and np.broadcast_shapes(i.shape, o.shape) == o.shape)
            if not same:
                raise ValueError(f"{what}: an input overlaps the output other than element "
                                 "for element (on a GPU the threads race)")


def _host_arrays_copied(*values: Any) -> None:
    """Count the host arrays among ``values`` (arguments of an operation on device arrays, an
    index array): CuPy copies each over first, from pageable memory, so the host waits."""
    for a in values:
        if isinstance(a, np.ndarray) and not isinstance(a, ndarray) and a.ndim:
            counts["h2d"] += 1
            counts["h2d_bytes"] += a.nbytes
            counts["wait"] += 1


_NO_LAUNCH = {np.reshape, np.transpose, np.swapaxes, np.moveaxis, np.squeeze, np.expand_dims,
              np.atleast_1d, np.atleast_2d, np.shape, np.ndim, np.size, np.result_type,
              np.may_share_memory, np.shares_memory, np.broadcast_to, np.iscomplexobj,
              np.isrealobj}


def _same_view(a: ndarray, key: Any, value: Any) -> bool:
    """Whether ``a[key] = value`` stores a view onto itself: the same memory, shape and
    strides (as ``a[:n] += b`` does after adding in place)."""
    if not isinstance(value, ndarray) or not _basic(key):
        return False
    target = np.ndarray.__getitem__(a, key)
    return (target.__array_interface__["data"][0] == value.__array_interface__["data"][0]
            and target.shape == value.shape and target.strides == value.strides)


def _basic(key: Any) -> bool:
    """Whether indexing by ``key`` is a view (no kernel on a GPU)."""
    keys = key if isinstance(key, tuple) else (key,)
    return all(k is None or k is Ellipsis or isinstance(k, (slice, int, np.integer))
               for k in keys)


def _device(result: Any) -> Any:
    """A result of an operation on device arrays, on the device: a NumPy scalar becomes a
    0-d device array, as CuPy's reductions and indexing return."""
    if isinstance(result, np.ndarray) and not isinstance(result, ndarray):
        return result.view(ndarray)
    if isinstance(result, np.generic):
        return np.asarray(result).view(ndarray)
    if isinstance(result, tuple):
        return tuple(_device(r) for r in result)
    if isinstance(result, list):  # split, array_split: a list of device arrays
        return [_device(r) for r in result]
    return result


def __getattr__(name: str) -> Any:
    """NumPy's function of that name, its array results made device arrays (a name CuPy
    lacks raises AttributeError, a keyword its function does not take TypeError)."""
    _check_call("cupy", name, {})
    attr = getattr(np, name)
    if not callable(attr) or isinstance(attr, (type, np.ufunc)):
        return attr  # a ufunc keeps its methods (add.at); its results follow its inputs

    @_timed
    @functools.wraps(attr)
    def call(*args: Any, **kwargs: Any) -> Any:
        _check_call("cupy", name, kwargs)
        counts["alloc" if name in _ALLOCATIONS else "launch"] += 1
        _reads_back("cupy", name, args, kwargs)
        out = kwargs.get("out")
        result = _device(attr(*(_host(a) for a in args),
                              **{k: _host(v) for k, v in kwargs.items()}))
        if name in _UNINITIALIZED and _POISON:
            _poisoned(result)
        return out if isinstance(out, ndarray) else result

    return call


_ALLOCATIONS = {"empty", "empty_like", "zeros", "zeros_like", "ones", "ones_like", "full",
                "full_like"}
_UNINITIALIZED = {"empty", "empty_like"}


def _poisoned(a: np.ndarray) -> np.ndarray:
    """A new ``empty`` array filled as CuPy's pool may hand it out, with what was there
    before: NaN for floats, a large number for integers, True for booleans, so that code
    reading what it did not write fails here too (NumPy's fresh pages are zeros)."""
    host = _host(a)  # (not a counted launch: CuPy writes nothing)
    if a.dtype.kind == "f":
        host.fill(np.nan)
    elif a.dtype.kind in "iu":
        host.fill(np.iinfo(a.dtype).max // 3)
    elif a.dtype.kind == "b":
        host.fill(True)
    return a


@_timed
def asarray(a: Any, dtype: Any = None) -> ndarray:
    """``a`` on the device: a host array (or list) is copied there, a device array of that
    dtype is returned as it is."""
    if isinstance(a, ndarray):
        return a if dtype is None or a.dtype == dtype else a.astype(dtype)
    host = np.asarray(a, dtype=dtype)
    counts["h2d"] += 1
    counts["h2d_bytes"] += host.nbytes
    counts["wait"] += 1  # a copy from pageable memory waits for the queued kernels
    return np.array(host).view(ndarray)


@_timed
def array(a: Any, dtype: Any = None, copy: bool = True) -> ndarray:
    if isinstance(a, ndarray):
        counts["launch"] += 1
        return np.array(a, dtype=dtype, copy=copy).view(ndarray)
    return asarray(a, dtype)


@_timed
def ascontiguousarray(a: Any, dtype: Any = None) -> ndarray:
    """``a`` itself where it is a C-contiguous device array of that dtype (no kernel, as in
    CuPy), else a contiguous copy (one)."""
    if isinstance(a, ndarray) and a.flags.c_contiguous and (dtype is None or a.dtype == dtype):
        return a
    if not isinstance(a, ndarray):
        return asarray(np.ascontiguousarray(a, dtype=dtype))
    counts["launch"] += 1
    return np.ascontiguousarray(a, dtype=dtype).view(ndarray)


@_timed
def asnumpy(a: Any) -> np.ndarray:
    if isinstance(a, ndarray):
        return a.get()
    return np.asarray(a)


class _Runtime:
    @staticmethod
    def getDeviceCount() -> int:  # noqa: N802 (CUDA's name)
        return 1

    @staticmethod
    def getDevice() -> int:  # noqa: N802
        return 0


class _Device:
    def __init__(self, index: int = 0) -> None:
        self.id = index

    def synchronize(self) -> None:
        _wait_for_all()

    def use(self) -> None:
        pass


class _Event:
    """A CUDA event in the stand-in's model of the queue (``_Counts``): recorded at the work
    queued so far, done once the host has waited for that much; waiting for one not known
    to be done counts a wait."""

    def __init__(self, block: bool = False, disable_timing: bool = False,
                 interprocess: bool = False) -> None:
        self.at = 0

    def record(self, stream: Any = None) -> None:
        self.at = _queue["tail"]

    @property
    def done(self) -> bool:
        return self.at <= _queue["synced"]

    def synchronize(self) -> None:
        if not self.done:
            synced = _queue["synced"]
            counts["wait"] += 1
            _queue["synced"] = max(synced, self.at)  # the work up to the event, not after


def _wait_for_all() -> None:
    """A stream's or the device's ``synchronize``: a wait, unless nothing was queued since
    the last."""
    if _queue["synced"] < _queue["tail"]:
        counts["wait"] += 1


_STREAM = types.SimpleNamespace(ptr=0, synchronize=_wait_for_all)

cuda = types.SimpleNamespace(runtime=_Runtime(), Device=_Device, Event=_Event,
                             get_current_stream=lambda: _STREAM,
                             device=types.SimpleNamespace(get_cublas_handle=lambda: 1))


_POISON = os.environ.get("CUPY_STAND_IN_POISON", "1") != "0"  # 0: empty arrays as NumPy's
_REVERSE = os.environ.get("CUPY_STAND_IN_ORDER") == "reverse"  # run threads, blocks backwards
_recorded: set[str] = set()
_RECORD_TO = os.environ.get("CUPY_STAND_IN_KERNELS")


def _record(entry: dict) -> None:
    """Append ``entry`` (a kernel as it was run) to ``$CUPY_STAND_IN_KERNELS`` (as it was when
    the stand-in was imported), once."""
    path = _RECORD_TO
    if not path:
        return
    line = json.dumps(entry, sort_keys=True)
    if line not in _recorded:
        _recorded.add(line)
        with open(path, "a") as f:
            f.write(line + "\n")


def _parameters(spec: str) -> list[tuple[bool, str, str]]:
    """``(raw, type, name)`` of each parameter of ``"raw T x, I label, int64 width"``."""
    out = []
    for piece in (p.split() for p in spec.split(",") if p.strip()):
        raw = piece[0] == "raw"
        type_, name = piece[1:] if raw else piece
        out.append((raw, type_, name))
    return out


_libraries: dict[str, ctypes.CDLL] = {}


_CACHE = os.environ.get("CUPY_STAND_IN_CACHE")  # a folder of compiled kernels (by source)


def _compile(source: str) -> ctypes.CDLL:
    """The kernel ``source`` compiled by g++ and loaded: once a process, and once for all
    processes that share ``$CUPY_STAND_IN_CACHE`` (the libraries there are named by the
    source's hash and moved in whole, so a half-written one is never loaded)."""
    key = hashlib.sha256(source.encode()).hexdigest()
    lib = _libraries.get(key)
    if lib is not None:
        return lib
    folder = _CACHE or tempfile.mkdtemp(prefix="cupy-stand-in-")
    built = os.path.join(folder, key + ".so")
    if not os.path.exists(built):
        os.makedirs(folder, exist_ok=True)
        partial = os.path.join(folder, f"{key}.{os.getpid()}.partial")
        with open(partial + ".cpp", "w") as f:
            f.write(source)
        done = subprocess.run(["g++", "-O1", "-U_FORTIFY_SOURCE", "-shared", "-fPIC", "-o",
                               partial + ".so", partial + ".cpp"],
                              capture_output=True, text=True)
        os.remove(partial + ".cpp")
        if done.returncode:
            raise RuntimeError(f"the kernel does not compile:\n{source}\n{done.stderr}")
        os.replace(partial + ".so", built)
    lib = _libraries[key] = ctypes.CDLL(built)
    return lib


class ElementwiseKernel:
    """CuPy's ElementwiseKernel, run by the CPU: ``body`` once per element ``i``."""

    def __init__(self, in_params: str, out_params: str, operation: str, name: str) -> None:
        self.params = _parameters(in_params) + _parameters(out_params)
        self.n_in = len(_parameters(in_params))
        self.operation, self.name = operation, name

    def _loop_shape(self, args: tuple, size: int | None) -> tuple | None:
        """CuPy's rules for the loop: ``size`` only where every array is ``raw``, else the
        shape the non-raw arrays broadcast to, which every non-raw output must have."""
        arrays = [(k, a) for k, ((raw, _, _), a) in enumerate(zip(self.params, args))
                  if not raw and isinstance(a, ndarray)]
        if size is not None:
            if arrays:
                raise ValueError(f"{self.name}: Specified 'size' can be used only if all of "
                                 "the ndarray are 'raw'.")
            return None
        if not arrays:
            raise ValueError(f"{self.name}: Loop size is undecided.")
        shape = np.broadcast_shapes(*(a.shape for _, a in arrays))
        for k, a in arrays:
            if k >= self.n_in and a.shape != shape:
                raise ValueError(f"{self.name}: Out shape is mismatched ({self.params[k][2]} "
                                 f"is {a.shape}, the loop {shape})")
        return shape

    @_timed
    def __call__(self, *args: Any, size: int | None = None) -> None:
        _no_host_arrays(self.name, *args)
        if len(args) != len(self.params):
            raise TypeError(f"{self.name}: {len(self.params)} arguments expected, got "
                            f"{len(args)}")
        placeholders: dict[str, np.dtype] = {}
        for (_, type_, name), a in zip(self.params, args):
            if type_ not in _FIXED:
                dtype = np.asarray(a).dtype
                if placeholders.setdefault(type_, dtype) != dtype:
                    raise TypeError(f"{self.name}: {name} is {dtype}, {type_} is already "
                                    f"{placeholders[type_]}")
        shape = self._loop_shape(args, size)
        n = size if size is not None else int(np.prod(shape))
        signature, lines, values, copies = [], [], [], []
        for (raw, type_, name), a in zip(self.params, args):
            c_type = _C_TYPES[placeholders.get(type_) or _FIXED[type_]]
            if isinstance(a, np.ndarray) and (raw or a.ndim):
                if raw or a.shape == shape:
                    flat = np.ascontiguousarray(a)
                    if flat is not a:
                        copies.append((a, flat))
                else:  # an input broadcast to the loop's shape
                    flat = np.ascontiguousarray(np.broadcast_to(a, shape))
                signature.append(f"{c_type}* {name}_data")
                values.append(ctypes.c_void_p(_address(flat)))
                if raw:
                    lines.append(f"{c_type}* {name} = {name}_data;")
                else:
                    lines.append(f"{c_type}& {name} = {name}_data[i];")
            else:
                signature.append(f"{c_type} {name}")
                dtype = placeholders.get(type_) or _FIXED[type_]
                values.append(_CTYPES_SCALAR[c_type](np.asarray(a).astype(dtype).item()))
        typedefs = "".join(f"typedef {_C_TYPES[d]} {t};\n" for t, d in placeholders.items())
        source = ("#include <cmath>\n#include <algorithm>\n#include <cstddef>\n"
                  "using std::min; using std::max; using std::exp; using std::log;\n"
                  "using std::tanh; using std::sqrt;\n" + typedefs
                  + 'extern "C" void run(long long n_, int reverse_, '
                  + f'{", ".join(signature)}) {{\n'
                  + "for (ptrdiff_t k_ = 0; k_ < n_; ++k_) {\n"
                  + "ptrdiff_t i = reverse_ ? n_ - 1 - k_ : k_;\n" + "\n".join(lines)
                  + "\n{\n" + self.operation + "\n}\n}\n}\n")
        _record({"kind": "elementwise", "name": self.name, "operation": self.operation,
                 "types": {t: _C_TYPES[d] for t, d in placeholders.items()},
                 "params": [{"raw": raw, "type": _C_TYPES[placeholders.get(t) or _FIXED[t]],
                             "name": name, "input": k < self.n_in,
                             "ndim": a.ndim if isinstance(a, np.ndarray) else None}
                            for k, ((raw, t, name), a) in enumerate(zip(self.params, args))]})
        counts["launch"] += 1
        _compile(source).run(ctypes.c_longlong(n), ctypes.c_int(_REVERSE), *values)
        for a, flat in copies:
            np.ndarray.__setitem__(a, Ellipsis, flat)


_RAW_PRELUDE = """#include <cmath>
#include <algorithm>
#include <csetjmp>
#include <cstddef>
#include <functional>
#include <ucontext.h>
#include <vector>
using std::min; using std::max; using std::exp; using std::log; using std::tanh; using std::sqrt;
struct stand_in_dim3 { unsigned x, y, z; };
static stand_in_dim3 threadIdx, blockIdx, blockDim, gridDim;
struct stand_in_fiber { jmp_buf at; ucontext_t start; bool started, done; };
static jmp_buf stand_in_main;
static std::vector<stand_in_fiber> stand_in_fibers;
static std::function<void()> stand_in_body;
static unsigned stand_in_now;
/* the threads' stacks, kept from launch to launch: a fresh zeroed 64 KB a thread (32 MB for
   a block of 512) each launch would evict the host's caches, and the Python after the
   kernel would pay for it in bench/gpu_launches.py's host time */
static std::vector<char> stand_in_stacks;
/* the order blocks and threads run in (CUPY_STAND_IN_ORDER=reverse: from the last), set at
   each launch, so one compiled kernel serves both */
static unsigned stand_in_reverse;
#define STAND_IN_ORDER(k, n) (stand_in_reverse ? (n) - 1 - (k) : (k))
/* a thread's turn ends at a barrier: save where it is, go back to the scheduler */
static inline void __syncthreads() {
  if (!_setjmp(stand_in_fibers[stand_in_now].at)) _longjmp(stand_in_main, 1);
}
static void stand_in_run() {
  stand_in_body();
  stand_in_fibers[stand_in_now].done = true;
  _longjmp(stand_in_main, 1);
}
#define __global__
#define __device__
#define __forceinline__ inline
#define __restrict__
#define __shared__ static
"""

_C_SCALARS = {"unsigned long long": ctypes.c_ulonglong, "long long": ctypes.c_longlong,
              "long long int": ctypes.c_longlong,
              "int": ctypes.c_int, "unsigned int": ctypes.c_uint, "float": ctypes.c_float,
              "double": ctypes.c_double, "bool": ctypes.c_bool}
_POINTEE = {"float": np.dtype(np.float32), "double": np.dtype(np.float64),
            "long long": np.dtype(np.int64), "long long int": np.dtype(np.int64),
            "unsigned long long": np.dtype(np.uint64), "int": np.dtype(np.int32),
            "unsigned int": np.dtype(np.uint32), "bool": np.dtype(np.bool_)}
_C_SCALAR_KINDS = {"unsigned long long": "u", "long long": "i", "long long int": "i", "int": "i",
                   "unsigned int": "u", "float": "f", "double": "f", "bool": "b"}


class CUDADriverError(RuntimeError):
    """As ``cupy_backends.cuda.api.driver.CUDADriverError``: a launch CUDA refuses."""


class RawKernel:
    """CuPy's RawKernel, run by the CPU (see the module's docstring)."""

    def __init__(self, code: str, name: str, options: tuple = (), **kwargs: Any) -> None:
        import re

        self.code, self.name = code, name
        head = re.search(r"__global__\s+void\s+" + re.escape(name) + r"\s*\(([^)]*)\)", code)
        if head is None:
            raise ValueError(f"RawKernel: no __global__ function {name!r} in the code")
        typedefs = dict((alias, real) for real, alias in
                        re.findall(r"typedef\s+([\w ]+?)\s+(\w+)\s*;", code))
        self.params = []
        self.restricted: set[str] = set()  # pointers declared __restrict__
        self.read_only: set[str] = set()  # pointers to const
        for piece in (p.strip() for p in head.group(1).split(",") if p.strip()):
            type_, pname = re.match(r"(.*?)(\w+)$", piece).groups()
            if "__restrict__" in type_:
                self.restricted.add(pname)
            if re.match(r"\s*const\b", type_):
                self.read_only.add(pname)
            type_ = type_.replace("const", "").replace("__restrict__", "").strip()
            pointer = "*" in type_
            base = type_.replace("*", "").strip()
            self.params.append((pointer, typedefs.get(base, base), pname))

    def _no_restricted_alias(self, args: tuple) -> None:
        """A ``__restrict__`` pointer promises nvcc that no other pointer of the kernel
        reaches its memory where that memory is written: nvcc then reads it through the
        read-only cache or keeps it in registers across stores. Passing one array as both a
        restricted parameter and a writable one (not pointer to const) breaks the promise,
        and the kernel reads stale values on a GPU (g++ here ignores ``__restrict__``).
        Refused at the launch."""
        pointers = [(pname, a) for (pointer, _, pname), a in zip(self.params, args) if pointer]
        for pname, a in pointers:
            if pname not in self.restricted:
                continue
            for other, b in pointers:
                if other != pname and other not in self.read_only and \
                        _shares_memory(a, b):
                    raise ValueError(f"{self.name}: {pname} is declared __restrict__ but "
                                     f"shares memory with {other}, which the kernel may "
                                     "write (on a GPU it may read stale values)")

    @_timed
    def __call__(self, grid: tuple, block: tuple, args: tuple, shared_mem: int = 0) -> None:
        if len(args) != len(self.params):
            raise TypeError(f"{self.name}: {len(self.params)} arguments expected, got "
                            f"{len(args)}")
        if shared_mem:
            raise NotImplementedError("the stand-in has static shared memory only")
        grid, block = tuple(grid) + (1,) * 2, tuple(block) + (1,) * 2
        if grid[1:3] != (1, 1) or block[1:3] != (1, 1):
            raise NotImplementedError("the stand-in runs one-dimensional grids and blocks")
        if not (0 < grid[0] < 2 ** 31 and 0 < block[0] <= 1024):
            # what CUDA refuses at the launch (cudaErrorInvalidConfiguration)
            raise CUDADriverError(f"CUDA_ERROR_INVALID_VALUE: invalid argument ({self.name}: "
                                  f"grid {grid[0]}, block {block[0]})")
        declared, values = [], []
        for (pointer, type_, pname), a in zip(self.params, args):
            if pointer:
                if not isinstance(a, ndarray):
                    raise TypeError(f"{self.name}: {pname} must be a device array")
                if type_ in _POINTEE and a.dtype != _POINTEE[type_]:
                    # CuPy passes the address only: the kernel would read the bytes as type_
                    raise TypeError(f"{self.name}: {pname} is declared {type_}*, got a "
                                    f"device array of {a.dtype}")
                declared.append(f"{type_}* {pname}")
                values.append(ctypes.c_void_p(_address(a)))
            else:
                if not isinstance(a, np.generic):
                    raise TypeError(f"{self.name}: pass {pname} as a NumPy scalar of its C "
                                    f"type ({type_}), got {type(a).__name__}")
                c_scalar = _C_SCALARS[type_]
                if a.dtype.itemsize != ctypes.sizeof(c_scalar) or \
                        a.dtype.kind != _C_SCALAR_KINDS[type_]:
                    # CuPy packs a scalar by its own dtype, not the parameter's: a mismatch
                    # shifts every later argument
                    raise TypeError(f"{self.name}: {pname} is declared {type_}, got a NumPy "
                                    f"{a.dtype}")
                declared.append(f"{type_} {pname}")
                values.append(c_scalar(a.item()))
        self._no_restricted_alias(args)
        names = ", ".join(p[2] for p in self.params)
        head = ('extern "C" void stand_in_launch(unsigned stand_in_grid, unsigned stand_in_block, '
                f'unsigned stand_in_backwards, {", ".join(declared)}) {{\n'
                "  gridDim = {stand_in_grid, 1, 1}; blockDim = {stand_in_block, 1, 1};\n"
                "  stand_in_reverse = stand_in_backwards;\n")
        if "__syncthreads" not in self.code:  # no barrier: each thread runs through in turn
            launcher = head + f"""  for (unsigned b = 0; b < stand_in_grid; ++b) {{
    blockIdx = {{STAND_IN_ORDER(b, stand_in_grid), 0, 0}};
    for (unsigned t = 0; t < stand_in_block; ++t) {{
      threadIdx = {{STAND_IN_ORDER(t, stand_in_block), 0, 0}};
      {self.name}({names});
    }}
  }}
}}
"""
        else:
            launcher = head + f"""  const size_t stack = 1 << 16;
  if (stand_in_stacks.size() < stack * stand_in_block)
    stand_in_stacks.resize(stack * stand_in_block);
  char* stacks = stand_in_stacks.data();
  stand_in_fibers.assign(stand_in_block, stand_in_fiber());
  stand_in_body = [=] {{ {self.name}({names}); }};
  ucontext_t here;
  for (unsigned b = 0; b < stand_in_grid; ++b) {{
    blockIdx = {{STAND_IN_ORDER(b, stand_in_grid), 0, 0}};
    for (unsigned t = 0; t < stand_in_block; ++t) {{
      stand_in_fiber& f = stand_in_fibers[t];
      f.started = f.done = false;
      getcontext(&f.start);
      f.start.uc_stack.ss_sp = &stacks[t * stack];
      f.start.uc_stack.ss_size = stack;
      f.start.uc_link = nullptr;
      makecontext(&f.start, stand_in_run, 0);
    }}
    for (unsigned left = stand_in_block; left; ) {{  /* a round: each thread to its barrier */
      left = 0;
      for (volatile unsigned t = 0; t < stand_in_block; ++t) {{
        stand_in_now = STAND_IN_ORDER(t, stand_in_block);
        stand_in_fiber& f = stand_in_fibers[stand_in_now];
        if (f.done) continue;
        threadIdx = {{stand_in_now, 0, 0}};
        if (!_setjmp(stand_in_main)) {{
          if (f.started) _longjmp(f.at, 1);
          f.started = true;
          swapcontext(&here, &f.start);
        }}
        left += !stand_in_fibers[stand_in_now].done;
      }}
    }}
  }}
}}
"""
        source = _RAW_PRELUDE + self.code + "\n" + launcher
        _record({"kind": "raw", "name": self.name, "code": self.code})
        counts["launch"] += 1
        _compile(source).stand_in_launch(ctypes.c_uint(grid[0]), ctypes.c_uint(block[0]),
                                         ctypes.c_uint(_REVERSE), *values)
