"""Inference with the v2 API (``paddle.v2.inference``): ``infer(output_layer, parameters,
input)`` runs samples through the network in test mode and returns the outputs."""

from __future__ import annotations

import io
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from sculler.backend import is_gpu_array, to_numpy
from sculler.core.layer import PASS_TEST
from sculler.core.network import Network
from sculler.data_feeder import DataFeeder
from sculler.data_type import DataType
from sculler.fileio import FileFormatError, describe
from sculler.minibatch import ArrayBatch
from sculler.parameters import Parameters
from sculler.topology import Topology
from sculler.validate import positive_int

__all__ = ["Inference", "infer", "load_inference_model"]

FIELDS = ("value", "id", "prob")


class Inference:
    """A test-mode network over ``output_layer`` (one layer or a list) bound to
    ``parameters``; or, with ``fileobj``, the model written by
    ``Topology.serialize_for_inference`` (its stored parameters unless ``parameters`` is
    given). ``fileobj`` may also be what PaddlePaddle's ``serialize_for_inference`` wrote (a
    pickled ModelConfig and data types, see :mod:`sculler.proto.files`); ``parameters`` are then
    required, as in PaddlePaddle, and taken by name and size."""

    def __init__(self, output_layer: Any = None, parameters: Parameters | None = None,
                 fileobj: Any = None, batch_size: int = 1024):
        if isinstance(output_layer, Parameters) and not isinstance(parameters, Parameters):
            # PaddlePaddle's signature is Inference(parameters, output_layer=None, fileobj=None)
            output_layer, parameters = parameters, output_layer
        from_paddle = False
        if fileobj is not None:
            from sculler.proto import files

            from_paddle = files.is_paddle_inference_file(fileobj)
        if from_paddle:
            if not isinstance(parameters, Parameters):
                raise TypeError("Inference(fileobj=...) of a PaddlePaddle inference file needs "
                                "parameters= (a sculler.parameters.Parameters, e.g. "
                                f"Parameters.from_tar of its tar), got {type(parameters).__name__}")
            topo = files.load_paddle_topology(fileobj)
            parameters = files.paddle_parameters_for(topo.proto(), parameters)
        elif fileobj is not None:
            topo, ptar = Topology.load_for_inference(fileobj)
            if parameters is None:
                if ptar is None:
                    raise ValueError("the inference file holds no parameters; pass parameters=")
                try:
                    parameters = Parameters.from_tar(io.BytesIO(ptar))
                except FileFormatError as e:
                    raise FileFormatError(f"Inference: the parameters.tar entry of "
                                          f"{describe(fileobj)} is damaged: {e}") from e
        elif output_layer is None:
            raise ValueError("Inference needs output_layer (with parameters) or fileobj")
        else:
            topo = output_layer if isinstance(output_layer, Topology) else Topology(output_layer)
        if not isinstance(parameters, Parameters):
            raise TypeError(f"parameters must be a sculler.parameters.Parameters, got "
                            f"{type(parameters).__name__}")
        mc = topo.proto()
        missing = [pc.name for pc in mc.parameters if pc.name not in parameters]
        if missing:
            raise ValueError(f"parameters lack {missing}, which the output layers need")
        for pc in mc.parameters:
            have = parameters.get_shape(pc.name)
            if list(have) != list(pc.dims):
                raise ValueError(f"parameter {pc.name!r} has shape {list(have)}, the topology "
                                 f"needs {pc.dims}")
        self.topology = topo
        self.network = Network(mc, parameters.parameter_set)
        self.batch_size = positive_int(batch_size, "Inference(batch_size=...)")

    def iter_infer(self, input: Sequence[Any],  # noqa: A002
                   feeding: Any = None) -> Iterator[list[dict[str, np.ndarray | None]]]:
        """Per chunk of ``batch_size`` samples, as PaddlePaddle's ``forwardTest``: one dict per
        output layer, ``{'value': ..., 'id': ..., 'prob': ...}`` (see :func:`infer`)."""
        input = self._samples(input)  # noqa: A001
        feeder = DataFeeder(self.topology.data_type(), feeding)
        for start in range(0, len(input), self.batch_size):
            outs = self.network.forward(feeder.convert(input[start:start + self.batch_size]),
                                        PASS_TEST)
            yield [_fields_of(arg) for arg in outs]

    def iter_infer_field(self, field: str | Sequence[str],
                         **kwargs: Any) -> Iterator[list[np.ndarray]]:
        """Per chunk and output layer (layers inner), the list of that layer's ``field``
        arrays, as PaddlePaddle's ``iter_infer_field``."""
        fields = _check_fields(field)
        for result in self.iter_infer(**kwargs):
            for layer_index, each in enumerate(result):
                yield [_field(each, f, self.topology.layers[layer_index].name) for f in fields]

    def _samples(self, input: Any) -> Sequence[Any]:  # noqa: A002
        """``input`` as a sequence of samples. For a model with one data layer an array is
        read as its rows, one sample each (the PyTorch/Keras habit), and bare rows as
        one-field samples; with several data layers each sample must be a tuple."""
        data_types = self.topology.data_type()
        names = [n for n, _ in data_types]
        if is_gpu_array(input):  # a CuPy array of samples: read on the host, as the feeder does
            input = to_numpy(input)  # noqa: A001
        is_array = isinstance(input, np.ndarray)
        bare_rows = not is_array and len(input) and isinstance(input[0], np.ndarray)
        if not (is_array or bare_rows):
            return input
        what = "an array" if is_array else "samples that are bare arrays"
        if len(names) != 1:
            raise TypeError(
                f"infer(input=...) got {what}, but the model reads {len(names)} data layers "
                f"{names}: pass a list of samples, one tuple per sample with one field per "
                f"data layer in that order, e.g. [(row_of_{names[0]}, ...), ...], or "
                "sculler.minibatch.ArrayBatch(column_0, column_1, ...)")
        if not is_array:
            return [(row,) for row in input]
        tp = data_types[0][1]
        if input.ndim == 1 and tp.type == DataType.Dense and tp.seq_type == 0 and tp.dim > 1:
            raise ValueError(
                f"infer(input=...) got a 1-D array of {input.shape[0]} values for data layer "
                f"{names[0]!r} (vectors of {tp.dim}): pass a 2-D array, one row a sample "
                "(x[None, :] for one sample)")
        return ArrayBatch(input)

    def infer(self, input: Sequence[Any], feeding: Any = None,  # noqa: A002
              field: str | Sequence[str] = "value",
              flatten_result: bool = True) -> np.ndarray | list:
        """The outputs for ``input``, laid out as PaddlePaddle v2 lays them out: per field, the
        arrays of every output layer in order; ``flatten_result`` concatenates them along rows
        (so several output layers come back as ONE array, layer after layer, as in v2; their
        widths must agree); without it each field is the list of per-layer arrays. One field
        gives that field's result alone, several a list in the order of ``field``; no samples
        give ``[]``."""
        fields = _check_fields(field)
        if not isinstance(flatten_result, bool):
            raise TypeError(f"infer: flatten_result must be a bool, got {flatten_result!r}")
        chunks = list(self.iter_infer(input, feeding))
        if not chunks:
            return []  # no samples: PaddlePaddle v2 returns an empty list
        names = [layer.name for layer in self.topology.layers]
        # PaddlePaddle feeds all of input as one batch; chunks are joined back into that batch
        per_field = [[_join([_field(c[k], f, names[k]) for c in chunks])
                      for k in range(len(names))] for f in fields]
        if flatten_result:
            per_field = [_flatten(arrays, names, f) for arrays, f in zip(per_field, fields)]
        return per_field[0] if len(per_field) == 1 else per_field


