"""``Topology``: a v2 layer expression compiled into a ModelConfig (``paddle.v2.topology``).

The layers reachable from the output (cost) layers and ``extra_layers`` are collected and
built with :class:`ModelBuilder` (pruned to what the outputs need) in the order the program
created them, as PaddlePaddle's ``parse_network`` keeps them: so the layers, the parameters and
the data layers (``input_layer_names``) come in creation order. The data layers' order is the
default feeding order (sample field i feeds the i-th data layer created), whatever order the
network uses them in.
"""

from __future__ import annotations

import copy
import io
from typing import Any, BinaryIO

from sculler.core.builder import ModelBuilder
from sculler.core.expression import LayerOutput
from sculler.core.group_layout import flatten_groups
from sculler.core.model_config import EvaluatorConfig, LayerConfig, ModelConfig
from sculler.data_type import TYPE_OF_KIND, DataType, InputType
from sculler.fileio import FileFormatError, atomic_write, read_tar

__all__ = ["Topology"]


def _as_layers(layers: Any, what: str) -> list[LayerOutput]:
    if layers is None:
        return []
    items = list(layers) if isinstance(layers, (list, tuple)) else [layers]
    for it in items:
        if not isinstance(it, LayerOutput):
            raise TypeError(f"{what} must be layers (LayerOutput), got {type(it).__name__}")
    return items


def _split_evaluators(extra: Any) -> tuple[list[Any], list[EvaluatorConfig]]:
    """``extra_layers`` may hold evaluators (``paddle.evaluator.auc(...)``), as PaddlePaddle v2
    programs pass them: an evaluator already rides on its input layer, so it only has to be
    checked against the topology; the layers are returned apart."""
    if extra is None:
        return [], []
    items = list(extra) if isinstance(extra, (list, tuple)) else [extra]
    return ([it for it in items if not isinstance(it, EvaluatorConfig)],
            [it for it in items if isinstance(it, EvaluatorConfig)])


def _collect(outputs: list[LayerOutput]) -> list[LayerOutput]:
    """Parents-first depth-first order of every layer reachable from ``outputs``."""
    seen: set[int] = set()
    order: list[LayerOutput] = []
    for root in outputs:
        stack: list[tuple[LayerOutput, int]] = [(root, 0)]
        while stack:
            node, k = stack.pop()
            if k == 0 and id(node) in seen:
                continue
            seen.add(id(node))
            if k < len(node.parents):
                stack.append((node, k + 1))
                if id(node.parents[k]) not in seen:
                    stack.append((node.parents[k], 0))
            else:
                order.append(node)
    return order


