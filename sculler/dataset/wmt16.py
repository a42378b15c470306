"""WMT-16 multimodal English-German translation, Multi30K (``paddle.dataset.wmt16``).

The archive ``wmt16.tar.gz`` holds tokenized, tab-separated ``english \\t german`` sentence
files ``wmt16/train``, ``wmt16/test`` and ``wmt16/val``. Dictionaries are built from the
training file for each language and size and cached as ``DATA_HOME/wmt16/<lang>_<size>.dict``
(one word a line): ``<s>``, ``<e>``, ``<unk>`` (ids 0, 1, 2), then the ``size - 3`` most
frequent other words, by decreasing count (ties alphabetical; PaddlePaddle left ties in hash
order, and listed a mark found in the text a second time).
A dictionary file whose line count is not its size is rebuilt. A sample is three id lists:

    src_ids      = [<s>] + source words + [<e>]
    trg_ids      = [<s>] + target words
    trg_ids_next = target words + [<e>]

Unknown words map to 2. Lines without exactly one tab are skipped, as PaddlePaddle did;
sentences are not cut by length. Sizes larger than the vocabulary (``TOTAL_EN_WORDS``,
``TOTAL_DE_WORDS``) are lowered to it.
"""

from __future__ import annotations

import collections
import os
import tarfile
from collections.abc import Callable, Iterator

from sculler.dataset import common
from sculler.fileio import atomic_write

__all__ = ["train", "test", "validation", "get_dict", "fetch", "convert", "START_MARK", "END_MARK",
           "UNK_MARK"]

DATA_URL = "http://cloud.dlnel.org/filepub/?uuid=46a0808e-ddd8-427c-bacd-0dbc6d045fed"
DATA_MD5 = "0c38be43600334966403524a40dcd81e"
SAVE_NAME = "wmt16.tar.gz"

TOTAL_EN_WORDS = 11250
TOTAL_DE_WORDS = 19220

START_MARK, END_MARK, UNK_MARK = "<s>", "<e>", "<unk>"
LANGS = ("en", "de")

Sample = tuple[list[int], list[int], list[int]]


def _archive() -> str:
    return common.download(DATA_URL, "wmt16", DATA_MD5, SAVE_NAME)


def _check_lang(lang: str, fn: str) -> None:
    if lang not in LANGS:
        raise ValueError(f"wmt16.{fn}: language must be 'en' (English) or 'de' (German), "
                         f"got {lang!r}")


def _clip_size(dict_size: int, lang: str, what: str) -> int:
    """``dict_size`` lowered to the language's vocabulary (with the three marks)."""
    if isinstance(dict_size, bool) or not isinstance(dict_size, int) or dict_size < 3:
        raise ValueError(f"wmt16: {what} must be an int >= 3 (the three marks and the words), "
                         f"got {dict_size!r}")
    return min(dict_size, TOTAL_EN_WORDS if lang == "en" else TOTAL_DE_WORDS)


def _pairs(tar_path: str, member: str) -> Iterator[tuple[str, str]]:
    """(english, german) of each line of ``member`` with exactly one tab."""
    with tarfile.open(tar_path, mode="r") as tf:
        f = tf.extractfile(member)
        if f is None:
            raise ValueError(f"wmt16: {member} is not a regular file in {tar_path}")
        for raw in f:
            parts = raw.decode("utf-8").strip().split("\t")
            if len(parts) == 2:
                yield parts[0], parts[1]


def _dict_path(lang: str, dict_size: int) -> str:
    return os.path.join(common.DATA_HOME, "wmt16", f"{lang}_{dict_size}.dict")


def _build_dict(tar_path: str, dict_size: int, lang: str) -> None:
    counts: collections.Counter = collections.Counter()
    col = LANGS.index(lang)
    for pair in _pairs(tar_path, "wmt16/train"):
        counts.update(pair[col].split())
    for mark in (START_MARK, END_MARK, UNK_MARK):  # a mark in the text keeps its own id
        counts.pop(mark, None)
    words = sorted(counts.items(), key=lambda wc: (-wc[1], wc[0]))[: dict_size - 3]
    lines = [START_MARK, END_MARK, UNK_MARK, *(w for w, _ in words)]
    atomic_write(_dict_path(lang, dict_size),
                 lambda f: f.write("".join(w + "\n" for w in lines).encode("utf-8")))


