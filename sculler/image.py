"""Image preprocessing of the v2 API (``paddle.v2.image``) on Pillow.

Conventions are PaddlePaddle's: an image is loaded as an ``H x W x C`` ``uint8`` array in
**BGR** channel order (PaddlePaddle read images with OpenCV, so models it trained expect BGR;
a gray image is ``H x W``), transformed in that layout, and ``to_chw`` turns it into the
``C x H x W`` layout a ``dense_vector(C*H*W)`` data layer reads. Random crops and flips use
NumPy's global random state, as PaddlePaddle's did (``np.random.seed`` makes them repeatable).

One deliberate difference: PaddlePaddle's ``resize_short`` passed ``(h, w)`` where OpenCV
expects ``(w, h)``, so non-square images came out with their aspect ratio inverted; here the
shorter edge becomes ``size`` and the aspect ratio is kept.

Pillow is the ``image`` extra (``pip install "sculler[image]"``).

Example:
    >>> import numpy as np
    >>> from sculler import image
    >>> im = np.zeros((40, 60, 3), dtype=np.uint8)       # H x W x C (BGR)
    >>> image.simple_transform(im, 32, 24, is_train=False).shape
    (3, 24, 24)
"""

from __future__ import annotations

import io
import os
import pickle
import tarfile
from collections.abc import Sequence
from typing import Any

import numpy as np

from sculler.fileio import atomic_write

__all__ = ["load_image_bytes", "load_image", "resize_short", "to_chw", "center_crop",
           "random_crop", "left_right_flip", "simple_transform", "load_and_transform",
           "batch_images_from_tar"]


def pillow():
    """Pillow's ``Image`` module, or an ImportError saying how to install it."""
    try:
        from PIL import Image
    except ImportError as exc:  # pragma: no cover - Pillow ships with the test extra
        raise ImportError("sculler.image needs Pillow: pip install 'sculler[image]'") from exc
    return Image


def _decode(source: Any, is_color: bool, what: str) -> np.ndarray:
    Image = pillow()
    try:
        with Image.open(source) as img:
            img = img.convert("RGB" if is_color else "L")
            im = np.asarray(img, dtype=np.uint8)
    except (OSError, ValueError) as exc:
        raise ValueError(f"cannot decode image {what}: {exc}") from exc
    return np.ascontiguousarray(im[:, :, ::-1]) if is_color else im


def load_image_bytes(bytes: bytes, is_color: bool = True) -> np.ndarray:  # noqa: A002
    """Decode an image file's bytes: ``H x W x 3`` BGR ``uint8`` (``H x W`` when gray)."""
    return _decode(io.BytesIO(bytes), is_color, f"from {len(bytes)} bytes")


def load_image(file: str | os.PathLike, is_color: bool = True) -> np.ndarray:
    """Read an image file: ``H x W x 3`` BGR ``uint8`` (``H x W`` when gray)."""
    if not os.path.isfile(file):
        raise FileNotFoundError(f"image file {os.fspath(file)!r} not found")
    return _decode(os.fspath(file), is_color, repr(os.fspath(file)))


def _check(im: Any, fn: str) -> np.ndarray:
    im = np.asarray(im)
    if im.ndim not in (2, 3) or (im.ndim == 3 and im.shape[2] not in (1, 3)):
        raise ValueError(f"{fn}: expected an H x W or H x W x C (C 1 or 3) image, got shape "
                         f"{im.shape}")
    return im


