"""Pooling kernels against Paddle-style loops, finite differences and (if present) torch."""

import math

import numpy as np
import pytest

from sculler.math.pool import (
    avg_pool2d_backward,
    avg_pool2d_forward,
    max_pool2d_backward,
    max_pool2d_forward,
    pool_output_shape,
)
from sculler.testing.numeric import numeric_grad

try:
    import torch
except ImportError:  # pragma: no cover - depends on the machine
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="torch is not installed")


def _p(v):
    return (v, v) if isinstance(v, int) else tuple(v)


def pool_loop(x, size, stride, padding, mode, ceil_mode=True, exclude_mode=True):
    """Reference pooling written after Paddle's maxPoolForward / avgPoolForward loops."""
    (ky, kx), (sy, sx), (py, px) = _p(size), _p(stride), _p(padding)
    n, c, h, w = x.shape
    rnd = math.ceil if ceil_mode else math.floor
    oh = 1 + rnd((h + 2 * py - ky) / sy)
    ow = 1 + rnd((w + 2 * px - kx) / sx)
    y = np.zeros((n, c, oh, ow), x.dtype)
    for oy in range(oh):
        for ox in range(ow):
            hs, ws = oy * sy - py, ox * sx - px
            he, we = min(hs + ky, h + py), min(ws + kx, w + px)
            count = (he - hs) * (we - ws)
            hs, ws, he, we = max(hs, 0), max(ws, 0), min(he, h), min(we, w)
            win = x[:, :, hs:he, ws:we]
            if mode == "max":
                y[:, :, oy, ox] = win.max(axis=(2, 3))
            else:
                if exclude_mode:
                    count = (he - hs) * (we - ws)
                y[:, :, oy, ox] = win.sum(axis=(2, 3)) / count
    return y



# (size, stride, padding)
CASES = [
    (2, 2, 0),
    (3, 2, 0),
    (3, 2, 1),
    ((3, 2), (1, 2), (1, 0)),
    (2, 3, 0),  # stride > size
]


def test_output_shape_uses_ceil_by_default():
    assert pool_output_shape((1, 1, 7, 5), 2, 2) == (1, 1, 4, 3)
    assert pool_output_shape((1, 1, 7, 5), 2, 2, ceil_mode=False) == (1, 1, 3, 2)
    assert pool_output_shape((2, 3, 28, 28), 2, 2) == (2, 3, 14, 14)


@pytest.mark.parametrize("size, stride, padding", CASES)
@pytest.mark.parametrize("ceil_mode", [True, False])
def test_forward_matches_loop(size, stride, padding, ceil_mode):
    x = np.random.default_rng(0).standard_normal((2, 3, 7, 5))
    y, idx = max_pool2d_forward(x, size, stride, padding, ceil_mode)
    np.testing.assert_allclose(y, pool_loop(x, size, stride, padding, "max", ceil_mode))
    assert idx.shape == y.shape and idx.min() >= 0
    for exclude in (True, False):
        ya = avg_pool2d_forward(x, size, stride, padding, ceil_mode, exclude)
        ref = pool_loop(x, size, stride, padding, "avg", ceil_mode, exclude)
        np.testing.assert_allclose(ya, ref, rtol=1e-12, atol=1e-12)
        ya32 = avg_pool2d_forward(x.astype(np.float32), size, stride, padding, ceil_mode, exclude)
        np.testing.assert_allclose(ya32, ref, rtol=1e-5, atol=1e-5)


def test_exclude_mode_changes_only_padded_windows():
    x = np.ones((1, 1, 3, 3))
    inc = avg_pool2d_forward(x, 2, 2, 1, exclude_mode=False)
    exc = avg_pool2d_forward(x, 2, 2, 1, exclude_mode=True)
    assert exc[0, 0, 0, 0] == 1.0 and inc[0, 0, 0, 0] == 0.25
    # ceil mode leaves a window wholly in the padding: 0 for avg, lowest float for max
    assert exc[0, 0, 2, 2] == 0.0
    y, idx = max_pool2d_forward(x, 2, 2, 1)
    assert y[0, 0, 2, 2] == np.finfo(np.float64).min and idx[0, 0, 2, 2] == -1
    dx = max_pool2d_backward(np.ones_like(y), idx, x.shape, 2, 2, 1)
    assert dx.sum() == (idx >= 0).sum()


def test_max_argmax_picks_first_of_ties():
    x = np.zeros((1, 1, 2, 2))
    y, idx = max_pool2d_forward(x, 2, 2)
    assert idx.item() == 0
    dx = max_pool2d_backward(np.full_like(y, 3.0), idx, x.shape, 2, 2)
    assert dx.tolist() == [[[[3.0, 0.0], [0.0, 0.0]]]]


