"""The fused CuPy kernels of sculler.math.cuda against their NumPy twins (marked ``gpu``:
skipped with the reason "CUDA/CuPy not available" where CuPy sees no CUDA device)."""

import itertools

import numpy as np
import pytest

from sculler.math import cuda, optim, rnn

pytestmark = pytest.mark.gpu

TOL = {np.float64: 1e-12, np.float32: 1e-5}
DTYPES = [np.float64, np.float32]


def _gpu(a):
    import cupy

    return None if a is None else cupy.asarray(a)


def _close(gpu, host, dtype):
    np.testing.assert_allclose(gpu.get(), host, rtol=TOL[dtype], atol=TOL[dtype])


@pytest.mark.parametrize("dtype", DTYPES)
def test_pick_nll_and_softmax_grad(dtype):
    rng = np.random.RandomState(0)
    logits = rng.randn(7, 5)
    p = (np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)).astype(dtype)
    labels = rng.randint(0, 5, 7)
    dcost = rng.rand(7, 1).astype(dtype)
    out = _gpu(np.zeros(7, dtype))
    cuda.pick_nll(_gpu(p), _gpu(labels), out)
    _close(out, -np.log(p[np.arange(7), labels]), dtype)
    dz = _gpu(np.zeros_like(p))
    cuda.softmax_ce_grad(_gpu(p), _gpu(labels), _gpu(dcost), dz)
    want = p.copy()
    want[np.arange(7), labels] -= 1
    _close(dz, dcost * want, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("with_momentum", [True, False])
def test_momentum_step(dtype, with_momentum):
    rng = np.random.RandomState(1)
    w, g, m = (rng.randn(3, 4).astype(dtype) for _ in range(3))
    wg, mg = _gpu(w), _gpu(m) if with_momentum else None
    optim.momentum_step(w, g, m if with_momentum else None, 0.1, 0.9, 0.01, np.empty_like(w))
    cuda.momentum_step(wg, _gpu(g), mg, 0.1, 0.9, 0.01)
    _close(wg, w, dtype)
    if with_momentum:
        _close(mg, m, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_heavy_ball_and_adam(dtype):
    rng = np.random.RandomState(2)
    w, g, v, m2 = (rng.rand(3, 4).astype(dtype) for _ in range(4))
    wg, vg = _gpu(w), _gpu(v)
    optim.heavy_ball(w, g, v, 0.1, 0.9, np.empty_like(w))
    cuda.heavy_ball(wg, _gpu(g), vg, 0.1, 0.9)
    _close(wg, w, dtype)
    _close(vg, v, dtype)
    wg, vg, mg = _gpu(w), _gpu(v), _gpu(m2)
    optim.adam(w, g, m2, v, 0.01, 0.9, 0.999, 3, 1e-8, np.empty_like(w))
    # the GPU path of optim.adam is the fused kernel: same call, CuPy arrays
    optim.adam(wg, _gpu(g), mg, vg, 0.01, 0.9, 0.999, 3, 1e-8, None)
    _close(wg, w, dtype)
    _close(mg, m2, dtype)
    _close(vg, v, dtype)


CASES = list(itertools.product(DTYPES, [True, False], [True, False],
                               [("tanh", "sigmoid", "tanh"), ("relu", "sigmoid", "linear")]))


@pytest.mark.parametrize("dtype, has_prev, has_peep, names", CASES)
def test_lstm_step_forward_and_backward(dtype, has_prev, has_peep, names):
    rng = np.random.RandomState(3)
    n, hs = 5, 3
    acts = tuple(rnn.cell_activation(a) for a in names)
    gates_in = rng.randn(4, n, hs).astype(dtype)
    rec = rng.randn(n, 4 * hs).astype(dtype) if has_prev else None
    c_prev = rng.randn(n, hs).astype(dtype) if has_prev else None
    peep = rng.randn(3, hs).astype(dtype) if has_peep else None
    gates = gates_in + (rec.reshape(n, 4, hs).transpose(1, 0, 2) if has_prev else 0)
    c, state, h = (np.zeros((n, hs), dtype) for _ in range(3))
    rnn.lstm_step_forward(gates, c_prev, peep, c, state, h, acts, np.zeros(2 * n * hs, dtype))
    g_gpu = _gpu(gates_in)
    cg, sg, hg = (_gpu(np.zeros((n, hs), dtype)) for _ in range(3))
    cuda.lstm_step_forward(g_gpu, _gpu(c_prev), _gpu(peep), cg, sg, hg, acts, _gpu(rec))
    for got, want in ((g_gpu, gates), (cg, c), (sg, state), (hg, h)):
        _close(got, want, dtype)

    dh = rng.randn(n, hs).astype(dtype)
    dc = rng.randn(n, hs).astype(dtype)
    dc_prev = rng.randn(n, hs).astype(dtype) if has_prev else None
    dgates = np.zeros((4, n, hs), dtype)
    dcg, dcpg = _gpu(dc), _gpu(dc_prev)
    dgg = _gpu(dgates)
    drow = _gpu(np.zeros((n, 4 * hs), dtype)) if has_prev else None
    rnn.lstm_step_backward(gates, c_prev, peep, state, dh, dc, dgates, dc_prev, acts,
                           np.zeros(2 * n * hs, dtype))
    cuda.lstm_step_backward(g_gpu, _gpu(c_prev), _gpu(peep), sg, _gpu(dh), dcg, dgg, dcpg,
                            acts, drow)
    _close(dgg, dgates, dtype)
    _close(dcg, dc, dtype)
    if has_prev:
        _close(dcpg, dc_prev, dtype)
        _close(drow, dgates.transpose(1, 0, 2).reshape(n, 4 * hs), dtype)
