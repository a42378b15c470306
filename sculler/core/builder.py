"""From layer descriptions to a complete ModelConfig: order, sizes and parameter configs.

Every front end (v1 ``Layer(...)``, the v2 layer expressions, the gradient-check harness) adds
``LayerConfig``s here; :meth:`ModelBuilder.build` orders them topologically (rejecting cycles
and dangling inputs), asks each layer class for its output size and parameter shapes, and
creates the ``ParameterConfig``s, one per name (a shared name must have one shape).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from sculler.core.layer import get_layer_class
from sculler.core.model_config import (
    PARAMETER_FIELDS,
    EvaluatorConfig,
    LayerConfig,
    ModelConfig,
    ParameterConfig,
)

ParamAttrs = Mapping[str, Any]


def topological_order(layers: Iterable[LayerConfig]) -> list[LayerConfig]:
    """Layers ordered so every layer comes after its inputs.

    Raises ValueError naming the layer and the missing input for a dangling input, and the
    layers on the loop for a cycle.
    """
    by_name: dict[str, LayerConfig] = {}
    for lc in layers:
        if lc.name in by_name:
            raise ValueError(f"two layers are named {lc.name!r}; layer names must be unique")
        by_name[lc.name] = lc
    order: list[LayerConfig] = []
    state: dict[str, int] = {}  # 1 = on the current path, 2 = done
    for root in by_name:
        if state.get(root) == 2:
            continue
        stack: list[tuple[str, int]] = [(root, 0)]
        path: list[str] = []
        while stack:
            name, k = stack.pop()
            if k == 0:
                state[name] = 1
                path.append(name)
            inputs = by_name[name].input_layer_names
            if k < len(inputs):
                stack.append((name, k + 1))
                child = inputs[k]
                if child not in by_name:
                    raise ValueError(
                        f"layer {name!r} takes input {child!r}, which is not defined in the model"
                    )
                if state.get(child) == 1:
                    loop = path[path.index(child):] + [child]
                    raise ValueError("the layers form a cycle: " + " -> ".join(reversed(loop)))
                if state.get(child) is None:
                    stack.append((child, 0))
            else:
                state[name] = 2
                path.pop()
                order.append(by_name[name])
    return order


def make_parameter(name: str, dims: Iterable[int], attrs: ParamAttrs | None) -> ParameterConfig:
    attrs = dict(attrs or {})
    unknown = set(attrs) - PARAMETER_FIELDS - {"name"}
    if unknown:
        raise TypeError(f"parameter {name!r}: unknown attributes {sorted(unknown)}")
    attrs.pop("name", None)
    attrs.pop("dims", None)
    return ParameterConfig(name=name, dims=[int(d) for d in dims], **attrs)


class ModelBuilder:
    """Collects layers (forward references allowed) and builds the :class:`ModelConfig`."""

    def __init__(self) -> None:
        self._layers: list[LayerConfig] = []
        self._weight_attrs: dict[str, list[ParamAttrs | None]] = {}
        self._bias_attrs: dict[str, Any] = {}
        self.evaluators: list[EvaluatorConfig] = []

    def add_layer(
        self,
        config: LayerConfig,
        weight_attrs: list[ParamAttrs | None] | None = None,
        bias_attr: bool | ParamAttrs | None = None,
    ) -> LayerConfig:
        """Add a layer. ``weight_attrs[i]`` customises input ``i``'s weight (name, initial_std,
        learning_rate, ...); ``bias_attr`` is False (no bias), True/None (the layer type's
        default) or a dict of bias attributes."""
        get_layer_class(config.type)
        self._layers.append(config)
        self._weight_attrs[config.name] = list(weight_attrs or [])
        self._bias_attrs[config.name] = bias_attr
        return config

    def add_evaluator(self, config: EvaluatorConfig) -> None:
        self.evaluators.append(config)

    def build(
        self,
        output_layer_names: list[str],
        input_layer_names: list[str] | None = None,
        prune: bool = False,
    ) -> ModelConfig:
        """Resolve sizes and parameters; with ``prune`` keep only what the outputs need."""
        layers = topological_order(self._layers)
        if prune:
            layers = _reachable(layers, output_layer_names)
        resolved: dict[str, LayerConfig] = {}
        params: dict[str, tuple[ParameterConfig, str]] = {}
        for lc in layers:
            inputs = [resolved[n] for n in lc.input_layer_names]
            for pc in self._resolve_layer(lc, inputs):
                seen = params.get(pc.name)
                if seen is None:
                    params[pc.name] = (pc, lc.name)
                elif seen[0].dims != pc.dims:
                    raise ValueError(
                        f"parameter {pc.name!r} is used by layer {seen[1]!r} with shape "
                        f"{seen[0].dims} and by layer {lc.name!r} with shape {pc.dims}"
                    )
            resolved[lc.name] = lc
        for name in output_layer_names:
            if name not in resolved:
                raise ValueError(f"output layer {name!r} is not defined")
        if input_layer_names is None:
            input_layer_names = [lc.name for lc in layers if lc.type == "data"]
        return ModelConfig(
            layers=layers,
            parameters=[pc for pc, _ in params.values()],
            input_layer_names=list(input_layer_names),
            output_layer_names=list(output_layer_names),
            evaluators=[e for e in self.evaluators if all(n in resolved for n in e.input_layers)],
        )

    def _resolve_layer(self, lc: LayerConfig, inputs: list[LayerConfig]) -> list[ParameterConfig]:
        cls = get_layer_class(lc.type)
        cls.check_config(lc, inputs)
        lc.size = int(cls.infer_size(lc, inputs))
        weight_attrs = self._weight_attrs.get(lc.name, [])
        defaults = cls.weight_defaults(lc, inputs)
        written = cls.paddle_dims(lc, inputs)
        out = []
        for i, dims in cls.weight_dims(lc, inputs).items():
            attrs = dict(defaults.get(i, {}))
            attrs.update((weight_attrs[i] or {}) if i < len(weight_attrs) else {})
            ic = lc.inputs[i]
            name = ic.input_parameter_name or attrs.get("name") or f"_{lc.name}.w{i}"
            ic.input_parameter_name = name
            out.append(make_parameter(name, dims, attrs))
            if i in written:
                out[-1].paddle_dims = [int(d) for d in written[i]]
        bias = self._bias_attrs.get(lc.name)
        use_bias = cls.default_bias if bias is None or bias is True else bias is not False
        if bias is True:
            use_bias = True
        if use_bias:
            attrs = {"initial_std": 0.0, **(bias if isinstance(bias, Mapping) else {})}
            name = lc.bias_parameter_name or attrs.get("name") or f"_{lc.name}.wbias"
            lc.bias_parameter_name = name
            out.append(make_parameter(name, cls.bias_dims(lc, inputs), attrs))
            if "bias" in written:
                out[-1].paddle_dims = [int(d) for d in written["bias"]]
        else:
            lc.bias_parameter_name = None
        out.extend(cls.extra_parameters(lc, inputs))
        return out


def _reachable(layers: list[LayerConfig], outputs: list[str]) -> list[LayerConfig]:
    by_name = {lc.name: lc for lc in layers}
    keep: set[str] = set()
    todo = list(outputs)
    while todo:
        n = todo.pop()
        if n in keep or n not in by_name:
            continue
        keep.add(n)
        todo.extend(by_name[n].input_layer_names)
    return [lc for lc in layers if lc.name in keep]
