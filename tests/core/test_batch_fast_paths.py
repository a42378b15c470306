"""The per-batch fast paths of the MLP round: each test fails when its mechanism is broken
(a fused softmax + cross-entropy backward taken where it must not be, a cached shape not
re-made when the batch size changes, a check skipped, a pass metric not accumulated)."""

import numpy as np
import pytest

import sculler as paddle
from sculler.core.argument import Argument
from sculler.core.builder import ModelBuilder
from sculler.core.layer import ids_out_of_range
from sculler.core.model_config import InputConfig, LayerConfig
from sculler.core.network import Network
from sculler.core.parameter import ParameterSet
from sculler.layers.cost import MultiClassCrossEntropy
from sculler.math import activation as K
from sculler.math.blas import col_sum
from sculler.testing import check_network_grad


def softmax_model(second_reader: bool = False, clip: float = 0.0):
    """x -> h (fc, tanh) -> out (fc, softmax) -> cost (cross entropy); optionally `out` is
    also read by `echo` (fc) whose square error is a second cost, or clips its error."""
    b = ModelBuilder()
    b.add_layer(LayerConfig("x", "data", size=5))
    b.add_layer(LayerConfig("label", "data", size=3))
    b.add_layer(LayerConfig("h", "fc", size=4, active_type="tanh", inputs=[InputConfig("x")]))
    attrs = {"error_clipping_threshold": clip} if clip else {}
    b.add_layer(LayerConfig("out", "fc", size=3, active_type="softmax",
                            inputs=[InputConfig("h")], attrs=attrs))
    outputs = ["cost"]
    if second_reader:  # before the cost, so that its backward runs after the cost's
        b.add_layer(LayerConfig("target", "data", size=2))
        b.add_layer(LayerConfig("echo", "fc", size=2, inputs=[InputConfig("out")]))
        b.add_layer(LayerConfig("cost2", "square_error",
                                inputs=[InputConfig("echo"), InputConfig("target")]))
        outputs.append("cost2")
    b.add_layer(LayerConfig("cost", "multi-class-cross-entropy",
                            inputs=[InputConfig("out"), InputConfig("label")]))
    return b.build(outputs)


def feed(batch: int, rng, second_reader: bool = False):
    args = {"x": Argument(rng.randn(batch, 5).astype(np.float32)),
            "label": Argument(ids=rng.randint(0, 3, size=batch))}
    if second_reader:
        args["target"] = Argument(rng.randn(batch, 2).astype(np.float32))
    return args


def run(config, batches, fused: bool, monkeypatch, calls: list | None = None):
    """Gradients after each batch, with the fused path allowed or not; ``calls`` collects
    the softmax backward calls."""
    with monkeypatch.context() as m:
        if not fused:  # the cost then adds into a zeroed buffer: never fused
            m.setattr(MultiClassCrossEntropy, "first_write", False)
        if calls is not None:
            real = K.softmax_grad_
            m.setattr(K, "softmax_grad_", lambda y, dy: (calls.append(1), real(y, dy)))
        net = Network(config, ParameterSet(seed=3), data_gradients=True)
        out = []
        for args in batches:
            net.zero_grad()
            net.forward(args, "train")
            net.backward()
            grads = {p.name: p.grad.copy() for p in net.used_parameters}
            grads["x"] = net.get_layer("x").output.grad.copy()
            out.append(grads)
        return net, out


def assert_same(got, want):
    for g, w in zip(got, want, strict=True):
        assert g.keys() == w.keys()
        for k in w:
            np.testing.assert_allclose(g[k], w[k], rtol=2e-5, atol=1e-6, err_msg=k)


def test_fused_softmax_cross_entropy_equals_unfused_and_skips_the_softmax_backward(
        monkeypatch):
    rng = np.random.RandomState(0)
    batches = [feed(6, rng), feed(4, rng), feed(7, rng)]  # batch size changes each time
    fused_calls, plain_calls = [], []
    _, fused = run(softmax_model(), batches, True, monkeypatch, fused_calls)
    _, plain = run(softmax_model(), batches, False, monkeypatch, plain_calls)
    assert not fused_calls and len(plain_calls) == 3
    assert_same(fused, plain)


