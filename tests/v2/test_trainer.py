"""The v2 trainer: regression and digits MLP quality, events, immutable parameters, NaN,
checkpoint resume, infer and Inference."""

import io

import numpy as np
import pytest

import sculler as paddle


def _regression(seed=0):
    paddle.layer.reset_names()
    paddle.init(seed=seed)
    x = paddle.layer.data(name="x", type=paddle.data_type.dense_vector(13))
    y = paddle.layer.data(name="y", type=paddle.data_type.dense_vector(1))
    pred = paddle.layer.fc(input=x, size=1, act=paddle.activation.Linear())
    cost = paddle.layer.square_error_cost(input=pred, label=y)
    rng = np.random.RandomState(1)
    X = rng.randn(256, 13).astype(np.float32)
    Y = X @ rng.randn(13, 1).astype(np.float32) + 0.5

    def reader():
        for i in range(len(X)):
            yield X[i], Y[i]

    return x, pred, cost, reader


def test_fit_a_line_cost_falls_and_events():
    x, pred, cost, reader = _regression()
    params = paddle.parameters.create(cost)
    tr = paddle.trainer.SGD(cost, params, paddle.optimizer.Momentum(momentum=0.9,
                                                                    learning_rate=1e-3))
    events, costs = [], []

    def handler(e):
        events.append(type(e).__name__)
        if isinstance(e, paddle.event.EndIteration):
            costs.append(e.cost)

    tr.train(paddle.batch(reader, 32), num_passes=10, event_handler=handler,
             feeding={"x": 0, "y": 1}, show_progress=False)
    assert costs[-1] < costs[0] / 10
    assert events[:4] == ["BeginTraining", "BeginPass", "BeginIteration", "EndForwardBackward"]
    assert events.count("EndPass") == 10 and events[-2:] == ["EndPass", "EndTraining"]
    res = tr.test(paddle.batch(reader, 100))
    # test cost is the mean per-sample cost
    X = np.stack([s[0] for s in reader()])
    Y = np.stack([s[1] for s in reader()])
    w, b = params.get("___fc_layer_0__.w0"), params.get("___fc_layer_0__.wbias")
    np.testing.assert_allclose(res.cost, np.mean(((X @ w + b) - Y) ** 2), rtol=1e-4)
    out = paddle.infer(output_layer=pred, parameters=params, input=[(X[i],) for i in range(7)])
    assert out.shape == (7, 1)
    np.testing.assert_allclose(out, X[:7] @ w + b, rtol=1e-5)


@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")  # NaN on purpose
def test_immutable_parameters_and_nan():
    _, pred, cost, reader = _regression()
    params = paddle.parameters.create(cost)
    before = params.get("___fc_layer_0__.w0")
    tr = paddle.trainer.SGD(cost, params, paddle.optimizer.Momentum(learning_rate=1e-3))
    tr.train(paddle.batch(reader, 32), immutable_parameters=["___fc_layer_0__.w0"],
             show_progress=False)
    np.testing.assert_array_equal(params.get("___fc_layer_0__.w0"), before)
    assert np.any(params.get("___fc_layer_0__.wbias") != 0)
    with pytest.raises(ValueError, match="immutable_parameters"):
        tr.train(paddle.batch(reader, 32), immutable_parameters=["nope"])
    params.set("___fc_layer_0__.w0", np.full((13, 1), np.inf))
    with pytest.raises(FloatingPointError, match=r"pass 0, batch 0.*'__fc_layer_0__' \(fc\)"):
        tr.train(paddle.batch(reader, 32), show_progress=False)


def _shuffled_run(tmp_path, stop_after_pass1):
    _, _, cost, reader = _regression(seed=3)
    params = paddle.parameters.create(cost)
    tr = paddle.trainer.SGD(cost, params, paddle.optimizer.Adam(learning_rate=1e-2))
    r = paddle.batch(paddle.reader.shuffle(reader, 64), 32)
    ck = str(tmp_path / "ck.safetensors")
    if stop_after_pass1:
        tr.train(r, num_passes=1, checkpoint=ck, show_progress=False)
        np.random.seed(12345)  # the "crash" disturbs the process state
        _, _, cost, reader = _regression(seed=99)
        params = paddle.parameters.create(cost)
        tr = paddle.trainer.SGD(cost, params, paddle.optimizer.Adam(learning_rate=1e-2))
        r = paddle.batch(paddle.reader.shuffle(reader, 64), 32)
    tr.train(r, num_passes=3, checkpoint=ck, show_progress=False)
    return {n: params.get(n) for n in params.names()}


def test_checkpoint_resume_is_bit_identical(tmp_path):
    full = _shuffled_run(tmp_path, False)
    (tmp_path / "b").mkdir()
    resumed = _shuffled_run(tmp_path / "b", True)
    for n in full:
        np.testing.assert_array_equal(full[n], resumed[n])


@pytest.mark.slow
def test_digits_mlp_reaches_95_percent_and_inference_file():
    paddle.layer.reset_names()
    paddle.init(seed=1)
    images = paddle.layer.data(name="pixel", type=paddle.data_type.dense_vector(64))
    label = paddle.layer.data(name="label", type=paddle.data_type.integer_value(10))
    h1 = paddle.layer.fc(input=images, size=128, act=paddle.activation.Relu())
    h2 = paddle.layer.fc(input=h1, size=64, act=paddle.activation.Relu())
    predict = paddle.layer.fc(input=h2, size=10, act=paddle.activation.Softmax())
    cost = paddle.layer.classification_cost(input=predict, label=label)
    params = paddle.parameters.create(cost)
    opt = paddle.optimizer.Momentum(learning_rate=0.1 / 128.0, momentum=0.9,
                                    regularization=paddle.optimizer.L2Regularization(
                                        rate=0.0005 * 128))
    tr = paddle.trainer.SGD(cost=cost, parameters=params, update_equation=opt)
    pass_metrics = []
    tr.train(paddle.batch(paddle.reader.shuffle(paddle.dataset.digits.train(), 2000), 128),
             num_passes=15, show_progress=False,
             event_handler=lambda e: isinstance(e, paddle.event.EndPass) and pass_metrics.append(
                 e.metrics))
    assert "classification_error_evaluator" in pass_metrics[-1]
    res = tr.test(paddle.batch(paddle.dataset.digits.test(), 128))
    assert 1 - res.metrics["classification_error_evaluator"] >= 0.95
    X, y = paddle.dataset.digits.load_arrays("test")
    probs, ids = paddle.infer(output_layer=predict, parameters=params,
                              input=[(x,) for x in X], field=["value", "id"])
    assert probs.shape == (360, 10) and ids.shape == (360,)
    assert np.mean(ids == y) == pytest.approx(1 - res.metrics["classification_error_evaluator"])
    buf = io.BytesIO()
    paddle.topology.Topology(predict).serialize_for_inference(buf, params)
    buf.seek(0)
    inf = paddle.inference.Inference(fileobj=buf)
    np.testing.assert_allclose(inf.infer([(x,) for x in X[:5]]), probs[:5], rtol=1e-4, atol=1e-6)
