"""MNIST handwritten digits (``paddle.v2.dataset.mnist``).

Downloads the four gzip IDX files from Yann LeCun's site (md5-checked, cached under
``DATA_HOME/mnist``). Each sample is ``(image, label)``: a float32 vector of 784 pixels
scaled as ``x / 255 * 2 - 1`` into [-1, 1] and an int label 0..9.
"""

from __future__ import annotations

import gzip
from collections.abc import Callable, Iterator

import numpy as np

from sculler.dataset import common

__all__ = ["train", "test", "load_arrays"]

URL_PREFIX = "http://yann.lecun.com/exdb/mnist/"
TEST_IMAGE_URL = URL_PREFIX + "t10k-images-idx3-ubyte.gz"
TEST_IMAGE_MD5 = "25e3cc63507ef6e98d5dc541e8672bb6"
TEST_LABEL_URL = URL_PREFIX + "t10k-labels-idx1-ubyte.gz"
TEST_LABEL_MD5 = "4e9511fe019b2189026bd0421ba7b688"
TRAIN_IMAGE_URL = URL_PREFIX + "train-images-idx3-ubyte.gz"
TRAIN_IMAGE_MD5 = "f68b3c2dcbeaaa9fbdd348bbdeb94873"
TRAIN_LABEL_URL = URL_PREFIX + "train-labels-idx1-ubyte.gz"
TRAIN_LABEL_MD5 = "d53e105ee54ea40749a09fcbcd1e9432"

_IMAGE_MAGIC, _LABEL_MAGIC = 2051, 2049


def _read_idx(path: str, magic: int, ndim: int) -> np.ndarray:
    """Parse a gzip IDX file: big-endian int32 magic, ``ndim`` int32 sizes, then uint8 data."""
    with gzip.open(path, "rb") as f:
        raw = f.read()
    header = np.frombuffer(raw, dtype=">i4", count=1 + ndim)
    if header[0] != magic:
        raise ValueError(f"{path} is not an IDX file with magic {magic} (got {header[0]})")
    shape = tuple(int(s) for s in header[1:])
    data = np.frombuffer(raw, dtype=np.uint8, offset=4 * (1 + ndim))
    if data.size != int(np.prod(shape)):
        raise ValueError(f"{path}: header says shape {shape} but holds {data.size} bytes")
    return data.reshape(shape)


def _load(image_path: str, label_path: str) -> tuple[np.ndarray, np.ndarray]:
    images = _read_idx(image_path, _IMAGE_MAGIC, 3)
    labels = _read_idx(label_path, _LABEL_MAGIC, 1)
    if len(images) != len(labels):
        raise ValueError(f"{image_path} has {len(images)} images but {label_path} has "
                         f"{len(labels)} labels")
    x = images.reshape(len(images), -1).astype(np.float32) * np.float32(2.0 / 255.0) - 1.0
    return x, labels.astype(np.int64)


def _paths(split: str) -> tuple[str, str]:
    if split == "train":
        return (common.download(TRAIN_IMAGE_URL, "mnist", TRAIN_IMAGE_MD5),
                common.download(TRAIN_LABEL_URL, "mnist", TRAIN_LABEL_MD5))
    if split == "test":
        return (common.download(TEST_IMAGE_URL, "mnist", TEST_IMAGE_MD5),
                common.download(TEST_LABEL_URL, "mnist", TEST_LABEL_MD5))
    raise ValueError(f"split must be 'train' or 'test', got {split!r}")


def load_arrays(split: str) -> tuple[np.ndarray, np.ndarray]:
    """All of one split at once: ``X`` float32 (n, 784) in [-1, 1], ``y`` int64 (n,)."""
    return _load(*_paths(split))



def train() -> Callable[[], Iterator[tuple[np.ndarray, int]]]:
    """Reader creator of the 60,000 training samples ``(float32[784], int label)``."""
    return common.labelled_reader(load_arrays, "train")


def test() -> Callable[[], Iterator[tuple[np.ndarray, int]]]:
    """Reader creator of the 10,000 test samples ``(float32[784], int label)``."""
    return common.labelled_reader(load_arrays, "test")