def _load_dict(dict_size: int, lang: str, reverse: bool = False) -> dict:
    path = _dict_path(lang, dict_size)
    words: list[str] = []
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            words = [line.rstrip("\n") for line in f]
    if len(words) != dict_size:
        _build_dict(_archive(), dict_size, lang)
        with open(path, encoding="utf-8") as f:
            words = [line.rstrip("\n") for line in f]
    if reverse:
        return dict(enumerate(words))
    return {w: i for i, w in enumerate(words)}


def _reader_creator(member: str, src_dict_size: int, trg_dict_size: int, src_lang: str,
                    fn: str) -> Callable[[], Iterator[Sample]]:
    _check_lang(src_lang, fn)
    trg_lang = "de" if src_lang == "en" else "en"
    src_size = _clip_size(src_dict_size, src_lang, "src_dict_size")
    trg_size = _clip_size(trg_dict_size, trg_lang, "trg_dict_size")

    def reader() -> Iterator[Sample]:
        src_dict = _load_dict(src_size, src_lang)
        trg_dict = _load_dict(trg_size, trg_lang)
        start, end, unk = src_dict[START_MARK], src_dict[END_MARK], src_dict[UNK_MARK]
        src_col = LANGS.index(src_lang)
        for pair in _pairs(_archive(), member):
            src = [start, *(src_dict.get(w, unk) for w in pair[src_col].split()), end]
            trg = [trg_dict.get(w, unk) for w in pair[1 - src_col].split()]
            yield src, [start, *trg], [*trg, end]

    return reader


def train(src_dict_size: int, trg_dict_size: int, src_lang: str = "en"
          ) -> Callable[[], Iterator[Sample]]:
    """Reader creator of the 29,000 training pairs ``(src_ids, trg_ids, trg_ids_next)``,
    translating from ``src_lang`` ('en' or 'de') into the other language."""
    return _reader_creator("wmt16/train", src_dict_size, trg_dict_size, src_lang, "train")


def test(src_dict_size: int, trg_dict_size: int, src_lang: str = "en"
         ) -> Callable[[], Iterator[Sample]]:
    """Reader creator of the test pairs."""
    return _reader_creator("wmt16/test", src_dict_size, trg_dict_size, src_lang, "test")


def validation(src_dict_size: int, trg_dict_size: int, src_lang: str = "en"
               ) -> Callable[[], Iterator[Sample]]:
    """Reader creator of the validation pairs (the archive's ``wmt16/val``)."""
    return _reader_creator("wmt16/val", src_dict_size, trg_dict_size, src_lang, "validation")


def get_dict(lang: str, dict_size: int, reverse: bool = False) -> dict:
    """The ``lang`` dictionary of ``dict_size`` words (lowered to the vocabulary): word -> id,
    or id -> word when ``reverse``. Built (downloading the archive) when not cached;
    PaddlePaddle required a reader to have built it first."""
    _check_lang(lang, "get_dict")
    return _load_dict(_clip_size(dict_size, lang, "dict_size"), lang, reverse)


def fetch() -> None:
    """Download the archive into the cache."""
    _archive()


def convert(path: str | os.PathLike, src_dict_size: int, trg_dict_size: int,
            src_lang: str = "en") -> None:
    """Write the three sets as RecordIO files of 1,000 samples under ``path``
    (``wmt16_train-00000``, ..., ``wmt16_test-*``, ``wmt16_validation-*``), for
    ``reader.creator.recordio``."""
    for name, creator in (("train", train), ("test", test), ("validation", validation)):
        common.convert(path, creator(src_dict_size, trg_dict_size, src_lang), 1000,
                       f"wmt16_{name}")
