"""ModelAverage: PaddlePaddle's AverageOptimizer window against averages computed by hand, lazy
sums for sparse rows, and the trainer's use of the averages (test, to_tar, after train) while
training continues on the raw values."""

import io

import numpy as np
import pytest

import sculler as paddle
from sculler import optimizer as O


def sgd_values(ma, grads, passes=None):
    """Plain SGD (lr 1) on a scalar from 0 with the given gradients; the value after each
    update and the average read after each batch."""
    opt = O.Momentum(learning_rate=1.0, model_average=ma)
    w = np.zeros((1, 1))
    values, averages = [], []
    for i, g in enumerate(grads):
        opt.update("w", w, np.full((1, 1), float(g)))
        opt.finish_batch(1)
        values.append(float(w[0, 0]))
        averages.append(float(ma.average("w")[0, 0]))
        if passes and (i + 1) in passes:
            opt.finish_pass()
    return values, averages


def test_window_restarts_when_long_enough_and_keeps_the_previous_window():
    # max_average_window=3: min window 3; restart at updates 3 and 6
    v, avg = sgd_values(O.ModelAverage(0.5, max_average_window=3), [-1, -2, -3, -4, -5, -6, -7])
    assert v == [1, 3, 6, 10, 15, 21, 28]
    # update 3 restarts: old = v1+v2+v3 (3 values); update 6 restarts: old = v4+v5+v6
    expect = [1, 2, 10 / 3, 20 / 4, 35 / 5, 46 / 3, (46 + 28) / 4]
    np.testing.assert_allclose(avg, expect)


def test_without_max_window_the_last_pass_length_caps_it():
    grads = [-1] * 9
    v, avg = sgd_values(O.ModelAverage(0.5), grads, passes={4})
    assert v == list(range(1, 10))
    # pass 1 (4 batches) sets max = min = 4; update 5 restarts (5 >= 4 and >= min(4, 2.5));
    # update 9 restarts again (4 accumulated >= 4 and >= min(4, 4.5)): old = v6..v9
    expect = [1, 1.5, 2, 2.5, 3, 21 / 6, 28 / 7, 36 / 8, (6 + 7 + 8 + 9) / 4]
    np.testing.assert_allclose(avg, expect)


def test_sparse_rows_are_summed_lazily_like_dense_ones():
    rng = np.random.RandomState(0)
    dense_ma, sparse_ma = O.ModelAverage(0.5, 4), O.ModelAverage(0.5, 4)
    dense, sparse = O.Momentum(learning_rate=0.1, model_average=dense_ma), O.Momentum(
        learning_rate=0.1, model_average=sparse_ma)
    wd, ws = np.ones((5, 2)), np.ones((5, 2))
    for _ in range(7):
        rows = np.sort(rng.choice(5, 2, replace=False))
        g = rng.randn(2, 2)
        full = np.zeros((5, 2))
        full[rows] = g
        dense.update("w", wd, full)
        sparse.update("w", ws, g.copy(), rows=rows)
        dense.finish_batch(1)
        sparse.finish_batch(1)
    np.testing.assert_allclose(ws, wd)
    np.testing.assert_allclose(sparse_ma.average("w"), dense_ma.average("w"))


def test_apply_restore_and_state_dict_round_trip():
    ma = O.ModelAverage(1.0, 100)
    opt = O.Momentum(learning_rate=1.0, model_average=ma)
    w = np.zeros(2)
    for g in ([-2.0, 0.0], [-2.0, -4.0]):
        opt.update("w", w, np.array(g))
        opt.finish_batch(1)
    with ma.averaged():
        np.testing.assert_allclose(w, [3.0, 2.0])
    np.testing.assert_allclose(w, [4.0, 4.0])
    other = O.ModelAverage(1.0, 100)
    opt2 = O.Momentum(learning_rate=1.0, model_average=other)
    opt2.load_state_dict(opt.state_dict())
    np.testing.assert_allclose(other.average("w"), [3.0, 2.0])
    with pytest.raises(ValueError, match="no model_average"):
        O.Momentum().load_state_dict(opt.state_dict())
    with pytest.raises(ValueError, match="average_window"):
        O.ModelAverage(0)


