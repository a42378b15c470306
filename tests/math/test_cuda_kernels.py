"""The fused CuPy kernels of sculler.math.cuda against their NumPy twins (marked ``gpu``:
skipped with the reason "CUDA/CuPy not available" where CuPy sees no CUDA device)."""

import itertools

import numpy as np
import pytest

from sculler.backend import to_numpy
from sculler.math import cuda, cuda_sequences, optim, rnn, segment

pytestmark = pytest.mark.gpu

TOL = {np.float64: 1e-12, np.float32: 1e-5}
DTYPES = [np.float64, np.float32]


def _gpu(a):
    import cupy

    return None if a is None else cupy.asarray(a)


def _close(gpu, host, dtype):
    np.testing.assert_allclose(to_numpy(gpu), host, rtol=TOL[dtype], atol=TOL[dtype])


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
    dx = rng.randn(7, 5).astype(dtype)
    want = dx.copy()
    want[np.arange(7), labels] -= dcost[:, 0] / p[np.arange(7), labels]
    got = _gpu(dx)
    assert cuda.pick_nll_grad(_gpu(p), _gpu(labels), _gpu(dcost[:, 0]), got)
    _close(got, want, dtype)
    wide = _gpu(np.zeros((7, 6), dtype))[:, :5]  # not C-contiguous: left to the caller
    assert not cuda.pick_nll_grad(_gpu(p), _gpu(labels), _gpu(dcost[:, 0]), wide)
    dz = _gpu(np.zeros_like(p))
    cuda.softmax_ce_grad(_gpu(p), _gpu(labels), _gpu(dcost), dz)
    want = p.copy()
    want[np.arange(7), labels] -= 1
    _close(dz, dcost * want, dtype)


