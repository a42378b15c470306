"""PaddlePaddle's inference model files: read into Sculler, and the merged model written.

Two layouts, as PaddlePaddle v2 (release 0.11) writes them:

* ``Topology.serialize_for_inference(stream)``: a pickle (protocol 2, Python 2's cPickle) of
  ``{'protobin': <paddle.ModelConfig bytes>, 'data_type': [(name, InputType), ...]}``; the
  parameters travel separately (a parameter tar). Read with :func:`load_paddle_topology`, or
  simply ``paddle.inference.Inference(parameters=..., fileobj=...)``. Only the one class such a
  file names (``paddle.trainer.PyDataProvider2.InputType``) is accepted from the pickle;
  anything else is refused, so a foreign pickle runs no code.
* ``paddle.utils.merge_model.merge_v2_model``: ``int64`` length of the ModelConfig bytes
  (little-endian), the bytes, then every parameter in the ModelConfig's order as PaddlePaddle's
  ``Parameters.serialize`` writes it (16-byte header ``uint32 0, uint32 4, uint64 count``, then
  ``count`` float32 values). Read with ``sculler.inference.load_inference_model``; written by
  :func:`write_merged_model` (and ``sculler.utils.merge_model.merge_v2_model``).

A merged model holds no data types (PaddlePaddle's C API is fed by the caller); data layers
default to dense vectors of their size, and ``input_types`` names the others.
"""

from __future__ import annotations

import io
import pickle
import struct
from typing import Any, BinaryIO

import numpy as np

from sculler.core.model_config import ModelConfig
from sculler.data_type import DataType, InputType
from sculler.fileio import FileFormatError, _read_all, atomic_write, binary, is_path
from sculler.parameters import _HEADER, Parameters, _read_values
from sculler.topology import Topology

__all__ = ["load_paddle_topology", "is_paddle_inference_file",
           "read_merged_model", "write_merged_model", "paddle_parameters_for",
           "merged_model_input_types"]

_LENGTH = struct.Struct("<q")
_PICKLED_INPUT_TYPE = ("paddle.trainer.PyDataProvider2", "InputType")


class _PickledInputType:
    """What the pickle's ``InputType`` objects load as (their three slots)."""

    __slots__ = ("dim", "seq_type", "type")


class _InferenceUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        if (module, name) == _PICKLED_INPUT_TYPE:
            return _PickledInputType
        raise pickle.UnpicklingError(f"refusing {module}.{name}: a PaddlePaddle inference file "
                                     "pickles only paddle.trainer.PyDataProvider2.InputType")


def is_paddle_inference_file(f: Any) -> bool:
    """Whether ``f`` (a path or a binary stream, left where it was: peeked at, or read and
    sought back) starts like a pickle, as PaddlePaddle's ``serialize_for_inference`` files do
    (Sculler's are tars)."""
    if is_path(f):
        with open(f, "rb") as fh:
            return fh.read(1) == b"\x80"
    stream = binary(f)
    peek = getattr(stream, "peek", None)  # buffered readers, pipes included
    if peek is not None:
        return peek(1)[:1] == b"\x80"
    pos = stream.tell()
    head = stream.read(1)
    stream.seek(pos)
    return head == b"\x80"


def load_paddle_topology(f: Any) -> Topology:
    """The Topology of a file PaddlePaddle's ``Topology.serialize_for_inference`` wrote
    (a path or a binary stream), with its data types."""
    data, fname = _read_all(f, "load_paddle_topology")
    try:
        meta = _InferenceUnpickler(io.BytesIO(data), encoding="latin1").load()
        protobin, data_types = meta["protobin"], meta["data_type"]
        if isinstance(protobin, str):  # Python 2's str, read back as latin-1 text
            protobin = protobin.encode("latin1")
        types = {str(name): InputType(int(t.dim), int(t.seq_type), int(t.type))
                 for name, t in data_types}
    except (pickle.UnpicklingError, EOFError, KeyError, TypeError, ValueError,
            AttributeError) as e:
        raise FileFormatError(f"load_paddle_topology: {fname} is not a PaddlePaddle inference "
                              f"file ({type(e).__name__}: {e})") from e
    from sculler.proto.convert import from_proto

    return Topology.from_model_config(from_proto(protobin), types)


