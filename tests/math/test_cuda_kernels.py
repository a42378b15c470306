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


CASES = list(itertools.product(DTYPES, [True, False],
                               [("tanh", "sigmoid", "tanh"), ("relu", "sigmoid", "linear")]))


@pytest.mark.parametrize("dtype, has_peep, names", CASES)
def test_lstm_forward_and_backward_through_time(dtype, has_peep, names):
    """The whole recurrence, four sequences of lengths 4, 1, 4, 2 (steps of 4, 3, 2, 2
    rows): the GPU's fused per-step kernels give the NumPy path's gates, cells, outputs and
    gradients."""
    from sculler.math.seq2batch import SequenceBatch

    rng = np.random.RandomState(3)
    plan = SequenceBatch(np.array([0, 4, 5, 9, 11]))
    rows, hs = 11, 3
    first = int(plan.batch_sizes[0])
    acts = tuple(rnn.cell_activation(a) for a in names)
    gates = rng.randn(4, rows, hs).astype(dtype)
    weight = (rng.randn(hs, 4 * hs) * 0.5).astype(dtype)
    peep = rng.randn(3, hs).astype(dtype) if has_peep else None
    dh = rng.randn(rows, hs).astype(dtype)
    host = {"gates": gates.copy(), "dh": dh.copy()}
    dev = {"gates": _gpu(gates), "dh": _gpu(dh)}
    for arrays, to in ((host, np.asarray), (dev, _gpu)):
        for k in ("c", "state", "h", "dc"):
            arrays[k] = to(np.zeros((rows, hs), dtype))
        arrays["dgates"] = to(np.zeros((4, rows, hs), dtype))
        tmp = to(np.zeros(4 * first * hs + 4 * hs * hs, dtype))
        w, p = to(weight), None if peep is None else to(peep)
        rnn.lstm_forward(plan, arrays["gates"], w, p, arrays["c"], arrays["state"],
                         arrays["h"], acts, tmp)
        rnn.lstm_backward(plan, arrays["gates"], w, p, arrays["c"], arrays["state"],
                          arrays["dh"], arrays["dc"], arrays["dgates"], acts, tmp)
    for k in ("gates", "c", "state", "h", "dh", "dgates"):
        _close(dev[k], host[k], dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_relu_grad_and_row_softmax(dtype):
    from sculler.math import activation

    rng = np.random.RandomState(4)
    y = np.maximum(rng.randn(6, 9), 0).astype(dtype)
    dy = rng.randn(6, 9).astype(dtype)
    dyg = _gpu(dy)
    cuda.relu_grad(_gpu(y), dyg)
    _close(dyg, dy * (y > 0), dtype)
    x = (rng.randn(6, 9) * 30).astype(dtype)
    want = np.exp(x - x.max(axis=1, keepdims=True))
    want /= want.sum(axis=1, keepdims=True)
    xg = _gpu(x)
    got = activation.softmax(xg)  # a new array: x is left alone
    _close(got, want, dtype)
    _close(xg, x, dtype)
    activation.softmax(xg, out=xg)
    _close(xg, want, dtype)


def test_trainer_packs_gpu_parameters_into_one_buffer():
    import sculler as paddle

    paddle.init(use_gpu=True, seed=1)
    paddle.layer.reset_names()
    x = paddle.layer.data(name="x", type=paddle.data_type.dense_vector(3))
    y = paddle.layer.data(name="y", type=paddle.data_type.integer_value(2))
    h = paddle.layer.fc(input=x, size=4, act=paddle.activation.Relu())
    out = paddle.layer.fc(input=h, size=2, act=paddle.activation.Softmax())
    cost = paddle.layer.classification_cost(input=out, label=y)
    params = paddle.parameters.create(cost)
    trainer = paddle.trainer.SGD(cost, params, paddle.optimizer.Momentum(momentum=0.9,
                                                                           learning_rate=0.1))
    values = [p.value for p in params.parameter_set.values()]
    assert len(values) == 4 and all(type(v).__module__.startswith("cupy") for v in values)
    assert len({id(v.base) for v in values}) == 1
    data = [(np.random.RandomState(i).rand(3).astype(np.float32), i % 2) for i in range(8)]
    costs = []
    trainer.train(lambda: iter([data] * 20), num_passes=1, show_progress=False,
                  event_handler=lambda e: costs.append(e.cost)
                  if isinstance(e, paddle.event.EndIteration) else None)
    assert costs[-1] < costs[0]
    paddle.init(use_gpu=False)


@pytest.mark.parametrize("dtype", DTYPES)
def test_segment_sum(dtype):
    from sculler.math import segment

    rng = np.random.RandomState(5)
    starts = np.array([0, 3, 3, 7, 8])  # an empty segment too
    x = rng.randn(8, 4).astype(dtype)
    want = segment.segment_sum(x, starts, np.full((4, 4), 9.0, dtype))
    got = segment.segment_sum(_gpu(x), starts, _gpu(np.full((4, 4), 9.0, dtype)))
    _close(got, want, dtype)