class Topology:
    """The network of ``layers`` (outputs, usually the cost) plus ``extra_layers`` (outputs
    evaluated too, e.g. a prediction layer carrying an evaluator)."""

    def __init__(self, layers: Any, extra_layers: Any = None):
        self.layers = _as_layers(layers, "Topology layers")
        if not self.layers:
            raise ValueError("Topology needs at least one output layer")
        extra, self.extra_evaluators = _split_evaluators(extra_layers)
        self.extra_layers = _as_layers(extra, "extra_layers (besides evaluators)")
        # creation order (a topological order: a layer's parents exist before it), as
        # PaddlePaddle's parse_network keeps the config's layers, parameters and data layers
        self._nodes = sorted(_collect(self.layers + self.extra_layers), key=lambda n: n.order)
        by_name: dict[str, LayerOutput] = {}
        for node in self._nodes:
            other = by_name.setdefault(node.name, node)
            if other is not node:
                raise ValueError(f"two different layers are named {node.name!r}; layer names "
                                 "must be unique within a topology")
        self._by_name = by_name
        for ev in self.extra_evaluators:
            unreached = [n for n in ev.input_layers if n not in by_name]
            if unreached:
                raise ValueError(f"extra_layers: evaluator {ev.name!r} reads layers {unreached} "
                                 "that the cost and the other extra layers do not reach; pass "
                                 "those layers in extra_layers too")
        self._proto: ModelConfig | None = None
        self.initializers: dict[str, Any] = {}

    @classmethod
    def from_model_config(cls, model_config: ModelConfig,
                          data_types: dict[str, InputType] | None = None) -> Topology:
        """A topology over an already built ModelConfig (a v1 config, a loaded model). Data
        types are ``data_types[name]`` where given, else from the data layers' sizes and
        ``attrs['kind']``/``attrs['seq_type']`` (default dense)."""
        data_types = dict(data_types or {})
        unknown = set(data_types) - set(model_config.input_layer_names)
        if unknown:
            raise ValueError(f"data types given for {sorted(unknown)}, which are not data "
                             f"layers of the model; data layers are "
                             f"{model_config.input_layer_names}")
        self = cls.__new__(cls)
        nodes: dict[str, LayerOutput] = {}
        for lc in model_config.layers:
            dt = data_types.get(lc.name)
            if lc.type == "data" and dt is None:
                kind = lc.attrs.get("kind", "dense")
                if kind not in TYPE_OF_KIND:
                    raise ValueError(f"data layer {lc.name!r}: unknown kind {kind!r}; expected "
                                     f"one of {sorted(TYPE_OF_KIND)}")
                dt = InputType(int(lc.size), int(lc.attrs.get("seq_type", 0)),
                               TYPE_OF_KIND[kind])
            nodes[lc.name] = LayerOutput(lc, [nodes[n] for n in lc.input_layer_names
                                              if n in nodes], data_type=dt)
        self.layers = [nodes[n] for n in model_config.output_layer_names]
        self.extra_layers = []
        self.extra_evaluators = []
        self._nodes = list(nodes.values())
        self._by_name = nodes
        self._proto = model_config
        self.initializers = {}
        return self

    def proto(self) -> ModelConfig:
        """The ModelConfig (built once, pruned to what the outputs need), its layers in the
        order the program created them, as PaddlePaddle's ``parse_network`` lists them."""
        if self._proto is None:
            b = ModelBuilder()
            seen_ev: set[str] = set()
            configs: list[tuple[LayerOutput, LayerConfig]] = []
            for node in self._nodes:  # in creation order
                lc = copy.deepcopy(node.config)
                b.add_layer(lc, node.weight_attrs, node.bias_attr)
                configs.append((node, lc))
                for ev in node.evaluators:
                    if ev.name not in seen_ev:
                        seen_ev.add(ev.name)
                        b.add_evaluator(ev)
            outputs = [n.name for n in self.layers + self.extra_layers]
            data_names = [n.name for n in self._nodes if n.layer_type == "data"]
            self._proto = flatten_groups(b.build(outputs, data_names, prune=True))
            for node, lc in configs:
                for key, init in node.initializers.items():
                    pname = lc.bias_parameter_name if key == "bias" else (
                        lc.inputs[key].input_parameter_name)
                    if pname:
                        self.initializers[pname] = init
        return self._proto

    def summary(self) -> str:
        """A table of the layers in order: name, type, output size, sequence level, parameters
        with their shapes and counts, and the total number of parameters."""
        from sculler.summary import format_summary

        return format_summary(self.proto())

    def __str__(self) -> str:
        return self.summary()

    def get_layer(self, name: str) -> LayerOutput:
        try:
            return self._by_name[name]
        except KeyError:
            raise ValueError(f"no layer named {name!r} in this topology; layers are "
                             f"{list(self._by_name)}") from None

    def get_layer_proto(self, name: str) -> LayerConfig | None:
        """The built LayerConfig of layer ``name``, or None when the topology has none."""
        return next((lc for lc in self.proto().layers if lc.name == name), None)

    def use_sparse_updater(self) -> bool:
        """Whether a parameter asks for sparse updates (``Param(sparse_update=True)``)."""
        return any(p.sparse_update or p.sparse_remote_update for p in self.proto().parameters)

    def data_layers(self) -> dict[str, LayerOutput]:
        """Data layers by name, in feeding order."""
        names = self.proto().input_layer_names
        return {n: self._by_name[n] for n in names}

    def data_type(self) -> list[tuple[str, InputType]]:
        """``(name, InputType)`` of each data layer, in feeding order."""
        out = []
        for name, node in self.data_layers().items():
            dt = node.data_type or InputType(node.size, 0, DataType.Dense)
            out.append((name, dt))
        return out

    def serialize_for_inference(self, stream: BinaryIO | str, parameters: Any = None) -> None:
        """Write the model to ``stream`` (a binary file or a path) for
        :class:`sculler.inference.Inference`: a tar holding
        ``model.json`` (ModelConfig + data types) and, when ``parameters`` is given, their
        Paddle-format tar as ``parameters.tar``. No pickle; writes to a path are atomic."""
        meta = {"model_config": self.proto().to_dict(),
                "data_type": [[n, t.dim, t.seq_type, t.type] for n, t in self.data_type()]}
        import json
        blobs = {"model.json": json.dumps(meta).encode()}
        if parameters is not None:
            buf = io.BytesIO()
            parameters.to_tar(buf)
            blobs["parameters.tar"] = buf.getvalue()

        def write(stream: BinaryIO) -> None:
            import tarfile

            with tarfile.open(fileobj=stream, mode="w") as tar:
                for name, data in blobs.items():
                    info = tarfile.TarInfo(name)
                    info.size = len(data)
                    tar.addfile(info, io.BytesIO(data))

        atomic_write(stream, write, "serialize_for_inference")

    @staticmethod
    def load_for_inference(f: BinaryIO | str) -> tuple[Topology, bytes | None]:
        """Read what :meth:`serialize_for_inference` wrote: the topology and the parameters
        tar bytes (None when none were stored)."""
        entries, fname = read_tar(f, "load_for_inference")
        if "model.json" not in entries or set(entries) - {"model.json", "parameters.tar"}:
            raise FileFormatError(f"load_for_inference: {fname} is not an inference model "
                                  f"file: entries {list(entries)}, expected model.json and "
                                  "optionally parameters.tar (write it with "
                                  "Topology.serialize_for_inference)")
        try:
            import json
            meta = json.loads(entries["model.json"])
            model_config = ModelConfig.from_dict(meta["model_config"])
            data_types = [(n, InputType(int(d), int(s), int(t)))
                          for n, d, s, t in meta["data_type"]]
        except (ValueError, KeyError, TypeError) as e:
            raise FileFormatError(f"load_for_inference: {fname} entry 'model.json' is "
                                  f"damaged ({type(e).__name__}: {e})") from e
        return Topology.from_model_config(model_config, dict(data_types)), entries.get(
            "parameters.tar")
