"""MQ2007 learning-to-rank data, LETOR 4.0 (``paddle.dataset.mq2007``).

About 1,700 queries of TREC 2007's Million Query track with judged documents. Each line of
``Fold1/train.txt`` / ``Fold1/test.txt`` is one query-document pair in SVMlight style::

    2 qid:10032 1:0.056537 2:0.000000 ... 46:0.076923 #docid = GX029-35-5894638 inc = 1 ...

a relevance score (0, 1 or 2), the query id and 46 features. Consecutive lines of one query
form a query list; lists whose scores are all 0 are dropped, each list is sorted by decreasing
relevance (stable), and with ``shuffle`` the lists are shuffled (``random.shuffle``). Samples by
``format``:

- ``"pointwise"``: ``(relevance, features)`` for each document, ``features`` float64 ``(46,)``;
- ``"pairwise"`` (default): ``(np.array([1]), better, worse)`` for every two documents of a
  query with different relevance, the more relevant first;
- ``"listwise"``: ``(relevance (n, 1) int array, features (n, 46))`` per query;
- ``"plain_txt"``: ``(query id, relevance, features)`` for each document.

PaddlePaddle's ``pointwise`` and ``plain_txt`` yielded only the first (most relevant) document
of each query, which its own docstrings contradict; here every document is a sample.
A feature missing from a line takes ``fill_missing``.

The data comes as a RAR archive. It is extracted once into ``DATA_HOME/MQ2007/MQ2007/``
(``Fold1`` ... ``Fold5``) with the ``rarfile`` package, which needs an external extractor for
compressed archives (``unrar``, ``unar``, ``bsdtar`` or ``7z``); without them, extract
``MQ2007.rar`` there by hand and the text files are read the same way.

``train`` and ``test`` are readers themselves, as in PaddlePaddle
(``paddle.batch(mq2007.train, 32)``, ``functools.partial(mq2007.train, format="listwise")``).
"""

from __future__ import annotations

import os
import random
import shutil
import tempfile
from collections.abc import Iterator

import numpy as np

from sculler.dataset import common

__all__ = ["train", "test", "fetch", "load_from_text", "FORMATS", "NUM_FEATURES"]

URL = ("http://www.bigdatalab.ac.cn/benchmark/upload/download_source/"
       "7b6dbbe2-842c-11e4-a536-bcaec51b9163_MQ2007.rar")
MD5 = "7be1640ae95c6408dab0ae7207bdc706"
EXTRACTED = "MQ2007"  # the archive's top folder, extracted next to the archive
TRAIN_FILE = "MQ2007/Fold1/train.txt"
TEST_FILE = "MQ2007/Fold1/test.txt"
NUM_FEATURES = 46
FORMATS = ("pointwise", "pairwise", "listwise", "plain_txt")

Query = tuple[int, int, np.ndarray]  # (query id, relevance, features)


def fetch() -> str:
    """Download the archive into the cache; its path."""
    return common.download(URL, "MQ2007", MD5)


def _extract(archive: str, target: str) -> None:
    """Extract ``archive`` into a temporary folder beside ``target``, then rename its top
    folder into place, so an interrupted extraction never looks complete."""
    try:
        import rarfile
    except ImportError as exc:
        raise ImportError(
            f"mq2007: reading {archive} needs the rarfile package (pip install rarfile) and an "
            f"extractor (unrar, unar, bsdtar or 7z); or extract it by hand so that "
            f"{os.path.join(target, 'Fold1', 'train.txt')} exists") from exc
    tmp = tempfile.mkdtemp(prefix=".extract-", dir=os.path.dirname(target))
    try:
        try:
            with rarfile.RarFile(archive) as rar:
                rar.extractall(path=tmp)
        except rarfile.Error as exc:
            raise RuntimeError(
                f"mq2007: cannot extract {archive} ({type(exc).__name__}: {exc}); install "
                f"unrar, unar, bsdtar or 7z, or extract it by hand so that "
                f"{os.path.join(target, 'Fold1', 'train.txt')} exists") from exc
        extracted = os.path.join(tmp, EXTRACTED)
        if not os.path.isdir(extracted):
            raise ValueError(f"mq2007: {archive} has no top folder {EXTRACTED!r}")
        os.replace(extracted, target)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _data_file(filepath: str) -> str:
    """Path of ``filepath`` (relative to the extracted top folder's parent), downloading and
    extracting the archive when it is not there yet."""
    home = os.path.join(common.DATA_HOME, "MQ2007")
    path = os.path.join(home, filepath)
    if not os.path.exists(path):
        target = os.path.join(home, EXTRACTED)
        if not os.path.isdir(target):
            _extract(fetch(), target)
        if not os.path.exists(path):
            raise FileNotFoundError(f"mq2007: {path} is not in the extracted archive")
    return path


