"""ONNX export of a v2 topology's inference part: ``sculler.onnx.export``.

The graph computes what ``paddle.infer`` computes (test mode): graph inputs are named after the
data layers (dense vectors: float32 ``(N, dim)``; integer ids: int64 ``(N,)``), outputs after
the output layers (float32 ``(N, size)``), parameters become initializers.

Exported: ``fc``, ``embedding``/``table``, ``concat``, ``addto``, ``mixed`` with the
projections ``full_matrix``, ``trans_full_matrix``, ``table``, ``identity`` (with offset),
``dotmul``, ``scaling`` and the ``dotmul_operator``, ``exconv`` (2-D convolution with groups,
dilation, padding, several inputs), ``pool`` (max/average, ceil and exclude modes),
``batch_norm`` (moving statistics), every activation, and dropout (test mode: Paddle's
non-inverted scaling by ``1 - drop_rate``).

Sequences, ONE at a time: a ``dense_vector_sequence`` / ``integer_value_sequence`` data layer is
an input of shape ``(T, dim)`` / ``(T,)`` (``T`` dynamic, at least 1) holding the rows of one
sample; the row-wise layers above work on it unchanged, ``sequence_softmax`` is a softmax over
the rows, ``lstmemory``/``grumemory``/``recurrent`` become ONNX ``LSTM``/``GRU``/``RNN`` (see
:mod:`sculler.onnx.sequence`) and whole-sequence ``last_seq``/``first_seq``/``pooling`` give
``(1, D)``, after which the network is non-sequence again. Anything else (nested sequences,
stride pooling, the other sequence layers, sparse inputs, ...) raises
:class:`UnsupportedLayerError` listing every layer that cannot be expressed.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from sculler.onnx.convert import Context, convert, refusal, sequence_levels
from sculler.onnx.graph import GraphBuilder

__all__ = ["DEFAULT_OPSET", "UnsupportedLayerError", "export"]

DEFAULT_OPSET = 17
MIN_OPSET = 13
# The name of the first dimension: a batch of vectors, or the rows of the one sequence.
ROWS = {0: "batch", 1: "T"}


class UnsupportedLayerError(NotImplementedError):
    """Layers of the topology that ONNX export cannot express (named in the message)."""


def export(output_layer_or_layers: Any, parameters: Any, path: str | os.PathLike,
           opset: int | None = None) -> Any:
    """Write the ONNX model of the network computing ``output_layer_or_layers`` (a layer or a
    list) with ``parameters`` to ``path`` (atomically); returns the ``onnx.ModelProto``.

    Raises:
        UnsupportedLayerError: naming each layer (and data layer) that cannot be exported.
        ValueError: ``opset`` below 13.
    """
    from sculler.fileio import atomic_write
    from sculler.topology import Topology

    opset = DEFAULT_OPSET if opset is None else int(opset)
    if opset < MIN_OPSET:
        raise ValueError(f"onnx export: opset {opset} is too old; the graph uses opset "
                         f"{MIN_OPSET} operators (Softmax on the last axis, Pad/Clip inputs)")
    topology = Topology(output_layer_or_layers)
    model = topology.proto()
    layers = {lc.name: lc for lc in model.layers}
    data_types = dict(topology.data_type())
    levels = sequence_levels(model.layers, {n: dt.seq_type for n, dt in data_types.items()})
    problems = []
    for lc in model.layers:
        if lc.type == "data":
            dt = data_types[lc.name]
            if dt.seq_type == 2 or dt.kind not in ("dense", "ids"):
                problems.append(f"{lc.name!r} (data layer, {dt}): only dense vectors and "
                                "integer ids, or single-level sequences of them, are exported")
        else:
            why = refusal(lc, levels)
            if why:
                problems.append(why)
    if problems:
        raise UnsupportedLayerError("cannot export to ONNX: " + "; ".join(problems))

    g = GraphBuilder()
    onnx = g.onnx

    def weight(name: str) -> np.ndarray:
        return np.asarray(parameters.get(name), dtype=np.float32)

    ctx = Context(layers, weight, opset)
    values: dict[str, str] = {}
    graph_inputs = []
    outputs = [layer.name for layer in topology.layers]
    for lc in model.layers:
        if lc.type == "data":
            dt = data_types[lc.name]
            name = g.reserve(lc.name)
            rows = ROWS[levels[lc.name]]
            if dt.kind == "ids":
                graph_inputs.append(onnx.helper.make_tensor_value_info(
                    name, onnx.TensorProto.INT64, [rows]))
                ctx.kind[name] = "ids"
            else:
                graph_inputs.append(onnx.helper.make_tensor_value_info(
                    name, onnx.TensorProto.FLOAT, [rows, dt.dim]))
                ctx.kind[name] = "dense"
            values[lc.name] = name
            continue
        out_name = g.reserve(lc.name) if lc.name in outputs else None
        try:
            values[lc.name] = convert(g, lc, [values[n] for n in lc.input_layer_names], ctx,
                                      out_name)
        except NotImplementedError as exc:
            raise UnsupportedLayerError(f"cannot export to ONNX: {exc}") from exc
    graph_outputs = []
    for name in outputs:
        if layers[name].type == "data":
            raise UnsupportedLayerError(f"cannot export to ONNX: output {name!r} is a data "
                                        "layer")
        graph_outputs.append(onnx.helper.make_tensor_value_info(
            name, onnx.TensorProto.FLOAT, [ROWS[levels[name]], layers[name].size]))
    graph = onnx.helper.make_graph(g.nodes, "sculler", graph_inputs, graph_outputs,
                                   g.initializers)
    opset_imports = [onnx.helper.make_opsetid("", opset)]
    # The oldest IR version that can hold the opset, not the installed onnx's newest: a
    # runtime older than onnx (onnxruntime refuses an IR version it does not know) still loads it.
    proto = onnx.helper.make_model(
        graph, opset_imports=opset_imports, producer_name="sculler",
        ir_version=onnx.helper.find_min_ir_version_for(opset_imports))
    onnx.checker.check_model(proto)
    atomic_write(os.fspath(path), lambda f: f.write(proto.SerializeToString()))
    return proto
