"""The ``data_norm`` layer (PaddlePaddle's ``DataNormLayer``): normalisation of a data layer's
columns with statistics computed beforehand and held in a static ``(5, size)`` parameter.

Rows of the parameter: ``min``, ``1/(max - min)``, ``mean``, ``1/std``, ``1/10^j`` per column.
Strategies (attr ``data_norm_strategy``): ``"z-score"`` ``y = (x - mean) / std``;
``"min-max"`` ``y = (x - min) / (max - min)``; ``"decimal-scaling"`` ``y = x / 10^j``. There is
no helper in PaddlePaddle's v1 or v2 API: build it as ``Layer(type="data_norm", ...)`` in a v1
config or a ``LayerConfig``, and load the statistics into its parameter.
"""

from __future__ import annotations

from typing import Any

from sculler.core.faces import onnx_converter
from sculler.core.layer import Layer, register_layer
from sculler.core.model_config import LayerConfig

# strategy -> (row subtracted or None, row multiplied by)
STRATEGIES = {"z-score": (2, 3), "min-max": (0, 1), "decimal-scaling": (None, 4)}


def _strategy(config: LayerConfig) -> tuple[int | None, int]:
    name = config.attrs.get("data_norm_strategy", "z-score")
    if name not in STRATEGIES:
        raise ValueError(f"layer {config.name!r} (data_norm): data_norm_strategy must be one of "
                         f"{sorted(STRATEGIES)}, got {name!r}")
    return STRATEGIES[name]


@register_layer("data_norm")
class DataNormLayer(Layer):
    """``y = (x - shift) * scale`` per column, ``shift``/``scale`` two rows of the static
    ``(5, size)`` statistics (see the module docstring). Input: one dense data layer; no
    bias."""

    max_inputs = 1

    @classmethod
    def infer_size(cls, config, inputs):
        _strategy(config)
        if inputs[0].type != "data":
            raise ValueError(f"layer {config.name!r} (data_norm): its input must be a data layer, "
                             f"got {inputs[0].name!r} of type {inputs[0].type!r}")
        return inputs[0].size

    @classmethod
    def weight_dims(cls, config, inputs):
        return {0: (5, inputs[0].size)}

    @classmethod
    def weight_defaults(cls, config, inputs):
        return {0: {"is_static": True}}

    def init(self, layer_map, parameter_map) -> None:
        super().init(layer_map, parameter_map)
        if self.bias is not None:
            raise ValueError(f"layer {self.name!r} (data_norm): takes no bias")
        if self.weights[0].w_grad is not None:
            raise ValueError(f"layer {self.name!r} (data_norm): its statistics "
                             f"{self.weights[0].parameter.name!r} must be a static parameter")
        self.shift_row, self.scale_row = _strategy(self.config)

    def forward(self, pass_type: str) -> None:
        super().forward(pass_type)
        x = self.get_input_value(0)
        stats = self.weights[0].w
        out = self.reserve_output(x.shape[0], self.size)
        shift = 0.0 if self.shift_row is None else stats[self.shift_row]
        out[...] = (x - shift) * stats[self.scale_row]
        self.forward_activation()

    def backward(self, callback=None) -> None:
        self.backward_activation()
        gx = self.get_input_grad(0)
        if gx is not None:
            gx += self.output.grad * self.weights[0].w[self.scale_row]


@onnx_converter("data_norm")
def data_norm_to_onnx(g: Any, lc: LayerConfig, ins: list[str], ctx: Any) -> str:
    """``(x - shift) * scale`` with the two rows of the statistics."""
    ctx.require_dense(lc, 0, ins[0])
    stats = ctx.weight(lc.inputs[0].input_parameter_name).reshape(5, -1)
    shift_row, scale_row = _strategy(lc)
    x = ins[0]
    if shift_row is not None:
        x = g.op("Sub", [x, g.const(f"{lc.name}/shift", stats[shift_row][None])], lc.name)
    return g.op("Mul", [x, g.const(f"{lc.name}/scale", stats[scale_row][None])], lc.name)
