"""Central finite differences, shared by every gradient check."""

from __future__ import annotations

from collections.abc import Callable, Iterable

import numpy as np


def numeric_grad(f: Callable[[], float], a: np.ndarray, eps: float = 1e-6,
                 indices: Iterable[int] | None = None) -> np.ndarray:
    """``(f(a + eps e_i) - f(a - eps e_i)) / (2 eps)`` for each flat index ``i`` of ``a``.

    ``a`` (any view, e.g. a transposed one) is perturbed in place and restored, so ``f`` must
    read it; ``f`` returns a scalar.
    Returns an array shaped like ``a``, or the values at ``indices`` when they are given.
    """
    picks = range(a.size) if indices is None else list(indices)
    out = np.zeros(len(picks))
    for n, i in enumerate(picks):
        idx = np.unravel_index(int(i), a.shape)
        orig = a[idx].item()  # a number: CuPy's a[idx] is a view that the writes would change
        a[idx] = orig + eps
        up = f()
        a[idx] = orig - eps
        down = f()
        a[idx] = orig
        out[n] = (up - down) / (2 * eps)
    return out.reshape(a.shape) if indices is None else out