def test_trainer_tests_saves_and_leaves_averaged_values_but_trains_on_raw():
    paddle.layer.reset_names()
    paddle.init(seed=0)
    x = paddle.layer.data(name="x", type=paddle.data_type.dense_vector(1))
    y = paddle.layer.data(name="y", type=paddle.data_type.dense_vector(1))
    pred = paddle.layer.fc(input=x, size=1, act=paddle.activation.Linear(), bias_attr=False)
    cost = paddle.layer.square_error_cost(input=pred, label=y)
    params = paddle.parameters.create(cost)
    params.set("___fc_layer_0__.w0", np.zeros((1, 1), dtype=np.float32))
    ma = paddle.optimizer.ModelAverage(average_window=1.0, max_average_window=100)
    trainer = paddle.trainer.SGD(cost, params, paddle.optimizer.Momentum(
        learning_rate=0.1, model_average=ma))

    def reader():
        yield from [(np.array([1.0], np.float32), np.array([2.0], np.float32))] * 3

    raw, seen_at_end_pass, first_seen = [], [], []

    def handler(e):
        if isinstance(e, paddle.event.BeginIteration) and not first_seen:
            first_seen.append(float(params.get("___fc_layer_0__.w0")[0, 0]))
        if isinstance(e, paddle.event.EndIteration):
            raw.append(float(params.get("___fc_layer_0__.w0")[0, 0]))
        if isinstance(e, paddle.event.EndPass):
            seen_at_end_pass.append(float(params.get("___fc_layer_0__.w0")[0, 0]))

    trainer.train(paddle.batch(reader, 1), num_passes=1, event_handler=handler,
                  show_progress=False)
    # w <- w - 0.1 * 2 (w - 2): 0.4, 0.72, 0.976
    np.testing.assert_allclose(raw, [0.4, 0.72, 0.976], rtol=1e-6)
    avg = (0.4 + 0.72 + 0.976) / 3
    assert seen_at_end_pass == pytest.approx([avg], rel=1e-6)
    assert float(params.get("___fc_layer_0__.w0")[0, 0]) == pytest.approx(avg, rel=1e-6)
    result = trainer.test(paddle.batch(reader, 3))
    assert result.cost == pytest.approx((avg - 2.0) ** 2, rel=1e-5)
    buf = io.BytesIO()
    trainer.save_parameter_to_tar(buf)
    buf.seek(0)
    loaded = paddle.parameters.Parameters.from_tar(buf)
    assert float(loaded.get("___fc_layer_0__.w0")[0, 0]) == pytest.approx(avg, rel=1e-6)
    out = paddle.infer(output_layer=pred, parameters=params,
                       input=[(np.array([1.0], np.float32),)])
    assert float(out[0, 0]) == pytest.approx(avg, rel=1e-6)
    raw.clear()
    first_seen.clear()
    trainer.train(paddle.batch(reader, 1), num_passes=1, event_handler=handler,
                  show_progress=False)
    assert first_seen == pytest.approx([0.976], rel=1e-6)  # training resumes from raw
    assert raw[0] == pytest.approx(0.976 - 0.2 * (0.976 - 2.0), rel=1e-6)


def test_v1_settings_model_average_reaches_the_optimizer(tmp_path):
    from sculler.cli import make_optimizer
    from sculler.config.config_parser import parse_config

    path = tmp_path / "conf.py"
    path.write_text(
        "from sculler.config.helpers import *\n"
        "settings(batch_size=8, learning_rate=0.1, learning_method=AdamOptimizer(),\n"
        "         model_average=ModelAverage(average_window=0.5, max_average_window=50))\n"
        "x = data_layer(name='x', size=2)\n"
        "y = data_layer(name='y', size=1)\n"
        "outputs(square_error_cost(input=fc_layer(input=x, size=1), label=y))\n")
    settings = parse_config(str(path)).settings
    opt = make_optimizer(settings)
    assert isinstance(opt.model_average, O.ModelAverage)
    assert opt.model_average.max_average_window == 50
