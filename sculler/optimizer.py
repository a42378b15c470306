"""Optimizers for the v2 trainer (``paddle.v2.optimizer``) and eager mode (``paddle.optimizer``).

One class per method serves both front ends. The v2 trainer calls
``update(key, value, grad, config, rows)`` once per parameter per batch, then
``finish_batch(num_samples)``; eager code builds the optimizer with ``parameters=[...]`` and
calls ``step()`` / ``clear_grad()``. The update math lives in :mod:`sculler.math.optim`.

v2 semantics follow PaddlePaddle v1's C++ optimizers: the incoming gradient is the SUM over
the batch (pick the learning rate accordingly), ``lr`` is the scheduled rate times the
parameter's ``learning_rate`` multiplier, L2 decay enters the momentum step as
``m = mu*m - lr*(g + l2*w)``, and gradient clipping clips each element to ``[-t, t]``.
Eager mode follows Paddle 2.x where that differs (see :class:`Momentum`, :class:`Adam`,
:class:`Adamax`): weight decay is added to the gradient (``g += coeff*w``) after clipping.

Example::

    opt = Momentum(momentum=0.9, learning_rate=0.01, regularization=L2Regularization(1e-4))
    opt.update("w", w, dw)      # w changes in place
    opt.finish_batch(128)
"""

from __future__ import annotations

import math
import operator
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from sculler.backend import address, get_array_module, is_gpu_array, to_device, to_device_of
from sculler.math import optim as K
from sculler.math import parallel
from sculler.model_average import ModelAverage

__all__ = [
    "Optimizer", "SGD", "Momentum", "Adam", "Adamax", "AdaGrad", "Adagrad", "DecayedAdaGrad",
    "AdaDelta", "Adadelta", "RMSProp", "L2Regularization", "L1Regularization", "ModelAverage",
    "L2Decay", "ClipGradByValue", "ClipGradByNorm", "ClipGradByGlobalNorm",
]

_COUNTERS = "__optimizer__"
# state-dict counter name -> the attribute it restores
_COUNTER_ATTRS = {"num_samples_processed": "_num_samples", "batch_id": "_batches",
                  "pass_id": "_pass", "learning_rate": "learning_rate"}


def _number(name: str, value: Any, low: float = 0.0, high: float = math.inf,
            high_open: bool = False) -> float:
    """Check a float hyper-parameter lies in ``[low, high]`` (or ``[low, high)``)."""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.number)):
        raise TypeError(f"{name} must be a number, got {value!r} ({type(value).__name__})")
    v = float(value)
    if not (low <= v <= high) or (high_open and v >= high) or math.isnan(v):
        bound = f"[{low}, {high})" if high_open else f"[{low}, {high}]"
        raise ValueError(f"{name} must be in {bound}, got {value!r}")
    return v


class L2Regularization:
    """L2 weight decay ``rate*|w|^2/2`` for every parameter without its own ``decay_rate``."""

    def __init__(self, rate: float) -> None:
        self.rate = self.decay_rate = _number("L2Regularization rate", rate)


class L1Regularization:
    """L1 weight decay ``rate*|w|_1``, applied after the update as soft-thresholding."""

    def __init__(self, rate: float) -> None:
        self.rate = self.decay_rate = _number("L1Regularization rate", rate)


class L2Decay:
    """Paddle 2.x ``regularizer.L2Decay(coeff)``: eager step adds ``coeff*w`` to the gradient."""

    def __init__(self, coeff: float = 0.0) -> None:
        self.coeff = _number("L2Decay coeff", coeff)


class ClipGradByValue:
    """Clip every gradient element to ``[min, max]`` (``min`` defaults to ``-max``)."""

    def __init__(self, max: float, min: float | None = None) -> None:  # noqa: A002
        self.max = float(max)
        self.min = -self.max if min is None else float(min)
        if self.min > self.max:
            raise ValueError(f"ClipGradByValue needs min <= max, got min={min}, max={max}")


class ClipGradByNorm:
    """Rescale each gradient to L2 norm at most ``clip_norm``: ``g *= c / max(|g|, c)``."""

    def __init__(self, clip_norm: float) -> None:
        self.clip_norm = _number("clip_norm", clip_norm)


class ClipGradByGlobalNorm:
    """Rescale all gradients together: ``g *= c / max(sqrt(sum_i |g_i|^2), c)``."""

    def __init__(self, clip_norm: float) -> None:
        self.clip_norm = _number("clip_norm", clip_norm)


class _EagerParamConfig:
    """The per-parameter settings eager ``step()`` hands to :meth:`Optimizer.update`."""

    __slots__ = ("learning_rate", "decay_rate")

    def __init__(self, learning_rate: float) -> None:
        self.learning_rate = learning_rate
        self.decay_rate = 0.0  # eager weight decay is already in the gradient


_SETTINGS = ("learning_rate", "momentum", "decay_rate", "decay_rate_l1",
             "gradient_clipping_threshold", "is_static")
_settings_of = operator.attrgetter(*_SETTINGS)