@pytest.mark.parametrize("label_dtype", [np.int64, np.int32])
def test_class_counts_equal_the_weighted_bincounts(label_dtype):
    """TP, TN, FP, FN a class, as NumPy's weighted ``bincount`` gives them (in the same row
    order: equal to the last bit), with classes nothing was predicted or labelled as."""
    rng = np.random.RandomState(9)
    n, classes = 50, 7
    pred = rng.randint(0, 5, n)
    label = rng.randint(0, 6, n).astype(label_dtype)
    w = rng.rand(n)
    hit = pred == label
    tp = np.bincount(pred, weights=w * hit, minlength=classes)
    fp = np.bincount(pred, weights=w * ~hit, minlength=classes)
    fn = np.bincount(label, weights=w * ~hit, minlength=classes)
    want = np.stack([tp, w.sum() - tp - fp - fn, fp, fn], axis=1)
    out = _gpu(np.full((classes, 4), np.nan))
    cuda.class_counts(_gpu(pred), _gpu(label), _gpu(w), out)
    np.testing.assert_allclose(to_numpy(out), want, rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(to_numpy(out)[:, [0, 2, 3]], want[:, [0, 2, 3]])
    assert to_numpy(out)[6, 1] == pytest.approx(w.sum())  # never predicted nor labelled


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


@pytest.mark.parametrize("whole", [True, False], ids=["one-launch", "per-step-cublas"])
@pytest.mark.parametrize("dtype, has_peep, names", CASES)
def test_lstm_forward_and_backward_through_time(dtype, has_peep, names, whole, monkeypatch):
    """The whole recurrence, four sequences of lengths 4, 1, 4, 2 (steps of 4, 3, 2, 2
    rows): the GPU gives the NumPy path's gates, cells, outputs and gradients, both with the
    one-launch sequence kernels (a block a sequence: narrow layers) and with a fused kernel
    and a cuBLAS product a step (wide layers)."""
    from sculler.math.seq2batch import SequenceBatch

    if not whole:
        monkeypatch.setattr(cuda_sequences, "SEQUENCE_KERNEL_MAX_HIDDEN", 0)

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
    cuda.activation_grad("relu", _gpu(y), dyg)
    _close(dyg, dy * (y > 0), dtype)
    s = (1 / (1 + np.exp(-rng.randn(6, 9)))).astype(dtype)
    for name, want in (("sigmoid", dy * s * (1 - s)), ("tanh", dy * (1 - s * s))):
        dyg = _gpu(dy)
        cuda.activation_grad(name, _gpu(s), dyg)
        _close(dyg, want, dtype)
    x = (rng.randn(6, 9) * 30).astype(dtype)
    want = np.exp(x - x.max(axis=1, keepdims=True))
    want /= want.sum(axis=1, keepdims=True)
    xg = _gpu(x)
    got = activation.softmax(xg)  # a new array: x is left alone
    _close(got, want, dtype)
    _close(xg, x, dtype)
    activation.softmax(xg, out=xg)
    _close(xg, want, dtype)
    b = rng.randn(9).astype(dtype)  # with a bias row added first, in place
    want = np.exp(x + b - (x + b).max(axis=1, keepdims=True))
    want /= want.sum(axis=1, keepdims=True)
    xg = _gpu(x)
    cuda.softmax_rows(xg, xg, _gpu(b))
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
    rng = np.random.RandomState(5)
    starts = np.array([0, 3, 3, 7, 8])  # an empty segment too
    x = rng.randn(8, 4).astype(dtype)
    want = segment.segment_sum(x, starts, np.full((4, 4), 9.0, dtype))
    got = segment.segment_sum(_gpu(x), starts, _gpu(np.full((4, 4), 9.0, dtype)))
    _close(got, want, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("first", [True, False], ids=["first-step", "later-step"])
@pytest.mark.parametrize("layout", ["gate-major", "rows"])
@pytest.mark.parametrize("blocks", [False, True], ids=["w-2H", "w-blocks"])
def test_gru_step(dtype, first, layout, blocks):
    """A GRU step forward and backward through rnn's entry points (the GPU dispatches to the
    fused kernels of sculler.math.cuda) equals the NumPy step, for (3, n, H) and (n, 3H)
    gates and for (H, 2H) and (2, H, H) gate weights."""
    rng = np.random.RandomState(6)
    n, hs = 5, 4
    acts = (rnn.cell_activation("tanh"), rnn.cell_activation("sigmoid"))
    g0 = rng.randn(3, n, hs).astype(dtype)
    gates = g0 if layout == "gate-major" else np.ascontiguousarray(
        g0.transpose(1, 0, 2).reshape(n, 3 * hs))
    w_gate = (rng.randn(hs, 2 * hs) * 0.5).astype(dtype)
    if blocks:
        w_gate = np.ascontiguousarray(w_gate.reshape(hs, 2, hs).transpose(1, 0, 2))
    w_cand = (rng.randn(hs, hs) * 0.5).astype(dtype)
    h_prev = None if first else rng.randn(n, hs).astype(dtype)
    dh = rng.randn(n, hs).astype(dtype)
    results = []
    for to in (np.asarray, _gpu):
        g, dg = to(gates.copy()), to(np.zeros_like(gates))
        reset_h, h = to(np.zeros((n, hs), dtype)), to(np.zeros((n, hs), dtype))
        dh_prev = None if first else to(np.full((n, hs), 0.5, dtype))
        hp = None if first else to(h_prev)
        tmp = to(np.zeros(2 * n * hs, dtype))
        rnn.gru_step_forward(g, hp, to(w_gate), to(w_cand), reset_h, h, acts, tmp)
        rnn.gru_step_backward(g, hp, to(w_gate), to(w_cand), to(dh), dg, dh_prev, acts, tmp)
        results.append((g, reset_h, h, dg, dh_prev))
    for got, want in zip(results[1], results[0]):
        if want is not None:
            _close(got, want, dtype)


@pytest.mark.parametrize("whole", [True, False], ids=["one-launch", "per-step"])
@pytest.mark.parametrize("names", [("tanh", "sigmoid"), ("relu", "sigmoid")])
@pytest.mark.parametrize("dtype", DTYPES)
def test_gru_forward_and_backward_through_time(dtype, names, whole, monkeypatch):
    """The whole GRU recurrence over sequences of lengths 4, 1, 4, 2: the GPU gives the
    NumPy path's gates, outputs, ``r h_prev`` and gradients, with the one-launch sequence
    kernels (narrow layers) and with the step kernels (wide ones)."""
    from sculler.math.seq2batch import SequenceBatch

    if not whole:
        monkeypatch.setattr(cuda_sequences, "SEQUENCE_KERNEL_MAX_HIDDEN", 0)
    rng = np.random.RandomState(7)
    plan = SequenceBatch(np.array([0, 4, 5, 9, 11]))
    rows, hs = 11, 3
    first = int(plan.batch_sizes[0])
    acts = tuple(rnn.cell_activation(a) for a in names)
    gates = rng.randn(3, rows, hs).astype(dtype)
    w_gate = (rng.randn(hs, 2 * hs) * 0.5).astype(dtype)
    w_cand = (rng.randn(hs, hs) * 0.5).astype(dtype)
    dh = rng.randn(rows, hs).astype(dtype)
    results = []
    for to in (np.asarray, _gpu):
        g, d = to(gates.copy()), to(dh.copy())
        h, reset_h = to(np.zeros((rows, hs), dtype)), to(np.zeros((rows, hs), dtype))
        dg = to(np.zeros((3, rows, hs), dtype))
        tmp = to(np.zeros(2 * first * hs + 3 * hs * hs, dtype))
        rnn.gru_forward(plan, g, to(w_gate), to(w_cand), reset_h, h, acts, tmp)
        rnn.gru_backward(plan, g, h, to(w_gate), to(w_cand), d, dg, acts, tmp)
        results.append((g, h, reset_h[first:], d, dg))
    for got, want in zip(results[1], results[0]):
        _close(got, want, dtype)


@pytest.mark.parametrize("whole", [True, False], ids=["one-launch", "per-step"])
@pytest.mark.parametrize("name", ["tanh", "relu", "sigmoid", "linear"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_rnn_forward_and_backward_through_time(dtype, name, whole, monkeypatch):
    """The plain RNN over sequences of lengths 4, 1, 4, 2: the GPU's outputs and
    pre-activation gradients equal NumPy's, in one launch each way and step by step."""
    from sculler.math.seq2batch import SequenceBatch

    if not whole:
        monkeypatch.setattr(cuda_sequences, "SEQUENCE_KERNEL_MAX_HIDDEN", 0)
    rng = np.random.RandomState(8)
    plan = SequenceBatch(np.array([0, 4, 5, 9, 11]))
    rows, hs = 11, 3
    act = rnn.cell_activation(name)
    y0 = rng.randn(rows, hs).astype(dtype)
    weight = (rng.randn(hs, hs) * 0.5).astype(dtype)
    dy0 = rng.randn(rows, hs).astype(dtype)
    results = []
    for to in (np.asarray, _gpu):
        y, dy, w = to(y0.copy()), to(dy0.copy()), to(weight)
        tmp = to(np.zeros(int(plan.batch_sizes[0]) * hs + hs * hs, dtype))
        rnn.rnn_forward(plan, y, w, act, tmp)
        rnn.rnn_backward(plan, y, w, dy, act, tmp)
        results.append((y, dy))
    for got, want in zip(results[1], results[0]):
        _close(got, want, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_crf_on_the_gpu(dtype):
    """The CRF kernels (a block a sequence, a thread a class) give the host recursions'
    negative log-likelihoods, input and weight gradients and Viterbi paths, an empty sequence
    and a one-step one included."""
    from sculler.math import crf

    rng = np.random.RandomState(9)
    c = 5
    starts = np.array([0, 4, 4, 5, 11])
    x = (rng.randn(11, c) * 2).astype(dtype)
    labels = rng.randint(0, c, 11)
    weight = rng.randn(c + 2, c).astype(dtype)
    scale = rng.rand(4).astype(dtype) + 0.5
    nll, saved = crf.crf_nll(x, labels, starts, weight)
    dx, dw = np.full_like(x, 0.25), np.zeros_like(weight)
    crf.crf_nll_backward(saved, labels, weight, scale, dx, dw)
    tags = crf.crf_viterbi(x, starts, weight)

    xg, lg, wg = _gpu(x), _gpu(labels.astype(np.int64)), _gpu(weight)
    alpha, log_z, nll_g = (_gpu(np.zeros(shape, dtype)) for shape in ((11, c), (4,), (4,)))
    cuda_sequences.crf_nll_forward(xg, lg, starts, wg, alpha, log_z, nll_g)
    _close(nll_g, nll, dtype)
    dx_g, parts = _gpu(np.full_like(x, 0.25)), _gpu(np.full((4, c + 2, c), np.nan, dtype))
    cuda_sequences.crf_nll_backward(xg, lg, starts, wg, alpha, log_z, _gpu(scale), dx_g, parts)
    _close(dx_g, dx, dtype)
    _close(parts.sum(axis=0), dw, dtype)
    tags_g = _gpu(np.zeros(11, np.int64))
    cuda_sequences.crf_viterbi(xg, starts, wg, _gpu(np.zeros((11, c), np.int64)), tags_g)
    np.testing.assert_array_equal(tags_g.get(), tags)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("want_grad", [True, False])
def test_ctc_on_the_gpu(dtype, want_grad):
    """The CTC kernel (a block a sequence, a thread an extended-label state) gives the host
    recursion's costs, scored flags and occupations: labels with repeats, an empty label, a
    sequence too short for its label (cost 0, no gradient) and an empty input sequence."""
    from sculler.math import ctc

    rng = np.random.RandomState(10)
    c, blank = 5, 4
    starts = np.array([0, 6, 9, 9, 13, 15])
    label_starts = np.array([0, 3, 3, 4, 6, 9])
    labels = np.array([1, 1, 2, 3, 0, 0, 2, 1, 2])  # 1 1 2 | - | 3 (no input) | 0 0 | 2 1 2
    logits = rng.randn(15, c)
    lp = (logits - np.log(np.exp(logits).sum(1, keepdims=True))).astype(dtype)
    cost, gamma, scored = ctc.ctc_loss(lp, starts, labels, label_starts, blank, want_grad)
    lab_len = np.diff(label_starts)
    repeats = np.array([1, 0, 0, 1, 0])
    feasible = ctc.ctc_feasible(lab_len, repeats, np.diff(starts))
    states = 2 * int(lab_len.max()) + 1
    cost_g, scored_g = _gpu(np.full(5, np.nan, dtype)), _gpu(np.full(5, np.nan, dtype))
    gamma_g = _gpu(np.full((15, c), np.nan, dtype)) if want_grad else None
    cuda_sequences.ctc_loss(_gpu(lp), starts, _gpu(labels), label_starts, feasible, blank,
                  _gpu(np.zeros((15, states), dtype)), cost_g, scored_g, gamma_g)
    _close(cost_g, cost, dtype)
    np.testing.assert_array_equal(scored_g.get() > 0, scored)
    np.testing.assert_array_equal(scored, [True, True, False, True, False])  # empty, too short
    if want_grad:
        _close(gamma_g, gamma, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_segment_max_on_the_gpu(dtype):
    """segment_max's GPU kernel gives the host's maxima and first arg-max rows, ties and a
    NaN (its maximum NaN, its row the row count) included, into the layer's int32 scratch."""
    rng = np.random.RandomState(11)
    starts = np.array([0, 3, 4, 9])
    x = rng.randint(0, 3, (9, 4)).astype(dtype)  # many ties
    x[6, 2] = np.nan
    want = np.empty((3, 4), dtype)
    rows = segment.segment_max(x, starts, want)
    got = _gpu(np.empty((3, 4), dtype))
    hit = _gpu(np.zeros((9, 4), np.int32))
    got_rows = segment.segment_max(_gpu(x), starts, got, hit=hit)
    np.testing.assert_array_equal(got.get(), want)
    np.testing.assert_array_equal(got_rows.get(), rows)
    assert got_rows.dtype == np.int32 and rows[2, 2] == 9
    assert segment.segment_max(_gpu(x), starts, got, argmax=False) is None


# (kernel, stride, padding, dilation) of the convolution kernel tests
CONV_GEOMETRIES = [((3, 2), (1, 1), (0, 0), (1, 1)), ((3, 3), (2, 2), (1, 1), (1, 1)),
                   ((2, 2), (1, 2), (1, 0), (2, 1))]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("geometry", CONV_GEOMETRIES)
def test_conv_backward_data_folds_on_the_gpu(dtype, geometry):
    """conv2d_backward_data's GPU path (one GEMM, then the gathering col2im kernel) equals
    the NumPy path, for batch-last (small outputs) and batch-first (large) column orders,
    into a new array and added into a given one (beta 1, 0.5; 0 overwrites even NaNs)."""
    from sculler.math import conv

    k, st, pad, dil = geometry
    rng = np.random.RandomState(7)
    for shape in ((2, 4, 7, 6), (2, 2, 40, 12)):  # 20+ output rows: batch-first columns
        w = rng.randn(6, shape[1] // 2, *k).astype(dtype)
        out_hw = conv._out_hw(shape[2], shape[3], k, st, pad, dil, None)
        dy = rng.randn(shape[0], 6, *out_hw).astype(dtype)
        want = conv.conv2d_backward_data(dy, w, shape, st, pad, dil, groups=2)
        got = conv.conv2d_backward_data(_gpu(dy), _gpu(w), shape, st, pad, dil, groups=2)
        _close(got, want, dtype)
        prior = rng.randn(*shape).astype(dtype)
        for beta in (1.0, 0.5, 0.0):  # the fold adds into a kept gradient in its kernel
            want = conv.conv2d_backward_data(dy, w, shape, st, pad, dil, groups=2,
                                             out=prior.copy(), beta=beta)
            out = _gpu(prior if beta else np.full(shape, np.nan, dtype))
            got = conv.conv2d_backward_data(_gpu(dy), _gpu(w), shape, st, pad, dil, groups=2,
                                            out=out, beta=beta)
            assert got is out
            _close(got, want, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("ceil_mode", [True, False])
@pytest.mark.parametrize("geometry", [((2, 2), (2, 2), (0, 0)), ((3, 3), (2, 2), (1, 1)),
                                      ((3, 2), (1, 1), (0, 1))])
def test_max_pool_on_the_gpu(dtype, ceil_mode, geometry):
    """Max pooling's GPU kernels give the NumPy path's maxima, winning taps (a NaN and a
    -inf in the input included) and input gradients, adding (beta 1) or overwriting."""
    from sculler.math import pool

    k, st, pad = geometry
    rng = np.random.RandomState(8)
    x = rng.randn(2, 3, 7, 6).astype(dtype)
    x[0, 0, 1, 1], x[0, 1, 0, 0] = np.nan, -np.inf
    y, arg = pool.max_pool2d_forward(x, k, st, pad, ceil_mode)
    yg, argg = pool.max_pool2d_forward(_gpu(x), k, st, pad, ceil_mode)
    np.testing.assert_array_equal(to_numpy(argg), arg)
    np.testing.assert_array_equal(to_numpy(yg), y)
    dy = rng.randn(*y.shape).astype(dtype)
    for beta in (0.0, 1.0):
        out = np.full(x.shape, 0.25, dtype)
        outg = _gpu(out)
        pool.max_pool2d_backward(dy, arg, x.shape, k, st, pad, out=out, beta=beta)
        pool.max_pool2d_backward(_gpu(dy), argg, x.shape, k, st, pad, out=outg, beta=beta)
        _close(outg, out, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_add_rows_sums_repeated_rows_on_the_gpu(dtype):
    """An embedding's gradient: repeated rows summed by the segment-sum kernel, in batch
    order, equal to the NumPy path (which sums through a CSR product)."""
    from sculler.math import sparse

    rng = np.random.RandomState(9)
    rows = np.array([4, 1, 4, 0, 1, 4, 7])
    src = rng.randn(rows.size, 3).astype(dtype)
    dst = rng.randn(8, 3).astype(dtype)
    want = sparse.add_rows(dst.copy(), rows, src)
    got = sparse.add_rows(_gpu(dst), _gpu(rows), _gpu(src))
    _close(got, want, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("rows", [0, 7, 600])
def test_classification_misses_count_as_numpy_does(dtype, rows):
    """One block counts the rows whose arg-max (NumPy's: the first of tied maxima, the first
    NaN) misses the label, or whose one-column threshold decision does, weighted or not, for
    int64, int32 and float labels; 600 rows give a thread several rows."""
    rng = np.random.RandomState(rows)
    x = rng.randint(0, 3, size=(rows, 4)).astype(dtype)  # many ties
    if rows:
        x[rows // 2, 2] = np.nan
    ids = rng.randint(0, 4, size=rows)
    w = rng.rand(rows)
    missed = x.argmax(axis=1) != ids
    column = rng.rand(rows, 1).astype(dtype)
    column_missed = (column[:, 0] > 0.3) != (ids > 1.5)
    for label_dtype in (np.int64, np.int32, np.float32):
        for weights in (None, w):
            out = _gpu(np.full(2, -1.0))
            assert cuda.classification_misses(_gpu(x), _gpu(ids.astype(label_dtype)),
                                              None if weights is None else _gpu(weights),
                                              0.5, out)
            ww = np.ones(rows) if weights is None else weights
            np.testing.assert_allclose(to_numpy(out), [ww[missed].sum(), ww.sum()],
                                       rtol=1e-12, atol=0)
            labels = (ids > 1.5).astype(label_dtype)
            assert cuda.classification_misses(_gpu(column), _gpu(labels),
                                              None if weights is None else _gpu(weights),
                                              0.3, out)
            np.testing.assert_allclose(to_numpy(out), [ww[column_missed].sum(), ww.sum()],
                                       rtol=1e-12, atol=0)
    assert not cuda.classification_misses(_gpu(x), _gpu(ids.astype(np.int8)), None, 0.5,
                                          _gpu(np.zeros(2)))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", ["relu", "sigmoid", "tanh"])
@pytest.mark.parametrize("shape", [(1, 1), (7, 33), (300, 70),
                                   (cuda.BIAS_GRAD_MAX_ROWS, 3)])
def test_activation_and_bias_grad_in_one_launch(dtype, name, shape):
    """The activation's gradient in place and the bias gradient (the column sums, added to
    the old ones or, with beta 0, replacing even NaN) in one launch, equal to the host's
    two steps; shapes that leave a block's columns or row groups partly empty included."""
    from sculler.math import activation

    rng = np.random.RandomState(13)
    y = rng.randn(*shape).astype(dtype)
    if name != "relu":
        y = np.tanh(y) if name == "tanh" else 1 / (1 + np.exp(-y))
    y = y.astype(dtype)
    dy = rng.randn(*shape).astype(dtype)
    want = getattr(activation, f"{name}_grad")(None, y, dy)
    old = rng.randn(shape[1]).astype(dtype)
    for beta, db in ((0.0, np.full(shape[1], np.nan, dtype)), (1.0, old)):
        got, got_db = _gpu(dy), _gpu(db)
        assert cuda.activation_and_bias_grad(name, _gpu(y), got, got_db, beta)
        _close(got, want, dtype)
        _close(got_db, want.astype(np.float64).sum(axis=0) + (beta * old if beta else 0),
               dtype)
    assert not cuda.activation_and_bias_grad("linear", _gpu(y), _gpu(dy), _gpu(old), 1.0)
    tall = _gpu(np.zeros((cuda.BIAS_GRAD_MAX_ROWS + 1, shape[1]), dtype))
    assert not cuda.activation_and_bias_grad(name, tall, tall.copy(), _gpu(old), 1.0)
    if shape[1] > 1:  # a column-reversed dy is not C-contiguous
        assert not cuda.activation_and_bias_grad(name, _gpu(y), _gpu(dy)[:, ::-1], _gpu(old),
                                                 1.0)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(3, 4, 5, 6), (2, 3, 20, 17), (1, 1, 1, 1)])
def test_dy_columns_and_channel_sums_in_one_launch(dtype, shape):
    """A convolution's dy laid out as its backward GEMMs read it (batch-last columns for
    small outputs, batch-first for large) and the shared bias's gradient (added, or with beta
    0 replacing even NaN) in one launch, equal to the host's layout and channel sums."""
    from sculler.math import conv

    rng = np.random.RandomState(14)
    dy = rng.randn(*shape).astype(dtype)
    n, f = shape[:2]
    want_cols = conv.conv2d_dy_columns(dy)
    old = rng.randn(f).astype(dtype)
    for beta, start in ((0.0, np.full(f, np.nan, dtype)), (1.0, old)):
        out = _gpu(np.zeros((1, f, dy.size // f), dtype))
        sums = _gpu(start)
        assert conv.conv2d_dy_columns(_gpu(dy), 1, out=out, bias_grad=sums,
                                      bias_beta=beta) is out
        _close(out, want_cols, dtype)
        want = dy.astype(np.float64).sum(axis=(0, 2, 3)) + (beta * old if beta else 0)
        _close(sums, want, dtype)
    host_sums = old.copy()  # the host path gives the same through channel_sums
    conv.conv2d_dy_columns(dy, 1, bias_grad=host_sums)
    _close(host_sums, dy.sum(axis=(0, 2, 3)) + old, dtype)
    strided = _gpu(np.zeros((f, 2 * dy.size // f), dtype))[:, ::2]
    if dy.size > 1:  # a strided out is left to the caller
        assert not cuda.dy_columns_and_channel_sums(_gpu(dy), strided, True, _gpu(old), 1.0)


@pytest.mark.parametrize("dtype", DTYPES)
def test_sums_and_parts_pack_a_batchs_read_back(dtype):
    """One launch sums each cost (float64, several threads' rows each for 1,000 rows, none
    for an empty one) and lays the evaluators' float64 sums after them, whatever their
    shapes; other dtypes are left to the caller."""
    rng = np.random.RandomState(12)
    totals = [rng.rand(1000, 1).astype(dtype), rng.rand(3, 1).astype(dtype),
              np.zeros((0, 1), dtype)]
    parts = [rng.rand(2), np.array(4.0), rng.rand(2, 3)]
    got = cuda.sums_and_parts([_gpu(t) for t in totals], [_gpu(q) for q in parts])
    want = [t.astype(np.float64).sum() for t in totals] + [v for q in parts
                                                          for v in q.reshape(-1)]
    assert got.dtype == np.float64 and got.shape == (len(want),)
    np.testing.assert_allclose(to_numpy(got), want, rtol=1e-13, atol=0)
    out = _gpu(np.full(3, np.nan))
    assert cuda.sums_and_parts([_gpu(totals[1])], [_gpu(parts[0])], out) is out
    np.testing.assert_allclose(to_numpy(out), [want[1], *parts[0]], rtol=1e-13, atol=0)
    with pytest.raises(ValueError, match=r"shape \(3,\)"):
        cuda.sums_and_parts([_gpu(totals[1])], [_gpu(parts[0])], _gpu(np.zeros(4)))
    assert cuda.sums_and_parts([_gpu(totals[0])], [_gpu(parts[0].astype(np.float32))]) is None
    assert cuda.sums_and_parts([], [_gpu(parts[0])]) is None


@pytest.mark.parametrize("dtype", DTYPES)
def test_row_adds_on_the_gpu_equal_the_host_paths(dtype):
    """``add_to_rows`` (``dst[rows] += src``, distinct rows, into a column slice too) and
    ``add_segment_sums`` (``dst += segment sums``, an empty segment included) each one
    kernel on the GPU, equal to their host paths; nothing outside the rows is touched."""
    from sculler.math import segment

    rng = np.random.RandomState(11)
    rows = np.array([5, 0, 3, 6])
    wide = rng.randn(7, 6).astype(dtype)
    src = rng.randn(4, 4).astype(dtype)
    want = wide.copy()
    segment.add_to_rows(want[:, 1:5], rows, src)
    got = _gpu(wide)
    segment.add_to_rows(got[:, 1:5], rows, _gpu(src))
    _close(got, want, dtype)
    assert want[1].tolist() == wide[1].tolist() and want[:, 0].tolist() == wide[:, 0].tolist()
    starts = np.array([0, 2, 2, 5])
    x = rng.randn(5, 3).astype(dtype)
    dst = rng.randn(3, 3).astype(dtype)
    want = segment.add_segment_sums(dst.copy(), x, starts, np.empty_like(dst))
    got = segment.add_segment_sums(_gpu(dst), _gpu(x), starts, None)
    _close(got, want, dtype)
    _close(want, dst + np.stack([x[:2].sum(0), np.zeros(3), x[2:].sum(0)]), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("bias_row", [False, True])
@pytest.mark.parametrize("geometry", CONV_GEOMETRIES)
def test_conv_unfold_on_the_gpu(dtype, bias_row, geometry):
    """conv2d_unfold's GPU kernel gives the CPU path's columns in both orders (batch-last
    for small outputs, batch-first for large) with and without the bias row."""
    from sculler.math import conv

    k, st, pad, dil = geometry
    rng = np.random.RandomState(10)
    for shape in ((2, 4, 7, 6), (2, 2, 40, 12)):
        x = rng.randn(*shape).astype(dtype)
        w_shape = (3, shape[1], *k)
        want = conv.conv2d_unfold(x, w_shape, st, pad, dil, bias_row=bias_row)
        got = conv.conv2d_unfold(_gpu(x), w_shape, st, pad, dil, bias_row=bias_row)
        _close(got, want, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_segment_softmax_and_its_gradient(dtype):
    """Attention's softmax over each sequence of a column (an empty sequence included) and
    its backward: the GPU kernels equal the NumPy path."""
    from sculler.math import activation

    rng = np.random.RandomState(11)
    starts = np.array([0, 3, 3, 7, 8])
    x = (rng.randn(8, 1) * 5).astype(dtype)
    dy = rng.randn(8, 1).astype(dtype)
    y = activation.segment_softmax(x, starts)
    _close(activation.segment_softmax(_gpu(x), starts), y, dtype)
    _close(activation.segment_softmax_grad(_gpu(y), _gpu(dy), starts),
           activation.segment_softmax_grad(y, dy, starts), dtype)


def test_classification_error_counted_on_the_device_equals_the_host_count():
    """The trainer's classification_error on GPU outputs counts the misses on the device
    (one number back); the count equals the host's, batch after batch."""
    from types import SimpleNamespace

    from sculler.core.argument import Argument
    from sculler.core.evaluator import create_evaluator
    from sculler.core.model_config import EvaluatorConfig

    rng = np.random.RandomState(12)
    evs = [create_evaluator(EvaluatorConfig("ev", "classification_error", ["p", "y"], {}))
           for _ in range(2)]
    for batch in (5, 9):
        p, y = rng.rand(batch, 4), rng.randint(0, 4, batch)
        for ev, to in zip(evs, (np.asarray, _gpu)):
            ev.eval_batch({"p": SimpleNamespace(output=Argument(value=to(p))),
                           "y": SimpleNamespace(output=Argument(ids=to(y)))})
    host, device = evs
    assert (device.total, device.count) == (host.total, host.count) and 0 < host.total < 14


def test_zero_together_clears_each_buffer_and_nothing_beside():
    """More buffers than one launch takes, of both float dtypes and odd sizes, views into a
    larger buffer (whose other elements stay), a strided view and an empty one."""
    rng = np.random.RandomState(7)
    whole = _gpu(rng.rand(100))
    parts = [whole[3:10], whole[20:21], whole[40:97]]
    others = [_gpu(rng.rand(n).astype(dtype)) for n, dtype in
              ((1, np.float32), (5, np.float64), (1000, np.float32), (33, np.float64),
               (7, np.float32), (2, np.float64), (300, np.float32))]
    others += [_gpu(rng.rand(n + 1)) for n in range(cuda.ZERO_TOGETHER)]
    strided = _gpu(rng.rand(6, 4))[:, ::2]
    empty = _gpu(np.zeros((0, 3)))
    before = to_numpy(whole).copy()
    cuda.zero_together(parts + others + [strided, empty])
    for a in parts + others + [strided]:
        assert not to_numpy(a).any()
    kept = np.ones(100, bool)
    kept[3:10] = kept[20] = False
    kept[40:97] = False
    np.testing.assert_array_equal(to_numpy(whole)[kept], before[kept])


@pytest.mark.parametrize("dtype", DTYPES)
def test_scaling_backward_and_add_segment_rows(dtype):
    rng = np.random.RandomState(8)
    w, x, dy = (rng.randn(*s).astype(dtype) for s in ((5, 1), (5, 3), (5, 3)))
    dw0, dx0 = rng.randn(5, 1).astype(dtype), rng.randn(5, 3).astype(dtype)
    for want_dw, want_dx in ((True, True), (True, False), (False, True)):
        dw, dx = _gpu(dw0) if want_dw else None, _gpu(dx0) if want_dx else None
        cuda.scaling_backward(_gpu(w), _gpu(x), _gpu(dy), dw, dx)
        if want_dw:
            _close(dw, dw0 + (x * dy).sum(axis=1, keepdims=True), dtype)
        if want_dx:
            _close(dx, dx0 + w * dy, dtype)
    starts = np.array([0, 2, 2, 5])  # an empty segment in the middle
    rows = segment.segment_of_rows(starts)
    src, scale = rng.randn(3, 4).astype(dtype), rng.rand(3).astype(dtype)
    dst0 = rng.randn(5, 4).astype(dtype)
    for s in (scale, None):
        dst = _gpu(dst0)
        segment.add_segment_rows(dst, _gpu(src), _gpu(rows), None if s is None else _gpu(s),
                                 None)
        _close(dst, dst0 + (src if s is None else src * s[:, None])[rows], dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_activate_with_and_without_bias(dtype):
    """One kernel for bias + activation matches the host's bias add and activation, and a
    NaN stays a NaN through relu (as np.maximum keeps it, so the NaN guard sees it)."""
    from sculler.math import activation

    rng = np.random.RandomState(9)
    x, b = (rng.randn(4, 6) * 3).astype(dtype), rng.randn(1, 6).astype(dtype)
    x[1, 2] = np.nan
    for name in cuda.ACTIVATIONS:
        f = {"linear": lambda v: v, "tanh": np.tanh, "sigmoid": activation.sigmoid,
             "relu": activation.relu}[name]
        for bias in (b, None):
            y = _gpu(x)
            cuda.activate(y, name, None if bias is None else _gpu(bias))
            want = f(x + (0 if bias is None else bias))
            np.testing.assert_allclose(to_numpy(y), want, rtol=TOL[dtype], atol=TOL[dtype])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("hw", [(7, 6), (19, 18)])  # outputs of <= 256 and > 256 positions
def test_conv_forward_and_filter_gradient_with_bias_on_the_gpu(dtype, hw):
    """One GEMM and one NCHW-writing kernel forward, two accumulating cuBLAS calls for the
    filter and bias gradients, in both column orders, against the host."""
    from sculler.math import conv

    rng = np.random.RandomState(10)
    x = rng.randn(3, 2, *hw).astype(dtype)
    w, b = rng.randn(4, 2, 3, 3).astype(dtype), rng.randn(4).astype(dtype)
    cols = conv.conv2d_unfold(x, w.shape, padding=1, bias_row=True)
    cols_g = conv.conv2d_unfold(_gpu(x), w.shape, padding=1, bias_row=True)
    want = conv.conv2d_forward(x, w, padding=1, cols=cols, bias=b)
    _close(conv.conv2d_forward(_gpu(x), _gpu(w), padding=1, cols=cols_g, bias=_gpu(b)), want,
           dtype)
    dy = rng.randn(*want.shape).astype(dtype)
    dw0, db0 = rng.randn(*w.shape).astype(dtype), rng.randn(4).astype(dtype)
    for beta in (0.0, 1.0):
        dw, db = dw0.copy(), db0.copy()
        conv.conv2d_backward_filter(x, dy, w.shape, padding=1, out=dw, beta=beta, cols=cols,
                                    bias_grad=db, bias_beta=beta)
        dwg, dbg = _gpu(dw0), _gpu(db0)
        conv.conv2d_backward_filter(_gpu(x), _gpu(dy), w.shape, padding=1, out=dwg, beta=beta,
                                    cols=cols_g, bias_grad=dbg, bias_beta=beta)
        _close(dwg, dw, dtype)
        _close(dbg, db, dtype)
    # the input gradient from dy columns and a GEMM written into the caller's buffers
    dy_cols_g = conv.conv2d_dy_columns(_gpu(dy), 1, out=_gpu(np.empty((1, 4, cols.shape[1]),
                                                                      dtype)))
    _close(dy_cols_g, conv.conv2d_dy_columns(dy, 1), dtype)
    dx0 = rng.randn(*x.shape).astype(dtype)
    dx = conv.conv2d_backward_data(dy, w, x.shape, padding=1, out=dx0.copy())
    dxg = conv.conv2d_backward_data(_gpu(dy), _gpu(w), x.shape, padding=1, out=_gpu(dx0),
                                    dy_cols=dy_cols_g,
                                    work=_gpu(np.empty((18, cols.shape[1]), dtype)))
    _close(dxg, dx, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", ["tanh", "sigmoid", "relu", "linear"])
def test_sum_and_activate_and_its_gradient_into_two_inputs(dtype, name):
    """``y = f(a + b + bias)`` over column windows of wider arrays, and its gradient added
    into two input gradients that already hold something (as a static input's gradient does
    across a recurrent group's frames)."""
    from sculler.core.activation import get_activation

    rng = np.random.RandomState(5)
    a, b = rng.randn(6, 7).astype(dtype), rng.randn(6, 4).astype(dtype)
    bias = rng.randn(1, 4).astype(dtype)
    act = get_activation(name)
    y = _gpu(np.zeros((6, 4), dtype))
    cuda.sum_and_activate(_gpu(a)[:, 2:6], _gpu(b), y, name, _gpu(bias))
    want = a[:, 2:6] + b + bias
    act.forward(want)
    _close(y, want, dtype)
    dy = rng.randn(6, 4).astype(dtype)
    g0, g1 = rng.randn(6, 7).astype(dtype), rng.randn(6, 4).astype(dtype)
    dy_gpu, g0_gpu, g1_gpu = _gpu(dy), _gpu(g0), _gpu(g1)
    cuda.activation_grad(name, y, dy_gpu, (g0_gpu[:, 2:6], g1_gpu))
    act.backward(None, want, dy)
    _close(dy_gpu, dy, dtype)
    g0[:, 2:6] += dy
    _close(g0_gpu, g0, dtype)
    _close(g1_gpu, g1 + dy, dtype)
