"""``Parameters``: the named arrays of one or more topologies (``paddle.v2.parameters``).

``create(layers)`` makes one parameter per name over all given topologies (a shared name is
one parameter). The tar format is PaddlePaddle v2's: per parameter an entry ``<name>`` with a
16-byte header ``struct.pack('IIQ', 0, 4, size)`` (version, value bytes, count) then raw
float32, and ``<name>.protobuf`` holding its ParameterConfig (name, size, dims).
"""

from __future__ import annotations

import io
import math
import struct
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, BinaryIO

import numpy as np

from sculler import backend
from sculler.core.model_config import ParameterConfig
from sculler.core.parameter import ParameterSet
from sculler.fileio import FileFormatError, atomic_write, binary, read_tar
from sculler.topology import Topology
from sculler.v2 import runtime
from sculler.v2.protobuf import decode_parameter_config, encode_parameter_config
from sculler.validate import as_array, exact_shape

if TYPE_CHECKING:
    import tarfile

__all__ = ["Parameters", "create", "training_topology"]

_HEADER = struct.Struct("IIQ")


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

    def __append_config__(self, param_conf: Any) -> None:
        """Add one parameter from its config, as PaddlePaddle's ``Parameters`` does (its own
        tests build Parameters this way): a :class:`ParameterConfig`, or any object with
        ``name``, ``dims`` and ``size`` (a protobuf ``ParameterConfig``); empty ``dims`` mean
        ``(1, size)`` as in Paddle's ``get_shape``. A name already present is an error."""
        name = getattr(param_conf, "name", None)
        if not isinstance(name, str) or not name:
            raise TypeError(f"Parameters.__append_config__: expected a ParameterConfig with a "
                            f"name, got {param_conf!r}")
        if name in self.parameter_set:
            raise ValueError(f"Parameters.__append_config__: duplicated parameter {name!r}")
        if isinstance(param_conf, ParameterConfig):
            config = param_conf
        else:
            dims = [int(d) for d in param_conf.dims] or [1, int(param_conf.size)]
            config = ParameterConfig(name=name, dims=dims)
        self.parameter_set.create(config, owner="Parameters.__append_config__")

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
        return self._parameter(key).shape

    def get(self, parameter_name: str) -> np.ndarray:
        """A host copy of the parameter's value."""
        return backend.to_numpy(self._parameter(parameter_name).value).copy()

    __getitem__ = get

    def get_grad(self, key: str) -> np.ndarray:
        """A host copy of the last batch's gradient (zeros for a static parameter)."""
        p = self._parameter(key)
        return np.zeros(p.shape, np.float32) if p.grad is None else backend.to_numpy(
            p.grad).copy()

    def set(self, parameter_name: str, value: Any) -> None:
        """Overwrite the value in place (layers keep their views). The array must have the
        parameter's shape exactly, or be flat (1-D) with its size (Paddle's
        ``parameters.set`` takes both); a transposed array is an error, not reshaped."""
        p = self._parameter(parameter_name)
        arr = exact_shape(as_array(value, f"value for parameter {parameter_name!r}"), p.shape,
                          f"parameter {parameter_name!r}", allow_flat=True)
        p.value[...] = backend.xp().asarray(arr, dtype=p.value.dtype)

    def _parameter(self, key: str) -> Any:
        if key not in self.parameter_set:
            raise KeyError(f"no parameter {key!r}; parameters are {self.names()}")
        return self.parameter_set[key]

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
        self.set(name, _read_values(binary(f).read(), f"parameter {name!r}",
                                    self.get_shape(name)))

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

        atomic_write(f, write, "Parameters.to_tar")

    @staticmethod
    def from_tar(f: BinaryIO | str) -> Parameters:
        """Parameters read from a v2 tar (Sculler's or PaddlePaddle's); the whole file is
        checked first (see :func:`read_parameter_tar`)."""
        params = Parameters()
        for pc, values in read_parameter_tar(f, "Parameters.from_tar")[0].values():
            params.parameter_set.create(pc, owner="tar")
            params.set(pc.name, values)
        return params

    def init_from_tar(self, f: BinaryIO | str, exclude_params: list[str] | None = None) -> None:
        """Overwrite parameters present both here and in the tar (except ``exclude_params``);
        the whole file is checked before anything is overwritten, and a parameter stored
        with another shape is an error."""
        exclude = set(exclude_params or [])
        stored, fname = read_parameter_tar(f, "Parameters.init_from_tar")
        for name, (pc, _) in stored.items():
            if name in self and name not in exclude and tuple(pc.dims) != self.get_shape(name):
                raise ValueError(f"init_from_tar: parameter {name!r} has shape "
                                 f"{self.get_shape(name)} here and {tuple(pc.dims)} in "
                                 f"{fname}")
        for name, (_, values) in stored.items():
            if name in self and name not in exclude:
                self.set(name, values)


