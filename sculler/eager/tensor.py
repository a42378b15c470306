"""``Tensor``: an array plus the autograd fields ``stop_gradient``, ``grad`` and a graph link.

Operators and most methods (``+``, ``@``, ``sum``, ``tanh``, ...) are attached by
``sculler.eager.ops`` so that the op implementations live in one place. Optimizers rely on
this protocol: ``t._array`` (updated in place), ``t.grad`` (None or a Tensor), ``t.name``,
``t.stop_gradient``, ``t.clear_grad()``.
"""

from __future__ import annotations

import itertools
import warnings
from typing import Any

import numpy as np

from sculler.backend import get_array_module, is_gpu_array, to_device_of, to_numpy
from sculler.eager import engine
from sculler.eager.device import Place, check_same_device, place_of

_name_ids = itertools.count()
_new = object.__new__


class Tensor:
    """An n-d array that records the ops applied to it for reverse-mode autograd.

    Created tensors have ``stop_gradient=True``; set it to False to get ``.grad`` after
    ``backward()``. Example::

        x = sculler.to_tensor([1.0, 2.0], stop_gradient=False)
        (x * x).sum().backward()      # x.grad == [2., 4.]
    """

    __slots__ = ("_array", "stop_gradient", "grad", "_node", "_out_idx", "_name",
                 "persistable", "__weakref__")
    __array_priority__ = 100

    def __init__(self, array: Any, stop_gradient: bool = True, name: str | None = None) -> None:
        if isinstance(array, Tensor):
            array = array._array
        if type(array) is not np.ndarray and not is_gpu_array(array):
            array = np.asarray(array)
        self._array = array
        self.stop_gradient = stop_gradient
        self.grad = None
        self._node = None
        self._out_idx = 0
        self._name = name
        self.persistable = False

    @staticmethod
    def _from_array(array: Any) -> Tensor:
        """A Tensor over ``array`` as is (no conversion, no copy): the ops' cheap wrap."""
        t = _new(Tensor)
        t._array = array
        t.stop_gradient = True
        t.grad = None
        t._node = None
        t._out_idx = 0
        t._name = None
        t.persistable = False
        return t

    # --- properties -------------------------------------------------------------------
    @property
    def name(self) -> str:
        """A unique name, generated on first access (``generated_tensor_<n>``)."""
        if self._name is None:
            self._name = f"generated_tensor_{next(_name_ids)}"
        return self._name

    @name.setter
    def name(self, value: str) -> None:
        self._name = str(value)

    @property
    def shape(self) -> list[int]:
        return list(self._array.shape)

    @property
    def dtype(self) -> np.dtype:
        return self._array.dtype

    @property
    def ndim(self) -> int:
        return self._array.ndim

    @property
    def size(self) -> int:
        return int(self._array.size)

    def numel(self) -> int:
        return int(self._array.size)

    def dim(self) -> int:
        return self._array.ndim

    @property
    def is_leaf(self) -> bool:
        return self._node is None

    @property
    def place(self) -> Place:
        """Where the data lives: ``Place(cpu)`` or ``Place(gpu:N)``."""
        return place_of(self._array)

    # --- conversion -------------------------------------------------------------------
    def numpy(self) -> np.ndarray:
        """The values as a numpy array (a view of host data, a copy of device data)."""
        return np.asarray(to_numpy(self._array))

    def item(self) -> Any:
        if self._array.size != 1:
            raise ValueError(
                f"item() needs a tensor with one element, got shape {self.shape}")
        return self._array.item()

    def tolist(self) -> Any:
        return self.numpy().tolist()

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        a = self.numpy()
        return a if dtype is None else a.astype(dtype)

    def __len__(self) -> int:
        if self._array.ndim == 0:
            raise TypeError("len() of a 0-D tensor")
        return self._array.shape[0]

    def __bool__(self) -> bool:
        return bool(self._array)

    def __float__(self) -> float:
        return float(self._array)

    def __int__(self) -> int:
        return int(self._array)

    def __index__(self) -> int:
        return int(self._array)

    __hash__ = object.__hash__

    def __repr__(self) -> str:
        body = np.array2string(self.numpy(), separator=", ", prefix="       ")
        return (f"Tensor(shape={self.shape}, dtype={self.dtype}, place={self.place}, "
                f"stop_gradient={self.stop_gradient},\n       {body})")

    # --- autograd ---------------------------------------------------------------------
    def backward(self, grad_tensor: Any = None, retain_graph: bool = False) -> None:
        """Accumulate d(self)/d(leaf) into every leaf's ``.grad``.

        ``grad_tensor`` is the upstream gradient (ones of self's shape when None, as
        Paddle). The graph is freed afterwards unless ``retain_graph``.
        """
        if self.stop_gradient:
            warnings.warn(
                f"backward() on tensor {self.name} with stop_gradient=True does nothing: no "
                "input in its history has stop_gradient=False (Paddle also returns silently)",
                stacklevel=2)
            return
        if grad_tensor is None:
            a = self._array
            if type(a) is np.ndarray:
                g = np.empty_like(a)
                g.fill(1)  # two C calls; np.ones_like costs several times more
            else:
                g = get_array_module(a).ones_like(a)
        else:
            if isinstance(grad_tensor, Tensor):
                g = grad_tensor._array
                if type(g) is not type(self._array):
                    check_same_device("backward", self._array, g)
            else:  # array data: put on this tensor's device
                g = to_device_of(np.asarray(grad_tensor, dtype=self._array.dtype), self._array)
            if g.shape != self._array.shape and tuple(g.shape) != tuple(self._array.shape):
                raise ValueError(
                    f"grad_tensor has shape {list(g.shape)}, expected the tensor's shape "
                    f"{self.shape}")
        engine.run_backward((self,), (g,), retain_graph)

    def clear_grad(self, set_to_zero: bool = False) -> None:
        """Drop the accumulated gradient (or zero it in place with ``set_to_zero``)."""
        if set_to_zero and self.grad is not None:
            self.grad._array[...] = 0
        else:
            self.grad = None

    clear_gradient = clear_grad

    def gradient(self) -> np.ndarray | None:
        """The gradient as a numpy array, or None."""
        return None if self.grad is None else self.grad.numpy()

    def detach(self) -> Tensor:
        """A tensor sharing the data, cut from the graph (``stop_gradient=True``)."""
        return Tensor._from_array(self._array)

    def set_value(self, value: Any) -> None:
        """Overwrite the data in place (copied to this tensor's device); the shape must
        match."""
        a = value._array if isinstance(value, Tensor) else np.asarray(value)
        if type(a) is not type(self._array):
            a = to_device_of(a, self._array)
        if tuple(a.shape) != tuple(self._array.shape):
            raise ValueError(
                f"set_value got shape {list(a.shape)}, expected {self.shape}")
        self._array[...] = a


