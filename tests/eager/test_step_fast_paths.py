"""Fast paths of an eager training step give the values of the general code they bypass:
cross entropy on narrow C-ordered rows (row max by argmax, row sums as a GEMV, label
entries by flat offsets) against the general path and a float64 formula."""

import numpy as np
import pytest

import sculler as paddle
import sculler.nn.functional as F


def _reference(x, labels, ignore_index, reduction):
    x = x.astype(np.float64)
    keep = labels != ignore_index
    safe = np.where(keep, labels, 0)
    logp = x - x.max(1, keepdims=True)
    logp -= np.log(np.exp(logp).sum(1, keepdims=True))
    loss = -logp[np.arange(len(x)), safe] * keep
    grad = np.exp(logp)
    grad[np.arange(len(x)), safe] -= 1
    grad *= keep[:, None]
    if reduction == "mean":
        return loss.sum() / max(keep.sum(), 1), grad / max(keep.sum(), 1)
    if reduction == "sum":
        return loss.sum(), grad
    return loss, grad


def _loss_and_grad(x_array, labels, reduction, ignore_index=-100, contiguous=True):
    # a transposed copy read through a transposed view is not C-contiguous: general path
    arr = x_array if contiguous else np.ascontiguousarray(x_array.T).T
    x = paddle.to_tensor(arr)
    x.stop_gradient = False
    loss = F.cross_entropy(x, paddle.to_tensor(labels), reduction=reduction,
                           ignore_index=ignore_index)
    loss.backward(paddle.ones(loss.shape, dtype=str(x_array.dtype)))
    return loss.numpy(), x.grad.numpy()


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("ignore_index", [-100, 2])
def test_cross_entropy_fast_path_equals_general_path_and_formula(reduction, ignore_index):
    rng = np.random.default_rng(3)
    x = (rng.standard_normal((9, 5)) * 4).astype(np.float32)
    labels = rng.integers(0, 5, 9)
    labels[[1, 4]] = 2
    fast = _loss_and_grad(x, labels, reduction, ignore_index)
    general = _loss_and_grad(x, labels, reduction, ignore_index, contiguous=False)
    want = _reference(x, labels, ignore_index, reduction)
    for got_fast, got_general, expected in zip(fast, general, want):
        np.testing.assert_allclose(got_fast, got_general, rtol=2e-6, atol=1e-6)
        np.testing.assert_allclose(got_fast, expected, rtol=1e-5, atol=1e-6)


def test_cross_entropy_fast_path_keeps_nan_rows_and_label_shapes():
    x = np.array([[0.0, 1.0, 2.0], [np.nan, 0.0, 1.0], [5.0, 5.0, 5.0]], np.float32)
    labels = np.array([[2], [0], [1]])  # [N, 1] labels: 'none' keeps that shape
    loss, grad = _loss_and_grad(x, labels, "none")
    assert loss.shape == (3, 1)
    assert np.isnan(loss[1, 0]) and np.isnan(grad[1]).all()
    np.testing.assert_allclose(loss[[0, 2], 0], [np.log(1 + np.exp(-1) + np.exp(-2)),
                                                 np.log(3)], rtol=1e-6)


@pytest.mark.parametrize("bad", [-1, 3, -100])
def test_cross_entropy_out_of_range_labels_still_raise(bad):
    x = paddle.to_tensor(np.zeros((2, 3), np.float32))
    with pytest.raises(ValueError, match=r"labels must lie in \[0, 3\)"):
        F.cross_entropy(x, paddle.to_tensor(np.array([0, bad])), ignore_index=7)


def test_cross_entropy_int32_labels_take_the_general_path_with_equal_values():
    rng = np.random.default_rng(4)
    x = rng.standard_normal((6, 4)).astype(np.float32)
    labels = rng.integers(0, 4, 6)
    for a, b in zip(_loss_and_grad(x, labels, "sum"),
                    _loss_and_grad(x, labels.astype(np.int32), "sum")):
        np.testing.assert_allclose(a, b, rtol=2e-6, atol=1e-6)
