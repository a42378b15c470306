"""``Parameters``: the named arrays of one or more topologies (``paddle.v2.parameters``).

``create(layers)`` makes one parameter per name over all given topologies (a shared name is
one parameter). The tar format is PaddlePaddle v2's: per parameter an entry ``<name>`` with a
16-byte header ``struct.pack('IIQ', 0, 4, size)`` (version, value bytes, count) then raw
float32, and ``<name>.protobuf`` holding its ParameterConfig (name, size, dims).
"""

from __future__ import annotations

import io
import os
import struct
import tempfile
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, BinaryIO

import numpy as np

from sculler import backend
from sculler.core.model_config import ParameterConfig
from sculler.core.parameter import ParameterSet
from sculler.topology import Topology, binary
from sculler.v2 import runtime
from sculler.v2.protobuf import decode_parameter_config, encode_parameter_config

if TYPE_CHECKING:
    import tarfile

__all__ = ["Parameters", "create"]

_HEADER = struct.Struct("IIQ")


def atomic_write(f: Any, write: Callable[[BinaryIO], None]) -> None:
    """Call ``write(stream)`` on ``f``; for a path, into a temp file renamed over it."""
    if isinstance(f, (str, bytes)) or hasattr(f, "__fspath__"):
        path = os.fspath(f)
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(os.path.abspath(path)) or ".",
                                   prefix=".tmp-")
        try:
            with os.fdopen(fd, "wb") as fh:
                write(fh)
            os.replace(tmp, path)
        except BaseException:
            os.unlink(tmp)
            raise
    else:
        write(binary(f))


def _topologies(layers: Any) -> list[Topology]:
    items = list(layers) if isinstance(layers, (list, tuple)) else [layers]
    if items and all(not isinstance(i, Topology) for i in items):
        return [Topology(items)]
    return [i if isinstance(i, Topology) else Topology(i) for i in items]


def create(layers: Any) -> Parameters:
    """Parameters of a layer, a list of layers, a Topology or a list of Topologies, each
    shared name created once and initialised (seeded by ``init(seed=...)``)."""
    params = Parameters()
    for topo in _topologies(layers):
        params.append_topology(topo)
    return params