def _parse(line: str, where: str, fill_missing: float) -> Query:
    """(query id, relevance, features) of one data line; the comment after '#' is dropped."""
    parts = line.split("#", 1)[0].split()
    if len(parts) < 2 or not parts[1].startswith("qid:"):
        raise ValueError(f"mq2007: {where}: expected 'relevance qid:N 1:v ... 46:v', got "
                         f"{line.strip()[:80]!r}")
    try:
        relevance, qid = int(parts[0]), int(parts[1][4:])
        features = np.full(NUM_FEATURES, fill_missing, dtype=np.float64)
        seen = set()
        for part in parts[2:]:
            index, value = part.split(":")
            i = int(index)
            if not 1 <= i <= NUM_FEATURES or i in seen:
                raise ValueError(f"feature index {i} repeated or outside 1..{NUM_FEATURES}")
            seen.add(i)
            features[i - 1] = float(value)
    except ValueError as exc:
        raise ValueError(f"mq2007: {where}: {exc} in {line.strip()[:80]!r}") from exc
    return qid, relevance, features


def load_from_text(filepath: str, shuffle: bool = True, fill_missing: float = -1
                   ) -> list[list[Query]]:
    """Query lists of a data file (path relative to the cache folder, e.g. ``TRAIN_FILE``):
    consecutive lines of one query, each list sorted by decreasing relevance (stable);
    shuffled with ``random.shuffle`` when ``shuffle``."""
    path = _data_file(filepath)
    lists: list[list[Query]] = []
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            query = _parse(line, f"{path} line {number}", fill_missing)
            if not lists or lists[-1][0][0] != query[0]:
                lists.append([])
            lists[-1].append(query)
    for docs in lists:
        docs.sort(key=lambda q: q[1], reverse=True)
    if shuffle:
        random.shuffle(lists)
    return lists


def _pairs(docs: list[Query]) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    for i, (_, rel_i, feat_i) in enumerate(docs):
        for _, rel_j, feat_j in docs[i + 1:]:
            if rel_i != rel_j:
                better, worse = (feat_i, feat_j) if rel_i > rel_j else (feat_j, feat_i)
                yield np.array([1]), better, worse


def _reader(filepath: str, format: str, shuffle: bool, fill_missing: float,  # noqa: A002
            fn: str) -> Iterator[tuple]:
    """The samples' iterator; ``format`` is checked at once, the file read when iterated."""
    if format not in FORMATS:
        raise ValueError(f"mq2007.{fn}: format must be one of {FORMATS}, got {format!r}")
    return _samples(filepath, format, shuffle, fill_missing)


def _samples(filepath: str, format: str, shuffle: bool,  # noqa: A002
             fill_missing: float) -> Iterator[tuple]:
    for docs in load_from_text(filepath, shuffle, fill_missing):
        if not any(rel for _, rel, _ in docs):
            continue  # PaddlePaddle's query_filter: nothing relevant, nothing to rank
        if format == "pointwise":
            yield from ((rel, feat) for _, rel, feat in docs)
        elif format == "plain_txt":
            yield from docs
        elif format == "pairwise":
            yield from _pairs(docs)
        else:
            yield (np.array([[rel] for _, rel, _ in docs]),
                   np.array([feat for _, _, feat in docs]))


def train(format: str = "pairwise", shuffle: bool = True,  # noqa: A002
          fill_missing: float = -1) -> Iterator[tuple]:
    """Samples of ``Fold1/train.txt`` in ``format`` (a reader: call it for an iterator)."""
    return _reader(TRAIN_FILE, format, shuffle, fill_missing, "train")


def test(format: str = "pairwise", shuffle: bool = True,  # noqa: A002
         fill_missing: float = -1) -> Iterator[tuple]:
    """Samples of ``Fold1/test.txt`` in ``format`` (a reader: call it for an iterator)."""
    return _reader(TEST_FILE, format, shuffle, fill_missing, "test")
