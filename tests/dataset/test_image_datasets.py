"""flowers and voc2012 on small archives of pictures written here (served from 127.0.0.1)."""

import io

import numpy as np
import pytest
import scipy.io

from sculler import image
from sculler.dataset import flowers, voc2012

Image = pytest.importorskip("PIL.Image")


def png(pixels, mode=None, palette=None):
    img = Image.fromarray(pixels, mode) if mode else Image.fromarray(pixels)
    if palette is not None:
        img.putpalette(palette)
    buf = io.BytesIO()
    img.save(buf, format="PNG")  # lossless, so decoded pixels are the written ones
    return buf.getvalue()


def mat(**arrays):
    buf = io.BytesIO()
    scipy.io.savemat(buf, arrays)
    return buf.getvalue()


def picture(seed, h=20, w=30):
    return np.random.RandomState(seed).randint(0, 256, (h, w, 3)).astype(np.uint8)  # RGB


@pytest.fixture
def flowers_files(publish, make_tar):
    """Five pictures (image_00001.jpg ... image_00005.jpg, PNG-encoded), labels 7, 102, 1, 50,
    3; tstid (train) = 1, 3, 5; trnid (test) = 2; valid = 4."""
    publish(flowers, "DATA_URL", "DATA_MD5", "102flowers.tgz", make_tar(
        {f"jpg/image_{i:05d}.jpg": png(picture(i)) for i in range(1, 6)}))
    publish(flowers, "LABEL_URL", "LABEL_MD5", "imagelabels.mat",
            mat(labels=np.array([[7, 102, 1, 50, 3]], dtype=np.uint8)))
    publish(flowers, "SETID_URL", "SETID_MD5", "setid.mat",
            mat(tstid=np.array([[5, 1, 3]]), trnid=np.array([[2]]), valid=np.array([[4]])))


def raw(sample):
    return sample


def test_flowers_splits_and_labels(flowers_files, data_home):
    train = list(flowers.train(mapper=raw, use_xmap=False)())
    # archive order within the split; labels 1..102 become 0..101
    assert [label for _, label in train] == [6, 0, 2]
    np.testing.assert_array_equal(image.load_image_bytes(train[1][0]), picture(3)[:, :, ::-1])
    assert [label for _, label in flowers.test(mapper=raw, use_xmap=False)()] == [101]
    assert [label for _, label in flowers.valid(mapper=raw, use_xmap=False)()] == [49]
    assert (data_home / "flowers" / "102flowers.tgz_batch" / "tstid.txt").exists()


def test_flowers_default_mappers(flowers_files):
    samples = list(flowers.test(use_xmap=False)())
    assert len(samples) == 1
    pixels, label = samples[0]
    assert pixels.dtype == np.float32 and pixels.shape == (3 * 224 * 224,) and label == 101
    bgr = picture(2)[:, :, ::-1]  # the PNG holds RGB; the mapper sees BGR, as Paddle's cv2
    expected = image.simple_transform(bgr, 256, 224, is_train=False, mean=flowers.MEAN_BGR)
    np.testing.assert_allclose(pixels, expected.ravel())
    np.random.seed(0)
    train = sorted(flowers.train(buffered_size=4)(), key=lambda s: s[1])  # threaded xmap
    assert [label for _, label in train] == [0, 2, 6]
    assert all(p.shape == (3 * 224 * 224,) and p.dtype == np.float32 for p, _ in train)


def test_flowers_refuses_bad_setid_and_mapper(publish, flowers_files):
    with pytest.raises(TypeError, match="mapper must be callable, got int"):
        flowers.train(mapper=3)
    publish(flowers, "SETID_URL", "SETID_MD5", "setid.mat",
            mat(tstid=np.array([[9]]), trnid=np.array([[2]]), valid=np.array([[4]])))
    with pytest.raises(ValueError, match=r"'tstid' numbers images outside 1\.\.5"):
        list(flowers.train(use_xmap=False)())
    publish(flowers, "SETID_URL", "SETID_MD5", "setid.mat", mat(trnid=np.array([[2]])))
    with pytest.raises(ValueError, match="has no 'valid'"):
        list(flowers.valid(use_xmap=False)())


VOC = "VOCdevkit/VOC2012/"


def class_map(seed, h=20, w=30):
    ids = np.random.RandomState(seed).randint(0, 21, (h, w)).astype(np.uint8)
    ids[0, :] = 255  # the border ("void") value
    return ids


@pytest.fixture
def voc_files(publish, make_tar):
    palette = list(np.random.RandomState(0).randint(0, 256, 768))
    files = {VOC + "ImageSets/Segmentation/trainval.txt": "2007_000032\n2007_000033\n",
             VOC + "ImageSets/Segmentation/train.txt": "2007_000033\n",
             VOC + "ImageSets/Segmentation/val.txt": "2007_000032\n\n"}
    for seed, name in enumerate(["2007_000032", "2007_000033"]):
        files[VOC + f"JPEGImages/{name}.jpg"] = png(picture(seed))
        files[VOC + f"SegmentationClass/{name}.png"] = png(class_map(seed), "P", palette)
    publish(voc2012, "VOC_URL", "VOC_MD5", "VOCtrainval_11-May-2012.tar",
            make_tar(files, mode="w"))
    return files


def test_voc2012_pairs(voc_files):
    train = list(voc2012.train()())
    assert len(train) == 2
    im, label = train[1]
    assert im.dtype == np.uint8 and im.shape == (20, 30, 3)
    np.testing.assert_array_equal(im, picture(1))  # RGB, as Pillow decodes
    assert label.dtype == np.uint8 and label.shape == (20, 30)
    np.testing.assert_array_equal(label, class_map(1))  # class ids, not palette colours
    [(im, label)] = list(voc2012.test()())  # PaddlePaddle's test() reads the 'train' list
    np.testing.assert_array_equal(label, class_map(1))
    [(im, label)] = list(voc2012.val()())
    np.testing.assert_array_equal(im, picture(0))


def test_voc2012_names_a_missing_member(publish, make_tar, voc_files):
    del voc_files[VOC + "SegmentationClass/2007_000033.png"]
    publish(voc2012, "VOC_URL", "VOC_MD5", "VOCtrainval_11-May-2012.tar",
            make_tar(voc_files, mode="w"))
    with pytest.raises(ValueError, match="SegmentationClass/2007_000033.png is not a file"):
        list(voc2012.test()())


@pytest.mark.parametrize("module,attrs", [
    (flowers, [("DATA_URL", "DATA_MD5"), ("LABEL_URL", "LABEL_MD5"), ("SETID_URL", "SETID_MD5")]),
    (voc2012, [("VOC_URL", "VOC_MD5")])])
def test_fetch(publish, data_home, module, attrs):
    for i, (url, md5) in enumerate(attrs):
        publish(module, url, md5, f"file{i}", b"bytes %d" % i)
    module.fetch()
    assert len([p for p in data_home.rglob("file*")]) == len(attrs)
