"""The trainer's NaN/Inf guard names the first layer (topological order) where a non-finite
value appears (its output forward, its gradient in the backward before), with the pass and
batch and whether the data was; the trainer checks nothing but the cost while all is finite."""

import numpy as np
import pytest

import sculler as paddle
from sculler.core.nan_guard import NonFiniteError

# every test here makes NaN/Inf on purpose: NumPy's warnings about it are expected
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")


def _train(cost, batches, params=None, **sets):
    params = params or paddle.parameters.create(cost)
    for name, value in sets.items():
        params.set(name, value)
    trainer = paddle.trainer.SGD(cost, params, paddle.optimizer.Momentum(learning_rate=1e-3))
    trainer.train(lambda: iter(batches), show_progress=False)
    return params


def _regression(act=None, hidden_act=None):
    paddle.layer.reset_names()
    x = paddle.layer.data(name="x", type=paddle.data_type.dense_vector(3))
    y = paddle.layer.data(name="y", type=paddle.data_type.dense_vector(1))
    hidden = paddle.layer.fc(input=x, size=2, act=hidden_act or paddle.activation.Tanh(),
                             name="hidden")
    pred = paddle.layer.fc(input=hidden, size=1, act=act or paddle.activation.Linear(),
                           name="pred")
    return paddle.layer.square_error_cost(input=pred, label=y, name="cost")


def _batch(n=4, x=None):
    rng = np.random.RandomState(0)
    xs = rng.rand(n, 3).astype(np.float32) if x is None else x
    return [(xs[i], np.array([1.0], np.float32)) for i in range(n)]


def test_non_finite_data_is_reported_at_the_data_layer():
    cost = _regression()
    good = _batch()
    bad = _batch()
    bad[2] = (np.array([1.0, np.nan, 0.0], np.float32), bad[2][1])
    with pytest.raises(NonFiniteError, match="pass 0, batch 1, forward: data layer 'x'.*"
                       "input data itself is non-finite in data layer\\(s\\) \\['x'\\]"):
        _train(cost, [good, bad])


def test_diverged_parameter_is_named_at_its_layer():
    cost = _regression(hidden_act=paddle.activation.Linear())
    with pytest.raises(FloatingPointError, match="first layer with a NaN/Inf output is "
                       "'hidden' \\(fc\\).*parameter\\(s\\) \\['_hidden.w0'\\].*before this "
                       "training run.*input data is finite"):
        _train(cost, [_batch()], **{"_hidden.w0": np.full((3, 2), np.inf, np.float32)})


def test_layer_that_overflows_on_finite_inputs():
    cost = _regression(act=paddle.activation.Exp())
    with pytest.raises(NonFiniteError, match="'pred' \\(fc\\); its inputs \\['hidden'\\] and "
                       "parameters are finite"):
        _train(cost, [_batch()], **{"_pred.w0": np.full((2, 1), 500.0, np.float32),
                                    "_hidden.w0": np.ones((3, 2), np.float32)})


def test_non_finite_gradient_names_the_backward_layer():
    # sqrt(0) = 0 is finite forward; its derivative 1 / (2 sqrt(0)) is not: batch 0's backward
    # gives 'hidden' an infinite gradient, the update makes its weights NaN, batch 1 shows it
    cost = _regression(hidden_act=paddle.activation.Sqrt())
    zeros = {"_hidden.w0": np.zeros((3, 2), np.float32),
             "_hidden.wbias": np.zeros((1, 2), np.float32)}
    with pytest.raises(NonFiniteError, match="pass 0, batch 1, forward: the first layer with a "
                       "NaN/Inf output is 'hidden'.*the backward of pass 0, batch 0 made them so: "
                       "the first layer, in backward order, whose gradient is NaN/Inf is "
                       "'hidden' \\(fc\\), for \\['_hidden.w0'"):
        _train(cost, [_batch(), _batch()], **zeros)


