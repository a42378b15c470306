"""classification_error(weight=...): PaddlePaddle's weighted error, errors weighted by the
weight input and divided by the total weight, checked against NumPy over two batches."""

import numpy as np
import pytest

import sculler as paddle
from sculler.config.parser_utils import parse_network_config


def _features(rng, n):
    return [(rng.normal(size=4).astype(np.float32), int(rng.integers(5)),
             np.array([rng.uniform(0.1, 2.0)], np.float32)) for _ in range(n)]


def _network():
    x = paddle.layer.data(name="x", type=paddle.data_type.dense_vector(4))
    label = paddle.layer.data(name="label", type=paddle.data_type.integer_value(5))
    weight = paddle.layer.data(name="weight", type=paddle.data_type.dense_vector(1))
    predict = paddle.layer.fc(input=x, size=5, act=paddle.activation.Softmax(), name="predict")
    cost = paddle.layer.classification_cost(input=predict, label=label, weight=weight)
    return x, label, weight, predict, cost


@pytest.mark.parametrize("top_k", [1, 2])
def test_weighted_error_equals_numpy_reference(top_k):
    rng = np.random.default_rng(0)
    _, label, weight, predict, cost = _network()
    paddle.evaluator.classification_error(input=predict, label=label, weight=weight,
                                          top_k=top_k, name="werr")
    params = paddle.parameters.create(cost)
    params.set("_predict.w0", rng.normal(size=(4, 5)).astype(np.float32))
    trainer = paddle.trainer.SGD(cost=cost, parameters=params,
                                 update_equation=paddle.optimizer.Momentum(learning_rate=0.0))
    samples = _features(rng, 20)
    result = trainer.test(reader=paddle.batch(lambda: iter(samples), 4),
                          feeding={"x": 0, "label": 1, "weight": 2})
    probs = paddle.infer(output_layer=predict, parameters=params,
                         input=[(s[0],) for s in samples], feeding={"x": 0})
    labels = np.array([s[1] for s in samples])
    weights = np.array([s[2][0] for s in samples], np.float64)
    top = np.argsort(-probs, axis=1)[:, :top_k]
    missed = ~(top == labels[:, None]).any(axis=1)
    expected = (weights * missed).sum() / weights.sum()
    assert 0 < expected < 1
    assert result.metrics["werr"] == pytest.approx(expected, rel=1e-6)
    if top_k == 1:  # classification_cost(weight=...) attaches the weighted evaluator too
        assert result.metrics["classification_error_evaluator"] == pytest.approx(expected)
    unweighted = missed.mean()
    assert unweighted != pytest.approx(expected)


def test_v1_helper_adds_the_weight_as_third_input():
    from sculler.trainer_config_helpers import (
        SoftmaxActivation,
        classification_cost,
        classification_error_evaluator,
        data_layer,
        fc_layer,
        outputs,
    )

    def network():
        x = data_layer(name="x", size=4)
        label = data_layer(name="label", size=3)
        weight = data_layer(name="weight", size=1)
        predict = fc_layer(input=x, size=3, act=SoftmaxActivation())
        classification_error_evaluator(input=predict, label=label, weight=weight)
        outputs(classification_cost(input=predict, label=label))

    model = parse_network_config(network)
    ev = next(e for e in model.evaluators if e.type == "classification_error"
              and len(e.input_layers) == 3)
    assert ev.input_layers == ["__fc_layer_0__", "label", "weight"]


def test_weight_must_be_one_column():
    _, label, _, predict, _ = _network()
    with pytest.raises(ValueError, match="weight must be a layer of width 1"):
        paddle.evaluator.classification_error(input=predict, label=label, weight=predict)
