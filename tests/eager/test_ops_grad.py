"""One row per eager op: the autograd gradient matches central finite differences (float64)."""

import numpy as np
import pytest

import sculler as paddle
import sculler.nn.functional as F
from sculler.testing.pylayer_check import check_grad


def _t(shape, low=-2.0, high=2.0, seed=0, grad=True):
    """Inputs drawn away from kinks: uniform in [low, high], seeded."""
    a = np.random.default_rng(seed).uniform(low, high, shape)
    t = paddle.to_tensor(a, dtype="float64")
    t.stop_gradient = not grad
    return t


def _pos(shape, seed=0):
    return _t(shape, 0.5, 2.0, seed)


def _away_from_zero(shape, seed=0):
    a = np.random.default_rng(seed).uniform(0.3, 2.0, shape)
    a *= np.where(np.random.default_rng(seed + 1).random(shape) < 0.5, -1, 1)
    t = paddle.to_tensor(a)
    t.stop_gradient = False
    return t


LABELS = paddle.to_tensor(np.array([0, 3, 1, 2, 3]))

OPS = [
    ("add", paddle.add, lambda: [_t([3, 4]), _t([4], seed=1)]),
    ("subtract", paddle.subtract, lambda: [_t([3, 1]), _t([3, 4], seed=1)]),
    ("multiply", paddle.multiply, lambda: [_t([2, 3, 4]), _t([3, 1], seed=1)]),
    ("divide", paddle.divide, lambda: [_t([3, 4]), _pos([3, 4], seed=1)]),
    ("pow_scalar", lambda x: x ** 3, lambda: [_t([3, 4])]),
    ("pow_tensor", paddle.pow, lambda: [_pos([3, 4]), _t([3, 4], seed=1)]),
    ("rsub_rdiv", lambda x: (1.0 - x) + 2.0 / x, lambda: [_pos([3, 4])]),
    ("neg", lambda x: -x, lambda: [_t([3, 4])]),
    ("maximum", paddle.maximum, lambda: [_t([3, 4]), _t([3, 4], seed=1)]),
    ("tanh", paddle.tanh, lambda: [_t([3, 4])]),
    ("sigmoid", paddle.sigmoid, lambda: [_t([3, 4])]),
    ("exp", paddle.exp, lambda: [_t([3, 4])]),
    ("log", paddle.log, lambda: [_pos([3, 4])]),
    ("sqrt", paddle.sqrt, lambda: [_pos([3, 4])]),
    ("square", paddle.square, lambda: [_t([3, 4])]),
    ("abs", paddle.abs, lambda: [_away_from_zero([3, 4])]),
    ("relu", paddle.relu, lambda: [_away_from_zero([3, 4])]),
    ("reciprocal", paddle.reciprocal, lambda: [_pos([3, 4])]),
    ("softmax", paddle.softmax, lambda: [_t([3, 5])]),
    ("softmax_axis0", lambda x: paddle.softmax(x, axis=0), lambda: [_t([3, 5])]),
    ("log_softmax", paddle.log_softmax, lambda: [_t([3, 5])]),
    ("matmul", paddle.matmul, lambda: [_t([3, 4]), _t([4, 2], seed=1)]),
    ("matmul_transposed", lambda x, y: paddle.matmul(x, y, transpose_x=True,
                                                     transpose_y=True),
     lambda: [_t([4, 3]), _t([2, 4], seed=1)]),
    ("matmul_batched", paddle.matmul, lambda: [_t([2, 3, 4]), _t([4, 5], seed=1)]),
    ("matmul_vector", paddle.matmul, lambda: [_t([4]), _t([4, 3], seed=1)]),
    ("matmul_operator", lambda x, y: x @ y, lambda: [_t([3, 4]), _t([4], seed=1)]),
    ("sum_all", paddle.sum, lambda: [_t([3, 4])]),
    ("sum_axis", lambda x: paddle.sum(x, axis=1), lambda: [_t([3, 4])]),
    ("sum_keepdim", lambda x: paddle.sum(x, axis=[0, 2], keepdim=True),
     lambda: [_t([2, 3, 4])]),
    ("mean", paddle.mean, lambda: [_t([3, 4])]),
    ("mean_axis", lambda x: paddle.mean(x, axis=-1), lambda: [_t([3, 4])]),
    ("max", lambda x: paddle.max(x, axis=1), lambda: [_t([3, 4])]),
    ("max_all", paddle.max, lambda: [_t([3, 4])]),
    ("min", lambda x: paddle.min(x, axis=0, keepdim=True), lambda: [_t([3, 4])]),
    ("reshape", lambda x: paddle.reshape(x, [4, -1]), lambda: [_t([2, 6])]),
    ("transpose", lambda x: paddle.transpose(x, [2, 0, 1]), lambda: [_t([2, 3, 4])]),
    ("T", lambda x: x.T * paddle.to_tensor(np.arange(6.0).reshape(3, 2)),
     lambda: [_t([2, 3])]),
    ("unsqueeze_squeeze", lambda x: paddle.squeeze(paddle.unsqueeze(x, 1) * 2, 1),
     lambda: [_t([3, 4])]),
    ("flatten", lambda x: paddle.flatten(x, 1), lambda: [_t([2, 3, 4])]),
    ("concat", lambda x, y: paddle.concat([x, y], axis=1),
     lambda: [_t([2, 3]), _t([2, 2], seed=1)]),
    ("stack", lambda x, y: paddle.stack([x, y], axis=1),
     lambda: [_t([2, 3]), _t([2, 3], seed=1)]),
    ("split", lambda x: paddle.split(x, [1, -1], axis=1), lambda: [_t([2, 5])]),
    ("split_partial_use", lambda x: paddle.split(x, 2, axis=0)[1] * 3, lambda: [_t([4, 3])]),
    ("where", lambda x, y: paddle.where(x > 0, x, y),
     lambda: [_away_from_zero([3, 4]), _t([3, 4], seed=1)]),
    ("clip", lambda x: paddle.clip(x, -1.0, 1.0), lambda: [_t([4, 5], -3, 3)]),
    ("gather", lambda x: paddle.gather(x, paddle.to_tensor([2, 0, 2])), lambda: [_t([3, 4])]),
    ("gather_axis1", lambda x: paddle.gather(x, paddle.to_tensor([1, 1]), axis=1),
     lambda: [_t([3, 4])]),
    ("getitem_slice", lambda x: x[1:, ::2], lambda: [_t([3, 4])]),
    ("getitem_int_ellipsis", lambda x: x[..., 1], lambda: [_t([2, 3, 4])]),
    ("getitem_fancy", lambda x: x[paddle.to_tensor([0, 2, 0])], lambda: [_t([3, 4])]),
    ("cast_clone", lambda x: paddle.clone(x.astype("float64")) * 2, lambda: [_t([3])]),
    ("scale", lambda x: paddle.scale(x, 2.0, 1.0), lambda: [_t([3])]),
    ("F.linear", F.linear, lambda: [_t([3, 4]), _t([4, 2], seed=1), _t([2], seed=2)]),
    ("F.embedding", lambda w: F.embedding(paddle.to_tensor([[1, 0], [1, 2]]), w),
     lambda: [_t([3, 4])]),
    ("F.cross_entropy", lambda x: F.cross_entropy(x, LABELS), lambda: [_t([5, 4])]),
    ("F.cross_entropy_sum", lambda x: F.cross_entropy(x, LABELS, reduction="sum"),
     lambda: [_t([5, 4])]),
    ("F.cross_entropy_none", lambda x: F.cross_entropy(x, LABELS.reshape([5, 1]),
                                                       reduction="none"),
     lambda: [_t([5, 4])]),
    ("F.mse_loss", F.mse_loss, lambda: [_t([3, 4]), _t([3, 4], seed=1)]),
    ("F.l1_loss", F.l1_loss, lambda: [_t([3, 4]), _t([3, 4], seed=1) + 5.0]),
]


