"""Parameters, per-layer weight views and the name -> parameter set shared by topologies."""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterable, Iterator

import numpy as np

from sculler import backend
from sculler.core.model_config import ParameterConfig

UpdateCallback = Callable[["Parameter"], None]

# values drawn per step of Parameter.randomize (2 MB of float64 temporaries)
_INIT_CHUNK = 1 << 18


class Parameter:
    """A learnable array with its gradient buffer and update bookkeeping.

    Several layers (or topologies) may use one parameter; each calls :meth:`inc_update` once its
    gradient contribution is in, and the callback fires once per batch, when the last user has
    reported, so an update (or a send to a parameter server) can start before backward ends.
    Sparse-update parameters track the rows a batch touched in ``touched_rows``.
    """

    def __init__(self, config: ParameterConfig, dtype=None):
        self.config = config
        self.name = config.name
        dt = np.dtype(dtype or backend.get_default_dtype())
        xp = backend.xp()
        self.value = xp.zeros(tuple(config.dims), dtype=dt)
        self._grad = None
        self.touched_rows: list = []
        self.users = 0
        self._pending = 0
        # set by a Network whose users of this parameter all write first (see Layer.first_write):
        # the gradient is logically zero but not cleared; the first writer overwrites it
        self.grad_unwritten = False
        self.packed = False  # value and grad are views of a ParameterSet.pack buffer
        self._views: weakref.WeakSet[Weight] = weakref.WeakSet()

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.value.shape)

    @property
    def grad(self):
        """The gradient buffer, None for a static parameter. Allocated (zeroed) at first use:
        creating or loading parameters for inference costs only their values."""
        if self._grad is None and not self.config.is_static:
            self._grad = backend.get_array_module(self.value).zeros_like(self.value)
        return self._grad

    @grad.setter
    def grad(self, grad) -> None:
        self._grad = grad

    def randomize(self, rng: np.random.RandomState) -> None:
        """Initialise from the config: N(mean, std) or U(min, max); std defaults to
        ``1/sqrt(dims[0])`` (PaddlePaddle's smart initialisation).

        The values are drawn into the parameter in place, ``_INIT_CHUNK`` at a time (the
        same stream as one draw of the whole shape), so a large table costs its own memory
        plus a few MB of float64 temporaries, not several copies of itself."""
        c = self.config
        flat = self.value.reshape(-1)
        if c.initial_strategy == "uniform" or c.initial_min is not None:
            lo = c.initial_min if c.initial_min is not None else -1.0
            hi = c.initial_max if c.initial_max is not None else 1.0
            def draw(n):
                return rng.uniform(lo, hi, size=n)
        else:
            std = c.initial_std if c.initial_std is not None else 1.0 / np.sqrt(c.dims[0])
            if not std:
                flat[...] = c.initial_mean
                return
            def draw(n):
                vals = rng.standard_normal(n)
                vals *= std
                vals += c.initial_mean
                return vals
        xp = backend.get_array_module(flat)
        for start in range(0, flat.size, _INIT_CHUNK):
            stop = min(start + _INIT_CHUNK, flat.size)
            flat[start:stop] = xp.asarray(draw(stop - start), dtype=flat.dtype)

    def zero_grad(self, fill: bool = True) -> None:
        """Clear the gradient for a new batch; ``fill=False`` when the caller clears the
        buffer it lives in (a packed one) itself."""
        self.grad_unwritten = False
        if self.grad is None or not fill:
            self.touched_rows = []
            return
        if self.config.sparse_update and self.touched_rows:
            self.grad[self.touched_rows_array()] = 0
        else:
            self.grad[...] = 0
        self.touched_rows = []

    def touched_rows_array(self) -> np.ndarray:
        """Unique rows the batch touched (sparse-update parameters)."""
        if not self.touched_rows:
            return np.zeros(0, dtype=np.int64)
        return np.unique(np.concatenate([backend.to_numpy(r).ravel() for r in self.touched_rows]))

    def expect_users(self, n: int) -> None:
        """Start a batch: ``n`` layers will report their gradient contribution."""
        self._pending = n

    def inc_update(self, callback: UpdateCallback | None) -> None:
        """One user's gradient is complete; fire ``callback`` when it was the last one."""
        self._pending -= 1
        if self._pending == 0:
            if self.grad_unwritten:  # its users reported without writing: the gradient is 0
                self.zero_grad()
            if callback is not None:
                callback(self)

    def __repr__(self) -> str:
        return f"Parameter({self.name!r}, shape={self.shape})"


