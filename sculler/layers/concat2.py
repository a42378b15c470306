"""The ``concat2`` layer: projections side by side (PaddlePaddle's ConcatenateLayer2).

``y = f([p_1(x_1), p_2(x_2), ...] + b)``: each input goes through its own projection (the
mixed layer's projections: ``InputConfig.attrs["proj"]``, see :mod:`sculler.layers.mixed`)
into its own block of columns instead of being summed. The width of block i is the
projection's ``size`` attr or the width it implies (identity, dotmul, scaling, context). Used
by ``paddle.layer.concat(input=[table_projection(...), ...])`` (the book's word2vec).
"""

from __future__ import annotations

from sculler.core.layer import register_layer
from sculler.layers.mixed import MixedLayer, _proj_width, _weight_shape

CONCAT_KINDS = ("full_matrix", "trans_full_matrix", "table", "identity", "dotmul", "scaling",
                "context")


def _widths(config, inputs) -> list[int]:
    widths = []
    for i, (ic, inp) in enumerate(zip(config.inputs, inputs)):
        kind = ic.attrs.get("proj")
        if kind not in CONCAT_KINDS or "offset" in ic.attrs:
            raise ValueError(f"layer {config.name!r} (concat2): input {i} ({inp.name!r}) has "
                             f"proj {kind!r}; concat of projections takes one of {CONCAT_KINDS}"
                             " (identity without offset)")
        width = int(ic.attrs.get("size") or 0) or _proj_width(kind, ic.attrs, inp.size)
        if width <= 0:
            raise ValueError(f"layer {config.name!r} (concat2): projection {i} ({kind}) of "
                             f"{inp.name!r} needs a size")
        widths.append(width)
    return widths


@register_layer("concat2")
class ConcatProjectionLayer(MixedLayer):
    """Projections of the inputs written side by side; width = sum of projection widths."""

    @classmethod
    def infer_size(cls, config, inputs):
        return sum(_widths(config, inputs))

    @classmethod
    def weight_dims(cls, config, inputs):
        dims = {}
        for i, (ic, inp, width) in enumerate(zip(config.inputs, inputs, _widths(config, inputs))):
            shape = _weight_shape(ic.attrs["proj"], ic.attrs, inp.size, width)
            if shape is not None:
                dims[i] = shape
        return dims

    def init(self, layer_map, parameter_map) -> None:
        super().init(layer_map, parameter_map)
        widths = _widths(self.config, [layer.config for layer in self.inputs])
        cols, self.blocks = 0, []
        for w in widths:
            self.blocks.append(slice(cols, cols + w))
            cols += w

    def _columns(self, i: int) -> slice:
        return self.blocks[i]

    def _window(self, i):
        return slice(None), slice(None)