def test_fused_gradient_passes_a_float64_gradient_check():
    paddle.layer.reset_names()
    x = paddle.layer.data(name="x", type=paddle.data_type.dense_vector(4))
    y = paddle.layer.data(name="y", type=paddle.data_type.integer_value(3))
    out = paddle.layer.fc(input=x, size=3, act=paddle.activation.Softmax())
    report = check_network_grad(paddle.layer.classification_cost(input=out, label=y),
                                num_samples=5)
    assert max(report.errors.values()) < 1e-5


@pytest.mark.parametrize("case", ["second_reader", "clipping"])
def test_no_fusion_where_dl_dy_must_reach_the_softmax(case, monkeypatch):
    """A second reader of the softmax output adds its dL/dy, error clipping clips dL/dy:
    both need the softmax backward, so the cost must write dL/dy."""
    second = case == "second_reader"
    config = softmax_model(second_reader=second, clip=0.0 if second else 0.05)
    rng = np.random.RandomState(1)
    batches = [feed(5, rng, second) for _ in range(2)]
    calls = []
    net, got = run(config, batches, True, monkeypatch, calls)
    _, want = run(config, batches, False, monkeypatch)
    if second:  # the cost's backward runs first, into a buffer nobody has written yet
        order = [layer.name for layer in net._backward_layers]
        assert order.index("cost") < order.index("echo")
    assert len(calls) == 2
    assert_same(got, want)


def test_given_output_gradient_is_not_overwritten_by_the_fusion(monkeypatch):
    """``backward(output_grads=...)`` on the softmax layer: the cost adds to that dL/dy."""
    rng = np.random.RandomState(2)
    args = feed(4, rng)
    g = rng.randn(4, 3).astype(np.float32)
    grads = []
    for fused in (True, False):
        with monkeypatch.context() as m:
            if not fused:
                m.setattr(MultiClassCrossEntropy, "first_write", False)
            net = Network(softmax_model(), ParameterSet(seed=3))
            net.zero_grad()
            net.forward(args, "train")
            net.backward(output_grads={"cost": np.ones((4, 1), np.float32), "out": g})
            grads.append({p.name: p.grad.copy() for p in net.used_parameters})
    assert_same([grads[0]], [grads[1]])


def test_cost_label_positions_follow_the_batch_size():
    net = Network(softmax_model(), ParameterSet(seed=3))
    rng = np.random.RandomState(4)
    big, small = feed(8, rng), feed(3, rng)
    net.forward(big, "train")
    got = net.forward(small, "train")[0].value.copy()
    fresh = Network(softmax_model(), ParameterSet(seed=3)).forward(small, "train")[0].value
    np.testing.assert_array_equal(got, fresh)


def test_fc_fast_path_still_checks_the_input_width():
    net = Network(softmax_model(), ParameterSet(seed=3))
    net.forward(feed(4, np.random.RandomState(5)), "train")
    net.get_layer("x").output.value = np.zeros((4, 6), np.float32)
    with pytest.raises(ValueError, match=r"layer 'h' \(fc\): input 0 \('x'\) has width 6, "
                                         r"expected 5"):
        net.get_layer("h").forward("train")


def test_ids_out_of_range_is_exact():
    assert not ids_out_of_range(np.array([0, 2, 1]), 3)
    assert ids_out_of_range(np.array([0, 3]), 3)
    assert ids_out_of_range(np.array([1, -1]), 3)
    assert ids_out_of_range(np.array([np.iinfo(np.int64).min]), 3)
    assert not ids_out_of_range(np.zeros(0, np.int64), 0)
    assert ids_out_of_range(np.array([2, -1], np.int32), 3)  # other dtypes: two reductions
    assert ids_out_of_range(np.arange(10)[::3], 9)  # strided views too


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("out_shape", [(1, 7), (7,)])
def test_col_sum_gemv_equals_the_row_sum(dtype, out_shape):
    rng = np.random.RandomState(6)
    m = rng.randn(9, 7).astype(dtype)
    tol = dict(rtol=1e-5 if dtype == np.float32 else 1e-12)
    for beta in (0.0, 1.0, 0.5):
        out = rng.randn(*out_shape).astype(dtype)
        want = m.sum(axis=0).reshape(out_shape) + beta * out
        np.testing.assert_allclose(col_sum(m, out, beta), want, **tol)
        np.testing.assert_allclose(out, want, **tol)  # in place
    out = np.zeros(out_shape, dtype)
    col_sum(np.asfortranarray(m), out, 0.0)  # not C-contiguous: the reduction path
    np.testing.assert_allclose(out.reshape(-1), m.sum(axis=0), **tol)


