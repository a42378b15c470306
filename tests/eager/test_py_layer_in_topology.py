"""A PyLayer written for eager mode runs as an engine layer and passes check_layer_grad."""

import numpy as np
import pytest

import sculler as paddle
from sculler.autograd import PyLayer
from sculler.eager.layer_bridge import py_layer_path
from sculler.testing import INPUT_DATA, GradientCheckError, check_layer_grad
from sculler.testing.pylayer_check import TanhPyLayer as CusTanh


class ScaledProduct(PyLayer):
    """y = scale * a * b, two inputs and a keyword argument."""

    @staticmethod
    def forward(ctx, a, b, scale=1.0):
        ctx.save_for_backward(a, b)
        ctx.scale = scale
        return a * b * scale

    @staticmethod
    def backward(ctx, dy):
        a, b = ctx.saved_tensor()
        return dy * b * ctx.scale, dy * a * ctx.scale


class WrongTanh(CusTanh):
    @staticmethod
    def backward(ctx, dy):
        (y,) = ctx.saved_tensor()
        return dy * (1 - y)


@pytest.mark.parametrize("cls, inputs, kwargs", [
    (CusTanh, [INPUT_DATA(4)], {}),
    (ScaledProduct, [INPUT_DATA(3), INPUT_DATA(3)], {"scale": 0.7}),
])
def test_py_layer_gradient(cls, inputs, kwargs):
    size = inputs[0].size
    config = {"size": size, "py_layer": py_layer_path(cls), "kwargs": kwargs, "inputs": inputs}
    report = check_layer_grad(config, "py_layer", 9)
    assert report.max_error < 1e-6 and len(report.errors) == len(inputs)


def test_wrong_py_layer_backward_is_caught():
    config = {"size": 4, "py_layer": py_layer_path(WrongTanh), "inputs": [INPUT_DATA(4)]}
    with pytest.raises(GradientCheckError, match="py_layer"):
        check_layer_grad(config, "py_layer", 9)


def test_output_shape_mismatch_names_the_layer():
    config = {"size": 5, "py_layer": py_layer_path(CusTanh), "inputs": [INPUT_DATA(4)]}
    with pytest.raises(ValueError, match=r"py_layer TanhPyLayer\): forward must return one Tensor "
                       r"of shape \(\d+, 5\)"):
        check_layer_grad(config, "py_layer", 9)


def test_local_class_is_rejected_with_advice():
    class Local(CusTanh):
        pass

    with pytest.raises(ValueError, match="module level"):
        py_layer_path(Local)


def test_same_math_as_eager_apply():
    x = np.random.RandomState(0).randn(3, 4)
    eager = CusTanh.apply(paddle.to_tensor(x)).numpy()
    np.testing.assert_allclose(eager, np.tanh(x))


def test_py_layer_in_a_v2_topology_trains():
    """sculler.layer.py_layer: the eager CusTanh as the hidden activation of a v2 MLP."""
    paddle.init(seed=2)
    paddle.layer.reset_names()
    x = paddle.layer.data(name="pixel", type=paddle.data_type.dense_vector(64))
    y = paddle.layer.data(name="label", type=paddle.data_type.integer_value(10))
    pre = paddle.layer.fc(input=x, size=32, act=paddle.activation.Linear())
    hidden = paddle.layer.py_layer(CusTanh, input=pre, size=32)
    out = paddle.layer.fc(input=hidden, size=10, act=paddle.activation.Softmax())
    cost = paddle.layer.classification_cost(input=out, label=y)
    parameters = paddle.parameters.create(cost)
    trainer = paddle.trainer.SGD(cost, parameters,
                                 paddle.optimizer.Momentum(momentum=0.9, learning_rate=0.1 / 64))
    digits = paddle.dataset.digits
    trainer.train(paddle.batch(digits.train(), 64), num_passes=15, show_progress=False)
    result = trainer.test(paddle.batch(digits.test(), 128))
    assert result.metrics["classification_error_evaluator"] <= 0.05
