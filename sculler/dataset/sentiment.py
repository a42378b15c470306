"""Movie-review polarity, NLTK's ``movie_reviews`` corpus (``paddle.v2.dataset.sentiment``).

The corpus zip holds 1,000 negative and 1,000 positive reviews as
``movie_reviews/{neg,pos}/cv*.txt`` (already lower-cased). Words are NLTK's ``WordPunct``
tokens (runs of word characters, or runs of other non-space characters). The dictionary numbers
every word of the corpus by decreasing frequency (ties alphabetical; v2 left ties to dict order).
Reviews are interleaved neg, pos, neg, pos, ... in file-name order; a sample is
``(word ids, label)`` with label 0 negative, 1 positive. ``train()`` is the first 1,600
samples, ``test()`` the last 400.

PaddlePaddle reads the corpus through NLTK; Sculler reads the same zip directly (no NLTK
needed). v2's ``train()``/``test()`` returned generators; here they are reader creators like
every other data set.
"""

from __future__ import annotations

import collections
import re
import zipfile
from collections.abc import Callable, Iterator

from sculler.dataset import common

__all__ = ["train", "test", "get_word_dict", "fetch", "NUM_TRAINING_INSTANCES",
           "NUM_TOTAL_INSTANCES"]

URL = "https://raw.githubusercontent.com/nltk/nltk_data/gh-pages/packages/corpora/movie_reviews.zip"
# md5 of NLTK's movie_reviews.zip as pinned by distribution packages of nltk_data (unverified
# against the current GitHub copy; a mismatch raises DownloadError naming both sums)
MD5 = "155de2b77c6834dd8eea7cbe88e93acb"
NUM_TRAINING_INSTANCES = 1600
NUM_TOTAL_INSTANCES = 2000

_TOKEN = re.compile(r"\w+|[^\w\s]+")
_REVIEW = re.compile(r"^movie_reviews/(neg|pos)/[^/]+\.txt$")

Sample = tuple[list[int], int]


def _reviews() -> dict[str, list[list[str]]]:
    """Token lists of the reviews of each category, in file-name order."""
    out: dict[str, list[list[str]]] = {"neg": [], "pos": []}
    with zipfile.ZipFile(common.download(URL, "sentiment", MD5)) as zf:
        for name in sorted(zf.namelist()):
            match = _REVIEW.match(name)
            if match:
                text = zf.read(name).decode("utf-8", errors="replace")
                out[match.group(1)].append(_TOKEN.findall(text.lower()))
    return out


def _word_dict(reviews: dict[str, list[list[str]]]) -> dict[str, int]:
    freq: collections.Counter = collections.Counter()
    for docs in reviews.values():
        for doc in docs:
            freq.update(doc)
    ranked = sorted(freq.items(), key=lambda wc: (-wc[1], wc[0]))
    return {w: i for i, (w, _) in enumerate(ranked)}


def get_word_dict() -> list[tuple[str, int]]:
    """``[(word, id), ...]`` by decreasing frequency (the v2 return type)."""
    return list(_word_dict(_reviews()).items())


def _samples() -> list[Sample]:
    reviews = _reviews()
    ids = _word_dict(reviews)
    data = []
    for neg, pos in zip(reviews["neg"], reviews["pos"]):
        data.append(([ids[w] for w in neg], 0))
        data.append(([ids[w] for w in pos], 1))
    return data


def train() -> Callable[[], Iterator[Sample]]:
    """Reader creator of the first 1,600 interleaved reviews."""
    return lambda: iter(_samples()[:NUM_TRAINING_INSTANCES])


def test() -> Callable[[], Iterator[Sample]]:
    """Reader creator of the remaining 400 reviews."""
    return lambda: iter(_samples()[NUM_TRAINING_INSTANCES:])


def fetch() -> None:
    """Download the corpus into the cache."""
    common.download(URL, "sentiment", MD5)
