"""Model averaging (``paddle.v2.optimizer.ModelAverage``): PaddlePaddle's AverageOptimizer.

The optimizer adds every parameter's value to a running sum after each update. The averaged
parameter is the mean of the values after the last ``n`` updates, where the window ``n``
restarts once it is long enough:

    n_acc >= min_window  and  n_acc >= min(max_window, average_window * num_updates)

At a restart the sum so far becomes the "old" sum (the window before), so the average always
covers the current partial window plus the one full window before it, i.e. between
``average_window`` and ``2 * average_window`` of all updates (capped by the max window):

    average = (sum_old + sum_now) / (n_old + n_now)

``min_window = min(10000, max_window)``; ``max_window = max_average_window``, or, when that is
None, the number of batches of the last pass (from the end of the first pass on). Sums are
moved to a second buffer every 16384 updates to limit rounding (as Paddle does). Rows of
sparse-update parameters are summed lazily: a row untouched for ``k`` batches adds its
unchanged value ``k`` times when next touched or when the average is read.

The trainer evaluates (``test``), saves (``save_parameter_to_tar``), runs its ``EndPass``
handlers and leaves the parameters after ``train`` with the averaged values (``apply``);
training itself continues from the raw values (``restore``).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np

from sculler.backend import to_device

__all__ = ["ModelAverage"]

_SHIFT_EVERY = 16384
_NO_LIMIT = 2**63 - 1
_COUNTERS = ("num_updates", "prev_num_updates", "num_accumulates", "old_num_accumulates",
             "min_window", "max_window")


class ModelAverage:
    """Average the parameters over a sliding window of updates (see the module docstring).

    Args:
        average_window: the window as a fraction of all updates so far (> 0).
        max_average_window: the longest window in batches (None: the last pass's batches).
        do_average_in_cpu: accepted for compatibility (Sculler always averages on the host
            arrays of the parameters).
    """

    def __init__(self, average_window: float, max_average_window: int | None = None,
                 do_average_in_cpu: bool = False) -> None:
        if isinstance(average_window, bool) or not isinstance(average_window,
                                                              (int, float, np.number)):
            raise TypeError(f"average_window must be a number, got {average_window!r}")
        if not 0 < float(average_window) or math.isnan(float(average_window)):
            raise ValueError(f"average_window must be > 0, got {average_window!r}")
        if max_average_window is not None and (isinstance(max_average_window, bool) or not
                                               isinstance(max_average_window, (int, np.integer))
                                               or max_average_window < 1):
            raise ValueError(f"max_average_window must be a positive int or None, got "
                             f"{max_average_window!r}")
        self.average_window = float(average_window)
        self.max_average_window = max_average_window
        self.do_average_in_cpu = do_average_in_cpu
        self.reset()

    def reset(self) -> None:
        """Forget every sum and counter."""
        limit = _NO_LIMIT if self.max_average_window is None else int(self.max_average_window)
        self.num_updates = self.prev_num_updates = 0
        self.num_accumulates = self.old_num_accumulates = 0
        self.min_window, self.max_window = min(10000, limit), limit
        self._sums: dict[str, list[Any]] = {}  # key -> [sum_now, sum_shifted, sum_old]
        self._values: dict[str, Any] = {}
        self._done: dict[str, Any] = {}  # sparse rows: batches already summed per row
        self._backup: dict[str, Any] | None = None

    # ------------------------------------------------------------------ optimizer hooks
    def before_update(self, key: str, value: Any, rows: Any = None) -> None:
        """Before a row update: sum the untouched batches of those rows (old values)."""
        if rows is None or key not in self._done:
            return
        done = self._done[key]
        missed = (self.num_updates - done[rows]).astype(value.dtype)[:, None]
        self._sums[key][0][rows] += value[rows] * missed

    def after_update(self, key: str, value: Any, rows: Any = None) -> None:
        """Add the updated value (or rows) to the running sum."""
        sums = self._sums.get(key)
        if sums is None:
            sums = self._sums[key] = [np.zeros_like(value) for _ in range(3)]
        self._values[key] = value
        if rows is None:
            sums[0] += value
            return
        done = self._done.get(key)
        if done is None:
            done = self._done[key] = np.zeros(value.shape[0], dtype=np.int64)
            sums[0] += value * self.num_updates  # rows never touched kept their value
            done[...] = self.num_updates
        sums[0][rows] += value[rows]
        done[rows] = self.num_updates + 1

    def finish_batch(self) -> None:
        """One update done: move the window forward, restarting it when long enough."""
        self.num_updates += 1
        self.num_accumulates += 1
        if self.num_updates % _SHIFT_EVERY == 0:
            for s in self._sums.values():
                s[1] += s[0]
                s[0][...] = 0
        if self._window_full():
            self._catch_up()
            for s in self._sums.values():
                np.add(s[0], s[1], out=s[2])
                s[0][...] = 0
                s[1][...] = 0
            self.old_num_accumulates = self.num_accumulates
            self.num_accumulates = 0

    def finish_pass(self) -> None:
        """End of a pass: without ``max_average_window`` the window is capped by this pass's
        number of batches."""
        if self.max_average_window is None and self.num_updates > self.prev_num_updates:
            self.max_window = self.num_updates - self.prev_num_updates
            self.prev_num_updates = self.num_updates
        self.min_window = min(self.min_window, self.num_updates)

    def _window_full(self) -> bool:
        n = self.num_accumulates
        return n >= self.min_window and n >= min(self.max_window,
                                                 self.num_updates * self.average_window)

    def _catch_up(self) -> None:
        for key, done in self._done.items():
            value = self._values[key]
            missed = (self.num_updates - done).astype(value.dtype)[:, None]
            self._sums[key][0] += value * missed
            done[...] = self.num_updates

    # ------------------------------------------------------------------ averaged values
    def average(self, key: str):
        """The averaged value of parameter ``key`` (a new array)."""
        count = self.num_accumulates + self.old_num_accumulates
        if key not in self._sums or count == 0:
            raise KeyError(f"no averaged value for {key!r} yet (no update accumulated)")
        self._catch_up()
        s = self._sums[key]
        return (s[0] + s[1] + s[2]) / count

    @property
    def applied(self) -> bool:
        return self._backup is not None

    def apply(self) -> None:
        """Write the averaged values into the parameters, keeping the raw ones aside."""
        if self._backup is not None or self.num_accumulates + self.old_num_accumulates == 0:
            return
        self._backup = {}
        for key, value in self._values.items():
            avg = self.average(key)
            self._backup[key] = value.copy()
            value[...] = avg

    def restore(self) -> None:
        """Put the raw (training) values back after :meth:`apply`."""
        if self._backup is None:
            return
        for key, raw in self._backup.items():
            self._values[key][...] = raw
        self._backup = None

    def raw_value(self, key: str, value: Any):
        """The training value of ``key``: its backup while averages are applied."""
        return self._backup.get(key, value) if self._backup is not None else value

    @contextlib.contextmanager
    def averaged(self) -> Iterator[None]:
        """``with ma.averaged():`` the parameters hold their averages (restored after)."""
        was = self.applied
        self.apply()
        try:
            yield
        finally:
            if not was:
                self.restore()

    # ------------------------------------------------------------------ state
    def state_dict(self) -> dict[str, np.ndarray]:
        """Sums (``<key>.avg_sum<i>``, ``<key>.avg_done``) and counters, for checkpoints."""
        d: dict[str, np.ndarray] = {}
        for key, sums in self._sums.items():
            for i, s in enumerate(sums):
                d[f"{key}.avg_sum{i}"] = s.copy()
        for key, done in self._done.items():
            d[f"{key}.avg_done"] = done.copy()
        for name in _COUNTERS:
            d[f"__model_average__.{name}"] = np.array(getattr(self, name), dtype=np.int64)
        return d

    def load_state_dict(self, d: Mapping[str, Any]) -> None:
        """Restore :meth:`state_dict`'s entries (the parameters are bound again at their next
        update); every entry is checked before any is applied."""
        self.apply_state(self.checked_state(d))

    def checked_state(self, d: Mapping[str, Any]) -> tuple:
        """``d`` checked and converted for :meth:`apply_state`, nothing applied yet."""
        counters, done, sums = {}, {}, []
        for full, arr in d.items():
            key, _, name = full.rpartition(".")
            if key == "__model_average__":
                if name not in _COUNTERS:
                    raise ValueError(f"unknown model-average counter {full!r}")
                counters[name] = int(arr)
            elif name == "avg_done":
                done[key] = np.array(arr, dtype=np.int64)
            elif name.startswith("avg_sum") and name[7:] in ("0", "1", "2"):
                sums.append((key, int(name[7:]), np.array(arr)))
            else:
                raise ValueError(f"unknown model-average state {full!r}")
        return counters, done, sums

    def apply_state(self, checked: tuple) -> None:
        """Apply what :meth:`checked_state` returned."""
        counters, done, sums = checked
        for name, value in counters.items():
            setattr(self, name, value)
        self._done.update(done)
        for key, i, arr in sums:
            self._sums.setdefault(key, [None, None, None])[i] = to_device(arr)
