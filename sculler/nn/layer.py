"""``nn.Layer``: the base of eager modules, and ``ParamAttr``.

Assigning a :class:`Parameter` or a ``Layer`` to an attribute registers it, so
``parameters()`` and ``state_dict()`` find it under its attribute path ("fc1.weight").
Parameter names are unique, derived from the layer type as Paddle does ("linear_0.w_0").
"""

from __future__ import annotations

import itertools
from collections import OrderedDict
from collections.abc import Iterator
from typing import Any

import numpy as np

from sculler.backend import get_default_dtype, to_device_of, to_place
from sculler.eager.creation import convert_dtype
from sculler.eager.device import wants_gpu
from sculler.eager.tensor import Parameter, Tensor
from sculler.nn.initializer import Constant, Initializer, XavierUniform

_layer_counts: dict[str, Any] = {}


class ParamAttr:
    """How a layer creates one parameter: name, initializer, learning-rate scale, trainable."""

    def __init__(self, name: str | None = None, initializer: Initializer | None = None,
                 learning_rate: float = 1.0, regularizer: Any = None, trainable: bool = True,
                 need_clip: bool = True) -> None:
        self.name = name
        self.initializer = initializer
        self.learning_rate = learning_rate
        self.regularizer = regularizer
        self.trainable = trainable
        self.need_clip = need_clip