class Parameters:
    """Name -> array map over a core :class:`ParameterSet` (``.parameter_set``)."""

    def __init__(self, parameter_set: ParameterSet | None = None):
        self.parameter_set = parameter_set if parameter_set is not None else ParameterSet(
            seed=runtime.parameter_seed())

    def append_topology(self, topology: Topology) -> None:
        """Create (once per name) the parameters ``topology`` uses."""
        mc = topology.proto()
        for pc in mc.parameters:
            new = pc.name not in self.parameter_set
            self.parameter_set.create(pc, owner=f"topology of {topology.layers[0].name}")
            init = topology.initializers.get(pc.name)
            if new and init is not None:
                self.set(pc.name, init(pc.name))

    # ---- map interface ----
    def names(self) -> list[str]:
        return self.parameter_set.names()

    def keys(self) -> list[str]:
        return self.names()

    def has_key(self, key: str) -> bool:
        return key in self.parameter_set

    def __contains__(self, key: object) -> bool:
        return key in self.parameter_set

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        return len(self.parameter_set)

    def get_shape(self, key: str) -> tuple[int, ...]:
        return self.parameter_set[key].shape

    def get(self, key: str) -> np.ndarray:
        """A host copy of the parameter's value."""
        return backend.to_numpy(self.parameter_set[key].value).copy()

    __getitem__ = get

    def get_grad(self, key: str) -> np.ndarray:
        """A host copy of the last batch's gradient (zeros for a static parameter)."""
        p = self.parameter_set[key]
        return np.zeros(p.shape, np.float32) if p.grad is None else backend.to_numpy(
            p.grad).copy()

    def set(self, key: str, value: Any) -> None:
        """Overwrite the value in place (layers keep their views); shapes must match, or a
        flat array of the same size."""
        p = self.parameter_set[key]
        arr = np.asarray(value)
        if arr.shape != p.shape:
            if arr.size != p.value.size:
                raise ValueError(f"parameter {key!r} has shape {p.shape}, got an array of "
                                 f"shape {arr.shape}")
            arr = arr.reshape(p.shape)
        p.value[...] = backend.xp().asarray(arr, dtype=p.value.dtype)

    __setitem__ = set

    # ---- Paddle's binary format ----
    def serialize(self, name: str, f: BinaryIO) -> None:
        """Write one parameter: the 16-byte header then float32 values."""
        arr = np.ascontiguousarray(self.get(name), dtype=np.float32)
        out = binary(f)
        out.write(_HEADER.pack(0, 4, arr.size))
        out.write(arr.tobytes())

    def deserialize(self, name: str, f: BinaryIO) -> None:
        """Read one parameter written by :meth:`serialize` (or by PaddlePaddle)."""
        self.set(name, _read_values(binary(f).read(), name, self.get_shape(name)))

    def to_tar(self, f: BinaryIO | str) -> None:
        """Write every parameter in PaddlePaddle v2's tar format (atomic for a path)."""

        def write(stream: BinaryIO) -> None:
            import tarfile

            with tarfile.open(fileobj=stream, mode="w") as tar:
                for name in self.names():
                    buf = io.BytesIO()
                    self.serialize(name, buf)
                    _add(tar, name, buf.getvalue())
                    pc = self.parameter_set[name].config
                    _add(tar, name + ".protobuf", encode_parameter_config(
                        name, pc.size, pc.dims, {"learning_rate": pc.learning_rate,
                                                 "is_static": pc.is_static}))

        atomic_write(f, write)

    @staticmethod
    def from_tar(f: BinaryIO | str) -> Parameters:
        """Parameters read from a v2 tar (Sculler's or PaddlePaddle's)."""
        params = Parameters()
        with _open_tar(f) as tar:
            members = {m.name: m for m in tar.getmembers()}
            for mname, m in members.items():
                if not mname.endswith(".protobuf"):
                    continue
                conf = decode_parameter_config(tar.extractfile(m).read())
                dims = [int(d) for d in conf["dims"]] or [int(conf.get("size", 0))]
                pc = ParameterConfig(name=conf["name"], dims=dims, initial_std=0.0,
                                     is_static=bool(conf.get("is_static", False)))
                params.parameter_set.create(pc, owner=f"tar entry {mname}")
            for name in params.names():
                if name not in members:
                    raise ValueError(f"tar has {name}.protobuf but no {name!r} value entry")
                params.deserialize(name, tar.extractfile(members[name]))
        return params

    def init_from_tar(self, f: BinaryIO | str, exclude_params: list[str] | None = None) -> None:
        """Overwrite parameters present both here and in the tar (except ``exclude_params``)."""
        exclude = set(exclude_params or [])
        with _open_tar(f) as tar:
            for m in tar.getmembers():
                if m.name.endswith(".protobuf") or m.name in exclude or m.name not in self:
                    continue
                self.deserialize(m.name, tar.extractfile(m))


def _read_values(raw: bytes, name: str, shape: tuple[int, ...]) -> np.ndarray:
    if len(raw) < _HEADER.size:
        raise ValueError(f"parameter {name!r}: entry of {len(raw)} bytes has no 16-byte header")
    version, width, count = _HEADER.unpack_from(raw)
    if version != 0 or width != 4:
        raise ValueError(f"parameter {name!r}: unsupported header (version {version}, value "
                         f"size {width}); expected version 0 with float32 values")
    n = int(np.prod(shape))
    if count != n or len(raw) - _HEADER.size != 4 * n:
        raise ValueError(f"parameter {name!r} has shape {shape} ({n} values), the entry holds "
                         f"{count} (header) / {(len(raw) - _HEADER.size) // 4} (data)")
    return np.frombuffer(raw, dtype=np.float32, offset=_HEADER.size).reshape(shape)


def _add(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    import tarfile

    info = tarfile.TarInfo(name)
    info.size = len(data)
    tar.addfile(info, io.BytesIO(data))


def _open_tar(f: Any) -> tarfile.TarFile:
    import tarfile

    if isinstance(f, (str, bytes)) or hasattr(f, "__fspath__"):
        return tarfile.open(f, mode="r")
    return tarfile.open(fileobj=binary(f), mode="r")
