"""``py_layer``: a PyLayer written once for eager mode, run as an engine layer in a topology.

The layer wraps its inputs' values as eager Tensors, runs ``MyPyLayer.apply`` on them (so every
PyLayer rule and check applies), and in backward feeds the output gradient through the PyLayer's
own ``backward``, adding the resulting gradients into the input gradients. The PyLayer class is
named in the config as ``"module:QualName"`` (``attrs["py_layer"]``) so configs stay plain data;
``attrs["kwargs"]`` holds extra JSON keyword arguments for ``forward``.
"""

from __future__ import annotations

import importlib
import sys

from sculler.core.layer import Layer, register_layer
from sculler.eager.engine import set_grad_enabled_flag
from sculler.eager.tensor import Tensor


def py_layer_path(cls: type) -> str:
    """The config name of a PyLayer class: ``"module:QualName"``."""
    if "<locals>" in cls.__qualname__:
        raise ValueError(
            f"PyLayer {cls.__qualname__} is defined inside a function; define it at module "
            "level so a topology can name it"
        )
    return f"{cls.__module__}:{cls.__qualname__}"


def resolve_py_layer(path: str) -> type:
    module_name, _, qualname = path.partition(":")
    module = sys.modules.get(module_name) or importlib.import_module(module_name)
    obj = module
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return obj


@register_layer("py_layer")
class PyLayerLayer(Layer):
    """``y = f(MyPyLayer.apply(x_1, ..., x_n, **kwargs))`` over dense inputs; the PyLayer's
    output must be (batch, size)."""

    def __init__(self, config):
        super().__init__(config)
        self.py_layer = resolve_py_layer(self.attr("py_layer"))
        self._inputs: list[Tensor] = []
        self._out: Tensor | None = None

    def forward(self, pass_type: str) -> None:
        super().forward(pass_type)
        batch = self.check_same_batch()
        self._inputs = [
            Tensor(self.get_input_value(i), stop_gradient=not inp.need_gradient)
            for i, inp in enumerate(self.inputs)
        ]
        old = set_grad_enabled_flag(True)
        try:
            out = self.py_layer.apply(*self._inputs, **self.attr("kwargs", {}))
        finally:
            set_grad_enabled_flag(old)
        if not isinstance(out, Tensor) or tuple(out.shape) != (batch, self.size):
            got = tuple(out.shape) if isinstance(out, Tensor) else type(out).__name__
            raise ValueError(
                f"layer {self.name!r} (py_layer {self.py_layer.__name__}): forward must return "
                f"one Tensor of shape {(batch, self.size)}, got {got}"
            )
        self._out = out
        self.reserve_output(batch, self.size)[...] = out._array
        self.forward_activation()

    def backward(self, callback=None) -> None:
        self.backward_activation()
        if self._out is None or self._out.stop_gradient:
            return
        for t in self._inputs:
            t.grad = None
        self._out.backward(Tensor(self.output.grad.copy()))
        for i, t in enumerate(self._inputs):
            grad = self.get_input_grad(i)
            if grad is not None and t.grad is not None:
                grad += t.grad._array
