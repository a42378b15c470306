"""Activations of the v2 API (``paddle.v2.activation``): ``act=Tanh()`` on a layer.

Each class only names the engine activation (:mod:`sculler.core.activation`), where the math
lives (``y = f(z)`` forward, ``dz = f'(z) dy`` backward).
"""

from __future__ import annotations

__all__ = [
    "BaseActivation", "Tanh", "Sigmoid", "Softmax", "Identity", "Linear", "SequenceSoftmax",
    "Exp", "Relu", "BRelu", "SoftRelu", "STanh", "Abs", "Square", "Log", "Sqrt", "Reciprocal",
    "SoftSign",
]


class BaseActivation:
    """An activation by engine name; instances compare equal by name."""

    name = "linear"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, BaseActivation) and other.name == self.name

    def __hash__(self) -> int:
        return hash(self.name)

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


def _act(cls_name: str, engine_name: str, doc: str) -> type[BaseActivation]:
    return type(cls_name, (BaseActivation,), {"name": engine_name, "__doc__": doc})


Tanh = _act("Tanh", "tanh", "``y = tanh(z)``.")
Sigmoid = _act("Sigmoid", "sigmoid", "``y = 1 / (1 + exp(-z))``.")
Softmax = _act("Softmax", "softmax", "``y_j = exp(z_j) / sum_k exp(z_k)`` per row.")
Identity = _act("Identity", "linear", "``y = z``.")
Linear = _act("Linear", "linear", "``y = z``.")
SequenceSoftmax = _act("SequenceSoftmax", "sequence_softmax",
                       "Softmax over the steps of each sequence (width-1 input).")
Exp = _act("Exp", "exponential", "``y = exp(z)`` (PaddlePaddle's name: ``exponential``).")
Relu = _act("Relu", "relu", "``y = max(z, 0)``.")
BRelu = _act("BRelu", "brelu", "``y = min(max(z, 0), 24)``.")
SoftRelu = _act("SoftRelu", "softrelu", "``y = log(1 + exp(z))`` (clipped input).")
STanh = _act("STanh", "stanh", "``y = 1.7159 tanh(2z/3)``.")
Abs = _act("Abs", "abs", "``y = |z|``.")
Square = _act("Square", "square", "``y = z^2``.")
Log = _act("Log", "log", "``y = log(z)``.")
Sqrt = _act("Sqrt", "sqrt", "``y = sqrt(z)``.")
Reciprocal = _act("Reciprocal", "reciprocal", "``y = 1/z``.")
SoftSign = _act("SoftSign", "softsign", "``y = z / (1 + |z|)``.")
