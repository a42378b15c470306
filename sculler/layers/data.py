"""The ``data`` layer: where a batch enters the network."""

from __future__ import annotations

from sculler.core.argument import Argument
from sculler.core.layer import Layer, first_id_out_of_range, register_layer


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