def read_parameter_tar(f: Any, what: str
                       ) -> tuple[dict[str, tuple[ParameterConfig, np.ndarray]], str]:
    """``name -> (config, values)`` of a v2 parameter tar, and the file's name for messages;
    every entry checked: the tar's
    structure (:func:`sculler.fileio.read_tar`), a ``<name>.protobuf`` config for every value
    entry and the reverse, the config's size equal to the product of its dims, and each value
    entry's 16-byte header and length equal to that size.

    Raises:
        FileFormatError: naming the file and the entry at fault.
    """
    entries, fname = read_tar(f, what)
    configs = [n[:-len(".protobuf")] for n in entries if n.endswith(".protobuf")]
    for n in entries:
        if not n.endswith(".protobuf") and n + ".protobuf" not in entries:
            raise FileFormatError(f"{what}: {fname} entry {n!r} has no {n + '.protobuf'!r} "
                                  "config entry; not a PaddlePaddle v2 parameter tar")
    if not configs:
        raise FileFormatError(f"{what}: {fname} holds no parameters (entries {list(entries)}); "
                              "not a PaddlePaddle v2 parameter tar")
    out = {}
    for name in configs:
        where = f"{what}: {fname} entry {name + '.protobuf'!r}"
        try:
            conf = decode_parameter_config(entries[name + ".protobuf"])
        except (ValueError, IndexError, UnicodeDecodeError, struct.error) as e:
            raise FileFormatError(f"{where} is not a ParameterConfig ({e})") from e
        dims = [int(d) for d in conf["dims"]] or [int(conf.get("size", 0))]
        size = int(conf.get("size", math.prod(dims)))
        if conf.get("name") != name or size != math.prod(dims) or size <= 0:
            raise FileFormatError(f"{where} describes {conf.get('name')!r} of size {size}, dims "
                                  f"{dims}; expected the config of {name!r} with size = "
                                  "product of dims > 0")
        if name not in entries:
            raise FileFormatError(f"{what}: {fname} has {name + '.protobuf'!r} but no {name!r} "
                                  "value entry")
        values = _read_values(entries[name], f"{what}: {fname} entry {name!r}", tuple(dims))
        pc = ParameterConfig(name=name, dims=dims, initial_std=0.0,
                             is_static=bool(conf.get("is_static", False)))
        out[name] = (pc, values)
    return out, fname


def _read_values(raw: bytes, where: str, shape: tuple[int, ...]) -> np.ndarray:
    if len(raw) < _HEADER.size:
        raise FileFormatError(f"{where}: {len(raw)} bytes, too short for the 16-byte header")
    version, width, count = _HEADER.unpack_from(raw)
    if version != 0 or width != 4:
        raise FileFormatError(f"{where}: unsupported header (version {version}, value size "
                              f"{width}); expected version 0 with float32 values")
    n = math.prod(shape)
    data = len(raw) - _HEADER.size
    if count != n or data != 4 * n:
        raise FileFormatError(f"{where}: shape {shape} needs {n} values "
                              f"(float32, {4 * n} bytes); the header says {count}, {data} bytes "
                              "follow it")
    return np.frombuffer(raw, dtype=np.float32, offset=_HEADER.size).reshape(shape)


def _add(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    import tarfile

    info = tarfile.TarInfo(name)
    info.size = len(data)
    tar.addfile(info, io.BytesIO(data))


def training_topology(cost: Any, parameters: Any, update_equation: Any,
                      extra_layers: Any = None) -> Topology:
    """The topology a trainer (local ``trainer.SGD`` or a Ray ``Cluster``) trains, after
    checking its arguments; ``parameters`` learns the topology's parameters."""
    from sculler.core.expression import LayerOutput
    from sculler.optimizer import Optimizer

    if not isinstance(parameters, Parameters):
        raise TypeError(f"parameters must be created by paddle.parameters.create, got "
                        f"{type(parameters).__name__}")
    if not isinstance(update_equation, Optimizer):
        raise TypeError(f"update_equation must be a paddle.optimizer optimizer, got "
                        f"{type(update_equation).__name__}")
    if isinstance(cost, Topology):
        if extra_layers is not None:
            raise ValueError("give extra_layers to the Topology, not to SGD, when passing "
                             "a Topology as cost")
        topology = cost
    elif isinstance(cost, (LayerOutput, list, tuple)):
        topology = Topology(cost, extra_layers)
    else:
        raise TypeError(f"cost must be a cost layer, a list of them or a Topology, got "
                        f"{type(cost).__name__}")
    parameters.append_topology(topology)
    return topology
