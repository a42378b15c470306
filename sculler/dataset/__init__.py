"""Data sets as readers (``paddle.v2.dataset``): downloaded ones are md5-checked and cached
under :data:`sculler.dataset.common.DATA_HOME`; ``digits`` ships offline."""

__all__ = ["common", "digits", "mnist", "uci_housing", "imdb", "imikolov", "movielens", "cifar",
           "conll05", "wmt14", "sentiment", "flowers", "voc2012", "mq2007", "wmt16"]


def __getattr__(name: str):
    """Each data set module is imported on first use (``paddle.dataset.mnist``)."""
    if name in __all__:
        import importlib

        return importlib.import_module(f"sculler.dataset.{name}")
    raise AttributeError(f"module 'sculler.dataset' has no attribute {name!r}")
