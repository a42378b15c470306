"""CSR batches: sparse rows times a dense weight, and the weight's row gradient.

A sparse batch ``X`` (batch x dim, CSR) meets a dense ``W`` (dim x size): ``Y = X W`` only
reads the rows of ``W`` that ``X`` touches, and ``dW = X^T dY`` only writes those rows, which
is what makes sparse row updates and parameter-server row prefetch possible. The products run
in ``scipy.sparse`` (``cupyx.scipy.sparse`` for CuPy arrays).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sculler.backend import get_array_module, to_gpu_together, to_numpy
from sculler.math import cuda
from sculler.math.segment import add_to_rows


@dataclass
class CsrMatrix:
    """Compressed sparse rows; ``data=None`` means every stored value is 1 (sparse binary)."""

    indptr: np.ndarray
    indices: np.ndarray
    data: np.ndarray | None
    shape: tuple[int, int]

    @property
    def nnz(self) -> int:
        return int(self.indices.shape[0])

    @property
    def row_ids(self) -> np.ndarray:
        """The row of every stored entry."""
        return np.repeat(np.arange(self.shape[0]), np.diff(self.indptr))

    def rows(self, start: int, stop: int) -> CsrMatrix:
        lo, hi = int(self.indptr[start]), int(self.indptr[stop])
        return CsrMatrix(
            self.indptr[start : stop + 1] - lo,
            self.indices[lo:hi],
            None if self.data is None else self.data[lo:hi],
            (stop - start, self.shape[1]),
        )

    def toarray(self, dtype=np.float64) -> np.ndarray:
        """Dense copy (repeated column ids add up)."""
        return np.asarray(to_scipy(self, dtype).toarray())

    @classmethod
    def from_rows(cls, rows: list, dim: int, with_values: bool, dtype=np.float32) -> CsrMatrix:
        """From per-sample lists: column ids, or (column id, value) pairs when ``with_values``."""
        lengths = np.fromiter((len(r) for r in rows), dtype=np.int64, count=len(rows))
        indptr = np.concatenate([[0], np.cumsum(lengths)])
        if with_values:
            flat = [p for r in rows for p in r]
            cols = np.asarray([p[0] for p in flat], dtype=np.int64)
            data = np.asarray([p[1] for p in flat], dtype=dtype)
        else:
            cols = np.asarray([c for r in rows for c in r], dtype=np.int64)
            data = None
        if cols.size and (cols.min() < 0 or cols.max() >= dim):
            bad = cols[(cols < 0) | (cols >= dim)][0]
            raise ValueError(f"sparse column id {bad} is outside [0, {dim})")
        return cls(indptr, cols, data, (len(rows), dim))


def _sparse_module(xp):
    """scipy.sparse for NumPy arrays, cupyx.scipy.sparse for CuPy ones."""
    if xp is np:
        import scipy.sparse

        return scipy.sparse
    import cupyx.scipy.sparse

    return cupyx.scipy.sparse


def to_scipy(x: CsrMatrix, dtype, xp=np, indices=None, width: int | None = None):
    """``x`` as a ``csr_matrix`` of ``dtype`` (ones for a sparse binary ``x``), optionally
    with other column ``indices`` and ``width``."""
    data = xp.ones(x.nnz, dtype=dtype) if x.data is None else xp.asarray(x.data, dtype=dtype)
    cols = x.indices if indices is None else indices
    shape = (x.shape[0], x.shape[1] if width is None else width)
    return _sparse_module(xp).csr_matrix((data, xp.asarray(cols), xp.asarray(x.indptr)),
                                         shape=shape)


def csr_matmul(x: CsrMatrix, w, out, beta: float = 0.0):
    """``out = X @ W + beta * out`` for a CSR ``X``; returns ``out``."""
    xp = get_array_module(w)
    prod = to_scipy(x, w.dtype, xp) @ w
    if beta == 0.0:
        out[...] = prod
        return out
    if beta != 1.0:
        out *= beta
    out += prod
    return out


def add_rows(dst, rows, src, host_rows: np.ndarray | None = None):
    """``dst[rows[i]] += src[i]`` for every i, the terms of a repeated row summed (the gradient
    of a row gather such as an embedding lookup: ``dW += onehot(rows)^T dY``); returns ``dst``.
    ``rows`` is a 1-D int array on dst's device, ``src`` is ``(len(rows), d)``; ``host_rows``
    is its host copy where the caller has one (on the GPU it spares a copy back, which waits
    for the device).

    Strictly increasing rows (the gather of disjoint ranges) are distinct: one indexed add
    (:func:`sculler.math.segment.add_to_rows`, one kernel on the GPU).
    Otherwise the terms go through a CSR product with one row per distinct destination, its
    entries in batch order: each row's terms are summed in the order ``np.add.at`` adds them,
    then added to ``dst`` once (4-7x faster than ``add.at`` on 8,168 ids of 128 floats; the
    same values where ``dst`` starts at zero, else equal up to rounding). On the GPU one
    kernel gathers, sums and adds each destination's terms (:func:`cuda.add_grouped_rows`,
    no temporaries), its three index arrays copied over in one asynchronous piece.
    """
    xp = get_array_module(dst)
    host = to_numpy(rows) if host_rows is None else host_rows
    if host.size < 2 or bool((host[1:] > host[:-1]).all()):
        return add_to_rows(dst, rows, src)
    order = np.argsort(host, kind="stable")
    ordered = host[order]
    first = np.flatnonzero(np.concatenate([[True], ordered[1:] != ordered[:-1]]))
    indptr = np.append(first, host.size)
    if xp is not np and src.ndim == 2 and dst.ndim == 2 and dst.shape[1] == src.shape[1] \
            and dst.flags.c_contiguous:  # the same sums, in batch order, by one kernel
        n, k = order.size, first.size
        index = to_gpu_together([np.concatenate([order, indptr, ordered[first]])
                                 .astype(np.int64)])[0]
        cuda.add_grouped_rows(dst, xp.ascontiguousarray(src), index[:n], index[n:n + k + 1],
                              index[n + k + 1:])
        return dst
    one_hot = _sparse_module(xp).csr_matrix(
        (xp.ones(host.size, dtype=src.dtype), xp.asarray(order), xp.asarray(indptr)),
        shape=(first.size, host.size))
    dst[xp.asarray(ordered[first])] += one_hot @ src
    return dst


def csr_t_matmul_rows(x: CsrMatrix, dy):
    """Row gradient of ``W`` for ``Y = X W``: returns ``(rows, grad_rows)`` with
    ``grad_rows[k] = sum_i X[i, rows[k]] * dY[i]`` (the only nonzero rows of ``X^T dY``),
    computed as ``X_c^T dY`` where ``X_c`` keeps only the touched columns."""
    xp = get_array_module(dy)
    rows, inverse = np.unique(x.indices, return_inverse=True)
    compact = to_scipy(x, dy.dtype, xp, indices=inverse.reshape(-1), width=rows.size)
    grad_rows = xp.asarray(compact.T @ dy, dtype=dy.dtype)
    return rows, grad_rows


def csr_matmul_t(dy, w, x: CsrMatrix):
    """Gradient w.r.t. the stored values of ``X`` for ``Y = X W``: ``dX_ij = dY_i . W_j``."""
    return (dy[x.row_ids] * w[x.indices]).sum(axis=1)
