"""CIFAR-10 and CIFAR-100 images (``paddle.v2.dataset.cifar``).

The python-version archives hold pickled batches (``data``: N x 3072 uint8 rows, channel-major
R, G, B planes of 32 x 32; ``labels`` for CIFAR-10, ``fine_labels`` for CIFAR-100). A sample is
``(pixels, label)``: a float32 vector of 3072 values in [0, 1] and an int label in [0, 9] or
[0, 99]. CIFAR-10 reads the ``data_batch_*`` members (train) or ``test_batch``; CIFAR-100 the
``train`` or ``test`` member, in archive order.
"""

from __future__ import annotations

import pickle
import tarfile
from collections.abc import Callable, Iterator

import numpy as np

from sculler.dataset import common

__all__ = ["train10", "test10", "train100", "test100", "fetch"]

URL_PREFIX = "https://www.cs.toronto.edu/~kriz/"
CIFAR10_URL = URL_PREFIX + "cifar-10-python.tar.gz"
CIFAR10_MD5 = "c58f30108f718f92721af3b95e74349a"
CIFAR100_URL = URL_PREFIX + "cifar-100-python.tar.gz"
CIFAR100_MD5 = "eb9058c3a382ffc7106e4002c42a8d85"

Sample = tuple[np.ndarray, int]


def _field(batch: dict, *names: str):
    for name in names:
        for key in (name, name.encode()):
            if key in batch:
                return batch[key]
    raise ValueError(f"CIFAR batch has none of the fields {names}; keys are {list(batch)}")


def _reader_creator(url_attr: str, md5_attr: str, sub_name: str) -> Callable[[], Iterator]:
    def reader() -> Iterator[Sample]:
        path = common.download(globals()[url_attr], "cifar", globals()[md5_attr])
        with tarfile.open(path, mode="r") as tf:
            for member in tf:
                if not member.isfile() or sub_name not in member.name:
                    continue
                # the archive's md5 was checked above, so its pickles are the published ones
                batch = pickle.load(tf.extractfile(member), encoding="bytes")  # noqa: S301
                data = np.asarray(_field(batch, "data"))
                labels = _field(batch, "labels", "fine_labels")
                pixels = (data / 255.0).astype(np.float32)
                for row, label in zip(pixels, labels):
                    yield row, int(label)

    return reader


def train10() -> Callable[[], Iterator[Sample]]:
    """Reader creator of the 50,000 CIFAR-10 training images: (3072 floats, label 0..9)."""
    return _reader_creator("CIFAR10_URL", "CIFAR10_MD5", "data_batch")


def test10() -> Callable[[], Iterator[Sample]]:
    """Reader creator of the 10,000 CIFAR-10 test images."""
    return _reader_creator("CIFAR10_URL", "CIFAR10_MD5", "test_batch")


def train100() -> Callable[[], Iterator[Sample]]:
    """Reader creator of the 50,000 CIFAR-100 training images: (3072 floats, label 0..99)."""
    return _reader_creator("CIFAR100_URL", "CIFAR100_MD5", "train")


def test100() -> Callable[[], Iterator[Sample]]:
    """Reader creator of the 10,000 CIFAR-100 test images."""
    return _reader_creator("CIFAR100_URL", "CIFAR100_MD5", "test")


def fetch() -> None:
    """Download both archives into the cache."""
    common.download(CIFAR10_URL, "cifar", CIFAR10_MD5)
    common.download(CIFAR100_URL, "cifar", CIFAR100_MD5)
