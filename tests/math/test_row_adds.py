"""Row kernels without scatter-add against ``np.add.at`` (bit for bit: each destination row
gets its terms in the same order)."""

import numpy as np
import pytest

from sculler.math import segment as S
from sculler.math.sparse import add_rows

RNG = np.random.RandomState(5)


@pytest.mark.parametrize("offset", [-3, -1, 0, 1, 2, 7, -9])
@pytest.mark.parametrize("transpose", [False, True])
def test_shifted_add_equals_add_at_over_the_valid_rows(offset, transpose):
    """Windows of packed sequences (lengths with 0 and 1) shifted by ``offset``: only rows
    whose partner row lies in the same sequence add; the others end bit for bit unchanged."""
    starts = S.starts_from_lengths([1, 0, 4, 1, 3, 0, 2])
    rows = int(starts[-1])
    seg = S.segment_of_rows(starts)
    t = np.arange(rows)
    partner = t + offset
    valid = (partner >= starts[seg]) & (partner < starts[seg + 1])
    src = RNG.randn(rows, 3)
    dst = RNG.randn(rows, 3)
    want = dst.copy()
    if transpose:
        np.add.at(want, partner[valid], src[valid])
    else:
        np.add.at(want, t[valid], src[partner[valid]])
    got = S.shifted_add(dst, src, offset, starts, transpose=transpose)
    assert got is dst
    np.testing.assert_array_equal(dst, want)


def test_shifted_add_writes_through_column_views():
    """The context projection passes column blocks of one wide array."""
    wide = np.zeros((4, 6))
    src = np.arange(8.0).reshape(4, 2)
    S.shifted_add(wide[:, 2:4], src, 1, np.array([0, 2, 4]))
    np.testing.assert_array_equal(wide[:, 2:4], [[2, 3], [0, 0], [6, 7], [0, 0]])
    assert not wide[:, [0, 1, 4, 5]].any()


@pytest.mark.parametrize("rows", [[0, 2, 5], [4], [], [3, 1, 4], [2, 2, 0, 2], [0, 1, 1]])
@pytest.mark.parametrize("start_at_zero", [True, False])
def test_add_rows_sums_repeated_rows_like_add_at(rows, start_at_zero):
    """Distinct increasing rows take an indexed add, the others a CSR product that sums each
    row's terms in batch order: bit for bit add.at's result on a zero gradient, else equal up
    to the rounding of adding the sum once."""
    rows = np.array(rows, dtype=np.int64)
    src = RNG.randn(rows.size, 2)
    dst = np.zeros((6, 2)) if start_at_zero else RNG.randn(6, 2)
    want = dst.copy()
    np.add.at(want, rows, src)
    assert add_rows(dst, rows, src) is dst
    if start_at_zero:
        np.testing.assert_array_equal(dst, want)
    else:
        np.testing.assert_allclose(dst, want, rtol=1e-14, atol=1e-15)