def resize_short(im: np.ndarray, size: int) -> np.ndarray:
    """Resize (bicubic) so the shorter edge is ``size``, keeping the aspect ratio."""
    im = _check(im, "resize_short")
    h, w = im.shape[:2]
    new_h, new_w = (size * h // w, size) if h > w else (size, size * w // h)
    Image = pillow()
    squeeze = im.ndim == 3 and im.shape[2] == 1
    pixels = im[:, :, 0] if squeeze else im
    if pixels.dtype == np.uint8:
        out = np.asarray(Image.fromarray(pixels).resize((new_w, new_h), Image.BICUBIC))
    else:  # float images: resize each channel as a 32-bit float picture
        chans = pixels[:, :, None] if pixels.ndim == 2 else pixels
        out = np.stack([np.asarray(Image.fromarray(chans[:, :, c].astype(np.float32), "F")
                                   .resize((new_w, new_h), Image.BICUBIC))
                        for c in range(chans.shape[2])], axis=2).astype(pixels.dtype)
        out = out[:, :, 0] if pixels.ndim == 2 else out
    return out[:, :, None] if squeeze else out


def to_chw(im: np.ndarray, order: Sequence[int] = (2, 0, 1)) -> np.ndarray:
    """Transpose an ``H x W x C`` image to ``C x H x W`` (or any ``order``)."""
    im = np.asarray(im)
    if len(order) != im.ndim:
        raise ValueError(f"to_chw: order {tuple(order)} has {len(order)} axes, the image "
                         f"{im.ndim}")
    return im.transpose(order)


def _crop(im: np.ndarray, size: int, top: int, left: int) -> np.ndarray:
    return im[top:top + size, left:left + size]


def _room(im: np.ndarray, size: int, fn: str) -> tuple[int, int]:
    h, w = im.shape[:2]
    if size > h or size > w:
        raise ValueError(f"{fn}: crop size {size} is larger than the image ({h} x {w})")
    return h - size, w - size


def center_crop(im: np.ndarray, size: int, is_color: bool = True) -> np.ndarray:
    """The central ``size x size`` square (``is_color`` is accepted for compatibility: the
    layout tells)."""
    im = _check(im, "center_crop")
    dh, dw = _room(im, size, "center_crop")
    return _crop(im, size, dh // 2, dw // 2)


def random_crop(im: np.ndarray, size: int, is_color: bool = True) -> np.ndarray:
    """A ``size x size`` square at a uniformly random position."""
    im = _check(im, "random_crop")
    dh, dw = _room(im, size, "random_crop")
    return _crop(im, size, np.random.randint(0, dh + 1), np.random.randint(0, dw + 1))


def left_right_flip(im: np.ndarray) -> np.ndarray:
    """Mirror the image left to right (``H x W`` or ``H x W x C``)."""
    return _check(im, "left_right_flip")[:, ::-1]


def simple_transform(im: np.ndarray, resize_size: int, crop_size: int, is_train: bool,
                     is_color: bool = True, mean: Any = None) -> np.ndarray:
    """Resize the shorter edge to ``resize_size``; crop ``crop_size`` (random, with a random
    left-right flip, in training; central otherwise); to CHW float32; minus ``mean`` (per
    channel, or elementwise ``C x H x W``)."""
    im = resize_short(im, resize_size)
    if is_train:
        im = random_crop(im, crop_size, is_color)
        if np.random.randint(2) == 0:
            im = left_right_flip(im)
    else:
        im = center_crop(im, crop_size, is_color)
    if im.ndim == 3:
        im = to_chw(im)
    im = im.astype(np.float32)
    if mean is not None:
        mean = np.asarray(mean, dtype=np.float32)
        if mean.ndim == 1:
            mean = mean[:, None, None]
        elif mean.shape != im.shape:
            raise ValueError(f"simple_transform: mean of shape {mean.shape} is neither per "
                             f"channel nor the image's shape {im.shape}")
        im -= mean
    return im


def load_and_transform(filename: str | os.PathLike, resize_size: int, crop_size: int,
                       is_train: bool, is_color: bool = True, mean: Any = None) -> np.ndarray:
    """``simple_transform(load_image(filename, is_color), ...)``."""
    return simple_transform(load_image(filename, is_color), resize_size, crop_size, is_train,
                            is_color, mean)


def batch_images_from_tar(data_file: str | os.PathLike, dataset_name: str,
                          img2label: dict[str, int], num_per_batch: int = 1024) -> str:
    """Pack the images of a tar file named in ``img2label`` (member name -> label) into
    pickled batch files ``{"data": [image bytes], "label": [labels]}`` of ``num_per_batch``
    under ``<data_file>_batch/<dataset_name>/``; returns the list file naming them (one path
    a line), reused when it already exists."""
    batch_dir = f"{os.fspath(data_file)}_batch"
    out_dir, meta_file = os.path.join(batch_dir, dataset_name), os.path.join(
        batch_dir, f"{dataset_name}.txt")
    if os.path.isfile(meta_file):
        return meta_file
    os.makedirs(out_dir, exist_ok=True)
    paths: list[str] = []

    def flush(data: list, labels: list) -> None:
        path = os.path.join(out_dir, f"batch_{len(paths)}")
        batch = {"label": labels, "data": data}
        atomic_write(path, lambda f: pickle.dump(batch, f, protocol=pickle.HIGHEST_PROTOCOL))
        paths.append(os.path.abspath(path))

    data, labels = [], []
    with tarfile.open(data_file) as tf:
        for member in tf.getmembers():
            if member.name in img2label:
                data.append(tf.extractfile(member).read())
                labels.append(img2label[member.name])
                if len(data) == num_per_batch:
                    flush(data, labels)
                    data, labels = [], []
    if data:
        flush(data, labels)
    atomic_write(meta_file, lambda f: f.write("".join(p + "\n" for p in paths).encode()))
    return meta_file
