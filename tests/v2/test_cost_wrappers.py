"""v2 wrappers of the extra cost layers: signatures, default names, parameters, training."""

import inspect

import numpy as np
import pytest

import sculler as paddle

REFERENCE = {
    "cross_entropy_with_selfnorm_cost": ["input", "label", "name", "coeff",
                                         "softmax_selfnorm_alpha", "layer_attr"],
    "multi_binary_label_cross_entropy_cost": ["input", "label", "name", "coeff", "layer_attr"],
    "sum_cost": ["input", "name", "layer_attr"],
    "lambda_cost": ["input", "score", "name", "NDCG_num", "max_sort_size", "layer_attr"],
    "huber_regression_cost": ["input", "label", "name", "delta", "coeff", "layer_attr"],
    "huber_classification_cost": ["input", "label", "name", "coeff", "layer_attr"],
    "smooth_l1_cost": ["input", "label", "name", "coeff", "layer_attr"],
    "nce": ["input", "label", "num_classes", "param_attr", "weight", "num_neg_samples",
            "neg_distribution", "name", "bias_attr", "layer_attr"],
    "hsigmoid": ["input", "label", "num_classes", "name", "bias_attr", "param_attr",
                 "layer_attr"],
}


@pytest.fixture(autouse=True)
def fresh_names():
    paddle.layer.reset_names()


def dense(name, dim):
    return paddle.layer.data(name=name, type=paddle.data_type.dense_vector(dim))


def ids(name, n):
    return paddle.layer.data(name=name, type=paddle.data_type.integer_value(n))


@pytest.mark.parametrize("fn", sorted(REFERENCE))
def test_signatures_match_paddle_v2(fn):
    params = list(inspect.signature(getattr(paddle.layer, fn)).parameters)
    assert params == REFERENCE[fn]


def test_default_names_types_and_attrs():
    x, y, lab = dense("x", 3), dense("y", 3), ids("l", 3)
    layers = [
        paddle.layer.cross_entropy_with_selfnorm_cost(input=x, label=lab,
                                                      softmax_selfnorm_alpha=0.3),
        paddle.layer.multi_binary_label_cross_entropy_cost(input=x, label=y),
        paddle.layer.huber_regression_cost(input=x, label=y, delta=2.0, coeff=0.5),
        paddle.layer.huber_classification_cost(input=dense("s", 1), label=ids("b", 2)),
        paddle.layer.smooth_l1_cost(input=x, label=y),
        paddle.layer.sum_cost(input=x),
        paddle.layer.soft_binary_class_cross_entropy_cost(input=x, label=y),
    ]
    assert [c.name for c in layers] == [
        "__cross_entropy_with_selfnorm_0__", "__multi_binary_label_cross_entropy_0__",
        "__huber_regression_cost_0__", "__huber_classification_cost_0__",
        "__smooth_l1_cost_0__", "__sum_cost_0__", "__soft_binary_class_cross_entropy_0__"]
    assert all(c.size == 1 for c in layers)
    assert layers[0].config.attrs["softmax_selfnorm_alpha"] == 0.3
    assert layers[2].config.attrs == {"coeff": 0.5, "delta": 2.0}
    with pytest.raises(ValueError, match="delta must be positive"):
        paddle.layer.huber_regression_cost(input=x, label=y, delta=0)


def test_nce_and_hsigmoid_parameters_follow_paddle_shapes():
    x1, x2, lab = dense("x1", 4), dense("x2", 2), ids("l", 10)
    cost = paddle.layer.nce(input=[x1, x2], label=lab, num_neg_samples=3,
                            param_attr=paddle.attr.Param(initial_std=0.1))
    assert cost.name == "__nce_layer_0__"
    params = paddle.parameters.create(cost)
    assert [params.get_shape(n) for n in params.names()] == [(10, 4), (10, 2), (1, 10)]
    hs = paddle.layer.hsigmoid(input=x1, label=lab, bias_attr=False)
    params = paddle.parameters.create(hs)
    assert params.names() == ["___hsigmoid_0__.w0"]
    assert params.get_shape("___hsigmoid_0__.w0") == (9, 4)
    with pytest.raises(ValueError, match="neg_distribution"):
        paddle.layer.nce(input=x1, label=lab, neg_distribution=[0.5, 0.5])


def _train(cost, reader, feeding, passes=20, lr=0.05):
    params = paddle.parameters.create(cost)
    tr = paddle.trainer.SGD(cost, params, paddle.optimizer.Momentum(momentum=0.9,
                                                                    learning_rate=lr))
    costs = []
    tr.train(paddle.batch(reader, 16), num_passes=passes, feeding=feeding,
             show_progress=False,
             event_handler=lambda e: isinstance(e, paddle.event.EndPass) or (
                 isinstance(e, paddle.event.EndIteration) and costs.append(e.cost)))
    return costs, params


@pytest.mark.parametrize("make_cost", ["huber", "smooth_l1"])
def test_robust_regression_costs_train(make_cost):
    paddle.init(seed=3)
    rng = np.random.RandomState(0)
    X = rng.randn(64, 4).astype(np.float32)
    Y = X @ np.array([[1.0], [-2.0], [0.5], [0.0]], dtype=np.float32)
    x, y = dense("x", 4), dense("y", 1)
    pred = paddle.layer.fc(input=x, size=1, act=paddle.activation.Linear())
    cost = (paddle.layer.huber_regression_cost(input=pred, label=y) if make_cost == "huber"
            else paddle.layer.smooth_l1_cost(input=pred, label=y))
    costs, _ = _train(cost, lambda: zip(X, Y), {"x": 0, "y": 1}, lr=0.01)
    assert costs[-1] < costs[0] / 20


def test_hsigmoid_and_nce_learn_a_separable_problem():
    rng = np.random.RandomState(0)
    labels = rng.randint(0, 6, size=96)
    centers = rng.randn(6, 5) * 3
    X = (centers[labels] + 0.3 * rng.randn(96, 5)).astype(np.float32)
    paddle.init(seed=1)
    hs = paddle.layer.hsigmoid(input=dense("x", 5), label=ids("l", 6))
    costs, _ = _train(hs, lambda: zip(X, labels), {"x": 0, "l": 1}, passes=15)
    assert np.mean(costs[-6:]) < np.mean(costs[:6]) / 3
    # NCE's sampled cost has a noise floor; its learned scores must rank the true class
    paddle.layer.reset_names()
    paddle.init(seed=1)
    cost = paddle.layer.nce(input=dense("x", 5), label=ids("l", 6), num_neg_samples=3)
    costs, params = _train(cost, lambda: zip(X, labels), {"x": 0, "l": 1}, passes=15)
    assert np.mean(costs[-6:]) < np.mean(costs[:6]) / 1.5
    scores = X @ params.get("___nce_layer_0__.w0").T + params.get("___nce_layer_0__.wbias")
    # chance is 1/6; over noise-sampler seeds (they follow the layer name) the ranking accuracy
    # of this 3-negative NCE ranges 0.50-0.62, so the bound is twice chance
    assert np.mean(scores.argmax(axis=1) == labels) > 1 / 3