def _softmax_reference(x):
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


@pytest.mark.parametrize("shape", [(5, 3), (4, 1), (3, K.SMALL_ROW + 1)])
def test_small_row_softmax_matches_the_reference(shape):
    rng = np.random.RandomState(7)
    x = (rng.randn(*shape) * 30).astype(np.float32)
    np.testing.assert_allclose(K.softmax(x.copy(), out=None), _softmax_reference(x),
                               rtol=1e-5, atol=1e-7)
    y = x.copy()
    K.softmax(y, out=y)  # in place, as the activation runs it
    np.testing.assert_allclose(y, _softmax_reference(x), rtol=1e-5, atol=1e-7)


def test_small_row_softmax_keeps_nan_and_strided_inputs():
    x = np.array([[1.0, np.nan, 0.0], [0.0, 1.0, 2.0]], np.float32)
    y = K.softmax(x)
    assert np.isnan(y[0]).all() and np.isfinite(y[1]).all()
    wide = np.random.RandomState(8).randn(4, 6).astype(np.float32)
    np.testing.assert_allclose(K.softmax(wide[:, ::2]), _softmax_reference(wide[:, ::2]),
                               rtol=1e-5)


def _trainer(monkeypatch, counter: list):
    from sculler.core.evaluator import ClassificationError

    real, real_sums = ClassificationError.eval_batch, ClassificationError.add_sums
    monkeypatch.setattr(ClassificationError, "eval_batch",
                        lambda self, layers: (counter.append(1), real(self, layers)))
    # on the GPU a batch's error is counted there and read back into add_sums instead
    monkeypatch.setattr(ClassificationError, "add_sums",
                        lambda self, sums, extra: (counter.append(1),
                                                   real_sums(self, sums, extra)))
    paddle.layer.reset_names()
    paddle.init(seed=0)
    x = paddle.layer.data(name="x", type=paddle.data_type.dense_vector(4))
    y = paddle.layer.data(name="y", type=paddle.data_type.integer_value(3))
    out = paddle.layer.fc(input=x, size=3, act=paddle.activation.Softmax())
    cost = paddle.layer.classification_cost(input=out, label=y)
    params = paddle.parameters.create(cost)
    return paddle.trainer.SGD(cost, params, paddle.optimizer.Momentum(learning_rate=0.1))


def test_pass_error_is_the_sum_of_the_batches_evaluated_once(monkeypatch):
    calls = []
    trainer = _trainer(monkeypatch, calls)
    rng = np.random.RandomState(9)
    batches = [[(rng.randn(4).astype(np.float32), int(rng.randint(3))) for _ in range(n)]
               for n in (5, 2, 7)]
    seen = {}

    def handler(ev):
        if isinstance(ev, paddle.event.EndIteration):
            seen.setdefault("batches", []).append(ev.metrics["classification_error_evaluator"])
        elif isinstance(ev, paddle.event.EndPass):
            seen["pass"] = ev.metrics["classification_error_evaluator"]

    trainer.train(lambda: iter(batches), event_handler=handler)
    assert len(calls) == 3  # once per batch, not once for the batch and once for the pass
    sizes = [len(b) for b in batches]
    want = sum(e * n for e, n in zip(seen["batches"], sizes)) / sum(sizes)
    assert seen["pass"] == pytest.approx(want, abs=1e-12)
    assert any(0 < e < 1 for e in seen["batches"])  # the figures are not all trivial


