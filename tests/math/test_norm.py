"""Batch norm, cross-map norm and maxout against loops, finite differences and torch."""

import numpy as np
import pytest

from sculler.math.jit import numba_available
from sculler.math.norm import (
    batch_norm_backward,
    batch_norm_forward,
    compiled_images,
    cross_map_norm_backward,
    cross_map_norm_forward,
    maxout_backward,
    maxout_forward,
)
from sculler.testing.numeric import numeric_grad

try:
    import torch
except ImportError:  # pragma: no cover - depends on the machine
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="torch is not installed")



def bn_loop(x, gamma, beta, eps=1e-5):
    """Per-channel loop: E[x], E[x^2] - E[x]^2, as Paddle's calMeanAndStd."""
    y = np.empty_like(x)
    means, vars_ = [], []
    for c in range(x.shape[1]):
        v = x[:, c]
        m = v.mean()
        var = max((v * v).mean() - m * m, 0.0)
        y[:, c] = gamma[c] * (v - m) / np.sqrt(var + eps) + beta[c]
        means.append(m)
        vars_.append(var)
    return y, np.array(means), np.array(vars_)


@pytest.mark.parametrize("shape", [(2, 3, 7, 5), (6, 4)])
def test_batch_norm_forward_and_moving_stats(shape):
    rng = np.random.default_rng(0)
    x = rng.standard_normal(shape) * 2 + 1
    c = shape[1]
    gamma, beta = rng.standard_normal(c), rng.standard_normal(c)
    mm0, mv0 = rng.standard_normal(c), rng.random(c) + 0.5
    mm, mv = mm0.copy(), mv0.copy()
    y, mean, inv_std = batch_norm_forward(x, gamma, beta, mm, mv, moving_average_fraction=0.8)
    ref, m, v = bn_loop(x, gamma, beta)
    np.testing.assert_allclose(y, ref, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(mean, m, rtol=1e-12)
    np.testing.assert_allclose(inv_std, 1 / np.sqrt(v + 1e-5), rtol=1e-12)
    np.testing.assert_allclose(mm, 0.8 * mm0 + 0.2 * m, rtol=1e-12)
    np.testing.assert_allclose(mv, 0.8 * mv0 + 0.2 * v, rtol=1e-12)
    y32, _, _ = batch_norm_forward(x.astype(np.float32), gamma.astype(np.float32),
                                   beta.astype(np.float32), mm0.astype(np.float32),
                                   mv0.astype(np.float32))
    assert y32.dtype == np.float32
    np.testing.assert_allclose(y32, ref, rtol=1e-5, atol=1e-5)


def test_batch_norm_global_stats_use_and_keep_moving_values():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 3, 4, 5))
    mm, mv = rng.standard_normal(3), rng.random(3) + 0.5
    before = (mm.copy(), mv.copy())
    y, _, _ = batch_norm_forward(x, np.ones(3), None, mm, mv, use_global_stats=True)
    np.testing.assert_allclose(y, (x - mm[:, None, None]) / np.sqrt(mv[:, None, None] + 1e-5))
    np.testing.assert_array_equal(mm, before[0])
    np.testing.assert_array_equal(mv, before[1])


