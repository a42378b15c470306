"""Inference with the v2 API (``paddle.v2.inference``): ``infer(output_layer, parameters,
input)`` runs samples through the network in test mode and returns the outputs."""

from __future__ import annotations

import io
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from sculler.backend import to_numpy
from sculler.core.layer import PASS_TEST
from sculler.core.network import Network
from sculler.data_feeder import DataFeeder
from sculler.fileio import FileFormatError, describe
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

    def iter_infer(self, input: Sequence[Any], feeding: Any = None,  # noqa: A002
                   field: str | list[str] = "value") -> Iterator[list[np.ndarray]]:
        """Per chunk of ``batch_size`` samples: the list of requested arrays (each output
        layer's fields, in order)."""
        fields = [field] if isinstance(field, str) else list(field)
        for f in fields:
            if f not in FIELDS:
                raise ValueError(f"field must be one of {FIELDS} or a list of them, got {f!r}")
        feeder = DataFeeder(self.topology.data_type(), feeding)
        for start in range(0, len(input), self.batch_size):
            outs = self.network.forward(feeder.convert(input[start:start + self.batch_size]),
                                        PASS_TEST)
            res = []
            for arg in outs:
                for f in fields:
                    if f == "id":
                        res.append(to_numpy(arg.ids).copy() if arg.ids is not None else
                                   to_numpy(arg.value).argmax(axis=1))
                    else:
                        if arg.value is None:
                            raise ValueError(f"output has no value to return as field {f!r}; "
                                             "use field='id'")
                        res.append(to_numpy(arg.value).copy())
            yield res

    def infer(self, input: Sequence[Any], feeding: Any = None,  # noqa: A002
              field: str | list[str] = "value") -> np.ndarray | list[np.ndarray]:
        """All outputs concatenated over the input; one array when one output/field."""
        chunks = list(self.iter_infer(input, feeding, field))
        if not chunks:
            raise ValueError("infer got no input samples")
        out = [np.concatenate([c[i] for c in chunks]) for i in range(len(chunks[0]))]
        return out[0] if len(out) == 1 else out


def infer(output_layer: Any, parameters: Parameters, input: Sequence[Any],  # noqa: A002
          feeding: Any = None, field: str | list[str] = "value") -> Any:
    """``paddle.infer``: outputs of ``output_layer`` for the samples ``input``.

    ``field`` is 'value' (the output), 'id' (arg-max ids, or the layer's ids), 'prob' (the
    value) or a list; several outputs/fields come back as a list in order.
    """
    return Inference(output_layer, parameters).infer(input, feeding, field)


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