class Weight:
    """A layer's view of a parameter, reshaped to the matrix shape the layer computes with."""

    __slots__ = ("parameter", "w", "w_grad", "__weakref__")

    def __init__(self, parameter: Parameter, shape: tuple[int, ...] | None = None):
        self.parameter = parameter
        self.bind(shape or parameter.shape)
        parameter._views.add(self)

    def bind(self, shape: tuple[int, ...]) -> None:
        """(Re)take the views of the parameter's current value and gradient arrays."""
        p = self.parameter
        self.w = p.value.reshape(shape)
        self.w_grad = None if p.grad is None else p.grad.reshape(shape)


class ParameterSet:
    """Ordered map name -> :class:`Parameter`; one set can back many topologies, and the same
    name always means the same parameter."""

    def __init__(self, seed: int | None = None):
        self._params: dict[str, Parameter] = {}
        self._owners: dict[str, str] = {}
        self._rng = np.random.RandomState(seed)

    def create(self, config: ParameterConfig, owner: str = "?", dtype=None) -> Parameter:
        """Return the parameter named ``config.name``, creating and initialising it if new.

        Raises ValueError when the name exists with another shape, naming both users.
        """
        existing = self._params.get(config.name)
        if existing is not None:
            if list(existing.config.dims) != list(config.dims):
                raise ValueError(
                    f"parameter {config.name!r} is used by {self._owners[config.name]!r} with "
                    f"shape {list(existing.config.dims)} and by {owner!r} with shape "
                    f"{list(config.dims)}; shared parameters must have one shape"
                )
            return existing
        p = Parameter(config, dtype=dtype)
        p.randomize(self._rng)
        self._params[config.name] = p
        self._owners[config.name] = owner
        return p

    def __getitem__(self, name: str) -> Parameter:
        try:
            return self._params[name]
        except KeyError:
            raise KeyError(
                f"no parameter named {name!r}; parameters are {list(self._params)}"
            ) from None

    def __contains__(self, name: object) -> bool:
        return name in self._params

    def __iter__(self) -> Iterator[str]:
        return iter(self._params)

    def __len__(self) -> int:
        return len(self._params)

    def names(self) -> list[str]:
        return list(self._params)

    def values(self) -> list[Parameter]:
        return list(self._params.values())

    def owner(self, name: str) -> str:
        return self._owners[name]

    def pack(self, params: Iterable[Parameter] | None = None) -> None:
        """Move the values and gradients of dense trainable parameters into one contiguous
        buffer each (per dtype), so an optimizer can update them all in a few vectorised
        passes (``Optimizer.update_dense``). Each parameter's ``value``/``grad`` and every
        layer's :class:`Weight` become views of those buffers; contents are kept. Parameters
        already packed, static or sparse-update are left alone; host and GPU parameters are
        packed apart.
        """
        chosen = [p for p in (self.values() if params is None else params)
                  if not p.packed and not p.config.is_static and not p.config.sparse_update
                  and (type(p.value) is np.ndarray or backend.is_gpu_array(p.value))]
        groups: dict[tuple, list[Parameter]] = {}
        for p in chosen:
            groups.setdefault((backend.is_gpu_array(p.value), p.value.dtype), []).append(p)
        for (_, dtype), group in groups.items():
            if len(group) < 2:
                continue
            total = sum(p.value.size for p in group)
            xp = backend.get_array_module(group[0].value)
            values = xp.empty(total, dtype=dtype)
            grads = xp.empty(total, dtype=dtype)
            at = 0
            for p in group:
                n = p.value.size
                values[at : at + n] = p.value.ravel()
                grads[at : at + n] = 0 if p._grad is None else p._grad.ravel()
                p.value = values[at : at + n].reshape(p.value.shape)
                p.grad = grads[at : at + n].reshape(p.value.shape)
                p.packed = True
                for view in list(p._views):
                    view.bind(view.w.shape)
                at += n
