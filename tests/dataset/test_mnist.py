import gzip
import struct

import numpy as np
import pytest

from sculler.dataset import mnist


def idx_images(images):
    n, rows, cols = images.shape
    return gzip.compress(struct.pack(">iiii", 2051, n, rows, cols) + images.tobytes())


def idx_labels(labels):
    return gzip.compress(struct.pack(">ii", 2049, len(labels)) + labels.tobytes())


@pytest.fixture
def tiny_mnist(publish):
    rng = np.random.RandomState(0)
    sets = {}
    for split, n in (("TRAIN", 5), ("TEST", 3)):
        images = rng.randint(0, 256, size=(n, 28, 28)).astype(np.uint8)
        images[0, 0, 0], images[0, 0, 1] = 0, 255
        labels = rng.randint(0, 10, size=n).astype(np.uint8)
        publish(mnist, f"{split}_IMAGE_URL", f"{split}_IMAGE_MD5", f"{split}-img.gz",
                idx_images(images))
        publish(mnist, f"{split}_LABEL_URL", f"{split}_LABEL_MD5", f"{split}-lbl.gz",
                idx_labels(labels))
        sets[split.lower()] = (images, labels)
    return sets


def test_train_reader_values(tiny_mnist):
    images, labels = tiny_mnist["train"]
    samples = list(mnist.train()())
    assert len(samples) == 5
    x0, y0 = samples[0]
    assert x0.dtype == np.float32 and x0.shape == (784,)
    assert isinstance(y0, int)
    assert x0[0] == -1.0 and x0[1] == pytest.approx(1.0)
    for (x, y), img, lbl in zip(samples, images, labels):
        np.testing.assert_allclose(x, img.reshape(-1) / 255.0 * 2.0 - 1.0, atol=1e-6)
        assert y == int(lbl)


def test_test_split_and_load_arrays(tiny_mnist):
    images, labels = tiny_mnist["test"]
    assert [y for _, y in mnist.test()()] == labels.tolist()
    x, y = mnist.load_arrays("test")
    assert x.shape == (3, 784) and y.dtype == np.int64
    with pytest.raises(ValueError, match="'valid'"):
        mnist.load_arrays("valid")


def test_bad_magic_is_reported(tmp_path):
    p = tmp_path / "bad.gz"
    p.write_bytes(gzip.compress(struct.pack(">ii", 1234, 0)))
    with pytest.raises(ValueError, match="magic 2049"):
        mnist._read_idx(str(p), 2049, 1)
