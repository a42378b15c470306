"""CoNLL-2005 semantic role labelling (``paddle.v2.dataset.conll05``), the book's chapter 07.

Only the test part of CoNLL-2005 is public, so ``test()`` is also what the book trains on. The
archive holds gzipped ``words`` (one token per line) and ``props`` files (per token: the
predicate lemma or ``-``, then one bracketed argument column per predicate; an empty line ends
a sentence). Each (sentence, predicate) pair becomes one sample of nine equally long id
sequences:

    (word, ctx_n2, ctx_n1, ctx_0, ctx_p1, ctx_p2, pred, mark, label)

``ctx_*`` repeat the words two before .. two after the predicate (``bos``/``eos`` past the
ends), ``pred`` repeats the predicate's id, ``mark`` is 1 within two tokens of it, and
``label`` is the IOB tag of every token. Unknown words map to ``UNK_IDX`` = 0.

Unlike v2, which numbered the tags in ``set`` order (different from run to run), the label
dictionary here numbers the tag types in sorted order: ``B-t`` = 2k, ``I-t`` = 2k + 1, ``O``
last.
"""

from __future__ import annotations

import gzip
import tarfile
from collections.abc import Callable, Iterator

from sculler.dataset import common

__all__ = ["test", "get_dict", "get_embedding", "fetch", "UNK_IDX"]

DATA_URL = "http://www.cs.upc.edu/~srlconll/conll05st-tests.tar.gz"
DATA_MD5 = "387719152ae52d60422c016e92a742fc"
WORDDICT_URL = "http://paddlepaddle.bj.bcebos.com/demo/srl_dict_and_embedding/wordDict.txt"
WORDDICT_MD5 = "ea7fb7d4c75cc6254716f0177a506baa"
VERBDICT_URL = "http://paddlepaddle.bj.bcebos.com/demo/srl_dict_and_embedding/verbDict.txt"
VERBDICT_MD5 = "0d2977293bbb6cbefab5b0f97db1e77c"
TRGDICT_URL = "http://paddlepaddle.bj.bcebos.com/demo/srl_dict_and_embedding/targetDict.txt"
TRGDICT_MD5 = "d8c7f03ceb5fc2e5a0fa7503a4353751"
EMB_URL = "http://paddlepaddle.bj.bcebos.com/demo/srl_dict_and_embedding/emb"
EMB_MD5 = "bf436eb0faa1f6f9103017f8be57cdb7"
WORDS_NAME = "conll05st-release/test.wsj/words/test.wsj.words.gz"
PROPS_NAME = "conll05st-release/test.wsj/props/test.wsj.props.gz"

UNK_IDX = 0


def load_dict(path: str) -> dict[str, int]:
    """One entry per line: the stripped line -> its line number."""
    with open(path, encoding="utf-8") as f:
        return {line.strip(): i for i, line in enumerate(f)}


def load_label_dict(path: str) -> dict[str, int]:
    """IOB tags of the tag types named by ``B-``/``I-`` lines, types in sorted order."""
    types = set()
    with open(path, encoding="utf-8") as f:
        for line in f:
            tag = line.strip()
            if tag[:2] in ("B-", "I-"):
                types.add(tag[2:])
    labels = {}
    for k, typ in enumerate(sorted(types)):
        labels[f"B-{typ}"], labels[f"I-{typ}"] = 2 * k, 2 * k + 1
    labels["O"] = len(labels)
    return labels


def brackets_to_iob(column: list[str]) -> list[str]:
    """One argument column (``(A0*``, ``*``, ``*)``, ``(V*)``) as IOB tags."""
    tags, current, inside = [], "O", False
    for cell in column:
        if cell.startswith("("):
            current = cell[1:cell.index("*")]
            tags.append("B-" + current)
            inside = not cell.endswith(")")
        elif cell == "*":
            tags.append("I-" + current if inside else "O")
        elif cell == "*)":
            tags.append("I-" + current)
            inside = False
        else:
            raise ValueError(f"conll05: unexpected argument cell {cell!r}")
    return tags


