"""Stand-in for ``cupyx.scipy.sparse``: SciPy's sparse matrices whose dense results (products,
``toarray``) are device arrays of the ``cupy`` stand-in, as cupyx's are cupy arrays; their
transposes and sparse results are of these classes too."""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy import sparse as _sparse


def _on_device(result: Any) -> Any:
    import cupy

    if isinstance(result, np.ndarray) and not isinstance(result, cupy.ndarray):
        return result.view(cupy.ndarray)
    return result


class _DeviceResults:
    """Dense results of a sparse matrix on the (stand-in) device."""

    def __matmul__(self, other: Any) -> Any:
        return _on_device(super().__matmul__(other))

    def __rmatmul__(self, other: Any) -> Any:
        return _on_device(super().__rmatmul__(other))

    def __mul__(self, other: Any) -> Any:
        return _on_device(super().__mul__(other))

    def __rmul__(self, other: Any) -> Any:
        return _on_device(super().__rmul__(other))

    def dot(self, other: Any) -> Any:
        return _on_device(super().dot(other))

    def toarray(self, *args: Any, **kwargs: Any) -> Any:
        return _on_device(super().toarray(*args, **kwargs))

    def sum(self, *args: Any, **kwargs: Any) -> Any:
        return _on_device(np.asarray(super().sum(*args, **kwargs)))


class csr_matrix(_DeviceResults, _sparse.csr_matrix):  # noqa: N801 (cupyx's name)
    pass


class csc_matrix(_DeviceResults, _sparse.csc_matrix):  # noqa: N801
    pass


for _cls in (csr_matrix, csc_matrix):
    _cls._csr_container, _cls._csc_container = csr_matrix, csc_matrix

__all__ = ["csc_matrix", "csr_matrix"]
