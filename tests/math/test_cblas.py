"""The accumulating GEMM on NumPy's OpenBLAS (sculler.math.cblas.gemm_accumulate, taken by
sculler.math.blas.gemm when beta != 0): the two-pass ``out = beta*out + a @ b`` within
rounding for every operand layout, in one call that leaves the scratch alone, and refused
(nothing changed) where BLAS cannot take the arrays."""

from __future__ import annotations

import numpy as np
import pytest

from sculler.math import cblas
from sculler.math.blas import gemm

needs_gemm = pytest.mark.skipif(cblas.routine("gemm", np.float32) is None,
                                reason="NumPy's BLAS has no 64-bit cblas_sgemm here")


def _operand(rng, rows, cols, dtype, transposed):
    """A (rows, cols) matrix, as a transposed view when ``transposed``."""
    if transposed:
        return rng.standard_normal((cols, rows)).astype(dtype).T
    return rng.standard_normal((rows, cols)).astype(dtype)


@needs_gemm
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("trans_a", [False, True])
@pytest.mark.parametrize("trans_b", [False, True])
@pytest.mark.parametrize("beta", [1.0, 0.5])
def test_accumulating_gemm_matches_two_passes_and_leaves_scratch(dtype, trans_a, trans_b, beta):
    rng = np.random.default_rng(0)
    m, k, n = 128, 19, 300  # an output of at least ACCUMULATE_MIN_ELEMENTS
    a, b = _operand(rng, m, k, dtype, trans_a), _operand(rng, k, n, dtype, trans_b)
    out = rng.standard_normal((m, n)).astype(dtype)
    expected = beta * out.astype(np.float64) + a.astype(np.float64) @ b.astype(np.float64)
    scratch = np.full((m, n), np.nan, dtype)
    assert gemm(a, b, out, beta, scratch) is out
    assert np.isnan(scratch).all()  # one BLAS call: no product in the scratch
    tol = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(out, expected, rtol=tol, atol=tol)


@needs_gemm
def test_accumulating_gemm_is_bit_identical_to_two_passes_for_a_thin_product():
    """A recurrent step's ``dW += x^T dz`` (K = the batch): the same bits as NumPy's
    ``matmul`` into a scratch and ``+=``."""
    rng = np.random.default_rng(1)
    x, dz = _operand(rng, 32, 128, np.float32, False), _operand(rng, 32, 3000, np.float32, False)
    out = rng.standard_normal((128, 3000)).astype(np.float32)
    two_pass = out + x.T @ dz
    assert cblas.gemm_accumulate(x.T, dz, out, 1.0)
    np.testing.assert_array_equal(out, two_pass)


def test_refused_arrays_are_left_alone():
    rng = np.random.default_rng(2)
    m, n = 128, cblas.ACCUMULATE_MIN_ELEMENTS // 128
    a, b = _operand(rng, m, 4, np.float32, False), _operand(rng, 4, n, np.float32, False)
    out = rng.standard_normal((m, n)).astype(np.float32)
    before = out.copy()
    big = rng.standard_normal((2 * m, 2 * m)).astype(np.float32)
    small = out[:, :-1].copy()
    for args in ((a, b[:, :-1], small),  # too small to gain from one call
                 (a, b.astype(np.float64), out),  # dtypes differ
                 (a.astype(np.int32), b.astype(np.int32), out.astype(np.int32)),
                 (a, b[:3], out),  # inner sizes differ
                 (a, b, np.asfortranarray(out)),  # out not C-contiguous
                 (a[:, ::2], b[::2], out),  # strided operand
                 (a[:0], b, out[:0])):  # empty
        assert not cblas.gemm_accumulate(*args, 1.0)
    np.testing.assert_array_equal(small, before[:, :-1])
    overlap = big.copy()
    assert not cblas.gemm_accumulate(overlap[:, :4], overlap[:4], overlap, 1.0)
    np.testing.assert_array_equal(out, before)


@needs_gemm
def test_gemm_falls_back_where_blas_is_refused():
    """An operand BLAS cannot describe (a strided view) still gets ``beta*out + a @ b``."""
    rng = np.random.default_rng(3)
    a = rng.standard_normal((5, 8)).astype(np.float32)[:, ::2]
    b = rng.standard_normal((4, 3)).astype(np.float32)
    out = rng.standard_normal((5, 3)).astype(np.float32)
    expected = 0.5 * out + a @ b
    gemm(a, b, out, 0.5, np.empty_like(out))
    np.testing.assert_allclose(out, expected, rtol=1e-6, atol=1e-6)
