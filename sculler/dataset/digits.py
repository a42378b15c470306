"""scikit-learn's 8x8 handwritten digits: the offline data set of the default demos.

1797 images ship inside scikit-learn (the optional extra ``data``), so nothing is
downloaded. Pixels 0..16 are scaled as ``x / 8 - 1`` into [-1, 1]. The split is fixed:
``perm = np.random.RandomState(0).permutation(1797)``; ``perm[:1437]`` is the training
set and ``perm[1437:]`` (360 samples) the test set.

Example:
    >>> X, y = load_arrays("train")  # doctest: +SKIP
    >>> X.shape, y.shape  # doctest: +SKIP
    ((1437, 64), (1437,))
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator

import numpy as np

from sculler.dataset import common

__all__ = ["train", "test", "load_arrays", "N_TRAIN", "N_TEST"]

N_SAMPLES, N_TRAIN, N_TEST = 1797, 1437, 360


@functools.lru_cache(maxsize=1)
def _all() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    try:
        from sklearn.datasets import load_digits
    except ImportError as exc:
        raise ImportError(
            "sculler.dataset.digits needs scikit-learn; install it with "
            "`pip install sculler[data]`"
        ) from exc
    d = load_digits()
    x = (d.data.astype(np.float32) / np.float32(8.0) - np.float32(1.0)).astype(np.float32)
    y = d.target.astype(np.int64)
    perm = np.random.RandomState(0).permutation(N_SAMPLES)
    return x, y, perm


def load_arrays(split: str) -> tuple[np.ndarray, np.ndarray]:
    """One split at once: ``X`` float32 (n, 64) in [-1, 1] and ``y`` int64 (n,).

    Args:
        split: ``"train"`` (1437 samples) or ``"test"`` (360 samples).
    """
    x, y, perm = _all()
    if split == "train":
        idx = perm[:N_TRAIN]
    elif split == "test":
        idx = perm[N_TRAIN:]
    else:
        raise ValueError(f"split must be 'train' or 'test', got {split!r}")
    return x[idx], y[idx]



def train() -> Callable[[], Iterator[tuple[np.ndarray, int]]]:
    """Reader creator of the 1437 training samples ``(float32[64], int label)``."""
    return common.labelled_reader(load_arrays, "train")


def test() -> Callable[[], Iterator[tuple[np.ndarray, int]]]:
    """Reader creator of the 360 test samples ``(float32[64], int label)``."""
    return common.labelled_reader(load_arrays, "test")
