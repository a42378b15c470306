"""Data sets as readers (``paddle.v2.dataset``): downloaded ones are md5-checked and cached
under :data:`sculler.dataset.common.DATA_HOME`; ``digits`` ships offline."""

from sculler.dataset import (
    cifar,
    common,
    conll05,
    digits,
    imdb,
    imikolov,
    mnist,
    movielens,
    sentiment,
    uci_housing,
    wmt14,
)

__all__ = ["common", "digits", "mnist", "uci_housing", "imdb", "imikolov", "movielens", "cifar",
           "conll05", "wmt14", "sentiment"]