class Parameter(Tensor):
    """A trainable leaf tensor (``stop_gradient=False``) with optimizer attributes.

    ``optimize_attr['learning_rate']`` scales the optimizer's rate for this parameter;
    ``trainable=False`` freezes it (sets ``stop_gradient``).
    """

    __slots__ = ("optimize_attr", "regularizer", "need_clip", "_trainable", "_spare_grad")

    def __init__(self, array: Any, name: str | None = None, trainable: bool = True,
                 learning_rate: float = 1.0, regularizer: Any = None,
                 need_clip: bool = True) -> None:
        super().__init__(array, stop_gradient=not trainable,
                         name=name if name is not None else f"param_{next(_name_ids)}")
        self.persistable = True
        self.optimize_attr = {"learning_rate": float(learning_rate)}
        self.regularizer = regularizer
        self.need_clip = need_clip
        self._trainable = trainable
        self._spare_grad = None

    def clear_grad(self, set_to_zero: bool = False) -> None:
        """Drop the accumulated gradient (or zero it in place with ``set_to_zero``).

        The dropped gradient's array is kept as a spare: the next backward may write this
        parameter's first gradient into it instead of a new array
        (:func:`sculler.eager.engine.spare_grad`), but only if nothing else references it
        by then, so a gradient a caller kept never changes.
        """
        g = self.grad
        if g is None:
            return
        if set_to_zero:
            g._array[...] = 0
        else:
            self._spare_grad = g._array
            self.grad = None

    clear_gradient = clear_grad

    @property
    def trainable(self) -> bool:
        return self._trainable

    @trainable.setter
    def trainable(self, value: bool) -> None:
        self._trainable = bool(value)
        self.stop_gradient = not value

    def __repr__(self) -> str:
        return "Parameter containing:\n" + super().__repr__()