def _check_fields(field: Any) -> list[str]:
    fields = [field] if isinstance(field, str) else list(field)
    for f in fields:
        if f not in FIELDS:
            raise ValueError(f"infer: field must be one of {FIELDS} or a list of them, got {f!r}")
    if not fields:
        raise ValueError(f"infer: field is an empty list; give one of {FIELDS} or several")
    return fields


def _fields_of(arg: Any) -> dict[str, np.ndarray | None]:
    """An output Argument as PaddlePaddle's forwardTest dict. Sculler keeps no separate
    probability slot: 'prob' is the value (the scores of max_id and beam_search live there)."""
    value = None if arg.value is None else to_numpy(arg.value).copy()
    ids = None if arg.ids is None else to_numpy(arg.ids).copy()
    return {"value": value, "id": ids, "prob": value}


def _field(result: dict[str, np.ndarray | None], field: str, layer: str) -> np.ndarray:
    """One field of one output; 'id' of a layer without ids is the arg-max of its value."""
    out = result[field]
    if out is None and field == "id" and result["value"] is not None:
        out = result["value"].argmax(axis=1)
    if out is None and field == "id":
        raise ValueError(f"infer: output layer {layer!r} has neither ids nor a value")
    if out is None:
        raise ValueError(f"infer: output layer {layer!r} has no {field!r} to return (it "
                         "outputs ids only); use field='id'")
    return out


def _join(arrays: list[np.ndarray]) -> np.ndarray:
    return arrays[0] if len(arrays) == 1 else np.concatenate(arrays)


def _flatten(arrays: list[np.ndarray], names: list[str], field: str) -> np.ndarray:
    """PaddlePaddle's ``numpy.concatenate`` of the output layers' arrays of one field."""
    tails = {a.shape[1:] for a in arrays}
    if len(tails) > 1:
        raise ValueError(f"infer: the {field!r} outputs of layers {names} have shapes "
                         f"{[a.shape for a in arrays]}; flatten_result=True concatenates them "
                         "along rows (as PaddlePaddle v2 does), which needs equal widths: pass "
                         "flatten_result=False to get one array per layer")
    return _join(arrays)


def infer(output_layer: Any, parameters: Parameters, input: Sequence[Any],  # noqa: A002
          feeding: Any = None, field: str | Sequence[str] = "value",
          flatten_result: bool = True) -> Any:
    """``paddle.infer``: outputs of ``output_layer`` for the samples ``input``: a list of
    tuples (one field per data layer), or for a model with one data layer an array whose rows
    are the samples.

    ``field`` is 'value' (the output), 'id' (the layer's ids, or the arg-max of its value),
    'prob' (the value: max_id's and beam_search's scores) or a list of them; results are laid
    out as :meth:`Inference.infer` says (PaddlePaddle v2's layout).
    """
    return Inference(output_layer, parameters).infer(input, feeding, field, flatten_result)


def load_inference_model(f: Any, input_types: dict[str, Any] | None = None,
                         batch_size: int = 1024) -> Inference:
    """An :class:`Inference` over a merged model file (config plus parameters, as
    PaddlePaddle's ``paddle.utils.merge_model.merge_v2_model`` writes it). A merged model holds
    no data types: data layers are dense vectors of their size unless ``input_types`` (name ->
    ``paddle.data_type.*``) says otherwise."""
    from sculler.proto import files

    model_config, parameters = files.read_merged_model(f)
    types = files.merged_model_input_types(model_config, input_types)
    return Inference(Topology.from_model_config(model_config, types), parameters,
                     batch_size=batch_size)