def _span(run: list[tuple[str, Any, Any, Any]], field: int) -> Any:
    """The flat slice of the shared buffer covering a run's consecutive views."""
    first, last = run[0][field], run[-1][field]
    start = (address(first) - address(first.base)) // first.itemsize
    stop = (address(last) - address(last.base)) // last.itemsize + last.size
    return first.base[start:stop]


def _cfg(config: Any, name: str, default: Any) -> Any:
    value = getattr(config, name, None) if config is not None else None
    return default if value is None else value


class Optimizer:
    """Base class: learning-rate schedule, regularization, clipping, state and counters.

    Subclasses name their per-parameter state arrays in ``_state_names`` and implement
    ``_apply``. ``_moment`` adds a momentum buffer when the momentum is non-zero,
    ``_lr_vec`` marks adaptive methods (they keep a per-element rate, ``lr`` included, also
    used by L1/L2 shrinkage as in Paddle's ``L1LrRegularizer``), ``_decay_in_kernel`` says
    whether dense L2 decay is part of the update formula (otherwise it is applied after it as
    ``w /= 1 + lr*l2``).

    Args:
        learning_rate: base rate (>= 0); the schedule scales it.
        learning_rate_decay_a, learning_rate_decay_b: the schedule's ``a`` and ``b``.
        learning_rate_schedule: one of ``sculler.math.optim.SCHEDULES``.
        learning_rate_args: ``"seg:rate,..."`` for 'manual' / 'pass_manual'.
        regularization: ``L2Regularization``, ``L1Regularization`` or a list of them.
        gradient_clipping_threshold: clip gradient elements to ``[-t, t]`` (None/0: off).
        model_average: a :class:`ModelAverage`: every update also feeds its running sums.
        parameters: eager tensors; enables ``step()`` and the Paddle 2.x variants.
        weight_decay: float or :class:`L2Decay`; eager: added to the gradient, v2: L2 rate.
        grad_clip: ``ClipGradByValue`` / ``ClipGradByNorm`` / ``ClipGradByGlobalNorm`` (eager).
    """

    _state_names: tuple[str, ...] = ()
    _moment = True
    _lr_vec = False
    _decay_in_kernel = True
    rho = 0.0

    def __init__(self, learning_rate: float = 1e-3, learning_rate_decay_a: float = 0.0,
                 learning_rate_decay_b: float = 0.0, learning_rate_schedule: str = "constant",
                 learning_rate_args: str = "", regularization: Any = None,
                 gradient_clipping_threshold: float | None = None,
                 model_average: ModelAverage | None = None,
                 parameters: Iterable[Any] | None = None, weight_decay: Any = None,
                 grad_clip: Any = None, batch_size: int | None = None,
                 is_async: bool = False) -> None:
        if is_async:
            raise NotImplementedError("optimizer is_async=True (PaddlePaddle's asynchronous "
                                      "SGD on parameter servers) is not supported; cluster "
                                      "training (SGD(is_local=False)) is synchronous")
        self.learning_rate = _number("learning_rate", learning_rate)
        self.learning_rate_decay_a = float(learning_rate_decay_a)
        self.learning_rate_decay_b = float(learning_rate_decay_b)
        self._set_schedule(learning_rate_schedule, learning_rate_args)
        self._set_regularization(regularization, weight_decay)
        if gradient_clipping_threshold is not None:
            gradient_clipping_threshold = _number(
                "gradient_clipping_threshold", gradient_clipping_threshold) or None
        self.gradient_clipping_threshold = gradient_clipping_threshold
        if model_average is not None and not isinstance(model_average, ModelAverage):
            raise TypeError(f"model_average must be a ModelAverage, got {model_average!r}")
        self.model_average = model_average
        if grad_clip is not None and not isinstance(
                grad_clip, (ClipGradByValue, ClipGradByNorm, ClipGradByGlobalNorm)):
            raise TypeError("grad_clip must be ClipGradByValue, ClipGradByNorm or "
                            f"ClipGradByGlobalNorm, got {grad_clip!r}")
        self.grad_clip = grad_clip
        self._parameters = self._check_parameters(parameters)
        self.eager = self._parameters is not None
        self.momentum = 0.0
        self._states: dict[str, dict[str, Any]] = {}
        self._scratch: dict[tuple[str, str], Any] = {}
        self._flat_states: dict[tuple[str, ...], dict[str, tuple[Any, list[Any]]]] = {}
        self._plans: dict[tuple, tuple] = {}
        self._num_samples = 0
        self._batches = 0
        self._pass = 0

    # ------------------------------------------------------------------ settings
    def _set_schedule(self, schedule: str, args: str) -> None:
        if schedule not in K.SCHEDULES:
            raise ValueError(f"unknown learning_rate_schedule {schedule!r}; expected one of "
                             f"{', '.join(K.SCHEDULES)}")
        a, b = self.learning_rate_decay_a, self.learning_rate_decay_b
        if schedule in ("exp", "discexp") and b <= 0:
            raise ValueError(f"schedule {schedule!r} needs learning_rate_decay_b > 0 "
                             f"(samples per decay), got {b}")
        if schedule == "caffe_poly" and a <= 0:
            raise ValueError(f"schedule 'caffe_poly' needs learning_rate_decay_a > 0, got {a}")
        self._manual = (K.parse_manual_schedule(args)
                        if schedule in ("manual", "pass_manual") else None)
        self.learning_rate_schedule = schedule
        self.learning_rate_args = args

    def _set_regularization(self, regularization: Any, weight_decay: Any) -> None:
        regs = regularization if isinstance(regularization, (list, tuple)) else (
            [] if regularization is None else [regularization])
        self._l2 = self._l1 = 0.0
        for reg in regs:
            if isinstance(reg, L2Regularization):
                self._l2 = reg.rate
            elif isinstance(reg, L1Regularization):
                self._l1 = reg.rate
            else:
                raise TypeError("regularization must be L2Regularization, L1Regularization "
                                f"or a list of them, got {reg!r}")
        if isinstance(weight_decay, L2Decay):
            weight_decay = weight_decay.coeff
        if weight_decay is not None:
            if regs:
                raise ValueError("pass either regularization= (v2) or weight_decay= (2.x), "
                                 "not both")
            self._l2 = _number("weight_decay", weight_decay)
        self.regularization = regularization

    @staticmethod
    def _check_parameters(parameters: Any) -> list[Any] | None:
        if parameters is None:
            return None
        if isinstance(parameters, (str, bytes, Mapping)) or not isinstance(parameters,
                                                                           Iterable):
            raise TypeError(f"parameters must be a list of tensors, got {parameters!r}")
        params = list(parameters)
        names = set()
        for p in params:
            if not hasattr(p, "_array") or not hasattr(p, "name"):
                raise TypeError(f"parameters must be eager tensors (with ._array and .name), "
                                f"got {type(p).__name__}")
            if p.name in names:
                raise ValueError(f"two parameters share the name {p.name!r}; names key the "
                                 "optimizer state and must be unique")
            names.add(p.name)
        return params

    # ------------------------------------------------------------------ schedule / counters
    def learning_rate_now(self) -> float:
        """The scheduled global learning rate for the next batch (before per-parameter
        multipliers), from the samples processed so far and the current pass."""
        return K.scheduled_learning_rate(
            self.learning_rate_schedule, self.learning_rate, self.learning_rate_decay_a,
            self.learning_rate_decay_b, self._num_samples, self._pass, self._manual)

    def start_pass(self, pass_id: int) -> None:
        """Record the pass id ('pass_manual' schedules on it)."""
        self._pass = int(pass_id)

    def finish_batch(self, num_samples: int) -> None:
        """Count a finished batch of ``num_samples`` samples (Paddle's num_samples_processed)."""
        if num_samples < 0:
            raise ValueError(f"num_samples must be >= 0, got {num_samples}")
        self._num_samples += int(num_samples)
        self._batches += 1
        if self.model_average is not None and not self.eager:
            self.model_average.finish_batch()

    def finish_pass(self) -> None:
        """End of a pass (the model average's window limit follows the pass length)."""
        if self.model_average is not None and not self.eager:
            self.model_average.finish_pass()

    # ------------------------------------------------------------------ buffers
    def _state(self, key: str, value: Any, momentum: float) -> dict[str, Any]:
        st = self._states.get(key)
        if st is None:
            st = self._states[key] = {}
        xp = get_array_module(value)
        names = self._state_names + (("moment",) if self._moment and momentum else ())
        for name in names:
            if name not in st:
                st[name] = xp.zeros_like(value)
        return st

    def _buffer(self, key: str, name: str, like: Any) -> Any:
        """A scratch array shaped like ``like``, kept between calls (never in state_dict)."""
        buf = self._scratch.get((key, name))
        if (buf is None or buf.shape != like.shape or buf.dtype != like.dtype
                or type(buf) is not type(like)):
            buf = self._scratch[(key, name)] = get_array_module(like).empty_like(like)
        return buf

    # ------------------------------------------------------------------ v2 interface
    def update(self, key: str, value: Any, grad: Any, config: Any = None,
               rows: Any = None) -> None:
        """Update ``value`` in place from ``grad`` (the batch-summed gradient).

        ``config`` is a ParameterConfig-like object (``learning_rate`` multiplier,
        ``momentum``, ``decay_rate``, ``decay_rate_l1``, ``gradient_clipping_threshold``,
        ``is_static``); missing/None fields fall back to the optimizer's settings. Clipping
        writes into ``grad``. With ``rows`` (unique row ids of a 2-D ``value``), ``grad`` is
        ``(len(rows), value.shape[1])`` and only those rows of value and state change: rows
        not in the batch keep their momentum (no movement, "lazy" momentum) and receive the
        L1/L2 decay they missed when next touched (Paddle's sparse regularizer catch-up:
        decay times the batches since the row was last updated).
        """
        if config is not None and getattr(config, "is_static", False):
            return
        avg = self.model_average
        if avg is not None and not self.eager:
            avg.before_update(key, value, rows)
            self._update(key, value, grad, config, rows)
            avg.after_update(key, value, rows)
        else:
            self._update(key, value, grad, config, rows)

    def _update(self, key: str, value: Any, grad: Any, config: Any, rows: Any) -> None:
        lr, mu, l2, l1, clip = self._settings(config)
        if rows is not None:
            self._update_rows(key, value, grad, rows, lr, mu, l1, l2, clip)
            return
        if grad.shape != value.shape:
            raise ValueError(f"parameter {key!r}: gradient shape {grad.shape} does not match "
                             f"value shape {value.shape}")
        self._dense_step(key, value, grad, self._state(key, value, mu), lr, mu, l1, l2, clip)

    def _settings(self, config: Any) -> tuple[float, float, float, float, Any]:
        """``(lr, momentum, l2, l1, clip)`` for one parameter's config."""
        return (self.learning_rate_now() * float(_cfg(config, "learning_rate", 1.0)),
                float(_cfg(config, "momentum", self.momentum)),
                float(_cfg(config, "decay_rate", self._l2)),
                float(_cfg(config, "decay_rate_l1", self._l1)),
                _cfg(config, "gradient_clipping_threshold", self.gradient_clipping_threshold))

    def _dense_step(self, key: str, value: Any, grad: Any, st: dict[str, Any], lr: float,
                    mu: float, l1: float, l2: float, clip: Any) -> None:
        """Clip, update and regularize one dense array (a parameter or a packed run)."""
        post = bool(l1) or not self._decay_in_kernel
        if not clip and not post and not self._lr_vec and self._blas_step(
                value, grad, st, lr, mu, l2):
            return
        tmp = self._buffer(key, "tmp", value)
        lr_vec = self._buffer(key, "lr", value) if self._lr_vec else None
        coef_new = 1.0 if self._batches == 0 else 1.0 - self.rho
        names = list(st)

        def piece(v, g, t, *rest):  # the whole step is elementwise: run it on any slice
            if clip:
                K.clip_by_value(g, -clip, clip)
            sub = dict(zip(names, rest))
            lv = rest[len(names)] if lr_vec is not None else None
            self._apply(v, g, sub, lr, mu, 0.0 if post else l2, t, lv, self.rho, coef_new)
            if post:
                self._regularize(v, lr, l1, l2, 1.0, t, lv)

        arrays = [value, grad, tmp, *(st[n] for n in names)]
        parallel.run(piece, arrays + ([lr_vec] if lr_vec is not None else []))

    def update_dense(self, items: Iterable[tuple[str, Any, Any, Any]]) -> None:
        """``update(key, value, grad, config)`` for each item, fused where possible.

        Items whose values and gradients are consecutive views of one buffer each (see
        ``ParameterSet.pack``) and whose settings agree are updated as one flat array: a
        handful of vectorised passes for all of them. Per-parameter state stays addressable
        (``state_dict`` is unchanged): it becomes views of the run's flat state.
        """
        items = list(items)
        if self.model_average is not None and not self.eager:
            for key, value, grad, config in items:  # the averager follows each parameter
                self.update(key, value, grad, config)
            return
        key = self._settings_key
        sig = tuple([(k, id(v), id(g), key(c)) for k, v, g, c in items])
        plan = self._plans.get(sig)
        if plan is None:
            if len(self._plans) > 16:
                self._plans.clear()
            runs, singles = self._flat_runs(items)
            fused = [(tuple(it[0] for it in run), run, _span(run, 1), _span(run, 2))
                     for run in runs]
            # the arrays are kept with the plan, so the ids in its key stay theirs
            plan = self._plans[sig] = (fused, singles, [(v, g) for _, v, g, _ in items])
        fused, singles, _ = plan
        for key, value, grad, config in singles:
            self.update(key, value, grad, config)
        for keys, run, value, grad in fused:
            config = run[0][3]
            if config is not None and getattr(config, "is_static", False):
                continue
            lr, mu, l2, l1, clip = self._settings(config)
            st = self._flat_state(keys, run, value, mu)
            self._dense_step("\x00" + "\x00".join(keys), value, grad, st, lr, mu, l1, l2, clip)

    def _flat_runs(self, items):
        """Split items into runs of >= 2 adjacent packed views with equal settings, and the
        rest."""
        def where(arr):
            base = arr.base
            if base is None or base.ndim != 1 or not arr.flags.c_contiguous:
                return None
            return id(base), (address(arr) - address(base)) // arr.itemsize

        keyed, singles = [], []
        for it in items:
            wv, wg = where(it[1]), where(it[2])
            if wv is None or wg is None or wv[1] != wg[1] or it[1].shape != it[2].shape:
                singles.append(it)
            else:
                keyed.append(((wv[0], wg[0], self._settings_key(it[3])), wv[1], it))
        keyed.sort(key=lambda k: (k[0][0], k[0][1], k[1]))
        chains: list[list] = []
        group = end = None
        for g, offset, it in keyed:
            if not chains or g != group or offset != end:
                chains.append([])
            chains[-1].append(it)
            group, end = g, offset + it[1].size
        runs = [c for c in chains if len(c) > 1]
        singles += [c[0] for c in chains if len(c) == 1]
        return runs, singles

    @staticmethod
    def _settings_key(config: Any) -> tuple:
        try:  # one C call for a full ParameterConfig (update_dense keys its plans on this)
            return _settings_of(config)
        except AttributeError:
            return tuple(getattr(config, name, None) for name in _SETTINGS)

    def _flat_state(self, keys: tuple[str, ...], run, value: Any, mu: float) -> dict[str, Any]:
        """The run's flat state arrays; each parameter's state is rebound to a view of them
        (existing values are copied in first, e.g. after ``load_state_dict``)."""
        names = self._state_names + (("moment",) if self._moment and mu else ())
        flat = self._flat_states.get(keys)
        if flat is not None and all(
                name in flat and self._states.get(k, {}).get(name) is view
                for name in names for k, view in zip(keys, flat[name][1])):
            return {name: flat[name][0] for name in names}
        xp = get_array_module(value)
        flat = {}
        for name in names:
            buf = xp.zeros_like(value)
            views, at = [], 0
            for key, v, _, _ in run:
                view = buf[at : at + v.size].reshape(v.shape)
                old = self._states.get(key, {}).get(name)
                if old is not None:
                    view[...] = old
                self._states.setdefault(key, {})[name] = view
                views.append(view)
                at += v.size
            flat[name] = (buf, views)
        self._flat_states[keys] = flat
        return {name: flat[name][0] for name in names}

    def _update_rows(self, key: str, value: Any, grad: Any, rows: Any, lr: float, mu: float,
                     l1: float, l2: float, clip: float | None) -> None:
        xp = get_array_module(value)
        rows = xp.asarray(rows).ravel()
        if rows.dtype.kind not in "iu":
            raise TypeError(f"parameter {key!r}: rows must be integer row ids, got dtype "
                            f"{rows.dtype}")
        if value.ndim != 2 or grad.shape != (rows.shape[0], value.shape[1]):
            raise ValueError(f"parameter {key!r}: a row update needs a 2-D value and a grad of "
                             f"shape (len(rows), {value.shape[-1]}), got value {value.shape}, "
                             f"grad {grad.shape}, {rows.shape[0]} rows")
        if xp.unique(rows).shape[0] != rows.shape[0]:
            raise ValueError(f"parameter {key!r}: rows must be unique (sum the gradients of "
                             "repeated ids first)")
        if clip:
            K.clip_by_value(grad, -clip, clip)
        st = self._state(key, value, mu)
        t0 = st.get("t0")
        if t0 is None:
            t0 = st["t0"] = xp.zeros(value.shape[0], dtype=np.int64)
        seen = t0[rows]
        since = (self._batches + 1 - seen).astype(value.dtype)[:, None]
        rho = value.dtype.type(self.rho)
        rho_old = rho**since
        coef_new = xp.where(seen[:, None] == 0, value.dtype.type(1), 1 - rho)
        sub = {name: arr[rows] for name, arr in st.items() if name != "t0"}
        v = value[rows]
        tmp = xp.empty_like(v)
        lr_vec = xp.empty_like(v) if self._lr_vec else None
        self._apply(v, grad, sub, lr, mu, 0.0, tmp, lr_vec, rho_old, coef_new)
        self._regularize(v, lr, l1, l2, since, tmp, lr_vec)
        value[rows] = v
        for name, arr in sub.items():
            st[name][rows] = arr
        t0[rows] = self._batches + 1

    @staticmethod
    def _regularize(value: Any, lr: float, l1: float, l2: float, times: Any, tmp: Any,
                    lr_vec: Any) -> None:
        scale = lr if lr_vec is None else 1.0  # an adaptive lr_vec holds lr already
        if l1:
            K.apply_l1(value, scale * l1 * times, tmp, lr_vec)
        if l2:
            K.apply_l2(value, scale * l2 * times, tmp, lr_vec)

    def _apply(self, value: Any, grad: Any, st: dict[str, Any], lr: float, mu: float,
               decay: float, tmp: Any, lr_vec: Any, rho_old: Any, coef_new: Any) -> None:
        raise NotImplementedError

    def _blas_step(self, value: Any, grad: Any, st: dict[str, Any], lr: float, mu: float,
                   decay: float) -> bool:
        """The whole dense update (no clipping, L1 or per-element rate) in a few threaded
        BLAS passes instead of ``_apply``'s NumPy ones, True when done; False (the default,
        nothing changed) where the method or the arrays have no such path."""
        return False

    def _step_count(self) -> int:
        return self._batches + 1

    # ------------------------------------------------------------------ state
    def state_dict(self) -> dict[str, np.ndarray]:
        """Flat copy of all state: ``"<key>.<name>"`` arrays and 0-d counter arrays."""
        d: dict[str, Any] = {}
        for key, st in self._states.items():
            for name, arr in st.items():
                d[f"{key}.{name}"] = arr.copy()
        d[f"{_COUNTERS}.num_samples_processed"] = np.array(self._num_samples, dtype=np.int64)
        d[f"{_COUNTERS}.batch_id"] = np.array(self._batches, dtype=np.int64)
        d[f"{_COUNTERS}.pass_id"] = np.array(self._pass, dtype=np.int64)
        d[f"{_COUNTERS}.learning_rate"] = np.array(self.learning_rate, dtype=np.float64)
        if self.model_average is not None:
            d.update(self.model_average.state_dict())
        return d

    def load_state_dict(self, d: Mapping[str, Any]) -> None:
        """Restore what :meth:`state_dict` returned; training then continues bit-identically.
        Every entry is checked before any is applied: a bad one leaves the state as it was."""
        self.apply_state(self.checked_state(d))

    def checked_state(self, d: Mapping[str, Any]) -> tuple:
        """``d`` checked and converted for :meth:`apply_state`, nothing applied yet.

        Raises:
            ValueError / TypeError: an unknown key or counter, or a value of the wrong kind.
        """
        if not isinstance(d, Mapping):
            raise TypeError(f"state dict must be a mapping, got {type(d).__name__}")
        averages = {k: v for k, v in d.items()
                    if k.startswith("__model_average__.") or ".avg_" in k}
        if averages and self.model_average is None:
            raise ValueError("the state dict holds model-average sums but this optimizer "
                             "has no model_average")
        average = self.model_average.checked_state(averages) if averages else None
        counters: dict[str, Any] = {}
        states = []
        for full, arr in d.items():
            if full in averages:
                continue
            key, sep, name = full.rpartition(".")
            if not sep:
                raise ValueError(f"state dict key {full!r} is not '<parameter>.<state>'")
            if key == _COUNTERS:
                if name not in _COUNTER_ATTRS:
                    raise ValueError(f"unknown optimizer counter {full!r}")
                convert = float if name == "learning_rate" else int
                counters[_COUNTER_ATTRS[name]] = convert(arr)
            else:
                states.append((key, name, np.asarray(arr)))
        return average, counters, states

    def apply_state(self, checked: tuple) -> None:
        """Apply what :meth:`checked_state` returned (nothing in it can fail)."""
        average, counters, states = checked
        if average is not None:
            self.model_average.apply_state(average)
        for attr, value in counters.items():
            setattr(self, attr, value)
        for key, name, host in states:
            arr = to_device(host)  # checked on the host, kept on the device chosen at init
            st = self._states.setdefault(key, {})
            old = st.get(name)
            if old is not None and old.shape == arr.shape and old.dtype == arr.dtype:
                old[...] = arr
            else:
                st[name] = arr.copy()

    # ------------------------------------------------------------------ eager interface
    def _eager_params(self) -> list[Any]:
        if self._parameters is None:
            raise ValueError(f"{type(self).__name__}.step() needs the optimizer built with "
                             "parameters=[...] (eager mode); the v2 trainer calls update()")
        return self._parameters

    def step(self) -> None:
        """One eager update of every parameter with a gradient (2.x: clip, decay, update)."""
        params = [p for p in self._eager_params()
                  if not getattr(p, "stop_gradient", False) and p.grad is not None]
        # clipping and weight decay change the gradient: only then work on a copy of it
        modifies = self.grad_clip is not None or bool(self._l2) or bool(
            self.gradient_clipping_threshold)
        grads = []
        for p in params:
            self._follow_device(p.name, p._array)
            if modifies:
                g = self._buffer(p.name, "grad", p._array)
                g[...] = p.grad._array
            else:
                g = p.grad._array
            grads.append(g)
        self._clip_eager(grads)
        lr_now = self.learning_rate_now()
        for p, g in zip(params, grads):
            if self._l2:
                tmp = self._buffer(p.name, "tmp", p._array)
                get_array_module(g).multiply(p._array, self._l2, out=tmp)
                g += tmp
            attr = getattr(p, "optimize_attr", None) or {}
            mult = attr.get("learning_rate", 1.0)
            if not self._eager_update(p.name, p._array, g, lr_now * float(mult)):
                self.update(p.name, p._array, g, _EagerParamConfig(mult))
        self._batches += 1

    def _follow_device(self, key: str, value: Any) -> None:
        """Move ``key``'s state to the device ``value`` is on, where they differ: a parameter
        moved by ``Layer.to`` is the same object on another device, its moments go with it."""
        st = self._states.get(key)
        if st:
            for name, arr in st.items():
                if type(arr) is not type(value) and is_gpu_array(arr) != is_gpu_array(value):
                    st[name] = to_device_of(arr, value)

    def _eager_update(self, key: str, value: Any, grad: Any, lr: float) -> bool:
        """A faster equivalent of ``update`` for one eager parameter (``lr``: the scheduled
        rate times the parameter's multiplier) where the method has one; False when it does
        not apply (``step`` then calls ``update``)."""
        return False

    def _clip_eager(self, grads: list[Any]) -> None:
        clip = self.grad_clip
        if clip is None or not grads:
            return
        if isinstance(clip, ClipGradByValue):
            for g in grads:
                K.clip_by_value(g, clip.min, clip.max)
            return
        norms = [float(get_array_module(g).vdot(g.ravel(), g.ravel())) for g in grads]
        if isinstance(clip, ClipGradByNorm):
            for g, sq in zip(grads, norms):
                if math.sqrt(sq) > clip.clip_norm:
                    g *= clip.clip_norm / math.sqrt(sq)
            return
        total = math.sqrt(sum(norms))
        if total > clip.clip_norm:
            for g in grads:
                g *= clip.clip_norm / total

    def clear_grad(self) -> None:
        """Drop the gradients of all parameters (``p.clear_grad()`` or ``p.grad = None``)."""
        for p in self._eager_params():
            if hasattr(p, "clear_grad"):
                p.clear_grad()
            else:
                p.grad = None

    clear_gradients = clear_grad

    def get_lr(self) -> float:
        """The current learning rate (eager name of :meth:`learning_rate_now`)."""
        return self.learning_rate_now()

    def set_lr(self, value: float) -> None:
        """Set the base learning rate (kept in the state dict)."""
        self.learning_rate = _number("learning_rate", value)

    def set_state_dict(self, d: Mapping[str, Any]) -> None:
        """Eager name of :meth:`load_state_dict`."""
        self.load_state_dict(d)