@pytest.mark.parametrize("size, stride, padding", CASES)
def test_backward_matches_finite_differences(size, stride, padding):
    rng = np.random.default_rng(1)
    # a permutation keeps every value distinct, so max pooling has no ties or kinks
    x = rng.permutation(2 * 2 * 7 * 5).reshape(2, 2, 7, 5) / 10.0
    y, idx = max_pool2d_forward(x, size, stride, padding)
    r = rng.standard_normal(y.shape)
    dx = max_pool2d_backward(r, idx, x.shape, size, stride, padding)
    num = numeric_grad(lambda: (max_pool2d_forward(x, size, stride, padding)[0] * r).sum(), x)
    np.testing.assert_allclose(dx, num, atol=1e-7)
    for exclude in (True, False):
        da = avg_pool2d_backward(r, x.shape, size, stride, padding, exclude)
        num = numeric_grad(
            lambda e=exclude: (avg_pool2d_forward(x, size, stride, padding, True, e) * r).sum(), x
        )
        np.testing.assert_allclose(da, num, atol=1e-7)


def test_backward_accumulates_into_out():
    x = np.random.default_rng(2).standard_normal((2, 3, 7, 5))
    y, idx = max_pool2d_forward(x, 3, 2, 1)
    dy = np.ones_like(y)
    buf = np.full_like(x, 2.0)
    assert max_pool2d_backward(dy, idx, x.shape, 3, 2, 1, out=buf) is buf
    np.testing.assert_allclose(buf, 2.0 + max_pool2d_backward(dy, idx, x.shape, 3, 2, 1))
    buf = np.full_like(x, 2.0)
    avg_pool2d_backward(dy, x.shape, 3, 2, 1, out=buf)
    np.testing.assert_allclose(buf, 2.0 + avg_pool2d_backward(dy, x.shape, 3, 2, 1))


def test_bad_arguments_raise():
    with pytest.raises(ValueError, match="NCHW"):
        max_pool2d_forward(np.zeros((3, 5, 5)), 2, 2)
    with pytest.raises(ValueError, match="size must be >= 1"):
        avg_pool2d_forward(np.zeros((1, 1, 5, 5)), 0, 2)


@needs_torch
@pytest.mark.parametrize("size, stride, padding", [(2, 2, 0), (3, 2, 1), ((3, 2), (2, 1), (1, 1))])
def test_matches_torch(size, stride, padding):
    # torch's ceil_mode drops a last window starting in the right padding; Paddle keeps it,
    # so compare in floor mode and in ceil mode on sizes where both agree.
    rng = np.random.default_rng(3)
    x = rng.permutation(2 * 3 * 7 * 5).reshape(2, 3, 7, 5) / 7.0
    for ceil_mode in (False, True):
        y, idx = max_pool2d_forward(x, size, stride, padding, ceil_mode)
        tx = torch.tensor(x, requires_grad=True)
        ty = torch.nn.functional.max_pool2d(tx, size, stride, padding, ceil_mode=ceil_mode)
        if ty.shape != y.shape:
            continue
        dy = rng.standard_normal(y.shape)
        ty.backward(torch.tensor(dy))
        np.testing.assert_allclose(y, ty.detach().numpy())
        np.testing.assert_allclose(max_pool2d_backward(dy, idx, x.shape, size, stride, padding),
                                   tx.grad.numpy(), atol=1e-12)
        for exclude in (True, False):
            tx.grad = None
            ta = torch.nn.functional.avg_pool2d(tx, size, stride, padding, ceil_mode,
                                                count_include_pad=not exclude)
            ta.backward(torch.tensor(dy))
            ya = avg_pool2d_forward(x, size, stride, padding, ceil_mode, exclude)
            np.testing.assert_allclose(ya, ta.detach().numpy(), atol=1e-12)
            da = avg_pool2d_backward(dy, x.shape, size, stride, padding, exclude)
            np.testing.assert_allclose(da, tx.grad.numpy(), atol=1e-12)


