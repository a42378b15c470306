"""The print layer (PaddlePaddle's ``print``, v2 ``printer``, v1 ``printer_layer`` /
``print_layer``): logs its inputs' values every forward pass, as a debugging probe.

The message is ``format`` with each ``%s`` replaced by one input's value (default
``"layer=<input> %s"`` per input, one a line), logged at INFO level by the logger
``sculler.layers.printer``. The layer has no output (size 0) and no gradient: in a v1 config it
runs like any declared layer; in the v2 API give it to the trainer in ``extra_layers``.
"""

from __future__ import annotations

import numpy as np

from sculler.backend import to_numpy
from sculler.core.expression import LayerOutput, as_inputs, make_layer
from sculler.core.faces import layer_function
from sculler.core.layer import Layer, register_layer


def _value_string(arg) -> str:
    """One input's value as text: its dense values, ids, and sequence starts if any."""
    parts = []
    if arg.value is not None:
        value = arg.value.toarray() if hasattr(arg.value, "toarray") else to_numpy(arg.value)
        parts.append(np.array2string(np.asarray(value), threshold=200))
    if arg.ids is not None:
        parts.append("ids=" + np.array2string(to_numpy(arg.ids), threshold=200))
    if arg.seq_starts is not None:
        parts.append("seq_starts=" + np.array2string(to_numpy(arg.seq_starts)))
    return " ".join(parts)


@register_layer("print")
class PrintLayer(Layer):
    """Logs ``attrs["format"]`` filled with the inputs' values; no output, no gradient."""

    @classmethod
    def infer_size(cls, config, inputs):
        fmt = config.attrs.get("format")
        if not isinstance(fmt, str) or fmt.count("%s") != len(inputs):
            raise ValueError(f"layer {config.name!r} (print): format must have one %s per input "
                             f"({len(inputs)}), got {fmt!r}")
        return 0

    def forward(self, pass_type: str) -> None:
        import logging  # (loaded when a print layer first runs, not with sculler)

        log = logging.getLogger("sculler.layers.printer")
        if log.isEnabledFor(logging.INFO):
            values = tuple(_value_string(self.get_input(i)) for i in range(len(self.inputs)))
            for line in (self.attr("format") % values).split("\n"):
                log.info(line)

    def backward(self, callback=None) -> None:
        """Printing has no gradient."""


@layer_function(v1=("printer_layer", "print_layer"), types=("print",), prefix="print")
def printer(input: LayerOutput | list[LayerOutput], format: str | None = None,  # noqa: A002
            name: str | None = None) -> LayerOutput:
    """Log the values of ``input`` (a layer or a list) every batch, formatted by ``format``."""
    inputs = as_inputs(input, "printer")
    if format is None:
        format = "\n".join(f"layer={layer.name} %s" for layer in inputs)
    return make_layer("print", inputs, name=name, bias_attr=False, attrs={"format": format})
