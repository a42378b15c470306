"""What flows between layers: values (dense or CSR), ids, gradients and sequence layout."""

from __future__ import annotations

import numpy as np

from sculler.backend import to_numpy
from sculler.math.sparse import CsrMatrix


class Argument:
    """A batch as one layer sees it.

    - ``value``: (batch, dim) dense array, or a :class:`CsrMatrix` for sparse inputs;
    - ``ids``: (batch,) int64 labels or word ids;
    - ``grad``: gradient w.r.t. ``value`` (same shape), or None where none is needed;
    - ``seq_starts``: start offsets of the sequences packed in the batch, ending with the batch
      size (``[0, 3, 7]`` = two sequences of 3 and 4 steps); ``sub_seq_starts`` likewise for
      the sub-sequences of nested sequences.
    """

    __slots__ = ("value", "ids", "grad", "seq_starts", "sub_seq_starts", "ids_checked",
                 "ids_host")

    def __init__(self, value=None, ids=None, grad=None, seq_starts=None, sub_seq_starts=None):
        self.value = value
        self.ids = ids
        self.grad = grad
        self.seq_starts = seq_starts
        self.sub_seq_starts = sub_seq_starts
        self.ids_checked: tuple | None = None  # (ids array, bound) from mark_ids_below
        self.ids_host: tuple | None = None  # (device ids, their host copy) from mark_host_ids

    def mark_ids_below(self, bound: int) -> None:
        """Record that every id of the current ``ids`` array lies in ``[0, bound)`` (the
        feeder checked them), so the layers reading it skip their own range check."""
        self.ids_checked = (self.ids, bound)

    def ids_known_below(self, bound: int) -> bool:
        """Whether :meth:`mark_ids_below` proved every id below ``bound`` for this very
        ``ids`` array (a new array, e.g. remapped ids, is not covered)."""
        checked = self.ids_checked
        return checked is not None and checked[0] is self.ids and checked[1] <= bound

    def mark_host_ids(self, host: np.ndarray) -> None:
        """Record that the current (device) ``ids`` were copied from ``host``, so that host-side
        bookkeeping on them (sorting an embedding's rows) needs no copy back."""
        self.ids_host = (self.ids, host)

    def host_ids(self) -> np.ndarray:
        """``ids`` on the host: the copy :meth:`mark_host_ids` recorded for this very array, else
        ``ids`` itself on the CPU or a copy back from the GPU (which waits for the device)."""
        known = self.ids_host
        if known is not None and known[0] is self.ids:
            return known[1]
        return to_numpy(self.ids)

    @property
    def batch_size(self) -> int:
        if self.value is not None:
            return int(self.value.shape[0])
        if self.ids is not None:
            return int(self.ids.shape[0])
        return 0

    def table_rows(self) -> np.ndarray:
        """The rows of a table this batch reads (what a remotely updated table prefetches):
        its ids, or the columns its sparse value names; sorted, unique, on the host."""
        if self.ids is not None:
            return np.unique(self.host_ids())
        return np.unique(to_numpy(self.value.indices))

    @property
    def is_sparse(self) -> bool:
        return isinstance(self.value, CsrMatrix)

    @property
    def num_sequences(self) -> int:
        return 0 if self.seq_starts is None else len(self.seq_starts) - 1

    def describe(self) -> str:
        """A short human description for error messages."""
        parts = []
        if self.value is not None:
            kind = "sparse" if self.is_sparse else "dense"
            parts.append(f"{kind} value of shape {tuple(self.value.shape)}")
        if self.ids is not None:
            parts.append(f"ids of shape {tuple(np.shape(self.ids))}")
        if self.seq_starts is not None:
            parts.append(f"{self.num_sequences} sequences")
        return ", ".join(parts) or "empty argument"