@pytest.mark.parametrize("size, stride", [(2, 2), ((2, 3), (2, 3)), (2, 3)])
def test_tiling_windows_write_into_out(size, stride):
    # windows that do not overlap take the direct paths: forward into out, backward added
    # straight into a contiguous out
    x = np.random.default_rng(4).permutation(2 * 3 * 7 * 8).reshape(2, 3, 7, 8) / 5.0
    for ceil_mode in (True, False):
        shape = pool_output_shape(x.shape, size, stride, 0, ceil_mode)
        y = np.full(shape, 7.0)
        _, idx = max_pool2d_forward(x, size, stride, 0, ceil_mode, out=y)
        np.testing.assert_array_equal(y, pool_loop(x, size, stride, 0, "max", ceil_mode))
        ya = np.full(shape, 7.0)
        avg_pool2d_forward(x, size, stride, 0, ceil_mode, out=ya)
        np.testing.assert_allclose(ya, pool_loop(x, size, stride, 0, "avg", ceil_mode))
        dy = np.random.default_rng(5).standard_normal(shape)
        num = numeric_grad(lambda c=ceil_mode, d=dy: (max_pool2d_forward(x, size, stride, 0, c)[0]
                                                      * d).sum(), x)
        buf = np.full_like(x, 2.0)
        max_pool2d_backward(dy, idx, x.shape, size, stride, 0, out=buf)
        np.testing.assert_allclose(buf, 2.0 + num, atol=1e-7)
        num = numeric_grad(lambda c=ceil_mode, d=dy: (avg_pool2d_forward(x, size, stride, 0, c)
                                                      * d).sum(), x)
        buf = np.full_like(x, 2.0)
        avg_pool2d_backward(dy, x.shape, size, stride, 0, out=buf)
        np.testing.assert_allclose(buf, 2.0 + num, atol=1e-7)


@pytest.mark.parametrize("size", [2, (3, 2)])
def test_exactly_tiling_max_backward_adds_or_overwrites(size):
    # windows that tile the input exactly take the per-tap path: beta=1 adds to out,
    # beta=0 overwrites whatever was there, no out gives a fresh gradient
    x = np.random.default_rng(6).permutation(2 * 3 * 6 * 8).reshape(2, 3, 6, 8) / 5.0
    y, idx = max_pool2d_forward(x, size, size, 0)
    assert y.shape[2] * _p(size)[0] == 6 and y.shape[3] * _p(size)[1] == 8
    dy = np.random.default_rng(7).standard_normal(y.shape)
    num = numeric_grad(lambda: (max_pool2d_forward(x, size, size, 0)[0] * dy).sum(), x)
    np.testing.assert_allclose(max_pool2d_backward(dy, idx, x.shape, size, size), num, atol=1e-7)
    buf = np.full_like(x, 2.0)
    assert max_pool2d_backward(dy, idx, x.shape, size, size, out=buf) is buf
    np.testing.assert_allclose(buf, 2.0 + num, atol=1e-7)
    buf = np.full_like(x, np.nan)
    max_pool2d_backward(dy, idx, x.shape, size, size, out=buf, beta=0.0)
    np.testing.assert_allclose(buf, num, atol=1e-7)
    with pytest.raises(ValueError, match="beta"):
        max_pool2d_backward(dy, idx, x.shape, size, size, out=buf, beta=0.5)


@pytest.mark.parametrize("size", [2, 12, 182])
def test_argmax_type_holds_every_tap_of_big_windows(size):
    # the tap index is kept in the smallest integer type that holds ky*kx taps (int8 for
    # 2x2): a 12x12 window has 144 taps and a 182x182 one 33124, past int8 and int16
    from sculler.math.pool import tap_dtype

    rng = np.random.default_rng(9)
    x = rng.standard_normal((1, 2, size, size)).astype(np.float32)
    x[0, 1, -1, -1] = 100.0  # the last tap wins in channel 1
    y, idx = max_pool2d_forward(x, size, size, 0)
    assert idx.dtype == tap_dtype(size * size)
    assert np.iinfo(idx.dtype).max >= size * size - 1
    assert int(idx[0, 1, 0, 0]) == size * size - 1
    assert int(idx[0, 0, 0, 0]) == int(np.argmax(x[0, 0]))
    np.testing.assert_array_equal(y[:, :, 0, 0], x.max(axis=(2, 3)))
    dx = max_pool2d_backward(np.ones_like(y), idx, x.shape, size, size)
    assert dx[0, 1, -1, -1] == 1.0 and dx.sum() == 2.0
    assert tap_dtype(4) == np.int8 and tap_dtype(144) == np.int16


def test_max_window_of_nan_or_minus_inf_first_taps_keeps_paddles_lowest_value():
    # a window's tap 0 enters against the start value -inf: a NaN or -inf there wins nothing
    # (argmax -1, output the dtype's lowest value, like Paddle's -FLT_MAX) unless a later tap
    # beats it; ties keep the first maximum
    x = np.array([[[[np.nan, 5, -np.inf, -np.inf, 1, 2],
                    [3, 4, -np.inf, -np.inf, 2, 2]]]], np.float32)
    low = np.finfo(np.float32).min
    y, idx = max_pool2d_forward(x, 2, 2)
    np.testing.assert_array_equal(y[0, 0, 0], [low, low, 2.0])
    np.testing.assert_array_equal(idx[0, 0, 0], [-1, -1, 1])
    dx = max_pool2d_backward(np.ones_like(y), idx, x.shape, 2, 2)
    assert dx.sum() == 1.0 and dx[0, 0, 0, 5] == 1.0  # empty windows route nothing
