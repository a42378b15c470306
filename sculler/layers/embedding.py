"""Embedding (PaddlePaddle's table projection): ids -> rows of a table."""

from __future__ import annotations

from typing import Any

import numpy as np

from sculler.core.expression import (
    LayerOutput,
    as_inputs,
    make_layer,
    no_support,
)
from sculler.core.faces import layer_function, onnx_converter
from sculler.core.layer import Layer, first_id_out_of_range, register_layer
from sculler.core.model_config import LayerConfig
from sculler.math.sparse import add_rows


@register_layer("embedding", "table")
class EmbeddingLayer(Layer):
    """``y_t = W[id_t]`` for an id input whose layer size is the dictionary size.

    Backward adds ``dy_t`` into row ``id_t`` of ``dW`` only (a sparse row gradient: with
    ``sparse_update`` the optimizer touches just those rows).
    """

    min_inputs = 1
    max_inputs = 1

    @classmethod
    def weight_dims(cls, config, inputs):
        return {0: (inputs[0].size, config.size)}

    def forward(self, pass_type: str) -> None:
        super().forward(pass_type)
        arg = self.get_input(0)
        if arg.ids is None:
            raise ValueError(
                f"layer {self.name!r} (embedding): input 0 ({self.inputs[0].name!r}) must carry "
                f"integer ids, got {arg.describe()}"
            )
        table = self.weights[0].w
        ids = arg.ids
        bad = None if arg.ids_known_below(table.shape[0]) else first_id_out_of_range(
            ids, table.shape[0])
        if bad is not None:
            raise ValueError(
                f"layer {self.name!r} (embedding): id {bad} is out of range "
                f"[0, {table.shape[0]})"
            )
        out = self.reserve_output(ids.shape[0], self.size)
        np.take(table, ids, axis=0, out=out)
        self.forward_activation()

    def backward(self, callback=None) -> None:
        self.backward_activation()
        weight = self.weights[0]
        if weight.w_grad is None:
            return
        arg = self.get_input(0)
        ids = arg.ids
        add_rows(weight.w_grad, ids, self.output.grad, arg.host_ids())
        weight.parameter.touched_rows.append(ids)
        weight.parameter.inc_update(callback)

    def prefetch(self) -> dict[str, np.ndarray]:
        p = self.weights[0].parameter
        if p.config.sparse_remote_update:
            return {p.name: self.get_input(0).table_rows()}
        return {}


@layer_function(v1="embedding_layer", types=("embedding",), prefix="embedding")
def embedding(input: LayerOutput, size: int, name: str | None = None,  # noqa: A002
              param_attr: Any = None, layer_attr: Any = None, act: Any = None,
              bias_attr: Any = None, parameter_name: str | None = None) -> LayerOutput:
    """Look up row ``id`` of a (dictionary x size) table for each id: ``y_t = W[id_t]``."""
    no_support("embedding", bias_attr=bias_attr)
    return make_layer("embedding", as_inputs(input, "embedding"), name=name, size=size,
                      act=act, param_attr=param_attr, bias_attr=False, layer_attr=layer_attr,
                      parameter_name=parameter_name)


@onnx_converter("embedding", "table")
def embedding_to_onnx(g: Any, lc: LayerConfig, ins: list[str], ctx: Any) -> str:
    """``y = W[ids]``."""
    if ctx.kind.get(ins[0]) != "ids":
        raise NotImplementedError(f"layer {lc.name!r} (embedding): input is not integer ids")
    table = g.const(f"{lc.name}/table", ctx.weight(lc.inputs[0].input_parameter_name))
    return ctx.bias(g, lc, g.op("Gather", [table, ins[0]], lc.name, axis=0))