class Layer:
    """Base class of eager modules: override ``forward``; call the layer to run it."""

    def __init__(self, name_scope: str | None = None, dtype: Any = "float32") -> None:
        prefix = name_scope or _snake(type(self).__name__)
        counter = _layer_counts.setdefault(prefix, itertools.count())
        object.__setattr__(self, "_full_name", f"{prefix}_{next(counter)}")
        object.__setattr__(self, "_parameters", OrderedDict())
        object.__setattr__(self, "_sub_layers", OrderedDict())
        object.__setattr__(self, "_buffers", OrderedDict())
        object.__setattr__(self, "_non_persistable", set())
        object.__setattr__(self, "_param_counts", {"w": 0, "b": 0})
        object.__setattr__(self, "training", True)
        object.__setattr__(self, "_dtype", dtype)

    # --- registration ----------------------------------------------------------------
    def __setattr__(self, name: str, value: Any) -> None:
        if "_parameters" not in self.__dict__:
            raise RuntimeError(f"{type(self).__name__}: call super().__init__() before "
                               f"assigning attribute {name!r}")
        was_buffer = name in self._buffers
        for d in (self._parameters, self._sub_layers, self._buffers):
            d.pop(name, None)
        if isinstance(value, Parameter):
            self._parameters[name] = value
        elif isinstance(value, Layer):
            self._sub_layers[name] = value
        elif isinstance(value, Tensor) and was_buffer:
            self._buffers[name] = value
        else:
            object.__setattr__(self, name, value)
            return
        self.__dict__.pop(name, None)

    def __getattr__(self, name: str) -> Any:
        d = self.__dict__
        for key in ("_parameters", "_sub_layers", "_buffers"):
            if key in d and name in d[key]:
                return d[key][name]
        raise AttributeError(f"{type(self).__name__} has no attribute {name!r}")

    def __delattr__(self, name: str) -> None:
        for d in (self._parameters, self._sub_layers, self._buffers):
            if name in d:
                del d[name]
                return
        object.__delattr__(self, name)

    def add_sublayer(self, name: str, sublayer: Layer) -> Layer:
        self._sub_layers[str(name)] = sublayer
        return sublayer

    def add_parameter(self, name: str, parameter: Parameter) -> Parameter:
        self._parameters[str(name)] = parameter
        return parameter

    def register_buffer(self, name: str, tensor: Tensor, persistable: bool = True) -> None:
        """A non-trainable tensor saved in ``state_dict`` (e.g. running statistics)."""
        if persistable:
            self._non_persistable.discard(name)
        else:
            self._non_persistable.add(name)
        self._buffers[name] = tensor

    def full_name(self) -> str:
        return self._full_name

    def create_parameter(self, shape: list[int], attr: Any = None, dtype: Any = None,
                         is_bias: bool = False, default_initializer: Any = None) -> Parameter:
        """A new Parameter of ``shape``; ``attr`` is a ParamAttr, a name string or None.

        The initializer is ``attr.initializer``, else ``default_initializer``, else zeros
        for biases and Xavier-uniform for weights (Paddle's defaults).
        """
        if isinstance(attr, str):
            attr = ParamAttr(name=attr)
        attr = attr or ParamAttr()
        init = attr.initializer or default_initializer or (
            Constant(0.0) if is_bias else XavierUniform())
        dt = convert_dtype(dtype or (self._dtype if self._dtype != "float32" else None))
        kind = "b" if is_bias else "w"
        name = attr.name or f"{self._full_name}.{kind}_{self._param_counts[kind]}"
        self._param_counts[kind] += 1
        shape = [int(s) for s in shape]
        if any(s <= 0 for s in shape):
            raise ValueError(f"create_parameter: shape {shape} must have positive dims")
        return Parameter(init(tuple(shape), dt), name=name, trainable=attr.trainable,
                         learning_rate=attr.learning_rate, regularizer=attr.regularizer,
                         need_clip=attr.need_clip)

    # --- traversal --------------------------------------------------------------------
    def named_sublayers(self, prefix: str = "", include_self: bool = False
                        ) -> Iterator[tuple[str, Layer]]:
        if include_self:
            yield prefix, self
        for name, layer in self._sub_layers.items():
            if layer is None:
                continue
            path = f"{prefix}.{name}" if prefix else name
            yield path, layer
            yield from layer.named_sublayers(path)

    def sublayers(self, include_self: bool = False) -> list[Layer]:
        return [layer for _, layer in self.named_sublayers(include_self=include_self)]

    def children(self) -> Iterator[Layer]:
        yield from self._sub_layers.values()

    def named_parameters(self, prefix: str = "", include_sublayers: bool = True
                         ) -> Iterator[tuple[str, Parameter]]:
        """(attribute path, parameter) pairs; a shared parameter is listed once."""
        seen = set()
        layers = self.named_sublayers(prefix, include_self=True) if include_sublayers \
            else [(prefix, self)]
        for path, layer in layers:
            for name, p in layer._parameters.items():
                if p is None or id(p) in seen:
                    continue
                seen.add(id(p))
                yield (f"{path}.{name}" if path else name), p

    def parameters(self, include_sublayers: bool = True) -> list[Parameter]:
        return [p for _, p in self.named_parameters(include_sublayers=include_sublayers)]

    def clear_gradients(self) -> None:
        for p in self.parameters():
            p.clear_grad()

    # --- state ------------------------------------------------------------------------
    def state_dict(self) -> OrderedDict:
        """Parameters and persistable buffers by attribute path (the tensors themselves)."""
        out = OrderedDict()
        for path, layer in self.named_sublayers(include_self=True):
            for name, p in layer._parameters.items():
                if p is not None:
                    out[f"{path}.{name}" if path else name] = p
            for name, b in layer._buffers.items():
                if b is not None and name not in layer._non_persistable:
                    out[f"{path}.{name}" if path else name] = b
        return out

    def set_state_dict(self, state_dict: dict, use_structured_name: bool = True
                       ) -> tuple[list[str], list[str]]:
        """Copy values (Tensors or ndarrays) into the parameters in place, each onto its
        parameter's device.

        Returns ``(missing_keys, unexpected_keys)``; a shape mismatch raises ValueError.
        """
        own = self.state_dict()
        if not use_structured_name:
            own = OrderedDict((t.name, t) for t in own.values())
        missing = [k for k in own if k not in state_dict]
        unexpected = [k for k in state_dict if k not in own]
        for key, target in own.items():
            if key not in state_dict:
                continue
            value = state_dict[key]
            arr = value._array if isinstance(value, Tensor) else np.asarray(value)
            if tuple(arr.shape) != tuple(target._array.shape):
                raise ValueError(f"set_state_dict: {key!r} has shape {list(arr.shape)} in "
                                 f"the state dict but {target.shape} in the layer")
            target._array[...] = to_device_of(arr, target._array)
        return missing, unexpected

    set_dict = set_state_dict
    load_dict = set_state_dict

    # --- mode and call ----------------------------------------------------------------
    def train(self) -> Layer:
        for layer in self.sublayers(include_self=True):
            object.__setattr__(layer, "training", True)
        return self

    def eval(self) -> Layer:
        for layer in self.sublayers(include_self=True):
            object.__setattr__(layer, "training", False)
        return self

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(f"{type(self).__name__} does not define forward()")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.forward(*args, **kwargs)

    def extra_repr(self) -> str:
        return ""

    def __repr__(self) -> str:
        lines = [f"{type(self).__name__}({self.extra_repr()}"]
        for name, layer in self._sub_layers.items():
            sub = repr(layer).replace("\n", "\n  ")
            lines.append(f"  ({name}): {sub}")
        return "\n".join(lines) + ("\n)" if len(lines) > 1 else ")")

    def to(self, device: Any = None, dtype: Any = None, blocking: Any = None) -> Layer:
        """Move every parameter and buffer (with its gradient) to ``device`` and/or cast the
        floating ones to ``dtype``, in place; returns the layer.

        ``device`` is a place (``paddle.CPUPlace()``, ``paddle.CUDAPlace(0)``) or "cpu",
        "gpu", "gpu:N". The tensors stay the same objects, so an optimizer built on
        ``parameters()`` keeps working: its state follows each parameter's device at the next
        ``step()``. Everything is checked before anything moves.
        """
        if blocking is not None and not isinstance(blocking, bool):
            raise TypeError(f"{type(self).__name__}.to: blocking must be a bool or None, got "
                            f"{type(blocking).__name__} {blocking!r}")
        gpu = None if device is None else wants_gpu(device, f"{type(self).__name__}.to")
        dt = None if dtype is None else convert_dtype(dtype)
        if dt is not None and dt.kind != "f":
            raise TypeError(f"{type(self).__name__}.to: dtype must be a float type, got {dt}")
        for t in self._tensors():
            t._array = _moved(t._array, gpu, dt)
            if t.grad is not None:
                t.grad._array = _moved(t.grad._array, gpu, dt)
            if isinstance(t, Parameter):
                t._spare_grad = None
        return self

    def _tensors(self) -> list[Tensor]:
        """Every parameter and buffer of this layer and its sublayers, each once."""
        seen: dict[int, Tensor] = {}
        for layer in self.sublayers(include_self=True):
            for t in (*layer._parameters.values(), *layer._buffers.values()):
                if t is not None:
                    seen.setdefault(id(t), t)
        return list(seen.values())

    def float(self) -> Layer:
        return self.to(dtype=get_default_dtype())


def _moved(array: Any, gpu: bool | None, dtype: np.dtype | None) -> Any:
    """``array`` on the GPU (``gpu`` True) or the host (False; None: where it is), floating
    arrays cast to ``dtype`` (None: kept)."""
    if gpu is not None:
        array = to_place(array, gpu, "Layer.to")
    if dtype is not None and array.dtype.kind == "f" and array.dtype != dtype:
        array = array.astype(dtype)
    return array


def _snake(name: str) -> str:
    out = []
    for i, c in enumerate(name):
        if c.isupper() and i and not name[i - 1].isupper():
            out.append("_")
        out.append(c.lower())
    return "".join(out)
