"""Oxford 102 Category Flowers (``paddle.dataset.flowers``).

8,189 JPEG pictures of flowers of 102 kinds: ``102flowers.tgz`` (``jpg/image_00001.jpg`` ...),
their labels 1..102 in ``imagelabels.mat`` (``labels``: 1 x 8189) and the split in
``setid.mat`` (``trnid``, ``valid``, ``tstid``: 1-based image numbers). As PaddlePaddle did,
``train()`` reads the 6,149 ``tstid`` images and ``test()`` the 1,020 ``trnid`` ones (the
official test split is the larger one); ``valid()`` reads the 1,020 ``valid`` images.

The first read packs each split's images into pickled batch files beside the archive
(:func:`sculler.image.batch_images_from_tar`); later reads use them (delete
``102flowers.tgz_batch`` to repack after replacing the label or split files). The reader yields
``(image file bytes, label)`` with labels 0..101 through ``mapper``: the default mappers decode
the image (BGR, as PaddlePaddle's OpenCV did), resize its shorter edge to 256, crop 224 x 224
(random crop and flip for ``train_mapper``, central for ``test_mapper``), subtract the BGR mean
``(103.94, 116.78, 123.68)`` and flatten it: ``(float32[3 * 224 * 224] in CHW order, label)``.
With ``use_xmap`` the mapper runs in ``cpu_count()`` threads, ``buffered_size`` samples ahead,
and samples come out in completion order.

Needs Pillow (``pip install "sculler[image]"``) for the default mappers.
"""

from __future__ import annotations

import functools
import os
import pickle
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from sculler.dataset import common

__all__ = ["train", "test", "valid", "fetch", "default_mapper", "train_mapper", "test_mapper"]

DATA_URL = "http://www.robots.ox.ac.uk/~vgg/data/flowers/102/102flowers.tgz"
LABEL_URL = "http://www.robots.ox.ac.uk/~vgg/data/flowers/102/imagelabels.mat"
SETID_URL = "http://www.robots.ox.ac.uk/~vgg/data/flowers/102/setid.mat"
DATA_MD5 = "52808999861908f626f3c1f4e79d11fa"
LABEL_MD5 = "e0620be6f572b9609742df49c70aed4d"
SETID_MD5 = "a5357ecc9cb78c4bef273ce3793fc85c"
TRAIN_FLAG, TEST_FLAG, VALID_FLAG = "tstid", "trnid", "valid"
MEAN_BGR = (103.94, 116.78, 123.68)

Sample = tuple[Any, int]


def default_mapper(is_train: bool, sample: tuple[bytes, int]) -> tuple[np.ndarray, int]:
    """Image bytes -> flat float32 CHW picture, 256 resize and 224 crop, minus the BGR mean."""
    from sculler import image

    data, label = sample
    im = image.simple_transform(image.load_image_bytes(data), 256, 224, is_train,
                                mean=MEAN_BGR)
    return im.flatten().astype(np.float32), label


train_mapper = functools.partial(default_mapper, True)
test_mapper = functools.partial(default_mapper, False)


def _mat_vector(path: str, key: str) -> np.ndarray:
    import scipy.io

    mat = scipy.io.loadmat(path)
    if key not in mat:
        raise ValueError(f"flowers: {path} has no {key!r}; it has "
                         f"{sorted(k for k in mat if not k.startswith('__'))}")
    return np.asarray(mat[key]).ravel().astype(np.int64)


def _batch_list(split: str) -> str:
    """The list file of the split's pickled batch files, packing them on first use."""
    from sculler import image

    data_file = common.download(DATA_URL, "flowers", DATA_MD5)
    labels = _mat_vector(common.download(LABEL_URL, "flowers", LABEL_MD5), "labels")
    numbers = _mat_vector(common.download(SETID_URL, "flowers", SETID_MD5), split)
    if numbers.size and (numbers.min() < 1 or numbers.max() > len(labels)):
        raise ValueError(f"flowers: setid {split!r} numbers images outside 1..{len(labels)}")
    img2label = {f"jpg/image_{i:05d}.jpg": int(labels[i - 1]) for i in numbers}
    return image.batch_images_from_tar(data_file, split, img2label)


def reader_creator(split: str, mapper: Callable[[Sample], Any], buffered_size: int = 1024,
                   use_xmap: bool = True) -> Callable[[], Iterator[Any]]:
    """Reader of ``mapper((image bytes, label 0..101))`` over the images of ``setid.mat``'s
    ``split`` ('tstid', 'trnid' or 'valid')."""
    from sculler.reader import map_readers, xmap_readers

    if split not in (TRAIN_FLAG, TEST_FLAG, VALID_FLAG):
        raise ValueError(f"flowers: split must be 'tstid', 'trnid' or 'valid', got {split!r}")
    if not callable(mapper):
        raise TypeError(f"flowers: mapper must be callable, got {type(mapper).__name__}")

    def reader() -> Iterator[Sample]:
        with open(_batch_list(split), encoding="utf-8") as listing:
            paths = [line.strip() for line in listing if line.strip()]
        for path in paths:
            if not os.path.isfile(path):
                raise FileNotFoundError(f"flowers: batch file {path} is missing; delete "
                                        f"{os.path.dirname(os.path.dirname(path))} to repack")
            with open(path, "rb") as f:
                batch = pickle.load(f)  # noqa: S301 - written by batch_images_from_tar
            for data, label in zip(batch["data"], batch["label"]):
                yield data, int(label) - 1

    if use_xmap:
        return xmap_readers(mapper, reader, os.cpu_count() or 1, buffered_size)
    return map_readers(mapper, reader)


def train(mapper: Callable[[Sample], Any] = train_mapper, buffered_size: int = 1024,
          use_xmap: bool = True) -> Callable[[], Iterator[Any]]:
    """Reader creator of the 6,149 training pictures (random crop and flip by default)."""
    return reader_creator(TRAIN_FLAG, mapper, buffered_size, use_xmap)


def test(mapper: Callable[[Sample], Any] = test_mapper, buffered_size: int = 1024,
         use_xmap: bool = True) -> Callable[[], Iterator[Any]]:
    """Reader creator of the 1,020 test pictures (central crop by default)."""
    return reader_creator(TEST_FLAG, mapper, buffered_size, use_xmap)


def valid(mapper: Callable[[Sample], Any] = test_mapper, buffered_size: int = 1024,
          use_xmap: bool = True) -> Callable[[], Iterator[Any]]:
    """Reader creator of the 1,020 validation pictures (central crop by default)."""
    return reader_creator(VALID_FLAG, mapper, buffered_size, use_xmap)


def fetch() -> None:
    """Download the pictures, the labels and the split into the cache."""
    common.download(DATA_URL, "flowers", DATA_MD5)
    common.download(LABEL_URL, "flowers", LABEL_MD5)
    common.download(SETID_URL, "flowers", SETID_MD5)