@pytest.mark.parametrize("global_stats", [False, True])
def test_batch_norm_backward_matches_finite_differences(global_stats):
    rng = np.random.default_rng(2)
    x = rng.standard_normal((3, 2, 3, 2))
    gamma, beta = rng.standard_normal(2), rng.standard_normal(2)
    mm, mv = rng.standard_normal(2), rng.random(2) + 0.5
    r = rng.standard_normal(x.shape)

    def loss():
        y, _, _ = batch_norm_forward(x, gamma, beta, mm.copy(), mv.copy(), global_stats)
        return (y * r).sum()

    _, mean, inv_std = batch_norm_forward(x, gamma, beta, mm.copy(), mv.copy(), global_stats)
    dx, dg, db = batch_norm_backward(r, x, mean, inv_std, gamma, global_stats)
    np.testing.assert_allclose(dx, numeric_grad(loss, x), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(dg, numeric_grad(loss, gamma), rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(db, numeric_grad(loss, beta), rtol=1e-6, atol=1e-7)
    bufs = (np.ones_like(x), np.ones(2), np.ones(2))
    res = batch_norm_backward(r, x, mean, inv_std, gamma, global_stats, *bufs)
    assert all(a is b for a, b in zip(res, bufs))
    np.testing.assert_allclose(bufs[1], dg + 1)


def test_batch_norm_float32_within_rounding_of_float64():
    """The float32 kernels (channel sums as batched dot products, x_hat folded into the
    per-channel coefficients) stay within float32 rounding of the float64 results."""
    rng = np.random.default_rng(6)
    for shape in [(8, 4, 16, 16), (64, 5)]:
        c = shape[1]
        x, dy = rng.standard_normal(shape) * 3 + 2, rng.standard_normal(shape)
        gamma, beta = rng.random(c) + 0.5, rng.standard_normal(c)
        ref = batch_norm_forward(x, gamma, beta, np.zeros(c), np.ones(c))
        ref_grads = batch_norm_backward(dy, x, ref[1], ref[2], gamma)
        f32 = [a.astype(np.float32) for a in (x, gamma, beta, dy)]
        y, mean, inv = batch_norm_forward(f32[0], f32[1], f32[2], np.zeros(c, np.float32),
                                          np.ones(c, np.float32))
        grads = batch_norm_backward(f32[3], f32[0], mean, inv, f32[1])
        for got, want in zip((y,) + grads, (ref[0],) + ref_grads):
            assert got.dtype == np.float32
            np.testing.assert_allclose(got, want, rtol=0, atol=2e-6 * np.abs(want).max())


@pytest.mark.parametrize("global_stats", [False, True])
def test_batch_norm_buffers_and_first_write_betas(global_stats):
    """``out`` and ``alloc`` hold the forward's arrays; betas 0 overwrite stale buffers,
    betas 1 add to them."""
    rng = np.random.default_rng(7)
    x, dy = rng.standard_normal((3, 2, 4, 5)), rng.standard_normal((3, 2, 4, 5))
    gamma, beta = rng.standard_normal(2), rng.standard_normal(2)
    y_ref, mean, inv = batch_norm_forward(x, gamma, beta, np.zeros(2), np.ones(2),
                                          global_stats)
    grads_ref = batch_norm_backward(dy, x, mean, inv, gamma, global_stats)
    work: dict[str, np.ndarray] = {}

    def alloc(key, shape, dtype):
        work[key] = np.full(shape, 9.0, dtype)
        return work[key]

    out = np.full_like(x, 5.0)
    y, _, _ = batch_norm_forward(x, gamma, beta, np.zeros(2), np.ones(2), global_stats,
                                 out=out, alloc=alloc)
    compiled = compiled_images(x) and not global_stats  # two passes, no work buffer
    assert y is out and set(work) == (set() if compiled else {"bn_centered"})
    np.testing.assert_allclose(y, y_ref, rtol=1e-12)
    for beta_value, base in ((0.0, 0.0), (1.0, 7.0)):
        bufs = (np.full_like(x, 7.0), np.full(2, 7.0), np.full(2, 7.0))
        res = batch_norm_backward(dy, x, mean, inv, gamma, global_stats, *bufs,
                                  betas=(beta_value,) * 3, alloc=alloc)
        assert all(a is b for a, b in zip(res, bufs))
        for got, want in zip(res, grads_ref):
            np.testing.assert_allclose(got, want + base, rtol=1e-12, atol=1e-12)
    with pytest.raises(ValueError, match=r"out has shape \(3, 2, 4, 4\)"):
        batch_norm_forward(x, gamma, beta, np.zeros(2), np.ones(2), out=np.empty((3, 2, 4, 4)))
    with pytest.raises(ValueError, match=r"betas must be three of 0.0 .* got \(0.5, 1.0, 1.0\)"):
        batch_norm_backward(dy, x, mean, inv, gamma, global_stats, betas=(0.5, 1.0, 1.0))


def test_batch_norm_rejects_wrong_parameter_shape():
    with pytest.raises(ValueError, match=r"scale has shape \(2,\), expected \(3,\)"):
        batch_norm_forward(np.zeros((2, 3, 2, 2)), np.ones(2), None, np.zeros(3), np.ones(3))


def cmr_loop(x, size, scale, power):
    """Paddle's CrossMapNormal: window [c - (size-1)//2, c - (size-1)//2 + size)."""
    n, c, h, w = x.shape
    y = np.empty_like(x)
    start = -((size - 1) // 2)
    for ch in range(c):
        lo, hi = max(ch + start, 0), min(ch + start + size, c)
        denom = 1 + scale / size * (x[:, lo:hi] ** 2).sum(axis=1)
        y[:, ch] = x[:, ch] * denom ** (-power)
    return y


@pytest.mark.parametrize("size", [1, 3, 4, 5])
def test_cross_map_norm_forward_and_backward(size):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 6, 3, 5))
    scale, power = 0.7, 0.75
    y, denom = cross_map_norm_forward(x, size, scale, power)
    np.testing.assert_allclose(y, cmr_loop(x, size, scale, power), rtol=1e-12)
    y32, _ = cross_map_norm_forward(x.astype(np.float32), size, scale, power)
    np.testing.assert_allclose(y32, y, rtol=1e-5, atol=1e-6)
    xs = x[:, :, :2, :2].copy()
    ys, ds = cross_map_norm_forward(xs, size, scale, power)
    r = rng.standard_normal(xs.shape)
    dx = cross_map_norm_backward(r, xs, ys, ds, size, scale, power)
    num = numeric_grad(lambda: (cross_map_norm_forward(xs, size, scale, power)[0] * r).sum(), xs)
    np.testing.assert_allclose(dx, num, rtol=1e-6, atol=1e-8)
    buf = np.ones_like(xs)
    assert cross_map_norm_backward(r, xs, ys, ds, size, scale, power, out=buf) is buf
    np.testing.assert_allclose(buf, dx + 1)


def test_maxout_forward_backward():
    rng = np.random.default_rng(4)
    x = rng.permutation(2 * 6 * 3 * 5).reshape(2, 6, 3, 5) / 10.0
    y, idx = maxout_forward(x, 3)
    ref = np.stack([x[:, 3 * o : 3 * o + 3].max(axis=1) for o in range(2)], axis=1)
    np.testing.assert_array_equal(y, ref)
    r = rng.standard_normal(y.shape)
    dx = maxout_backward(r, idx, 3)
    np.testing.assert_allclose(dx, numeric_grad(lambda: (maxout_forward(x, 3)[0] * r).sum(), x),
                               atol=1e-8)
    buf = np.ones_like(x)
    maxout_backward(r, idx, 3, out=buf)
    np.testing.assert_allclose(buf, dx + 1)
    with pytest.raises(ValueError, match="groups=4 must be a positive divisor"):
        maxout_forward(x, 4)


@needs_torch
def test_batch_norm_and_lrn_match_torch():
    rng = np.random.default_rng(5)
    x = rng.standard_normal((2, 5, 7, 3))
    gamma, beta = rng.standard_normal(5), rng.standard_normal(5)
    mm, mv = np.zeros(5), np.ones(5)
    y, mean, inv_std = batch_norm_forward(x, gamma, beta, mm, mv)
    tx = torch.tensor(x, requires_grad=True)
    tg, tb = torch.tensor(gamma, requires_grad=True), torch.tensor(beta, requires_grad=True)
    tmm, tmv = torch.zeros(5, dtype=torch.float64), torch.ones(5, dtype=torch.float64)
    ty = torch.nn.functional.batch_norm(tx, tmm, tmv, tg, tb, True, 0.1, 1e-5)
    dy = rng.standard_normal(y.shape)
    ty.backward(torch.tensor(dy))
    np.testing.assert_allclose(y, ty.detach().numpy(), atol=1e-10)
    np.testing.assert_allclose(mm, tmm.numpy(), atol=1e-12)  # torch's momentum = 1 - fraction
    dx, dg, db = batch_norm_backward(dy, x, mean, inv_std, gamma)
    np.testing.assert_allclose(dx, tx.grad.numpy(), atol=1e-10)
    np.testing.assert_allclose(dg, tg.grad.numpy(), atol=1e-10)
    np.testing.assert_allclose(db, tb.grad.numpy(), atol=1e-10)

    # Paddle (odd size) = torch LRN with k=1 and the same alpha (both divide alpha by size)
    tx.grad = None
    yl, denom = cross_map_norm_forward(x, 3, 0.6, 0.75)
    tl = torch.nn.functional.local_response_norm(tx, 3, alpha=0.6, beta=0.75, k=1.0)
    tl.backward(torch.tensor(dy))
    np.testing.assert_allclose(yl, tl.detach().numpy(), atol=1e-10)
    dxl = cross_map_norm_backward(dy, x, yl, denom, 3, 0.6, 0.75)
    np.testing.assert_allclose(dxl, tx.grad.numpy(), atol=1e-10)


@pytest.mark.skipif(not numba_available(), reason="numba is not installed (sculler[fast])")
@pytest.mark.parametrize("dtype,rtol", [(np.float64, 1e-12), (np.float32, 1e-5)])
@pytest.mark.parametrize("add", [False, True])
@pytest.mark.parametrize("relu", [False, True])
def test_compiled_batch_norm_equals_numpy_passes(monkeypatch, dtype, rtol, add, relu):
    """The two compiled passes each way (numba) give the NumPy passes' output, moving
    statistics and gradients; ``add`` checks beta 1 (add into dx) against beta 0; ``relu``
    the relu applied in the kernels against NumPy's batch norm, then relu and its gradient."""
    rng = np.random.default_rng(9)
    x = (rng.standard_normal((3, 5, 4, 6)) * 2 + 0.5).astype(dtype)
    gamma, beta = rng.standard_normal(5).astype(dtype), rng.standard_normal(5).astype(dtype)
    dy = rng.standard_normal(x.shape).astype(dtype)

    def run(fused):
        mm, mv = np.zeros(5, dtype), np.ones(5, dtype)
        y, mean, inv_std = batch_norm_forward(x, gamma, beta, mm, mv, relu=fused)
        grad = dy
        if relu and not fused:
            np.maximum(y, 0, out=y)
            grad = dy * (y > 0)
        dx = np.full_like(x, 0.25)
        dg, db = np.ones(5, dtype), np.ones(5, dtype)
        batch_norm_backward(grad, x, mean, inv_std, gamma, dx=dx, dscale=dg, dbias=db,
                            betas=(1.0 if add else 0.0, 1.0, 0.0),
                            relu_output=y if fused else None)
        return y, mm, mv, dx, dg, db

    compiled = run(relu)
    monkeypatch.setenv("SCULLER_JIT", "0")
    with pytest.raises(ValueError, match="needs the compiled kernels"):
        batch_norm_forward(x, gamma, beta, np.zeros(5, dtype), np.ones(5, dtype), relu=True)
    reference = run(False)
    for got, want in zip(compiled, reference):
        np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol * np.abs(want).max())
