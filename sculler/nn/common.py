"""Eager modules: ``Linear``, ``Embedding``, ``Dropout``, ``Sequential`` and activation layers."""

from __future__ import annotations

from typing import Any

from sculler.eager import ops
from sculler.eager.tensor import Tensor
from sculler.nn import functional as F
from sculler.nn.initializer import XavierUniform
from sculler.nn.layer import Layer
from sculler.validate import integer, number, positive_int


class Linear(Layer):
    """``y = x @ W + b`` with ``W`` of shape [in_features, out_features] (as Paddle).

    ``bias_attr=False`` drops the bias. Input [..., in], output [..., out].
    """

    def __init__(self, in_features: int, out_features: int, weight_attr: Any = None,
                 bias_attr: Any = None, name: str | None = None) -> None:
        super().__init__()
        in_features = positive_int(in_features, "Linear(in_features=...)")
        out_features = positive_int(out_features, "Linear(out_features=...)")
        self.in_features, self.out_features = in_features, out_features
        self.weight = self.create_parameter([in_features, out_features], attr=weight_attr)
        self.bias = None if bias_attr is False else self.create_parameter(
            [out_features], attr=bias_attr, is_bias=True)

    def forward(self, x: Tensor) -> Tensor:
        try:
            shape = x._array.shape
        except AttributeError:
            raise TypeError(f"Linear expects a Tensor, got {type(x).__name__}: convert it with "
                            "paddle.to_tensor(x)") from None
        if not shape or shape[-1] != self.in_features:
            raise ValueError(f"Linear expects inputs of shape [..., {self.in_features}], got "
                             f"{x.shape}")
        params = self._parameters  # read directly: no __getattr__ call per parameter
        weight, bias = params.get("weight"), params.get("bias")
        if weight is None:
            weight = self.weight  # replaced by a plain Tensor
        if bias is None:
            bias = self.__dict__.get("bias")  # None (no bias) or a plain Tensor
        return F.linear(x, weight, bias)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}"


class Embedding(Layer):
    """Lookup table: ids [...] -> rows [..., embedding_dim] of a [num, dim] weight."""

    def __init__(self, num_embeddings: int, embedding_dim: int, padding_idx: int | None = None,
                 sparse: bool = False, weight_attr: Any = None, name: str | None = None) -> None:
        super().__init__()
        num_embeddings = positive_int(num_embeddings, "Embedding(num_embeddings=...)")
        embedding_dim = positive_int(embedding_dim, "Embedding(embedding_dim=...)")
        if padding_idx is not None:
            padding_idx = integer(padding_idx, "Embedding(padding_idx=...)")
            if not -num_embeddings <= padding_idx < num_embeddings:
                raise ValueError(f"Embedding(padding_idx={padding_idx}) is outside "
                                 f"[-{num_embeddings}, {num_embeddings})")
        self.padding_idx = padding_idx
        self.weight = self.create_parameter([num_embeddings, embedding_dim], attr=weight_attr,
                                            default_initializer=XavierUniform())
        if padding_idx is not None:
            self.weight._array[padding_idx % num_embeddings] = 0

    def forward(self, x: Tensor) -> Tensor:
        return F.embedding(x, self.weight, padding_idx=self.padding_idx)


class Dropout(Layer):
    """Dropout with probability ``p`` in training mode, identity in eval mode."""

    def __init__(self, p: float = 0.5, axis: Any = None, mode: str = "upscale_in_train",
                 name: str | None = None) -> None:
        super().__init__()
        if mode not in ("upscale_in_train", "downscale_in_infer"):
            raise ValueError(f"Dropout(mode={mode!r}): expected 'upscale_in_train' or "
                             "'downscale_in_infer'")
        self.p = number(p, "Dropout(p=...)", 0.0, 1.0)
        self.mode = mode

    def forward(self, x: Tensor) -> Tensor:
        return F.dropout(x, self.p, training=self.training, mode=self.mode)


class Sequential(Layer):
    """Run sublayers in order; built from layers or (name, layer) pairs."""

    def __init__(self, *layers: Any) -> None:
        super().__init__()
        if len(layers) == 1 and isinstance(layers[0], list | tuple) and layers[0] and \
                isinstance(layers[0][0], list | tuple):
            layers = tuple(layers[0])
        for i, item in enumerate(layers):
            if isinstance(item, list | tuple):
                self.add_sublayer(item[0], item[1])
            elif isinstance(item, Layer):
                self.add_sublayer(str(i), item)
            else:
                raise TypeError(f"Sequential takes Layers or (name, Layer) pairs, got "
                                f"{type(item).__name__} at position {i}")

    def __getitem__(self, i: int) -> Layer:
        return list(self._sub_layers.values())[i]

    def __len__(self) -> int:
        return len(self._sub_layers)

    def forward(self, x: Any) -> Any:
        for layer in self._sub_layers.values():
            x = layer(x)
        return x


def _activation(fn: Any, doc: str) -> type:
    class Act(Layer):
        def __init__(self, name: str | None = None) -> None:
            super().__init__()

        def forward(self, x: Tensor) -> Tensor:
            return fn(x)

    Act.__doc__ = doc
    return Act


ReLU = _activation(ops.relu, "max(x, 0)")
Tanh = _activation(ops.tanh, "tanh(x)")
Sigmoid = _activation(ops.sigmoid, "1 / (1 + exp(-x))")
Softsign = _activation(ops.softsign, "x / (1 + |x|)")
for _cls, _name in ((ReLU, "ReLU"), (Tanh, "Tanh"), (Sigmoid, "Sigmoid"),
                    (Softsign, "Softsign")):
    _cls.__name__ = _cls.__qualname__ = _name


class Softmax(Layer):
    """softmax(x) along ``axis``."""

    def __init__(self, axis: int = -1, name: str | None = None) -> None:
        super().__init__()
        self.axis = axis

    def forward(self, x: Tensor) -> Tensor:
        return ops.softmax(x, self.axis)


class LogSoftmax(Softmax):
    """log softmax(x) along ``axis``."""

    def forward(self, x: Tensor) -> Tensor:
        return ops.log_softmax(x, self.axis)


class Flatten(Layer):
    def __init__(self, start_axis: int = 1, stop_axis: int = -1) -> None:
        super().__init__()
        self.start_axis, self.stop_axis = start_axis, stop_axis

    def forward(self, x: Tensor) -> Tensor:
        return ops.flatten(x, self.start_axis, self.stop_axis)
