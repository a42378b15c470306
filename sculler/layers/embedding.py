"""Embedding (PaddlePaddle's table projection): ids -> rows of a table."""

from __future__ import annotations

import numpy as np

from sculler.core.layer import Layer, first_id_out_of_range, register_layer


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
        ids = self.get_input(0).ids
        np.add.at(weight.w_grad, ids, self.output.grad)
        weight.parameter.touched_rows.append(ids)
        weight.parameter.inc_update(callback)

    def prefetch(self) -> dict[str, np.ndarray]:
        p = self.weights[0].parameter
        if p.config.sparse_remote_update:
            return {p.name: np.unique(self.get_input(0).ids)}
        return {}
