"""Stand-in for ``cupy.cublas`` (see ``cupy``'s stand-in): ``gemm`` and ``gemv`` with CuPy's
signatures and argument checks, each counted as one launch."""

from __future__ import annotations

from typing import Any

import numpy as np

from cupy import _timed, counts, ndarray


def _op(a: Any, trans: str) -> np.ndarray:
    if trans not in ("N", "T"):
        raise TypeError(f"invalid trans (actual: {trans})")
    host = a.view(np.ndarray)
    return host.T if trans == "T" else host


@_timed
def gemm(transa: str, transb: str, a: ndarray, b: ndarray, out: ndarray | None = None,
         alpha: float = 1.0, beta: float = 0.0) -> ndarray:
    """``out = alpha * op(a) @ op(b) + beta * out``."""
    assert a.ndim == b.ndim == 2
    assert a.dtype == b.dtype
    if a.dtype.char not in "fdFD":
        raise TypeError("invalid dtype")
    pa, pb = _op(a, transa), _op(b, transb)
    assert pb.shape[0] == pa.shape[1]
    if out is None:
        out = np.empty((pa.shape[0], pb.shape[1]), a.dtype).view(ndarray)
        beta = 0.0
    else:
        assert out.ndim == 2 and out.shape == (pa.shape[0], pb.shape[1])
        assert out.dtype == a.dtype
    counts["launch"] += 1
    host = out.view(np.ndarray)
    host[...] = alpha * (pa @ pb) + (beta * host if beta else 0)
    return out


@_timed
def gemv(transa: str, alpha: float, a: ndarray, x: ndarray, beta: float, y: ndarray) -> None:
    """``y = alpha * op(a) @ x + beta * y`` (``y`` is updated)."""
    assert a.ndim == 2
    assert x.ndim == y.ndim == 1
    assert a.dtype == x.dtype == y.dtype
    pa = _op(a, transa)
    assert x.shape[0] == pa.shape[1]
    assert y.shape[0] == pa.shape[0]
    counts["launch"] += 1
    host = y.view(np.ndarray)
    host[...] = alpha * (pa @ x.view(np.ndarray)) + (beta * host if beta else 0)