def corpus_reader(path: str, words_name: str = WORDS_NAME,
                  props_name: str = PROPS_NAME) -> Callable[[], Iterator]:
    """Reader creator of ``(words, predicate, IOB tags)``, one per predicate of a sentence."""

    def reader() -> Iterator[tuple[list[str], str, list[str]]]:
        with tarfile.open(path) as tf, \
                gzip.open(tf.extractfile(words_name), "rt", encoding="utf-8") as words, \
                gzip.open(tf.extractfile(props_name), "rt", encoding="utf-8") as props:
            sentence: list[str] = []
            rows: list[list[str]] = []
            for word, prop in zip(words, props):
                cells = prop.split()
                if cells:
                    sentence.append(word.strip())
                    rows.append(cells)
                    continue
                if rows:
                    columns = list(zip(*rows))
                    verbs = [v for v in columns[0] if v != "-"]
                    for verb, column in zip(verbs, columns[1:]):
                        yield sentence, verb, brackets_to_iob(list(column))
                sentence, rows = [], []

    return reader


def reader_creator(corpus: Callable[[], Iterator], word_dict: dict[str, int],
                   predicate_dict: dict[str, int],
                   label_dict: dict[str, int]) -> Callable[[], Iterator]:
    """The nine id sequences of every (sentence, predicate) sample (see the module doc)."""

    def reader() -> Iterator[tuple[list[int], ...]]:
        for sentence, predicate, labels in corpus():
            n = len(sentence)
            v = labels.index("B-V")
            mark = [1 if abs(i - v) <= 2 else 0 for i in range(n)]
            ctx = [sentence[i] if 0 <= i < n else ("bos" if i < 0 else "eos")
                   for i in range(v - 2, v + 3)]
            if predicate not in predicate_dict:
                raise ValueError(f"conll05: predicate {predicate!r} is not in the verb "
                                 "dictionary")
            unknown = [t for t in labels if t not in label_dict]
            if unknown:
                raise ValueError(f"conll05: tags {sorted(set(unknown))} are not in the label "
                                 "dictionary")
            words = [word_dict.get(w, UNK_IDX) for w in sentence]
            ctx_ids = [[word_dict.get(w, UNK_IDX)] * n for w in ctx]
            pred = [predicate_dict[predicate]] * n
            yield (words, *ctx_ids, pred, mark, [label_dict[t] for t in labels])

    return reader


def get_dict() -> tuple[dict[str, int], dict[str, int], dict[str, int]]:
    """(word dictionary, verb dictionary, label dictionary)."""
    return (load_dict(common.download(WORDDICT_URL, "conll05st", WORDDICT_MD5)),
            load_dict(common.download(VERBDICT_URL, "conll05st", VERBDICT_MD5)),
            load_label_dict(common.download(TRGDICT_URL, "conll05st", TRGDICT_MD5)))


def get_embedding() -> str:
    """Path of the pre-trained word vectors (the book skips a 16-byte header, then reads
    float32 rows of width 32, one per word of the word dictionary)."""
    return common.download(EMB_URL, "conll05st", EMB_MD5)


def test() -> Callable[[], Iterator]:
    """Reader creator of the CoNLL-2005 test samples (nine sequences each); the files are
    fetched when the reader is first iterated."""

    def reader() -> Iterator[tuple[list[int], ...]]:
        word_dict, verb_dict, label_dict = get_dict()
        corpus = corpus_reader(common.download(DATA_URL, "conll05st", DATA_MD5))
        yield from reader_creator(corpus, word_dict, verb_dict, label_dict)()

    return reader


def fetch() -> None:
    """Download the dictionaries, embedding and data into the cache."""
    get_dict()
    get_embedding()
    common.download(DATA_URL, "conll05st", DATA_MD5)
