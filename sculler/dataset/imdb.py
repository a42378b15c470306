"""IMDB movie-review sentiment (``paddle.v2.dataset.imdb``).

The aclImdb archive holds one review per text file under
``aclImdb/{train,test}/{pos,neg}/``. A review is tokenised by stripping trailing
newlines, deleting ASCII punctuation, lower-casing and splitting on whitespace. Samples
are ``(word ids, label)`` with label 0 for positive and 1 for negative reviews; all
positive reviews come first, as in v2.
"""

from __future__ import annotations

import collections
import re
import string
import tarfile
from collections.abc import Callable, Iterator

from sculler.dataset import common

__all__ = ["fetch", "build_dict", "word_dict", "train", "test", "tokenize"]

URL = "http://ai.stanford.edu/%7Eamaas/data/sentiment/aclImdb_v1.tar.gz"
MD5 = "7c2ac02c03563afcf9b574c7e56c153a"

_PUNCT = string.punctuation.encode("ascii")


def tokenize(pattern: re.Pattern) -> Iterator[list[str]]:
    """Yield the token list of every archive member whose name matches ``pattern``.

    Members are visited in archive order (sequential reads, no random access).
    """
    with tarfile.open(common.download(URL, "imdb", MD5)) as tarf:
        for member in tarf:
            if member.isfile() and pattern.match(member.name):
                raw = tarf.extractfile(member).read()
                words = raw.rstrip(b"\n\r").translate(None, _PUNCT).lower().split()
                yield [w.decode("utf-8", errors="replace") for w in words]


def build_dict(pattern: re.Pattern, cutoff: int) -> dict[str, int]:
    """Word -> id for the words seen more than ``cutoff`` times in matching reviews.

    Ids follow decreasing frequency (ties broken alphabetically); ``'<unk>'`` gets the
    last id.
    """
    freq: collections.Counter = collections.Counter()
    for doc in tokenize(pattern):
        freq.update(doc)
    kept = sorted(((w, c) for w, c in freq.items() if c > cutoff), key=lambda x: (-x[1], x[0]))
    word_idx = {w: i for i, (w, _) in enumerate(kept)}
    word_idx["<unk>"] = len(kept)
    return word_idx


def word_dict() -> dict[str, int]:
    """The v2 dictionary: words seen more than 150 times in train and test reviews."""
    return build_dict(re.compile(r"aclImdb/((train)|(test))/((pos)|(neg))/.*\.txt$"), 150)


def _reader_creator(
    pos_pattern: re.Pattern, neg_pattern: re.Pattern, word_idx: dict[str, int]
) -> Callable[[], Iterator[tuple[list[int], int]]]:
    if "<unk>" not in word_idx:
        raise ValueError("word_idx must contain '<unk>' (build it with imdb.word_dict())")
    unk = word_idx["<unk>"]
    samples: list[tuple[list[int], int]] = []

    def reader() -> Iterator[tuple[list[int], int]]:
        if not samples:  # tokenise the archive once, on the first pass
            for label, pattern in ((0, pos_pattern), (1, neg_pattern)):
                for doc in tokenize(pattern):
                    samples.append(([word_idx.get(w, unk) for w in doc], label))
        yield from samples

    return reader


def train(word_idx: dict[str, int]) -> Callable[[], Iterator[tuple[list[int], int]]]:
    """Reader creator of the training reviews as ``(word ids, label)``."""
    return _reader_creator(
        re.compile(r"aclImdb/train/pos/.*\.txt$"), re.compile(r"aclImdb/train/neg/.*\.txt$"),
        word_idx,
    )


def test(word_idx: dict[str, int]) -> Callable[[], Iterator[tuple[list[int], int]]]:
    """Reader creator of the test reviews as ``(word ids, label)``."""
    return _reader_creator(
        re.compile(r"aclImdb/test/pos/.*\.txt$"), re.compile(r"aclImdb/test/neg/.*\.txt$"),
        word_idx,
    )


def fetch() -> None:
    """Download the archive into the cache (v2's ``fetch``)."""
    common.download(URL, "imdb", MD5)