def paddle_parameters_for(model_config: ModelConfig, parameters: Parameters) -> Parameters:
    """``parameters`` laid out as ``model_config`` needs them: each value taken flat by name
    (PaddlePaddle's inference copies ``parameters.get(name).flatten()`` the same way), so
    PaddlePaddle's shapes (an empty shape, ``[F, 1]`` for a conv bias) load into Sculler's."""
    out = Parameters()
    for pc in model_config.parameters:
        if pc.name not in parameters:
            raise ValueError(f"parameters lack {pc.name!r}, which the model needs")
        value = np.asarray(parameters.get(pc.name)).reshape(-1)
        if value.size != pc.size:
            raise ValueError(f"parameter {pc.name!r} has {value.size} values, the model needs "
                             f"{pc.dims} ({pc.size})")
        out.parameter_set.create(pc, owner="PaddlePaddle model file")
        out.set(pc.name, value)
    return out


def read_merged_model(f: Any) -> tuple[ModelConfig, Parameters]:
    """The ModelConfig and parameters (Sculler's shapes) of a merged model file (a path or a
    binary stream) written by PaddlePaddle's ``merge_v2_model``."""
    data, fname = _read_all(f, "read_merged_model")
    if len(data) < _LENGTH.size:
        raise FileFormatError(f"read_merged_model: {fname} has {len(data)} bytes, too short "
                              "for the 8-byte config length")
    (n,) = _LENGTH.unpack_from(data)
    if not 0 < n <= len(data) - _LENGTH.size:
        raise FileFormatError(f"read_merged_model: {fname} says its ModelConfig has {n} "
                              f"bytes, but {len(data) - _LENGTH.size} follow the length")
    from sculler.proto.convert import from_proto

    try:
        mc = from_proto(data[_LENGTH.size:_LENGTH.size + n])
    except ValueError as e:
        raise FileFormatError(f"read_merged_model: {fname}: {e}") from e
    pos, params = _LENGTH.size + n, Parameters()
    for pc in mc.parameters:
        end = pos + _HEADER.size + 4 * pc.size
        if end > len(data):
            raise FileFormatError(f"read_merged_model: {fname} ends inside parameter "
                                  f"{pc.name!r} ({len(data)} bytes, it needs {end})")
        values = _read_values(data[pos:end], f"read_merged_model: {fname} parameter "
                              f"{pc.name!r}", tuple(pc.dims))
        params.parameter_set.create(pc, owner="merged model")
        params.set(pc.name, values)
        pos = end
    if pos != len(data):
        raise FileFormatError(f"read_merged_model: {fname} has {len(data) - pos} bytes after "
                              "the last parameter")
    return mc, params


def merged_model_input_types(model_config: ModelConfig,
                             input_types: dict[str, InputType] | None) -> dict[str, InputType]:
    """Data types of a merged model's data layers: dense vectors of their size unless
    ``input_types`` (name -> ``paddle.data_type.*``) says otherwise."""
    types = {name: InputType(model_config.layer(name).size, 0, DataType.Dense)
             for name in model_config.input_layer_names}
    for name, t in (input_types or {}).items():
        if name not in types:
            raise ValueError(f"load_inference_model: input_types names {name!r}, which is not "
                             f"a data layer of the model; data layers are {list(types)}")
        if not isinstance(t, InputType):
            raise TypeError(f"load_inference_model: input_types[{name!r}] must be a "
                            f"paddle.data_type (InputType), got {type(t).__name__}")
        types[name] = t
    return types


def write_merged_model(output_layer: Any, parameters: Parameters, f: BinaryIO | str) -> None:
    """Write ``output_layer``'s network (a layer, a list of layers or a Topology) with
    ``parameters`` as one merged model file, byte for byte as PaddlePaddle's
    ``merge_v2_model`` lays it out (atomic for a path)."""
    from sculler.proto.convert import to_proto

    topo = output_layer if isinstance(output_layer, Topology) else Topology(output_layer)
    message = to_proto(topo.proto())
    conf = message.SerializeToString()
    missing = [p.name for p in message.parameters if p.name not in parameters]
    if missing:
        raise ValueError(f"write_merged_model: parameters lack {missing}, which the network "
                         "needs")

    def write(stream: BinaryIO) -> None:
        stream.write(_LENGTH.pack(len(conf)))
        stream.write(conf)
        for p in message.parameters:
            parameters.serialize(p.name, stream)

    atomic_write(f, write, "write_merged_model")
