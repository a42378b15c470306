"""One cuBLAS call per product on device arrays of any row or column stride
(sculler.math.cuda_blas) against NumPy. Marked ``gpu``: on a GPU it checks the real cuBLAS;
without one, the CuPy stand-in reads each matrix at its address with cuBLAS's column-major
leading dimensions, so a wrong transpose flag or leading dimension gives wrong numbers."""

import itertools

import numpy as np
import pytest

from sculler.backend import to_numpy
from sculler.math import blas, cuda_blas

pytestmark = pytest.mark.gpu

TOL = {np.float64: 1e-12, np.float32: 2e-5}


def _views(x, rng):
    """``x`` (2-D) as device arrays of each layout cuBLAS reads in place, with the array each
    is a view of and the part of it the view covers: C-contiguous, F-contiguous, a column
    slice of a wider row-major array, a row slice of a taller column-major one."""
    import cupy

    r, c = x.shape
    wide = cupy.asarray(rng.randn(r, c + 3).astype(x.dtype))
    tall = cupy.asarray(np.asfortranarray(rng.randn(r + 5, c).astype(x.dtype)))
    c_order, f_order = cupy.asarray(x), cupy.asarray(np.asfortranarray(x))
    views = {"c": (c_order, c_order, (slice(None),)),
             "f": (f_order, f_order, (slice(None),)),
             "row-slice": (wide[:, 2:2 + c], wide, (slice(None), slice(2, 2 + c))),
             "col-slice": (tall[1:1 + r], tall, (slice(1, 1 + r),))}
    for view, _, _ in views.values():
        view[...] = cupy.asarray(x)
    return views


LAYOUTS = ["c", "f", "row-slice", "col-slice"]
SHAPES = [(5, 4, 3), (1, 4, 3), (5, 1, 3), (5, 4, 1), (1, 1, 1)]


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("m,k,n", SHAPES)
def test_gemm_reads_every_layout_in_place(dtype, m, k, n):
    rng = np.random.RandomState(m * 100 + k * 10 + n)
    a, b, c0 = (rng.randn(*s).astype(dtype) for s in ((m, k), (k, n), (m, n)))
    for ka, kb, kc, beta in itertools.product(*[LAYOUTS] * 3, [0.0, 1.0, 0.5]):
        va, vb = _views(a, rng)[ka][0], _views(b, rng)[kb][0]
        vc, parent, covered = _views(c0, rng)[kc]
        before = to_numpy(parent).copy()
        assert cuda_blas.gemm(va, vb, vc, beta), (ka, kb, kc)
        np.testing.assert_allclose(to_numpy(vc), a @ b + beta * c0, rtol=TOL[dtype],
                                   atol=TOL[dtype], err_msg=f"{ka} {kb} {kc} beta {beta}")
        outside = np.ones(before.shape, bool)
        outside[covered] = False  # nothing around the view was written
        np.testing.assert_array_equal(to_numpy(parent)[outside], before[outside])


def test_gemm_declines_what_it_cannot_read_in_place():
    """A broadcast or doubly strided operand, mixed dtypes or an empty product: False, and
    blas.gemm's own fallback still gives the product."""
    import cupy

    rng = np.random.RandomState(0)
    a = rng.randn(6, 8)
    b = rng.randn(4, 3)
    out = cupy.zeros((3, 3))
    strided = cupy.asarray(a)[::2, ::2]  # (3, 4), no unit stride
    assert cuda_blas.layout(strided) is None
    assert not cuda_blas.gemm(strided, cupy.asarray(b), out)
    blas.gemm(strided, cupy.asarray(b), out, 1.0, cupy.empty((3, 3)))
    np.testing.assert_allclose(to_numpy(out), a[::2, ::2] @ b, rtol=1e-12)
    assert not cuda_blas.gemm(cupy.asarray(b.T).astype(np.float32), cupy.asarray(b), out)
    assert not cuda_blas.gemm(cupy.zeros((3, 0)), cupy.zeros((0, 3)), out)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("rows,cols", [(6, 4), (1, 4), (6, 1)])
def test_gemv_t_sums_rows_of_every_layout(dtype, rows, cols):
    import cupy

    rng = np.random.RandomState(rows + cols)
    m, x, y0 = rng.randn(rows, cols).astype(dtype), rng.randn(rows).astype(dtype), \
        rng.randn(cols).astype(dtype)
    for km, beta in itertools.product(LAYOUTS, [0.0, 1.0, 2.0]):
        y = cupy.asarray(y0)
        assert cuda_blas.gemv_t(_views(m, rng)[km][0], cupy.asarray(x), y, beta), km
        np.testing.assert_allclose(to_numpy(y), m.T @ x + beta * y0, rtol=TOL[dtype],
                                   atol=TOL[dtype], err_msg=f"{km} beta {beta}")
    strided_y = cupy.asarray(np.zeros(2 * cols, dtype))[::2]
    assert cuda_blas.gemv_t(cupy.asarray(m), cupy.asarray(x), strided_y)
    np.testing.assert_allclose(to_numpy(strided_y), m.T @ x, rtol=TOL[dtype], atol=TOL[dtype])
