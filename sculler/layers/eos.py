"""End-of-sequence check (PaddlePaddle's ``eos_id`` layer, v2 ``eos``): ``y_i = [id_i ==
eos_id]`` as ids, the stop signal of a generating recurrent group. Not differentiable."""

from __future__ import annotations

from typing import Any

from sculler.backend import get_array_module
from sculler.core.expression import LayerOutput, make_layer, one_input
from sculler.core.faces import layer_function
from sculler.core.layer import Layer, register_layer
from sculler.validate import integer


@register_layer("eos_id")
class EosIdCheckLayer(Layer):
    """Output ids ``1`` where the input id equals attr ``eos_id``, else ``0`` (size 2: a
    boolean, as PaddlePaddle declares it); sequence layout kept."""

    max_inputs = 1

    @classmethod
    def infer_size(cls, config, inputs):
        return 2

    def forward(self, pass_type: str) -> None:
        super().forward(pass_type)
        arg = self.get_input(0)
        if arg.ids is None:
            raise ValueError(f"layer {self.name!r} (eos_id): input 0 ({self.inputs[0].name!r}) "
                             f"must be integer ids, got {arg.describe()}")
        xp = get_array_module(arg.ids)
        self.output.value = self.output.grad = None
        self.output.ids = (arg.ids == int(self.attr("eos_id"))).astype(xp.int64)
        self.output.seq_starts, self.output.sub_seq_starts = arg.seq_starts, arg.sub_seq_starts

    def backward(self, callback=None) -> None:
        """A comparison has no gradient."""


@layer_function(v1="eos_layer", types=("eos_id",))
def eos(input: LayerOutput, eos_id: int, name: str | None = None,  # noqa: A002
        layer_attr: Any = None) -> LayerOutput:
    """``1`` where the input id is ``eos_id``, else ``0`` (ids)."""
    return make_layer("eos_id", [one_input(input, "eos")], name=name, bias_attr=False,
                      layer_attr=layer_attr,
                      attrs={"eos_id": integer(eos_id, "eos: eos_id", minimum=0)})
