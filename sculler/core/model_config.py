"""The model description every front end produces: plain dataclasses with a JSON round trip.

v1 configs (``Layer(...)``), the v2 API (``layer.fc(...)``) and the gradient-check harness all
build a :class:`ModelConfig`; :class:`~sculler.core.network.Network` builds layers from it.
Layer-specific settings (image height, a cost's ``coeff``, a custom layer's ``k``) live in
``attrs`` so that adding a layer never touches this file.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import asdict, dataclass, field, fields
from typing import Any

_PARAMETER_NUMBERS = ("initial_mean", "initial_std", "initial_min", "initial_max",
                      "learning_rate", "momentum", "decay_rate", "decay_rate_l1",
                      "gradient_clipping_threshold")


@dataclass
class ParameterConfig:
    """A learnable parameter: shape, initializer and update settings.

    ``initial_std=None`` means Paddle's smart default ``1/sqrt(dims[0])``; ``initial_strategy``
    is ``"normal"`` (mean, std) or ``"uniform"`` (``initial_min``..``initial_max``).
    ``None`` update settings fall back to the optimizer's.
    """

    name: str
    dims: list[int]
    initial_mean: float = 0.0
    initial_std: float | None = None
    initial_strategy: str = "normal"
    initial_min: float | None = None
    initial_max: float | None = None
    learning_rate: float = 1.0
    momentum: float | None = None
    decay_rate: float | None = None
    decay_rate_l1: float | None = None
    gradient_clipping_threshold: float | None = None
    is_static: bool = False
    sparse_update: bool = False
    sparse_remote_update: bool = False
    # the dims PaddlePaddle's config writes when they are not the array shape ``dims`` (conv
    # weights: none); only the protobuf form of the ModelConfig uses them
    paddle_dims: list[int] | None = None

    def __post_init__(self) -> None:
        """Numeric settings must be finite numbers (or None): a string or NaN here would
        only fail, far from the config line, when the parameter is initialised or updated."""
        for key in _PARAMETER_NUMBERS:
            value = getattr(self, key)
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, numbers.Real):
                raise TypeError(f"parameter {self.name!r}: {key} must be a number, got "
                                f"{type(value).__name__} {value!r}")
            if not math.isfinite(value):
                raise ValueError(f"parameter {self.name!r}: {key} must be finite, got {value}")

    @property
    def size(self) -> int:
        n = 1
        for d in self.dims:
            n *= int(d)
        return n


@dataclass
class InputConfig:
    """One input of a layer: the producing layer and, if the input has a weight, its name."""

    input_layer_name: str
    input_parameter_name: str | None = None
    attrs: dict[str, Any] = field(default_factory=dict)


@dataclass
class LayerConfig:
    name: str
    type: str
    size: int = 0
    active_type: str = "linear"
    inputs: list[InputConfig] = field(default_factory=list)
    bias_parameter_name: str | None = None
    drop_rate: float = 0.0
    attrs: dict[str, Any] = field(default_factory=dict)

    @property
    def input_layer_names(self) -> list[str]:
        return [i.input_layer_name for i in self.inputs]


@dataclass
class EvaluatorConfig:
    """An evaluator (metric) over some layers' outputs, e.g. ``classification_error``."""

    name: str
    type: str
    input_layers: list[str]
    attrs: dict[str, Any] = field(default_factory=dict)


@dataclass
class LinkConfig:
    """A layer of the outer model seen inside a recurrent group (an in-link) or a group layer
    seen outside (an out-link): PaddlePaddle's ``LinkConfig``."""

    layer_name: str
    link_name: str
    has_subseq: bool = False


@dataclass
class MemoryConfig:
    """A memory of a recurrent group: ``link_name`` at step t reads ``layer_name`` at step t-1;
    at step 0 it reads ``boot_layer_name`` (or a bias, a constant id, or zeros)."""

    layer_name: str
    link_name: str
    boot_layer_name: str | None = None
    boot_bias_parameter_name: str | None = None
    boot_bias_active_type: str | None = None
    boot_with_const_id: int | None = None
    is_sequence: bool = False


@dataclass
class GeneratorConfig:
    """How a recurrent group generates (beam search) instead of reading a target sequence."""

    max_num_frames: int
    eos_layer_name: str
    num_results_per_sample: int = 1
    beam_size: int = 1
    log_prob: bool = True


@dataclass
class SubModelConfig:
    """A named part of the model; a recurrent layer group is one (PaddlePaddle's
    ``SubModelConfig``): its step layers are listed in ``layer_names`` (named
    ``<layer>@<group>``), joined to the outer model by in/out links and memories."""

    name: str
    layer_names: list[str] = field(default_factory=list)
    input_layer_names: list[str] = field(default_factory=list)
    output_layer_names: list[str] = field(default_factory=list)
    evaluator_names: list[str] = field(default_factory=list)
    is_recurrent_layer_group: bool = False
    reversed: bool = False
    memories: list[MemoryConfig] = field(default_factory=list)
    in_links: list[LinkConfig] = field(default_factory=list)
    out_links: list[LinkConfig] = field(default_factory=list)
    generator: GeneratorConfig | None = None
    target_inlinkid: int | None = None

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> SubModelConfig:
        gen = d.get("generator")
        return cls(**{
            **d,
            "memories": [MemoryConfig(**m) for m in d.get("memories", [])],
            "in_links": [LinkConfig(**k) for k in d.get("in_links", [])],
            "out_links": [LinkConfig(**k) for k in d.get("out_links", [])],
            "generator": GeneratorConfig(**gen) if gen is not None else None,
        })


@dataclass
class ModelConfig:
    layers: list[LayerConfig] = field(default_factory=list)
    parameters: list[ParameterConfig] = field(default_factory=list)
    input_layer_names: list[str] = field(default_factory=list)
    output_layer_names: list[str] = field(default_factory=list)
    evaluators: list[EvaluatorConfig] = field(default_factory=list)
    sub_models: list[SubModelConfig] = field(default_factory=list)
    type: str = "nn"

    def layer(self, name: str) -> LayerConfig:
        for lc in self.layers:
            if lc.name == name:
                return lc
        raise KeyError(f"no layer named {name!r}; layers are {[lc.name for lc in self.layers]}")

    def parameter(self, name: str) -> ParameterConfig:
        for pc in self.parameters:
            if pc.name == name:
                return pc
        raise KeyError(f"no parameter named {name!r}")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def to_json(self, indent: int | None = 1) -> str:
        import json
        return json.dumps(self.to_dict(), indent=indent)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ModelConfig:
        layers = [
            LayerConfig(**{**lc, "inputs": [InputConfig(**i) for i in lc["inputs"]]})
            for lc in d.get("layers", [])
        ]
        return cls(
            layers=layers,
            parameters=[ParameterConfig(**p) for p in d.get("parameters", [])],
            input_layer_names=list(d.get("input_layer_names", [])),
            output_layer_names=list(d.get("output_layer_names", [])),
            evaluators=[EvaluatorConfig(**e) for e in d.get("evaluators", [])],
            sub_models=[SubModelConfig.from_dict(m) for m in d.get("sub_models", [])],
            type=d.get("type", "nn"),
        )

    @classmethod
    def from_json(cls, text: str) -> ModelConfig:
        import json
        return cls.from_dict(json.loads(text))


PARAMETER_FIELDS = frozenset(f.name for f in fields(ParameterConfig))
