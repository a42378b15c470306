"""CSR kernels (scipy.sparse) against dense NumPy: products, row gradients, value gradients,
with empty rows, repeated column ids, binary and valued rows."""

import numpy as np
import pytest

from sculler.math.sparse import CsrMatrix, csr_matmul, csr_matmul_t, csr_t_matmul_rows

ROWS = [[3, 0, 3], [], [7], [1, 2, 5, 9], []]
VALUED = [[(3, 0.5), (0, -1.0), (3, 2.0)], [], [(7, 1.5)], [(1, 1.0), (2, -2.0), (9, 0.25)], []]


@pytest.fixture(params=["binary", "valued"])
def x(request):
    if request.param == "binary":
        return CsrMatrix.from_rows(ROWS, 10, with_values=False)
    return CsrMatrix.from_rows(VALUED, 10, with_values=True, dtype=np.float64)


@pytest.mark.parametrize("beta", [0.0, 1.0, 0.5])
def test_csr_matmul_equals_dense_product(x, beta):
    rng = np.random.RandomState(0)
    w = rng.randn(10, 4)
    out = rng.randn(5, 4)
    want = x.toarray() @ w + beta * out
    assert csr_matmul(x, w, out, beta=beta) is out
    np.testing.assert_allclose(out, want, rtol=1e-12, atol=1e-12)


def test_toarray_adds_repeated_ids():
    dense = CsrMatrix.from_rows(ROWS, 10, with_values=False).toarray()
    assert dense[0, 3] == 2 and dense[0, 0] == 1 and dense[1].sum() == 0 and dense.sum() == 8


def test_row_gradient_is_x_transpose_dy_on_touched_rows(x):
    dy = np.random.RandomState(1).randn(5, 4)
    rows, grad_rows = csr_t_matmul_rows(x, dy)
    full = x.toarray().T @ dy
    np.testing.assert_array_equal(rows, np.unique(x.indices))
    np.testing.assert_allclose(grad_rows, full[rows], rtol=1e-12, atol=1e-12)
    untouched = np.setdiff1d(np.arange(10), rows)
    assert not full[untouched].any()


def test_value_gradient(x):
    rng = np.random.RandomState(2)
    dy, w = rng.randn(5, 4), rng.randn(10, 4)
    grad = csr_matmul_t(dy, w, x)
    want = [dy[r] @ w[c] for r, c in zip(x.row_ids, x.indices)]
    np.testing.assert_allclose(grad, want, rtol=1e-12)


def test_float32_weights_keep_float32():
    x = CsrMatrix.from_rows(ROWS, 10, with_values=False)
    w = np.ones((10, 3), np.float32)
    out = np.zeros((5, 3), np.float32)
    csr_matmul(x, w, out)
    assert out.dtype == np.float32 and out[0, 0] == 3
    assert csr_t_matmul_rows(x, out)[1].dtype == np.float32
