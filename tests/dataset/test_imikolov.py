import io
import tarfile

import pytest

from sculler.dataset import imikolov


@pytest.fixture
def archive(publish):
    files = {
        "./simple-examples/data/ptb.train.txt": " the cat sat \n the dog <unk> \n",
        "./simple-examples/data/ptb.valid.txt": " the cat \n",
    }
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        for name, text in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(text)
            tf.addfile(info, io.BytesIO(text.encode()))
    publish(imikolov, "URL", "MD5", "simple-examples.tgz", buf.getvalue())


def test_build_dict(archive):
    d = imikolov.build_dict(min_word_freq=1)
    # counts: <s>=3, <e>=3, the=3, cat=2; dog and sat (1) are cut; <unk> last
    assert d == {"<e>": 0, "<s>": 1, "the": 2, "cat": 3, "<unk>": 4}
    assert len(imikolov.build_dict(min_word_freq=0)) == 7  # <unk> from the text is not counted


def test_ngram_reader(archive):
    d = imikolov.build_dict(min_word_freq=1)
    grams = list(imikolov.train(d, 3)())
    s, e, the, cat, unk = d["<s>"], d["<e>"], d["the"], d["cat"], d["<unk>"]
    assert grams == [(s, the, cat), (the, cat, unk), (cat, unk, e),
                     (s, the, unk), (the, unk, unk), (unk, unk, e)]
    assert list(imikolov.test(d, 5)()) == []  # "<s> the cat <e>" is shorter than 5
    assert list(imikolov.test(d, 4)()) == [(s, the, cat, e)]


def test_seq_reader(archive):
    d = imikolov.build_dict(min_word_freq=1)
    seqs = list(imikolov.test(d, 0, imikolov.DataType.SEQ)())
    assert seqs == [([d["<s>"], d["the"], d["cat"]], [d["the"], d["cat"], d["<e>"]])]
    assert list(imikolov.train(d, 3, imikolov.DataType.SEQ)()) == []  # both lines too long
    with pytest.raises(ValueError, match="data_type"):
        imikolov.train(d, 3, data_type=7)
