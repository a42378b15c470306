"""The ``data`` layer: where a batch enters the network."""

from __future__ import annotations

from typing import Any

from sculler.attr import ExtraLayerAttribute
from sculler.core.argument import Argument
from sculler.core.expression import (
    LayerOutput,
    no_support,
)
from sculler.core.faces import layer_function
from sculler.core.layer import Layer, first_id_out_of_range, register_layer
from sculler.core.model_config import LayerConfig
from sculler.data_type import InputType


@register_layer("data")
class DataLayer(Layer):
    """Holds the batch fed to it; checks its width. ``attrs`` may carry ``height``/``width``
    (image data is ``dense_vector(C*H*W)``) and ``kind`` ("dense", "ids", "sparse", ...)."""

    min_inputs = 0
    max_inputs = 0

    def set_input(self, arg: Argument) -> None:
        if arg.value is not None and arg.value.shape[1] != self.size:
            raise ValueError(
                f"data layer {self.name!r} expects width {self.size}, got {arg.describe()}"
            )
        if arg.ids is not None and not arg.ids_known_below(self.size):
            bad = first_id_out_of_range(arg.ids, self.size)
            if bad is not None:
                raise ValueError(
                    f"data layer {self.name!r}: id {bad} is out of range [0, {self.size})"
                )
        out = self.output
        out.value, out.ids, out.ids_checked = arg.value, arg.ids, arg.ids_checked
        out.ids_host = arg.ids_host
        out.seq_starts, out.sub_seq_starts = arg.seq_starts, arg.sub_seq_starts

    def forward(self, pass_type: str) -> None:
        super().forward(pass_type)
        out = self.output
        if self.need_gradient and out.value is not None and not out.is_sparse:
            grad = self.scratch("grad", out.value.shape)
            grad[...] = 0
            out.grad = grad
        else:
            out.grad = None


def _check_data_layer_attr(name: str, layer_attr: Any) -> None:
    """Accept ``layer_attr`` as PaddlePaddle did where it meant something for a data layer.

    PaddlePaddle's DataLayer copies the batch to its output and never runs the activation step
    where dropout and error clipping happen, so ``drop_rate`` and ``error_clipping_threshold``
    had no effect there; ``device`` placed the batch (Sculler has one device, so -1/None). A
    value that Paddle would have dropped without a word is refused here, with the way to get
    it; the empty attribute and ``device=-1`` are accepted.
    """
    if layer_attr is None:
        return
    if not isinstance(layer_attr, ExtraLayerAttribute):
        raise TypeError(f"data layer {name!r}: layer_attr must be paddle.attr.Extra(...), got "
                        f"{layer_attr!r}")
    if layer_attr.drop_rate:
        raise ValueError(f"data layer {name!r}: layer_attr drop_rate={layer_attr.drop_rate} has "
                         "no effect on a data layer in PaddlePaddle (its DataLayer applies no "
                         "dropout); drop it to get Paddle's results, or use "
                         "paddle.layer.dropout(input=<this layer>, dropout_rate=...)")
    if layer_attr.error_clipping_threshold is not None:
        raise ValueError(f"data layer {name!r}: layer_attr error_clipping_threshold="
                         f"{layer_attr.error_clipping_threshold} has no effect on a data layer "
                         "in PaddlePaddle (no gradient is clipped there); set it on the layer "
                         "whose output gradient should be clipped")


@layer_function(v2=True, types=("data",))
def data(name: str, type: InputType, height: int | None = None,  # noqa: A002
         width: int | None = None, depth: int | None = None, layer_attr: Any = None,
         **kw: Any) -> LayerOutput:
    """A data layer: where field ``name`` of each sample enters (width ``type.dim``)."""
    if not isinstance(name, str) or not name:
        raise TypeError(f"data layer: name must be a non-empty str, got {name!r}")
    if not isinstance(type, InputType):
        raise TypeError(f"data layer {name!r}: type must be a paddle.data_type input type such "
                        f"as dense_vector(784), got {type!r}")
    _check_data_layer_attr(name, layer_attr)
    no_support("data", **kw)
    attrs: dict[str, Any] = {"kind": type.kind, "seq_type": type.seq_type}
    for key, val in (("height", height), ("width", width), ("depth", depth)):
        if val is not None:
            attrs[key] = int(val)
    config = LayerConfig(name=name, type="data", size=type.dim, attrs=attrs)
    return LayerOutput(config, [], data_type=type)