def test_diverging_update_with_finite_gradients():
    cost = _regression(hidden_act=paddle.activation.Linear())
    params = paddle.parameters.create(cost)
    for name in params.names():
        params.set(name, np.ones(params.get_shape(name), np.float32))
    # finite gradients times a rate beyond float32's range: the update overflows
    trainer = paddle.trainer.SGD(cost, params, paddle.optimizer.Momentum(learning_rate=1e39))
    with pytest.raises(NonFiniteError, match="gradients of pass 0, batch 0 were finite, so the "
                       "update itself overflowed"):
        trainer.train(lambda: iter([_batch(), _batch()]), show_progress=False)


def test_guard_lets_finite_training_through_and_keeps_gradients():
    cost = _regression()
    params = _train(cost, [_batch(), _batch()])
    for name in params.names():
        assert np.isfinite(params.get(name)).all()
        assert np.isfinite(params.get_grad(name)).all()


def _softmax_classifier(bias: bool = False):
    """Logits = the input row (identity weights), plus ``[0, 0.5, 0]`` with ``bias``."""
    paddle.layer.reset_names()
    x = paddle.layer.data(name="x", type=paddle.data_type.dense_vector(3))
    y = paddle.layer.data(name="y", type=paddle.data_type.integer_value(3))
    out = paddle.layer.fc(input=x, size=3, act=paddle.activation.Softmax(),
                          bias_attr=paddle.attr.Param(name="b") if bias else False,
                          param_attr=paddle.attr.Param(name="w"))
    cost = paddle.layer.classification_cost(input=out, label=y)
    params = paddle.parameters.create(cost)
    params.set("w", np.eye(3, dtype=np.float32))
    if bias:
        params.set("b", np.array([[0, 0.5, 0]], np.float32))
    return cost, params


def test_cross_entropy_of_an_underflowed_softmax_is_finite_and_exact():
    """logits [1e4, -1e4, 0], label 1: softmax gives p = 0, yet the cost is exactly 20000
    (logsumexp - z[1]); test() once returned inf."""
    cost, params = _softmax_classifier()
    trainer = paddle.trainer.SGD(cost, params, paddle.optimizer.Momentum(learning_rate=0.0))
    row = np.array([1e4, -1e4, 0], np.float32)
    assert trainer.test(lambda: iter([[(row, 1)]])).cost == 20000.0
    usual = np.array([1.0, 2.0, 3.0], np.float32)
    expected = (20000 + np.log(np.exp(usual).sum()) - 3) / 2
    result = trainer.test(lambda: iter([[(row, 1), (usual, 2)]]))
    assert result.cost == pytest.approx(expected, rel=1e-6)


@pytest.mark.gpu
@pytest.mark.parametrize("bias", [False, True])
def test_an_underflowed_softmax_costs_the_same_on_the_gpu(bias):
    """On the GPU the softmax's launch keeps its logits (with the bias) and the cost kernel
    recomputes an underflowed row from them in float64, as the host does: 20000, not inf
    (which would stop training there and not on the CPU)."""
    rows = [(np.array([1e4, -1e4, 0], np.float32), 1), (np.array([1, 2, 3], np.float32), 2)]
    costs = []
    for use_gpu in (False, True):
        paddle.init(use_gpu=use_gpu, seed=0)
        try:
            cost, params = _softmax_classifier(bias)
            trainer = paddle.trainer.SGD(cost, params,
                                         paddle.optimizer.Momentum(learning_rate=0.0))
            costs.append([trainer.test(lambda r=r: iter([[r]])).cost for r in rows])
        finally:
            paddle.init(use_gpu=False)
    assert costs[1][0] == costs[0][0] == 20000.0 - bias * 0.5
    assert costs[1][1] == pytest.approx(costs[0][1], rel=1e-6)


def test_truly_non_finite_cross_entropy_still_stops_training():
    cost, params = _softmax_classifier()
    with pytest.raises(NonFiniteError):
        _train(cost, [[(np.array([np.nan, 0, 0], np.float32), 1)]], params=params)