def _openblas() -> Any:
    from sculler.math import openblas  # ctypes and threadpoolctl: loaded by the first update

    return openblas


class Momentum(Optimizer):
    """SGD with momentum.

    v2 (Paddle v1 ``sgdUpdate``): ``m = mu*m - lr*(g + l2*w);  w += m``.
    Eager (Paddle 2.x): ``v = mu*v + g;  w -= lr*v`` (``g`` already holds ``coeff*w``). The two
    agree while the learning rate is constant (``m = -lr*v``); they are kept as two kernels
    because they differ under a schedule. ``momentum=None`` means 0 in v2 (Paddle's default)
    and 0.9 in eager mode (2.x's default).
    """

    def __init__(self, momentum: float | None = None, sparse: bool = False,
                 learning_rate: float = 1e-3, **kwargs: Any) -> None:
        super().__init__(learning_rate=learning_rate, **kwargs)
        if momentum is None:
            momentum = 0.9 if self.eager else 0.0
        self.momentum = _number("momentum", momentum)
        self.sparse = bool(sparse)

    def _eager_update(self, key: str, value: Any, grad: Any, lr: float) -> bool:
        """Eager heavy ball without ``update``'s per-parameter settings, plans and thread-split
        bookkeeping, for NumPy arrays without L1 decay or clipping:
        :func:`sculler.math.openblas.heavy_ball` (2 BLAS passes, threaded while a CPU is idle)
        for large parameters, else :func:`~sculler.math.optim.heavy_ball` below the
        thread-split size (from it ``update`` splits that kernel over threads)."""
        mu = self.momentum
        if (not mu or self._l1 or self.gradient_clipping_threshold
                or type(value) is not np.ndarray or type(grad) is not np.ndarray
                or grad.shape != value.shape):
            return False
        st = self._states.get(key)
        v = None if st is None else st.get("moment")
        if v is None:
            v = self._state(key, value, mu)["moment"]
        if _openblas().heavy_ball(value, grad, v, lr, mu):
            return True
        if value.size >= parallel.PARALLEL_MIN_ELEMENTS:
            return False
        K.heavy_ball(value, grad, v, lr, mu, self._buffer(key, "tmp", value))
        return True

    def _blas_step(self, value, grad, st, lr, mu, decay):
        mom = st.get("moment")
        if self.eager and mom is not None:
            return _openblas().heavy_ball(value, grad, mom, lr, mu)
        return _openblas().momentum_step(value, grad, mom, lr, mu, decay)

    def _apply(self, value, grad, st, lr, mu, decay, tmp, lr_vec, rho_old, coef_new):
        mom = st.get("moment")
        if self.eager and mom is not None:
            K.heavy_ball(value, grad, mom, lr, mu, tmp)
        else:
            K.momentum_step(value, grad, mom, lr, mu, decay, tmp)