def _train_classifier(monkeypatch, handler, X, y) -> dict:
    """The parameters after 2 passes of ``_trainer``'s classifier over 8-sample batches."""
    from sculler.minibatch import array_batches

    trainer = _trainer(monkeypatch, [])
    trainer.train(array_batches(X, y, batch_size=8), num_passes=2, event_handler=handler,
                  show_progress=False)
    params = trainer.parameters
    return {name: params.get(name).copy() for name in params.names()}


def test_no_handler_builds_no_batch_events_and_trains_the_same(monkeypatch, caplog):
    """train() without an event handler or progress bar builds no per-batch events or batch
    metrics (nobody reads them), yet trains the same and its pass evaluators see every
    batch."""
    import logging

    from sculler import event

    rng = np.random.RandomState(0)
    X, y = rng.rand(40, 4).astype(np.float32), rng.randint(0, 3, 40)
    pass_metrics = []

    def handler(e):
        if isinstance(e, event.EndPass):
            pass_metrics.append(e.metrics)

    with_handler = _train_classifier(monkeypatch, handler, X, y)

    def refuse(*args, **kwargs):
        raise AssertionError("a per-batch event was built with no one to read it")

    for name in ("BeginIteration", "EndForwardBackward", "EndIteration"):
        monkeypatch.setattr(event, name, refuse)
    with caplog.at_level(logging.INFO, logger="sculler.trainer"):
        quiet = _train_classifier(monkeypatch, None, X, y)
    for name, value in with_handler.items():
        np.testing.assert_array_equal(quiet[name], value)
    logged = [r.getMessage() for r in caplog.records if r.getMessage().startswith("pass ")]
    assert len(logged) == 2 and len(pass_metrics) == 2
    for line, metrics in zip(logged, pass_metrics):
        assert metrics and str(metrics) in line  # the same pass metrics, every batch counted


def test_a_handler_still_gets_every_batch_event(monkeypatch):
    rng = np.random.RandomState(1)
    X, y = rng.rand(24, 4).astype(np.float32), rng.randint(0, 3, 24)
    seen = []
    _train_classifier(monkeypatch, lambda e: seen.append(type(e).__name__), X, y)
    per_batch = [n for n in seen if n in ("BeginIteration", "EndForwardBackward", "EndIteration")]
    assert per_batch == ["BeginIteration", "EndForwardBackward", "EndIteration"] * 6


@pytest.mark.gpu
def test_on_the_gpu_the_fused_cost_takes_the_seed_without_writing_it():
    """On the GPU the cost past the fused softmax takes dL/dcost = 1 without it being written
    (a launch fewer a batch): its gradient buffer keeps what it held (NaN here) and every
    gradient equals the CPU's. Given output gradients are still read: 2 doubles them, even
    where an interrupted backward left the cost expecting the unwritten seed."""
    from sculler import backend

    host = feed(6, np.random.RandomState(7))
    results = []
    for use_gpu in (False, True):
        paddle.init(use_gpu=use_gpu, seed=0)
        try:
            args = {"x": Argument(backend.to_place(host["x"].value, use_gpu)),
                    "label": Argument(ids=backend.to_place(host["label"].ids, use_gpu))}
            net = Network(softmax_model(), ParameterSet(seed=3), data_gradients=True)
            runs = []
            for given in (None, 2.0):
                net.zero_grad()
                net.forward(args, "train")
                seed = net.get_layer("cost").output.grad
                seed.fill(np.nan)
                # as a backward interrupted before the cost's turn would leave it
                net.get_layer("cost").unit_output_grad = given is not None
                net.backward(output_grads=None if given is None else {
                    "cost": backend.to_device_of(np.full((6, 1), given, np.float32), seed)})
                runs.append({p.name: backend.to_numpy(p.grad).copy()
                             for p in net.used_parameters})
                if use_gpu and given is None:
                    assert np.isnan(backend.to_numpy(seed)).all()
        finally:
            paddle.init(use_gpu=False)
        results.append(runs)
    (cpu, cpu_doubled), (gpu, gpu_doubled) = results
    assert_same([gpu, gpu_doubled], [cpu, cpu_doubled])
    assert_same([cpu_doubled], [{k: 2 * v for k, v in cpu.items()}])
