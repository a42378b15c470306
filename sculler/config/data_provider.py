"""PaddlePaddle's PyDataProvider2 (``@provider``) and ``define_py_data_sources2``.

A v1 config names its data the way PaddlePaddle's did: a provider module beside the config
whose function, decorated with ``@provider(input_types=...)``, yields the samples of one data
file; and list files naming the data files (one path a line). ``sculler train`` reads them::

    # data_provider.py         (PaddlePaddle: from paddle.trainer.PyDataProvider2 import *)
    from sculler.config.data_provider import *

    @provider(input_types=[dense_vector(4), integer_value(2)])
    def process(settings, file_name):
        for line in open(file_name):
            *x, y = line.split()
            yield [float(v) for v in x], int(y)

    # config.py
    define_py_data_sources2(train_list="train.list", test_list=None,
                            module="data_provider", obj="process")

``input_types`` may be a list (in data-layer order) or a dict keyed by data-layer name (the
samples are then dicts too); an ``init_hook(settings, file_list, is_train, **args)`` may set
``settings.input_types`` and anything else the provider reads. Shuffling follows PaddlePaddle:
``should_shuffle=None`` shuffles training data only, within a pool of ``pool_size`` samples (the
whole pass when -1), seeded per pass so a run is reproducible. Caching, ``calc_batch_size`` and
``check`` are accepted and do nothing here (each pass reads the files again).
"""

from __future__ import annotations

import importlib
import os
import random
from collections.abc import Callable, Iterator
from typing import Any

from sculler.config.config_parser import Settings
from sculler.data_type import (  # noqa: F401 - PyDataProvider2's input types
    DataType,
    InputType,
    SequenceType,
    dense_vector,
    dense_vector_sequence,
    dense_vector_sub_sequence,
    integer_value,
    integer_value_sequence,
    integer_value_sub_sequence,
    sparse_binary_vector,
    sparse_binary_vector_sequence,
    sparse_binary_vector_sub_sequence,
    sparse_float_vector,
    sparse_float_vector_sequence,
    sparse_float_vector_sub_sequence,
)

__all__ = ["provider", "CacheType", "define_py_data_sources2", "DataType", "SequenceType",
           "InputType", "dense_vector",
           "dense_vector_sequence", "dense_vector_sub_sequence", "integer_value",
           "integer_value_sequence", "integer_value_sub_sequence", "sparse_binary_vector",
           "sparse_binary_vector_sequence", "sparse_binary_vector_sub_sequence",
           "sparse_float_vector", "sparse_float_vector_sequence",
           "sparse_float_vector_sub_sequence"]


class CacheType:
    NO_CACHE = 0
    CACHE_PASS_IN_MEM = 1


class ProviderSettings:
    """The ``settings`` object a provider and its init hook share (attributes they set)."""

    def __init__(self, input_types: Any, is_train: bool):
        self.input_types = input_types
        self.is_train = is_train


def provider(input_types: Any = None, should_shuffle: bool | None = None, pool_size: int = -1,
             min_pool_size: int = -1, can_over_batch_size: bool = True,
             calc_batch_size: Callable | None = None, cache: int = CacheType.NO_CACHE,
             check: bool = False, check_fail_continue: bool = False,
             init_hook: Callable | None = None, **unknown: Any) -> Callable:
    """Mark ``generator(settings, file_name)`` as a data provider (PaddlePaddle's decorator)."""
    if unknown:
        raise TypeError(f"provider: unknown arguments {sorted(unknown)}")

    def mark(generator: Callable) -> Callable:
        generator.provider_options = {"input_types": input_types,
                                      "should_shuffle": should_shuffle,
                                      "pool_size": int(pool_size), "init_hook": init_hook}
        return generator

    return mark


class ProviderSource:
    """A reader creator over the files of a list file, read by a ``@provider`` function."""

    def __init__(self, list_file: Any, module: str, obj: str, args: Any, is_train: bool,
                 base_dir: str):
        self.list_file, self.module, self.obj, self.args = list_file, module, obj, args
        self.is_train, self.base_dir = is_train, base_dir
        self.passes = 0

    def _files(self) -> list[str]:
        if isinstance(self.list_file, (list, tuple)):
            return [str(f) for f in self.list_file]
        path = os.path.join(self.base_dir, self.list_file)
        with open(path) as f:
            return [line.strip() for line in f if line.strip()]

    def generator(self) -> Callable:
        module = importlib.import_module(self.module)
        fn = getattr(module, self.obj, None)
        if fn is None or not hasattr(fn, "provider_options"):
            raise TypeError(f"define_py_data_sources2: {self.module}.{self.obj} must be a "
                            "function decorated with @provider(...)")
        return fn

    def input_types(self) -> Any:
        """The provider's input types once its init hook ran (list or dict)."""
        return self._settings(self.generator(), self._files()).input_types

    def _settings(self, fn: Callable, files: list[str]) -> ProviderSettings:
        options = fn.provider_options
        settings = ProviderSettings(options["input_types"], self.is_train)
        hook = options["init_hook"]
        if hook is not None:
            hook(settings, file_list=files, is_train=self.is_train, **(self.args or {}))
        if settings.input_types is None:
            raise ValueError(f"data provider {self.module}.{self.obj}: no input_types (give "
                             "them to @provider or set settings.input_types in init_hook)")
        return settings

    def __call__(self) -> Callable[[], Iterator]:
        fn, files = self.generator(), self._files()
        settings = self._settings(fn, files)
        options = fn.provider_options
        shuffle = options["should_shuffle"]
        shuffle = self.is_train if shuffle is None else shuffle
        names = (list(settings.input_types) if isinstance(settings.input_types, dict)
                 else None)

        def samples() -> Iterator:
            for name in files:
                for sample in fn(settings, name):
                    yield tuple(sample[n] for n in names) if names else tuple(sample)

        def reader() -> Iterator:
            self.passes += 1
            if not shuffle:
                yield from samples()
                return
            rng, pool_size, pool = random.Random(self.passes), options["pool_size"], []
            for sample in samples():
                pool.append(sample)
                if 0 < pool_size <= len(pool):
                    rng.shuffle(pool)
                    yield from pool
                    pool = []
            rng.shuffle(pool)
            yield from pool

        return reader


def _pair(value: Any, what: str) -> tuple[Any, Any]:
    if isinstance(value, (list, tuple)):
        if len(value) != 2:
            raise ValueError(f"define_py_data_sources2: {what} must be one value or a (train, "
                             f"test) pair, got {value!r}")
        return value[0], value[1]
    return value, value


def define_py_data_sources2(train_list: Any, test_list: Any, module: Any, obj: Any,
                            args: Any = None) -> None:
    """Read training (and test) data with a ``@provider`` function ``module.obj`` over the
    files listed in ``train_list`` (``test_list``; or Python lists of file names); ``module``,
    ``obj`` and ``args`` may be (train, test) pairs. A relative list file is read from the
    working directory, as PaddlePaddle did."""
    base = os.getcwd()
    modules, objs = _pair(module, "module"), _pair(obj, "obj")
    arg_pair = args if isinstance(args, (list, tuple)) else (args, args)
    train = ProviderSource(train_list, modules[0], objs[0], arg_pair[0], True, base) \
        if train_list is not None else None
    test = ProviderSource(test_list, modules[1], objs[1], arg_pair[1], False, base) \
        if test_list is not None else None
    Settings(train_source=train, test_source=test, input_types={})