class SGD(Momentum):
    """Plain SGD (Paddle 2.x ``optimizer.SGD``): ``w -= lr*(g + l2*w)``."""

    def __init__(self, learning_rate: float = 1e-3, parameters: Iterable[Any] | None = None,
                 weight_decay: Any = None, grad_clip: Any = None, **kwargs: Any) -> None:
        super().__init__(momentum=0.0, learning_rate=learning_rate, parameters=parameters,
                         weight_decay=weight_decay, grad_clip=grad_clip, **kwargs)


class AdaGrad(Optimizer):
    """AdaGrad (Paddle v1): ``G += g^2;  m = mu*m - lr/sqrt(G + eps)*(g + l2*w);  w += m``.

    Paddle v1 fixes ``eps`` at 1e-6 (``ada_epsilon``). Eager mode uses the same formula
    (Paddle 2.x puts ``eps`` outside the root: ``lr*g/(sqrt(G) + eps)``).
    """

    _state_names = ("sqsum",)
    _lr_vec = True

    def __init__(self, epsilon: float = 1e-6, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.epsilon = _number("epsilon", epsilon)

    def _apply(self, value, grad, st, lr, mu, decay, tmp, lr_vec, rho_old, coef_new):
        K.adagrad(value, grad, st.get("moment"), st["sqsum"], lr_vec, lr, self.epsilon, mu,
                  decay, tmp)


class DecayedAdaGrad(Optimizer):
    """Decayed AdaGrad: ``E = rho*E + (1-rho)*g^2`` (``E = g^2`` on the first batch),
    ``m = mu*m - lr/sqrt(E + eps)*(g + l2*w);  w += m``."""

    _state_names = ("sqsum",)
    _lr_vec = True

    def __init__(self, rho: float = 0.95, epsilon: float = 1e-6, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.rho = _number("rho", rho, 0.0, 1.0)
        self.epsilon = _number("epsilon", epsilon)

    def _apply(self, value, grad, st, lr, mu, decay, tmp, lr_vec, rho_old, coef_new):
        K.decayed_adagrad(value, grad, st.get("moment"), st["sqsum"], lr_vec, lr, rho_old,
                          coef_new, self.epsilon, mu, decay, tmp)


class AdaDelta(Optimizer):
    """AdaDelta: ``E[g^2] = rho*E[g^2] + (1-rho)*g^2;  r = sqrt((E[dx^2]+eps)/(E[g^2]+eps))``,
    ``E[dx^2] = rho*E[dx^2] + (1-rho)*(r*g)^2;  m = mu*m - lr*r*(g + l2*w);  w += m``."""

    _state_names = ("sqsum", "sqsum_update")
    _lr_vec = True

    def __init__(self, rho: float = 0.95, epsilon: float = 1e-6, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.rho = _number("rho", rho, 0.0, 1.0)
        self.epsilon = _number("epsilon", epsilon)

    def _apply(self, value, grad, st, lr, mu, decay, tmp, lr_vec, rho_old, coef_new):
        K.adadelta(value, grad, st.get("moment"), st["sqsum"], st["sqsum_update"], lr_vec,
                   lr, self.rho, self.epsilon, mu, decay, tmp)


class RMSProp(Optimizer):
    """Paddle v1's centred RMSProp: ``E[g^2] = rho*E[g^2] + (1-rho)*g^2`` (``g^2`` on the first
    batch), ``E[g] = rho*E[g] + (1-rho)*g``,
    ``m = mu*m - lr/sqrt(E[g^2] - E[g]^2 + eps)*(g + l2*w);  w += m``.

    Eager mode uses the same formula (Paddle 2.x's RMSProp defaults to the uncentred form).
    """

    _state_names = ("sqsum", "mean")
    _lr_vec = True

    def __init__(self, rho: float = 0.95, epsilon: float = 1e-6, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.rho = _number("rho", rho, 0.0, 1.0)
        self.epsilon = _number("epsilon", epsilon)

    def _apply(self, value, grad, st, lr, mu, decay, tmp, lr_vec, rho_old, coef_new):
        K.rmsprop(value, grad, st.get("moment"), st["sqsum"], st["mean"], lr_vec, lr, rho_old,
                  coef_new, self.rho, self.epsilon, mu, decay, tmp)


class Adam(Optimizer):
    """Adam: ``m = b1*m + (1-b1)*g;  v = b2*v + (1-b2)*g^2``,
    ``w -= lr*sqrt(1-b2^t)/(1-b1^t) * m/(sqrt(v) + eps)``, ``t`` = batches so far + 1.

    Eager mode uses 2.x's ``eps*sqrt(1-b2^t)`` in the denominator. Paddle v1 ignores a dense
    L2 rate for Adam; here L2 (and L1) are applied after the step as ``w /= 1 + lr*l2``, as
    Paddle's own regularizer does for sparse or L1-regularized parameters.
    """

    _state_names = ("moment", "moment2")
    _moment = False
    _decay_in_kernel = False

    def __init__(self, beta1: float = 0.9, beta2: float = 0.999, epsilon: float = 1e-8,
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.beta1 = _number("beta1", beta1, 0.0, 1.0, high_open=True)
        self.beta2 = _number("beta2", beta2, 0.0, 1.0, high_open=True)
        self.epsilon = _number("epsilon", epsilon)

    def _apply(self, value, grad, st, lr, mu, decay, tmp, lr_vec, rho_old, coef_new):
        K.adam(value, grad, st["moment"], st["moment2"], lr, self.beta1, self.beta2,
               self._step_count(), self.epsilon, tmp, scale_epsilon=self.eager)


class Adamax(Optimizer):
    """Adamax: ``m = b1*m + (1-b1)*g;  u = max(b2*u + eps, |g|);  w -= lr/(1-b1^t) * m/u``.

    ``epsilon=None`` means 0 in v2 (Paddle v1 has none) and 1e-8 in eager mode (2.x).
    Regularization as in :class:`Adam`.
    """

    _state_names = ("moment", "inf_norm")
    _moment = False
    _decay_in_kernel = False

    def __init__(self, beta1: float = 0.9, beta2: float = 0.999,
                 epsilon: float | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.beta1 = _number("beta1", beta1, 0.0, 1.0, high_open=True)
        self.beta2 = _number("beta2", beta2, 0.0, 1.0, high_open=True)
        if epsilon is None:
            epsilon = 1e-8 if self.eager else 0.0
        self.epsilon = _number("epsilon", epsilon)

    def _apply(self, value, grad, st, lr, mu, decay, tmp, lr_vec, rho_old, coef_new):
        K.adamax(value, grad, st["moment"], st["inf_norm"], lr, self.beta1, self.beta2,
                 self._step_count(), self.epsilon, tmp)


Adagrad = AdaGrad
Adadelta = AdaDelta
