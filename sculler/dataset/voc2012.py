"""PASCAL VOC 2012 semantic segmentation (``paddle.dataset.voc2012``).

``VOCtrainval_11-May-2012.tar`` (1.9 GB, not compressed) names each split's images in
``VOCdevkit/VOC2012/ImageSets/Segmentation/<split>.txt``; an image ``<id>`` is
``JPEGImages/<id>.jpg`` and its class map ``SegmentationClass/<id>.png``. A sample is
``(image, label)``: the picture as Pillow decodes it, ``H x W x 3`` ``uint8`` in **RGB**
order (PaddlePaddle read this set with Pillow, not OpenCV), and the class map ``H x W``
``uint8`` of class ids 0..20 (0 background) and 255 on object borders ("void").

The splits are PaddlePaddle's: ``train()`` reads ``trainval`` (2,913 images), ``test()``
``train`` (1,464) and ``val()`` ``val`` (1,449); samples come in the list file's order.
Needs Pillow (``pip install "sculler[image]"``).
"""

from __future__ import annotations

import io
import tarfile
from collections.abc import Callable, Iterator

import numpy as np

from sculler.dataset import common

__all__ = ["train", "test", "val", "fetch"]

VOC_URL = "http://host.robots.ox.ac.uk/pascal/VOC/voc2012/VOCtrainval_11-May-2012.tar"
VOC_MD5 = "6cd6e144f989b92b3379bac3b3de84fd"
SET_FILE = "VOCdevkit/VOC2012/ImageSets/Segmentation/{}.txt"
DATA_FILE = "VOCdevkit/VOC2012/JPEGImages/{}.jpg"
LABEL_FILE = "VOCdevkit/VOC2012/SegmentationClass/{}.png"
CACHE_DIR = "voc2012"

Sample = tuple[np.ndarray, np.ndarray]


def _read(tf: tarfile.TarFile, members: dict[str, tarfile.TarInfo], name: str) -> bytes:
    member = members.get(name)
    f = tf.extractfile(member) if member is not None else None
    if f is None:
        raise ValueError(f"voc2012: {name} is not a file in {tf.name}")
    return f.read()


def _decode(data: bytes, name: str) -> np.ndarray:
    from sculler.image import pillow

    try:
        with pillow().open(io.BytesIO(data)) as img:
            return np.array(img)
    except OSError as exc:
        raise ValueError(f"voc2012: cannot decode {name}: {exc}") from exc


def reader_creator(filename: str, sub_name: str) -> Callable[[], Iterator[Sample]]:
    """Reader of the ``(image, class map)`` pairs of the split ``sub_name`` of the tar file
    ``filename``."""

    def reader() -> Iterator[Sample]:
        with tarfile.open(filename) as tf:
            members = {m.name: m for m in tf.getmembers()}
            set_file = SET_FILE.format(sub_name)
            for raw in _read(tf, members, set_file).decode("utf-8").splitlines():
                image_id = raw.strip()
                if not image_id:
                    continue
                data_name, label_name = DATA_FILE.format(image_id), LABEL_FILE.format(image_id)
                yield (_decode(_read(tf, members, data_name), data_name),
                       _decode(_read(tf, members, label_name), label_name))

    return reader


def _split(sub_name: str) -> Callable[[], Iterator[Sample]]:
    def reader() -> Iterator[Sample]:
        yield from reader_creator(common.download(VOC_URL, CACHE_DIR, VOC_MD5), sub_name)()

    return reader


def train() -> Callable[[], Iterator[Sample]]:
    """Reader creator of the 2,913 ``trainval`` images and class maps (HWC RGB, HW ids)."""
    return _split("trainval")


def test() -> Callable[[], Iterator[Sample]]:
    """Reader creator of the 1,464 ``train`` images and class maps (PaddlePaddle's choice)."""
    return _split("train")


def val() -> Callable[[], Iterator[Sample]]:
    """Reader creator of the 1,449 ``val`` images and class maps."""
    return _split("val")


def fetch() -> None:
    """Download the archive into the cache."""
    common.download(VOC_URL, CACHE_DIR, VOC_MD5)
