"""Activations by name, as the base layer applies them in place after ``forward``.

``forward_activation`` turns the layer's pre-activation output ``z`` into ``y = f(z)``;
``backward_activation`` turns ``dL/dy`` into ``dL/dz``. Names are PaddlePaddle's.
"""

from __future__ import annotations

from sculler.core.suggest import close_matches
from sculler.math import activation as K
from sculler.math import parallel

ALIASES = K.NAME_ALIASES
NAMES = (
    "linear", "sigmoid", "tanh", "relu", "brelu", "softrelu", "stanh", "softmax",
    "sequence_softmax", "exp", "log", "abs", "square", "sqrt", "reciprocal", "softsign",
)
IN_PLACE = frozenset({"linear", "sigmoid", "tanh", "relu", "exp", "softmax"})


class Activation:
    """One activation: ``forward(z)`` in place and ``backward`` of the gradient in place."""

    def __init__(self, name: str):
        self.name = name
        self.needs_input = name in K.NEEDS_INPUT
        self.is_linear = name == "linear"
        self.needs_seq = name == "sequence_softmax"  # forward/backward read seq_starts
        if name != "sequence_softmax":
            self._f = getattr(K, name)
            self._df = getattr(K, name + "_grad")
        self._f_inplace = K.FORWARD_INPLACE.get(name)
        self._df_inplace = K.GRAD_INPLACE.get(name)

    def forward(self, value, seq_starts=None) -> None:
        """Replace ``value`` (pre-activation) by ``f(value)``."""
        if self.is_linear:
            return
        f = self._f_inplace
        if f is not None:  # elementwise: split over threads only when large
            if value.size < parallel.PARALLEL_MIN_ELEMENTS:
                f(value)
            else:
                parallel.run(f, (value,))
        elif self.name == "sequence_softmax":
            if value.shape[1] != 1:
                raise ValueError(
                    f"sequence_softmax normalises a column over each sequence; the layer's "
                    f"width must be 1, got {value.shape[1]}"
                )
            K.segment_softmax_(value, _need_seq(seq_starts))
        elif self.name in IN_PLACE:
            self._f(value, out=value)
        else:
            value[...] = self._f(value)

    def backward(self, pre, value, grad, seq_starts=None) -> None:
        """Replace ``grad`` (dL/dy) by dL/dz; ``pre`` is z for activations that need it."""
        if self.is_linear:
            return
        df = self._df_inplace
        if df is not None:
            if grad.size < parallel.PARALLEL_MIN_ELEMENTS:
                df(value, grad)
            else:
                parallel.run(df, (value, grad))
        elif self.name == "sequence_softmax":
            K.segment_softmax_grad_(value, grad, _need_seq(seq_starts))
        elif self.name == "softmax":
            K.softmax_grad_(value, grad)
        else:
            grad[...] = self._df(pre, value, grad)


def _need_seq(seq_starts):
    if seq_starts is None:
        raise ValueError("sequence_softmax needs a sequence input (seq_starts is missing)")
    return seq_starts


_CACHE: dict[str, Activation] = {}


def get_activation(name: str | None) -> Activation:
    """The activation called ``name``; unknown names raise ValueError with close matches."""
    name = ALIASES.get(name, name)
    act = _CACHE.get(name)
    if act is None:
        if name not in NAMES:
            close = close_matches(name, NAMES)
            raise ValueError(
                f"unknown activation {name!r}; did you mean {close}? known: {list(NAMES)}"
            )
        act = _CACHE[name] = Activation(name)
    return act
