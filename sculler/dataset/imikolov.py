"""Penn Treebank text from Mikolov's RNNLM examples (``paddle.v2.dataset.imikolov``).

Each line of ``ptb.train.txt`` / ``ptb.valid.txt`` is a sentence, framed by ``<s>`` and
``<e>``. With ``DataType.NGRAM`` a sample is a tuple of ``n`` consecutive word ids (every
window of every sentence with at least ``n`` tokens); with ``DataType.SEQ`` it is
``(src, trg)`` = (``<s>`` + ids, ids + ``<e>``), skipping sentences longer than ``n``
when ``n > 0``.
"""

from __future__ import annotations

import collections
import tarfile
from collections.abc import Callable, Iterable, Iterator

from sculler.dataset import common

__all__ = ["fetch", "DataType", "build_dict", "train", "test"]

URL = "http://www.fit.vutbr.cz/~imikolov/rnnlm/simple-examples.tgz"
MD5 = "30177ea32e27c525793142b6bf2c8e2d"
TRAIN_FILE = "./simple-examples/data/ptb.train.txt"
TEST_FILE = "./simple-examples/data/ptb.valid.txt"


class DataType:
    """Sample layout: n-gram windows or (source, target) sequences."""

    NGRAM = 1
    SEQ = 2


def _lines(tf: tarfile.TarFile, name: str) -> Iterator[list[str]]:
    f = tf.extractfile(name)
    if f is None:
        raise ValueError(f"{name} is not a regular file in the imikolov archive")
    for line in f:
        yield line.decode("utf-8").split()


def word_count(
    lines: Iterable[list[str]], word_freq: collections.Counter | None = None
) -> collections.Counter:
    """Add each line's words plus one ``<s>`` and one ``<e>`` per line to ``word_freq``."""
    freq = word_freq if word_freq is not None else collections.Counter()
    for words in lines:
        freq.update(words)
        freq["<s>"] += 1
        freq["<e>"] += 1
    return freq


def build_dict(min_word_freq: int = 50) -> dict[str, int]:
    """Word -> id over train and valid text for words seen more than ``min_word_freq``
    times, by decreasing frequency (ties alphabetical); ``'<unk>'`` gets the last id."""
    with tarfile.open(common.download(URL, "imikolov", MD5)) as tf:
        freq = word_count(_lines(tf, TEST_FILE), word_count(_lines(tf, TRAIN_FILE)))
    freq.pop("<unk>", None)  # the corpus spells unknown words <unk>; it goes last
    kept = sorted(
        ((w, c) for w, c in freq.items() if c > min_word_freq), key=lambda x: (-x[1], x[0])
    )
    word_idx = {w: i for i, (w, _) in enumerate(kept)}
    word_idx["<unk>"] = len(kept)
    return word_idx


def _reader_creator(
    filename: str, word_idx: dict[str, int], n: int, data_type: int
) -> Callable[[], Iterator[tuple]]:
    if data_type not in (DataType.NGRAM, DataType.SEQ):
        raise ValueError(f"data_type must be DataType.NGRAM or DataType.SEQ, got {data_type!r}")
    if data_type == DataType.NGRAM and n < 1:
        raise ValueError(f"n-gram length n must be >= 1, got {n}")
    for key in ("<unk>", "<s>", "<e>"):
        if key not in word_idx:
            raise ValueError(f"word_idx must contain {key!r} (build it with build_dict())")
    unk = word_idx["<unk>"]

    def reader() -> Iterator[tuple]:
        with tarfile.open(common.download(URL, "imikolov", MD5)) as tf:
            for words in _lines(tf, filename):
                if data_type == DataType.NGRAM:
                    tokens = ["<s>", *words, "<e>"]
                    if len(tokens) < n:
                        continue
                    ids = [word_idx.get(w, unk) for w in tokens]
                    for i in range(n, len(ids) + 1):
                        yield tuple(ids[i - n : i])
                else:
                    ids = [word_idx.get(w, unk) for w in words]
                    src, trg = [word_idx["<s>"], *ids], [*ids, word_idx["<e>"]]
                    if n > 0 and len(src) > n:
                        continue
                    yield src, trg

    return reader


def train(word_idx: dict[str, int], n: int, data_type: int = DataType.NGRAM) -> Callable:
    """Reader creator over ``ptb.train.txt``: n-gram tuples or (src, trg) sequences."""
    return _reader_creator(TRAIN_FILE, word_idx, n, data_type)


def test(word_idx: dict[str, int], n: int, data_type: int = DataType.NGRAM) -> Callable:
    """Reader creator over ``ptb.valid.txt``: n-gram tuples or (src, trg) sequences."""
    return _reader_creator(TEST_FILE, word_idx, n, data_type)


def fetch() -> None:
    """Download the archive into the cache (v2's ``fetch``)."""
    common.download(URL, "imikolov", MD5)
