import sys

import numpy as np
import pytest

from sculler.dataset import digits

sklearn_datasets = pytest.importorskip("sklearn.datasets", reason="digits needs sculler[data]")


def test_split_follows_the_fixed_permutation():
    d = sklearn_datasets.load_digits()
    perm = np.random.RandomState(0).permutation(1797)
    x, y = digits.load_arrays("train")
    assert x.shape == (1437, 64) and x.dtype == np.float32 and y.dtype == np.int64
    np.testing.assert_allclose(x, d.data[perm[:1437]] / 8.0 - 1.0)
    np.testing.assert_array_equal(y, d.target[perm[:1437]])
    xt, yt = digits.load_arrays("test")
    assert xt.shape == (360, 64)
    np.testing.assert_array_equal(yt, d.target[perm[1437:]])
    assert x.min() == -1.0 and x.max() == 1.0


def test_readers_match_arrays():
    x, y = digits.load_arrays("test")
    samples = list(digits.test()())
    assert len(samples) == 360
    np.testing.assert_array_equal(np.stack([s[0] for s in samples]), x)
    assert [s[1] for s in samples] == y.tolist()
    assert all(isinstance(s[1], int) for s in samples)
    assert sum(1 for _ in digits.train()()) == 1437


def test_bad_split():
    with pytest.raises(ValueError, match="'dev'"):
        digits.load_arrays("dev")


def test_missing_sklearn_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "sklearn.datasets", None)
    digits._all.cache_clear()
    try:
        with pytest.raises(ImportError, match=r"pip install sculler\[data\]"):
            digits.load_arrays("train")
    finally:
        digits._all.cache_clear()
