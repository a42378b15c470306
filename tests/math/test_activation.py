"""The relu kernel's zeros operand: one read-only buffer per dtype, grown on demand."""

import numpy as np
import pytest

from sculler.math import activation as K


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_relu_against_a_shared_zeros_buffer(dtype):
    rng = np.random.default_rng(0)
    for shape in [(3, 4), (50, 70), (2, 5)]:  # the buffer grows, then a prefix serves
        x = rng.standard_normal(shape).astype(dtype)
        x[0, 0] = np.nan
        want = np.where(np.isnan(x), np.nan, np.where(x > 0, x, 0))
        np.testing.assert_array_equal(K.relu(x), want)
        y = x.copy()
        K._relu_(y)  # the in-place form the layers use
        np.testing.assert_array_equal(y, want)
        assert y.dtype == dtype
    zeros = K._zeros_like(np.empty((50, 70), dtype))
    assert not zeros.any() and not zeros.flags.writeable
    np.testing.assert_array_equal(K.relu(x[:, ::2]), np.maximum(x[:, ::2], 0))  # a view
