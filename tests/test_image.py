"""paddle.image: loading (BGR, HWC uint8), resizing, cropping, flipping, the transforms, and
batching images from a tar, against the layouts PaddlePaddle documented."""

import io
import pickle
import tarfile

import numpy as np
import pytest
from PIL import Image

import sculler as paddle

image = paddle.image


def _png(rgb: np.ndarray) -> bytes:
    buf = io.BytesIO()
    Image.fromarray(rgb).save(buf, format="PNG")
    return buf.getvalue()


def test_images_load_as_bgr_hwc_uint8(tmp_path):
    rgb = np.zeros((4, 6, 3), np.uint8)
    rgb[..., 0] = 200  # red
    path = tmp_path / "red.png"
    path.write_bytes(_png(rgb))
    im = image.load_image(path)
    assert im.shape == (4, 6, 3) and im.dtype == np.uint8
    np.testing.assert_array_equal(im[0, 0], [0, 0, 200])  # B, G, R
    gray = image.load_image(path, is_color=False)
    assert gray.shape == (4, 6)
    np.testing.assert_array_equal(image.load_image_bytes(path.read_bytes()), im)
    with pytest.raises(FileNotFoundError, match="not found"):
        image.load_image(tmp_path / "missing.png")
    with pytest.raises(ValueError, match="cannot decode image"):
        image.load_image_bytes(b"not an image")


def test_resize_short_keeps_the_aspect_ratio():
    im = np.random.default_rng(0).integers(0, 255, (40, 60, 3)).astype(np.uint8)
    assert image.resize_short(im, 20).shape == (20, 30, 3)
    assert image.resize_short(im.transpose(1, 0, 2), 20).shape == (30, 20, 3)
    assert image.resize_short(im[:, :, 0], 20).shape == (20, 30)


def test_crops_flip_and_chw():
    im = np.arange(5 * 7 * 3).reshape(5, 7, 3)
    np.testing.assert_array_equal(image.center_crop(im, 3), im[1:4, 2:5])
    np.random.seed(0)
    crop = image.random_crop(im, 4)
    assert crop.shape == (4, 4, 3)
    assert any(np.array_equal(crop, im[r:r + 4, c:c + 4]) for r in range(2) for c in range(4))
    np.testing.assert_array_equal(image.left_right_flip(im), im[:, ::-1])
    assert image.to_chw(im).shape == (3, 5, 7)
    with pytest.raises(ValueError, match="larger than the image"):
        image.center_crop(im, 6)


def test_simple_transform_for_training_and_testing(tmp_path):
    im = np.full((32, 48, 3), 100, np.uint8)
    test = image.simple_transform(im, 24, 16, is_train=False, mean=[10, 20, 30])
    assert test.shape == (3, 16, 16) and test.dtype == np.float32
    np.testing.assert_allclose(test[:, 0, 0], [90, 80, 70], atol=1)
    np.random.seed(1)
    assert image.simple_transform(im, 24, 16, is_train=True).shape == (3, 16, 16)
    path = tmp_path / "a.png"
    path.write_bytes(_png(im))
    assert image.load_and_transform(path, 24, 16, False).shape == (3, 16, 16)


def test_batch_images_from_tar(tmp_path):
    tar_path = tmp_path / "images.tar"
    with tarfile.open(tar_path, "w") as tf:
        for i in range(5):
            data = _png(np.full((2, 2, 3), i, np.uint8))
            info = tarfile.TarInfo(f"img/{i}.png")
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    labels = {f"img/{i}.png": i % 2 for i in range(4)}  # image 4 is not listed
    meta = image.batch_images_from_tar(tar_path, "train", labels, num_per_batch=3)
    files = open(meta).read().split()
    assert len(files) == 2
    batches = [pickle.load(open(f, "rb")) for f in files]
    assert [b["label"] for b in batches] == [[0, 1, 0], [1]]
    assert image.load_image_bytes(batches[1]["data"][0])[0, 0, 0] == 3
    assert image.batch_images_from_tar(tar_path, "train", labels) == meta  # reused
