import numpy as np
import pytest

from sculler.minibatch import batch


def test_batch_keeps_last_partial():
    assert list(batch(lambda: iter(range(7)), 3)()) == [[0, 1, 2], [3, 4, 5], [6]]


def test_batch_drop_last():
    assert list(batch(lambda: iter(range(7)), 3, drop_last=True)()) == [[0, 1, 2], [3, 4, 5]]
    assert list(batch(lambda: iter(range(6)), 3, drop_last=True)()) == [[0, 1, 2], [3, 4, 5]]


def test_batch_accepts_numpy_int_and_empty_reader():
    assert list(batch(lambda: iter(range(4)), np.int64(2))()) == [[0, 1], [2, 3]]
    assert list(batch(lambda: iter([]), 2)()) == []


@pytest.mark.parametrize("bad", [0, -3])
def test_batch_size_must_be_positive(bad):
    with pytest.raises(ValueError, match=f"batch_size.*{bad}"):
        batch(lambda: iter(range(3)), bad)


def test_batch_size_type():
    with pytest.raises(TypeError, match="2.5"):
        batch(lambda: iter(range(3)), 2.5)
