import io
import re
import tarfile

import pytest

from sculler.dataset import imdb


def make_tar(files):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    return buf.getvalue()


@pytest.fixture
def archive(publish):
    files = {
        "aclImdb/train/pos/0_9.txt": "Great movie, GREAT fun!\n" + "good " * 160,
        "aclImdb/train/pos/1_8.txt": "A great cast.",
        "aclImdb/train/neg/0_1.txt": "Bad... really bad.\n",
        "aclImdb/test/pos/0_7.txt": "great",
        "aclImdb/test/neg/0_2.txt": "boring & bad",
        "aclImdb/README": "not a review",
    }
    publish(imdb, "URL", "MD5", "aclImdb_v1.tar.gz", make_tar(files))
    return files


def test_tokenize_strips_punctuation_and_lowercases(archive):
    docs = list(imdb.tokenize(re.compile(r"aclImdb/train/neg/.*\.txt$")))
    assert docs == [["bad", "really", "bad"]]


def test_build_dict_orders_by_frequency_then_word(archive):
    d = imdb.build_dict(re.compile(r"aclImdb/((train)|(test))/((pos)|(neg))/.*\.txt$"), 0)
    assert d["good"] == 0 and d["great"] == 1 and d["bad"] == 2
    assert d["a"] == 3  # ties (count 1) are alphabetical: a, boring, cast, fun, movie, really
    assert d["<unk>"] == len(d) - 1
    assert imdb.word_dict() == {"good": 0, "<unk>": 1}  # only 'good' appears > 150 times


def test_train_and_test_readers(archive):
    d = {"great": 0, "bad": 1, "<unk>": 2}
    train = list(imdb.train(d)())
    labels = [label for _, label in train]
    assert labels == [0, 0, 1]  # positives first, label 0
    assert train[1] == ([2, 0, 2], 0)  # "a great cast", in archive order
    assert train[2] == ([1, 2, 1], 1)
    assert list(imdb.test(d)()) == [([0], 0), ([2, 1], 1)]  # "&" is dropped
    with pytest.raises(ValueError, match="<unk>"):
        imdb.train({"great": 0})
