"""UCI Boston housing prices (``paddle.v2.dataset.uci_housing``).

506 rows of 13 features and the median price. Every feature column is normalised as
``(x - mean) / (max - min)`` over the whole file; the first 80% of rows (in file order)
are the training set, the rest the test set. Samples are ``(float32[13], float32[1])``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np

from sculler.dataset import common

__all__ = ["train", "test", "feature_names", "load_data"]

URL = "https://archive.ics.uci.edu/ml/machine-learning-databases/housing/housing.data"
MD5 = "d4accdce7a25600298819f8e28e8d593"
feature_names = [
    "CRIM", "ZN", "INDUS", "CHAS", "NOX", "RM", "AGE", "DIS", "RAD", "TAX", "PTRATIO", "B",
    "LSTAT",
]

_cache: dict[str, tuple[np.ndarray, np.ndarray]] = {}


def load_data(
    filename: str, feature_num: int = 14, ratio: float = 0.8
) -> tuple[np.ndarray, np.ndarray]:
    """Parse, normalise and split a whitespace-separated housing file.

    Returns ``(train, test)`` float32 arrays of shape (rows, feature_num), the last column
    being the (unnormalised) price.
    """
    with open(filename) as f:
        values = np.array(f.read().split(), dtype=np.float64)
    if values.size % feature_num:
        raise ValueError(f"{filename} holds {values.size} numbers, not a multiple of "
                         f"feature_num={feature_num}")
    data = values.reshape(-1, feature_num)
    maxs, mins, avgs = data.max(axis=0), data.min(axis=0), data.mean(axis=0)
    span = np.where(maxs > mins, maxs - mins, 1.0)
    data[:, :-1] = (data[:, :-1] - avgs[:-1]) / span[:-1]
    offset = int(data.shape[0] * ratio)
    data = data.astype(np.float32)
    return data[:offset], data[offset:]


def _split(index: int) -> np.ndarray:
    path = common.download(URL, "uci_housing", MD5)
    if path not in _cache:
        _cache[path] = load_data(path)
    return _cache[path][index]


def _reader_creator(index: int) -> Callable[[], Iterator[tuple[np.ndarray, np.ndarray]]]:
    def reader() -> Iterator[tuple[np.ndarray, np.ndarray]]:
        for d in _split(index):
            yield d[:-1], d[-1:]

    return reader


def train() -> Callable[[], Iterator[tuple[np.ndarray, np.ndarray]]]:
    """Reader creator of the first 80% of rows: ``(features float32[13], price float32[1])``."""
    return _reader_creator(0)


def test() -> Callable[[], Iterator[tuple[np.ndarray, np.ndarray]]]:
    """Reader creator of the last 20% of rows: ``(features float32[13], price float32[1])``."""
    return _reader_creator(1)
