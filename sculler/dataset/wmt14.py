"""WMT-14 French -> English, the shrunk set PaddlePaddle's book uses (``paddle.v2.dataset.wmt14``).

The archive holds ``src.dict`` / ``trg.dict`` (one word per line, the first three being
``<s>``, ``<e>``, ``<unk>``) and tab-separated ``source \\t target`` sentence files under
``train/``, ``test/`` and ``gen/``. With a dictionary of the first ``dict_size`` words, a sample
is three id lists:

    src_ids      = [<s>] + source words + [<e>]
    trg_ids      = [<s>] + target words
    trg_ids_next = target words + [<e>]

Unknown words map to ``UNK_IDX`` = 2. Lines without exactly one tab are skipped, and so are
pairs whose ``src_ids`` or target words exceed 80 tokens.
"""

from __future__ import annotations

import gzip
import tarfile
from collections.abc import Callable, Iterator

from sculler.dataset import common

__all__ = ["train", "test", "gen", "get_dict", "model", "fetch", "START", "END", "UNK",
           "UNK_IDX"]

URL_DEV_TEST = "http://www-lium.univ-lemans.fr/~schwenk/cslm_joint_paper/data/dev+test.tgz"
MD5_DEV_TEST = "7d7897317ddd8ba0ae5c5fa7248d3ff5"
URL_TRAIN = "http://paddlepaddle.cdn.bcebos.com/demo/wmt_shrinked_data/wmt14.tgz"
MD5_TRAIN = "0791583d57d5beb693b9414c5b36798c"
URL_MODEL = "http://paddlepaddle.bj.bcebos.com/demo/wmt_14/wmt14_model.tar.gz"
MD5_MODEL = "0cb4a5366189b6acba876491c8724fa3"

START, END, UNK = "<s>", "<e>", "<unk>"
UNK_IDX = 2
MAX_LEN = 80


def _read_dicts(tf: tarfile.TarFile, dict_size: int) -> tuple[dict[str, int], dict[str, int]]:
    out = []
    for suffix in ("src.dict", "trg.dict"):
        names = [m.name for m in tf if m.isfile() and m.name.endswith(suffix)]
        if len(names) != 1:
            raise ValueError(f"wmt14: expected one {suffix} in the archive, found {names}")
        words: dict[str, int] = {}
        for i, line in enumerate(tf.extractfile(names[0])):
            if i >= dict_size:
                break
            words[line.decode("utf-8").strip()] = i
        out.append(words)
    return out[0], out[1]


def _archive() -> str:
    return common.download(URL_TRAIN, "wmt14", MD5_TRAIN)


def reader_creator(file_name: str, dict_size: int) -> Callable[[], Iterator]:
    """Samples of the archive members whose name ends with ``file_name``."""
    if isinstance(dict_size, bool) or not isinstance(dict_size, int) or dict_size < 3:
        raise ValueError(f"wmt14: dict_size must be an int >= 3, got {dict_size!r}")

    def reader() -> Iterator[tuple[list[int], list[int], list[int]]]:
        with tarfile.open(_archive()) as tf:
            src_dict, trg_dict = _read_dicts(tf, dict_size)
            members = [m for m in tf if m.isfile() and m.name.endswith(file_name)]
            for member in members:
                for raw in tf.extractfile(member):
                    parts = raw.decode("utf-8").strip().split("\t")
                    if len(parts) != 2:
                        continue
                    src = [src_dict.get(w, UNK_IDX) for w in [START, *parts[0].split(), END]]
                    trg = [trg_dict.get(w, UNK_IDX) for w in parts[1].split()]
                    if len(src) > MAX_LEN or len(trg) > MAX_LEN:
                        continue
                    yield src, [trg_dict[START], *trg], [*trg, trg_dict[END]]

    return reader


def train(dict_size: int) -> Callable[[], Iterator]:
    """Reader creator of the training pairs ``(src_ids, trg_ids, trg_ids_next)``."""
    return reader_creator("train/train", dict_size)


def test(dict_size: int) -> Callable[[], Iterator]:
    """Reader creator of the test pairs."""
    return reader_creator("test/test", dict_size)


def gen(dict_size: int) -> Callable[[], Iterator]:
    """Reader creator of the generation pairs (the book's translation examples)."""
    return reader_creator("gen/gen", dict_size)


def get_dict(dict_size: int, reverse: bool = True) -> tuple[dict, dict]:
    """(source, target) dictionaries of the first ``dict_size`` words: id -> word when
    ``reverse`` (the default, as in v2), else word -> id."""
    with tarfile.open(_archive()) as tf:
        src_dict, trg_dict = _read_dicts(tf, dict_size)
    if reverse:
        return {v: k for k, v in src_dict.items()}, {v: k for k, v in trg_dict.items()}
    return src_dict, trg_dict


def model():
    """The book's trained translation model (:class:`sculler.parameters.Parameters`)."""
    from sculler.parameters import Parameters

    with gzip.open(common.download(URL_MODEL, "wmt14", MD5_MODEL), "rb") as f:
        return Parameters.from_tar(f)


def fetch() -> None:
    """Download the data and the model into the cache."""
    _archive()
    common.download(URL_MODEL, "wmt14", MD5_MODEL)