@pytest.mark.parametrize("name,fn,make", OPS, ids=[row[0] for row in OPS])
def test_op_gradient_matches_finite_differences(name, fn, make):
    check_grad(fn, *make(), label=name)


def test_checker_catches_a_wrong_gradient():
    class WrongTanh(paddle.autograd.PyLayer):
        @staticmethod
        def forward(ctx, x):
            y = paddle.tanh(x)
            ctx.save_for_backward(y)
            return y

        @staticmethod
        def backward(ctx, dy):
            (y,) = ctx.saved_tensor()
            return dy * (1 - y)  # wrong: should be 1 - y^2

    from sculler.testing.pylayer_check import check_pylayer_grad

    with pytest.raises(AssertionError, match=r"WrongTanh: gradient of input 0 .*index"):
        check_pylayer_grad(WrongTanh, _t([2, 3]))


def test_cross_entropy_matches_manual_formula():
    x = _t([5, 4], grad=False)
    logp = x.numpy() - np.log(np.exp(x.numpy()).sum(1, keepdims=True))
    want = -logp[np.arange(5), LABELS.numpy()].mean()
    assert np.isclose(F.cross_entropy(x, LABELS).item(), want)
    masked = paddle.to_tensor(np.array([0, -100, 1, 2, -100]))
    want_masked = -logp[[0, 2, 3], [0, 1, 2]].mean()
    assert np.isclose(F.cross_entropy(x, masked).item(), want_masked)
    assert F.cross_entropy(x, LABELS, reduction="none").shape == [5]
    assert F.cross_entropy(x, LABELS.reshape([5, 1]), reduction="none").shape == [5, 1]


@pytest.mark.parametrize("kernel", ["tanh", "sigmoid", "relu", "exp", "log", "softmax"])
def test_ops_match_the_activation_kernels_bit_for_bit(kernel):
    """Eager ops and the engine's layers share sculler.math.activation (same bits)."""
    from sculler.math import activation

    a = np.random.default_rng(3).uniform(0.1, 2.0, (3, 5)).astype(np.float32)
    dy = np.random.default_rng(4).standard_normal((3, 5)).astype(np.float32)
    x = paddle.to_tensor(a, stop_gradient=False)
    y = getattr(paddle, kernel)(x)
    y.backward(paddle.to_tensor(dy))
    want_y = getattr(activation, kernel)(a)
    want_dx = getattr(activation, kernel + "_grad")(a, want_y, dy)
    assert y.dtype == np.float32
    np.testing.assert_array_equal(y.numpy(), want_y)
    np.testing.assert_array_equal(x.grad.numpy(), want_dx)
