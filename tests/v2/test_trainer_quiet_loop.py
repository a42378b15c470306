"""train() without an event handler or progress bar builds no per-batch events or batch
metrics (nobody reads them), yet trains the same and its pass evaluators see every batch."""

from __future__ import annotations

import logging

import numpy as np

import sculler as paddle
from sculler import event
from sculler.minibatch import array_batches


def _train(handler, X, y):
    paddle.layer.reset_names()
    paddle.init(seed=3)
    x = paddle.layer.data(name="x", type=paddle.data_type.dense_vector(4))
    lab = paddle.layer.data(name="y", type=paddle.data_type.integer_value(3))
    out = paddle.layer.fc(input=x, size=3, act=paddle.activation.Softmax())
    cost = paddle.layer.classification_cost(input=out, label=lab)
    params = paddle.parameters.create(cost)
    tr = paddle.trainer.SGD(cost, params, paddle.optimizer.Momentum(momentum=0.9,
                                                                    learning_rate=0.05))
    tr.train(array_batches(X, y, batch_size=8), num_passes=2, event_handler=handler,
             show_progress=False)
    return {name: params.get(name).copy() for name in params.names()}


def test_no_handler_builds_no_batch_events_and_trains_the_same(monkeypatch, caplog):
    rng = np.random.RandomState(0)
    X, y = rng.rand(40, 4).astype(np.float32), rng.randint(0, 3, 40)
    pass_metrics = []

    def handler(e):
        if isinstance(e, event.EndPass):
            pass_metrics.append(e.metrics)

    with_handler = _train(handler, X, y)

    def refuse(*args, **kwargs):
        raise AssertionError("a per-batch event was built with no one to read it")

    for name in ("BeginIteration", "EndForwardBackward", "EndIteration"):
        monkeypatch.setattr(event, name, refuse)
    with caplog.at_level(logging.INFO, logger="sculler.trainer"):
        quiet = _train(None, X, y)
    for name, value in with_handler.items():
        np.testing.assert_array_equal(quiet[name], value)
    logged = [r.getMessage() for r in caplog.records if r.getMessage().startswith("pass ")]
    assert len(logged) == 2 and len(pass_metrics) == 2
    for line, metrics in zip(logged, pass_metrics):
        assert metrics and str(metrics) in line  # the same pass metrics, every batch counted


def test_a_handler_still_gets_every_batch_event():
    rng = np.random.RandomState(1)
    X, y = rng.rand(24, 4).astype(np.float32), rng.randint(0, 3, 24)
    seen = []
    _train(lambda e: seen.append(type(e).__name__), X, y)
    per_batch = [n for n in seen if n in ("BeginIteration", "EndForwardBackward", "EndIteration")]
    assert per_batch == ["BeginIteration", "EndForwardBackward", "EndIteration"] * 6
