"""Data sets as readers (``paddle.v2.dataset``): downloaded ones are md5-checked and cached
under :data:`sculler.dataset.common.DATA_HOME`; ``digits`` ships offline."""

from sculler.dataset import common, digits, imdb, imikolov, mnist, movielens, uci_housing

__all__ = ["common", "digits", "mnist", "uci_housing", "imdb", "imikolov", "movielens"]
