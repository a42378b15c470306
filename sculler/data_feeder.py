"""``DataFeeder``: a minibatch (list of sample tuples, or an :class:`ArrayBatch` of columns)
-> one core ``Argument`` per data layer.

Each field is converted by its :class:`~sculler.data_type.InputType` with one
``np.asarray`` per data layer: dense rows into a (batch, dim) float array, ids into an int64
vector, sparse rows into a :class:`CsrMatrix`; sequences are packed
end to end with ``seq_starts`` (and ``sub_seq_starts`` for nested sequences). Checks run on
the whole array; only when one fails is the offending sample looked for, so errors still name
the data layer and the sample. Nothing is coerced: strings or booleans anywhere (NumPy would
read True as 1 among floats), non-integral numbers for ids or sparse column ids, sparse pairs
of other than two numbers, and with positional feeding a sample with more fields than data
layers are errors. A dense or id column of an :class:`ArrayBatch` that
already has the feeder's dtype is bound as a read-only view: nothing is copied.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from itertools import chain
from operator import attrgetter, itemgetter
from typing import Any

import numpy as np

from sculler import backend
from sculler.core.argument import Argument
from sculler.core.layer import first_id_out_of_range
from sculler.data_type import DataType, InputType
from sculler.math.sparse import CsrMatrix
from sculler.minibatch import ArrayBatch

__all__ = ["DataFeeder", "default_feeding_map"]


class _BadSample(ValueError):
    """A check that knows which sample failed (``sample``; None when it does not)."""

    def __init__(self, sample: int | None, message: str):
        super().__init__(message)
        self.sample = sample


_BOOL_REFUSED = "expected numbers, got a boolean (True/False is not read as 1/0)"


def _entry_size(sizes: set) -> str:
    """``3 values`` for a wrong-sized entry, ``no length`` for a scalar one."""
    size = min(sizes, key=lambda n: -1 if n is None else n)
    return "no length (a single number)" if size is None else f"{size} values"


def _to_gpu(args: Iterable[Argument]) -> None:
    """Move the dense values and ids of a converted batch to the GPU in one copy
    (:func:`sculler.backend.to_gpu_together`); the ids keep their host copy for host-side
    bookkeeping (:meth:`Argument.host_ids`). Sparse values go when a layer reads them."""
    slots = [(arg, field) for arg in args for field in ("value", "ids")
             if type(getattr(arg, field)) is np.ndarray]
    moved = backend.to_gpu_together([getattr(arg, field) for arg, field in slots])
    for (arg, field), device in zip(slots, moved):
        host = getattr(arg, field)
        setattr(arg, field, device)
        if field == "ids":
            checked = arg.ids_checked
            if checked is not None and checked[0] is host:
                arg.mark_ids_below(checked[1])
            arg.mark_host_ids(host)


def _describe_column(column: Any) -> str:
    """``shape (128, 783) float32`` for an array column, its length for a list."""
    if isinstance(column, np.ndarray):
        return f"shape {column.shape} {column.dtype}"
    return f"{type(column).__name__} of {len(column)} samples"


_CONTAINERS = frozenset({list, tuple, np.ndarray})
_BOOLS = frozenset({bool, np.bool_})
_PY_NUMBERS = frozenset({float, int})


def _leaf_types(values: Sequence) -> set:
    """The types of the scalars in ``values`` and in its nested lists and tuples, arrays
    counted by their dtype's scalar type. ``set(map(type, ...))`` runs at C speed, one level of
    nesting at a time; a level is materialised only when another one follows it."""
    leaves: set = set()
    types = set(map(type, values))
    while True:
        if np.ndarray in types:
            arrays = values if len(types) == 1 else [v for v in values if type(v) is np.ndarray]
            leaves.update(d.type for d in set(map(attrgetter("dtype"), arrays)))
        leaves |= types - _CONTAINERS
        if not types & {list, tuple}:
            return leaves
        nested = values if types <= {list, tuple} else [
            v for v in values if type(v) in (list, tuple)]
        types = set(map(type, chain.from_iterable(nested)))
        if not types & _CONTAINERS:
            return leaves | types
        values = list(chain.from_iterable(nested))


def _numbers(values: Any, dtype: Any = None, direct: frozenset = _PY_NUMBERS) -> np.ndarray:
    """``values`` (an array, or nested lists of numbers) as an array of numbers.

    NumPy reads ``True`` as 1 among numbers (``np.asarray([[True, False], [0.5, 1.0]])`` is a
    float array), so the leaf types are looked at first and booleans refused. Leaves all of
    the ``direct`` Python types are converted straight to ``dtype`` when one is given: NumPy's
    dtype discovery over nested lists costs about what the conversion does.

    Raises:
        TypeError: a boolean, a string or another non-number.
    """
    if isinstance(values, np.ndarray):
        arr = values
    else:
        leaves = _leaf_types(values)
        if leaves & _BOOLS:
            raise TypeError(_BOOL_REFUSED)
        arr = None
        if dtype is not None and leaves <= direct:
            try:
                arr = np.asarray(values, dtype=dtype)
            except OverflowError as e:
                raise ValueError(f"a number is out of range ({e})") from None
        if arr is None:
            arr = np.asarray(values)
    if arr.dtype.kind not in "iuf":
        raise TypeError(f"expected numbers, got values of dtype {arr.dtype}")
    return arr


def _batching_note(minibatch: Any) -> str:
    """A hint when ``minibatch`` is not a list of samples: one sample (a tuple of fields that
    are not samples; the reader was not batched) or a list of minibatches (batched twice)."""
    if isinstance(minibatch, tuple) and not all(isinstance(f, (tuple, list)) for f in minibatch):
        return ("; the minibatch is a tuple of fields, which looks like one sample: the "
                "reader yields samples, not minibatches; batch it with "
                "paddle.batch(reader, batch_size)")
    first = minibatch[0] if len(minibatch) else None
    if isinstance(first, list) and first and isinstance(first[0], (tuple, list)):
        return ("; sample 0 is itself a list of samples: the reader is batched twice "
                "(paddle.batch over a reader that already yields minibatches); batch it once "
                "(`sculler train` batches a script's train_reader itself)")
    return ""


def _starts(lengths: list[int]) -> np.ndarray:
    out = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=out[1:])
    return out


def default_feeding_map(data_types: Sequence[tuple[str, InputType]]) -> dict[str, int]:
    """``{name: i}`` for the i-th ``(name, type)`` of ``data_types``: the feeding used when
    none is given (PaddlePaddle's ``default_feeding_map``)."""
    return {name: i for i, (name, _) in enumerate(data_types)}


class DataFeeder:
    """Converts minibatches for the data layers ``data_types`` (``[(name, InputType)]``).

    ``feeding`` maps data layer names to sample field indices: a dict ``{name: index}``, a list
    of names (field ``i`` feeds ``names[i]``) or None (fields in data-layer order).

    With ``reuse_buffers`` (the trainer's feeder), dense rows that are already 1-D arrays of
    the feeder's dtype are concatenated into one buffer per data layer that every call
    overwrites: no batch-sized allocation per batch, but an ``Argument`` returned by one call
    is only valid until the next.
    """

    def __init__(self, data_types: Sequence[tuple[str, InputType]], feeding: Any = None,
                 reuse_buffers: bool = False):
        self.data_types = list(data_types)
        self._buffers: dict[str, np.ndarray] | None = {} if reuse_buffers else None
        names = [n for n, _ in self.data_types]
        # positional feeding (None or a list of names) reads every field: one more is a
        # mistake, never silently dropped; a dict picks the fields it names
        self._every_field_read = not isinstance(feeding, Mapping)
        if feeding is None:
            feeding = default_feeding_map(self.data_types)
        elif isinstance(feeding, (list, tuple)):
            feeding = {n: i for i, n in enumerate(feeding)}
        elif not isinstance(feeding, Mapping):
            raise TypeError(f"feeding must be a dict name -> field index, a list of names or "
                            f"None, got {feeding!r}")
        missing = [n for n in names if n not in feeding]
        if missing:
            raise ValueError(f"feeding {dict(feeding)} gives no field for data layers "
                             f"{missing}; data layers are {names}")
        self.feeding = {n: int(feeding[n]) for n in names}
        self._fields_read = max(self.feeding.values(), default=-1) + 1
        self.dtype = backend.get_default_dtype()

    def __call__(self, dat: Sequence[Any]) -> dict[str, Argument]:
        return self.convert(dat)

    def convert(self, dat: Sequence[Any]) -> dict[str, Argument]:
        """One :class:`Argument` per data layer, by name."""
        try:
            size = len(dat)
        except TypeError:
            raise TypeError(f"a minibatch must be a list of samples (tuples, one field per "
                            f"data layer), got {type(dat).__name__}: check what the "
                            "reader yields") from None
        if size == 0:
            raise ValueError("cannot feed an empty minibatch")
        columns = dat.columns if isinstance(dat, ArrayBatch) else None
        if columns is not None and len(columns) < self._fields_read:
            self._columns_missing(columns)
        if self._every_field_read:
            self._refuse_extra_fields(dat, columns)
        out = {}
        for name, tp in self.data_types:
            col = self.feeding[name]
            if columns is not None:
                fields = columns[col]
            else:
                try:
                    fields = tuple(map(itemgetter(col), dat))  # (asarray: faster)
                except (IndexError, TypeError, KeyError):
                    self._check_samples(dat)
                    raise
            try:
                out[name] = self._convert(fields, tp, name, columns is not None)
            except _BadSample as e:
                raise ValueError(f"data layer {name!r} (expects {tp}): sample {e.sample} field "
                                 f"{col} does not match: {e}") from None
            except (ValueError, TypeError) as e:
                where = f"field {col}"
                if columns is not None:
                    where = f"ArrayBatch column {col} ({_describe_column(fields)})"
                bad = self._first_bad(fields, tp)
                who = (f"sample {bad} {where}" if bad is not None else
                       f"{where} of the batch (each sample converts alone, not together)")
                raise ValueError(f"data layer {name!r} (expects {tp}): {who} does not match: "
                                 f"{e}{_batching_note(dat)}") from None
        if backend.gpu_enabled():
            _to_gpu(out.values())
        return out

    def _check_samples(self, minibatch: Sequence[Any]) -> None:
        """ValueError naming the first sample that is not a tuple/list with enough fields."""
        need = self._fields_read
        for i, sample in enumerate(minibatch):
            if not isinstance(sample, (tuple, list)) or len(sample) < need:
                got = len(sample) if isinstance(sample, (tuple, list)) else type(sample).__name__
                who = [n for n, c in self.feeding.items() if not isinstance(
                    sample, (tuple, list)) or c >= len(sample)]
                raise ValueError(f"sample {i} has {got} fields, but data layers {who} read "
                                 f"fields up to index {need - 1} (feeding {self.feeding})"
                                 f"{_batching_note(minibatch)}")

    def _refuse_extra_fields(self, minibatch: Sequence[Any], columns: tuple | None) -> None:
        """ValueError naming the first sample with more fields than the data layers read."""
        need = self._fields_read
        if columns is not None:
            counts = [len(columns)]
        else:
            try:
                counts = list(map(len, minibatch))
            except TypeError:
                return  # a sample that is not a tuple: reported where its field is read
        if max(counts) <= need:
            return
        i = next(i for i, c in enumerate(counts) if c > need)
        what = "the ArrayBatch" if columns is not None else f"sample {i}"
        note = "" if columns is not None else _batching_note(minibatch)
        if note:
            raise ValueError(f"{what} has {counts[i]} fields, but the data layers "
                             f"{list(self.feeding)} read {need}{note}")
        raise ValueError(f"{what} has {counts[i]} fields, but the data layers "
                         f"{list(self.feeding)} read {need} (feeding {self.feeding}): the extra "
                         f"fields would be ignored; drop them from the reader, or pass "
                         f"feeding={{name: field index}} to choose the fields to read")

    def _columns_missing(self, columns: tuple) -> None:
        """ValueError for an ArrayBatch with fewer columns than the fields the feeding reads."""
        who = [n for n, c in self.feeding.items() if c >= len(columns)]
        raise ValueError(f"the ArrayBatch has {len(columns)} columns, but data layers {who} "
                         f"read fields up to index {self._fields_read - 1} (feeding "
                         f"{self.feeding})")

    def _buffer(self, name: str, size: int) -> np.ndarray:
        """The first ``size`` entries of ``name``'s reused flat buffer (grown when short)."""
        buf = self._buffers.get(name)
        if buf is None or buf.size < size:
            buf = self._buffers[name] = np.empty(size, self.dtype)
        return buf[:size]

    def _into_buffer(self, fields: Sequence, dim: int, name: str) -> np.ndarray | None:
        """The rows concatenated into ``name``'s reused buffer as ``(n, dim)`` when each is a
        1-D array of the feeder's dtype and length ``dim``; None otherwise (the caller takes
        the general path, whose checks name the bad sample)."""
        size = len(fields) * dim
        flat = self._buffer(name, size)
        try:  # casting "no": any other dtype fails; a 0-d or 2-D row fails on its ndim
            np.concatenate(fields, out=flat, casting="no")
        except (ValueError, TypeError):
            return None
        if len(set(map(len, fields))) != 1:  # equal lengths summing to n * dim: all are dim
            return None
        return flat.reshape(-1, dim)

    def _dense(self, fields: Sequence, dim: int, name: str | None = None,
               column: bool = False) -> np.ndarray:
        """``(n, dim)`` float array of the rows (one copy; none more when they already have
        the feeder's dtype). Samples may also be 2-D or 3-D arrays of ``dim`` values. A
        ``column`` (an ArrayBatch's array of all the rows) of the feeder's dtype is returned as
        a read-only view: layers never write into their inputs, and the user's data stays
        safe if one tried."""
        if self._buffers is not None and name is not None and not column:
            value = self._into_buffer(fields, dim, name)
            if value is not None:
                return value
        value = _numbers(fields, self.dtype)
        if column and value.dtype == self.dtype:
            value = value.view()
            value.flags.writeable = False
        elif column and self._buffers is not None and name is not None:
            converted = self._buffer(name, value.size).reshape(value.shape)
            np.copyto(converted, value, casting="same_kind")
            value = converted
        value = value.astype(self.dtype, copy=False)
        if value.ndim == 1 and dim == 1:
            value = value.reshape(-1, 1)
        elif value.ndim in (3, 4) and math.prod(value.shape[1:]) == dim:
            # samples of 2 or 3 dimensions (an image's HW or CHW) are read in C order, as
            # PaddlePaddle's feeder does
            value = value.reshape(value.shape[0], dim)
        if value.ndim != 2 or value.shape[1] != dim:
            raise ValueError(f"got values of shape {value.shape}, expected (n, {dim}) or "
                             f"samples of 2 or 3 dimensions holding {dim} values")
        return value

    def _ids(self, fields: Sequence, dim: int, what: str = "id") -> np.ndarray:
        """``fields`` as an int64 vector of one integer each in ``[0, dim)``: floats must hold
        integral values, booleans and anything else are refused (``what`` names them)."""
        raw = _numbers(fields, np.int64, frozenset({int}))
        if raw.dtype.kind in "iu":
            ids = raw.astype(np.int64, copy=False).reshape(-1)
        elif raw.dtype.kind == "f":
            with np.errstate(invalid="ignore"):  # NaN, inf: caught as not integral below
                ids = raw.astype(np.int64).reshape(-1)
            frac = raw.reshape(-1) != ids
            if frac.any():
                raise _BadSample(int(frac.argmax()) if raw.ndim == 1 else None,
                                 f"{what} {float(raw.reshape(-1)[frac.argmax()])!r} is not an "
                                 f"integer (integer {what}s expected; a float {what} usually "
                                 "comes from Python 3's '/': use '//' for integer division)")
        if raw.ndim != 1 and not isinstance(fields, np.ndarray):
            raise ValueError(f"expected one integer {what} per entry, got entries of shape "
                             f"{raw.shape[1:]}")
        if ids.shape[0] != len(fields):
            raise ValueError(f"expected one integer {what} per entry, got {len(ids)} values "
                             f"for {len(fields)} entries")
        bad = first_id_out_of_range(ids, dim)
        if bad is not None:
            raise ValueError(f"{what} {bad} outside [0, {dim})")
        return ids

    def _sparse(self, fields: Sequence, dim: int, with_values: bool) -> CsrMatrix:
        """CSR rows from per-sample lists of column ids, or of ``(column id, value)`` pairs
        ``with_values``: ids must be integers in ``[0, dim)`` and pairs exactly two numbers;
        nothing is rounded, truncated or read as 1/0."""
        indptr = _starts(list(map(len, fields)))
        flat = list(chain.from_iterable(fields))
        try:
            if not with_values:
                cols = self._ids(flat, dim, "column id") if flat else np.empty(0, np.int64)
                return CsrMatrix(indptr, cols, None, (len(fields), dim))
            try:
                sizes = set(map(len, flat))
            except TypeError:
                sizes = {None}
            if sizes - {2}:
                raise ValueError(f"expected (column id, value) pairs, got an entry of "
                                 f"{_entry_size(sizes - {2})}")
            return self._sparse_pairs(indptr, flat, dim, len(fields))
        except _BadSample as e:  # its index counts entries, not samples: the caller locates
            raise ValueError(str(e)) from None

    def _sparse_pairs(self, indptr: np.ndarray, flat: list, dim: int, n: int) -> CsrMatrix:
        """CSR of checked pairs: their columns and values split apart first (NumPy converts
        a list of tuples one tuple at a time, several times slower)."""
        cols, values = zip(*flat) if flat else ((), ())
        ids = self._ids(cols, dim, "column id") if flat else np.empty(0, np.int64)
        data = _numbers(values, self.dtype).astype(self.dtype, copy=False)
        if data.ndim != 1:
            raise ValueError(f"expected (column id, value) pairs of two numbers, got values "
                             f"of shape {data.shape[1:]}")
        return CsrMatrix(indptr, ids, data, (n, dim))

    def _convert(self, fields: Sequence, tp: InputType, name: str | None = None,
                 column: bool = False) -> Argument:
        """``fields`` as one host :class:`Argument` of type ``tp``."""
        seq_starts = sub_starts = None
        if tp.seq_type == 2:
            sub_lens = [len(sub) for f in fields for sub in f]
            seq_starts = _starts([sum(len(sub) for sub in f) for f in fields])
            sub_starts = _starts(sub_lens)
            fields = [x for f in fields for sub in f for x in sub]
        elif tp.seq_type == 1:
            seq_starts = _starts([len(f) for f in fields])
            fields = [x for f in fields for x in f]
        if tp.type == DataType.Dense:
            arg = Argument(value=self._dense(fields, tp.dim, name, column and seq_starts is None))
        elif tp.type == DataType.Index:
            try:
                ids = self._ids(fields, tp.dim)
            except _BadSample as e:
                if e.sample is None or seq_starts is not None:
                    raise ValueError(str(e)) from None  # the caller locates the sample
                raise
            arg = Argument(ids=ids)
            arg.mark_ids_below(tp.dim)  # checked in _ids: the layers skip the check
        else:
            arg = Argument(value=self._sparse(fields, tp.dim, tp.type == DataType.SparseValue))
        arg.seq_starts, arg.sub_seq_starts = seq_starts, sub_starts
        return arg

    def _first_bad(self, fields: Sequence, tp: InputType) -> int | None:
        """The first sample that fails to convert alone; None when each one converts."""
        for i, f in enumerate(fields):
            try:
                self._convert([f], tp)
            except (ValueError, TypeError):
                return i
        return None
