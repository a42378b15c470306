"""Tensor basics, creation, broadcasting gradients and the engine's graph semantics."""

import numpy as np
import pytest

import sculler as paddle


def _leaf(data):
    return paddle.to_tensor(np.asarray(data, dtype=np.float64), stop_gradient=False)


def test_creation_defaults_and_dtypes():
    assert paddle.to_tensor([1.0, 2.0]).dtype == np.float32
    assert paddle.to_tensor([1, 2]).dtype == np.int64
    assert paddle.to_tensor(np.zeros(2)).dtype == np.float64
    assert paddle.to_tensor([1, 2], dtype="float64").dtype == paddle.float64
    assert paddle.randn([2, 3]).dtype == np.float32
    assert paddle.zeros([2], dtype="int64").dtype == np.int64
    assert paddle.arange(5).dtype == np.int64 and paddle.arange(5).tolist() == list(range(5))
    assert paddle.full([2, 2], 7.0).numpy().tolist() == [[7.0, 7.0], [7.0, 7.0]]
    x = paddle.ones([2, 3])
    assert x.shape == [2, 3] and x.ndim == 2 and x.size == 6
    assert paddle.zeros_like(x).shape == [2, 3] and paddle.full_like(x, 2).numpy().sum() == 12
    assert paddle.to_tensor([1.0]).stop_gradient is True
    with pytest.raises(TypeError, match="not a known dtype"):
        paddle.zeros([2], dtype="floaty")
    with pytest.raises(TypeError, match="ragged"):
        paddle.to_tensor([[1, 2], [3]])


def test_seed_makes_random_tensors_reproducible():
    paddle.seed(7)
    a = paddle.randn([3]).numpy()
    b = paddle.rand([3]).numpy()
    paddle.seed(7)
    np.testing.assert_array_equal(paddle.randn([3]).numpy(), a)
    np.testing.assert_array_equal(paddle.rand([3]).numpy(), b)
    assert ((b >= 0) & (b < 1)).all()


def test_names_are_unique_strings():
    a, b = paddle.ones([1]), paddle.ones([1])
    assert isinstance(a.name, str) and a.name != b.name


def test_broadcast_gradients_reduce_to_input_shapes():
    x = _leaf(np.ones((2, 3)))
    b = _leaf([1.0, 2.0, 3.0])
    c = _leaf([[2.0], [3.0]])
    ((x * b + c) / 2).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), np.tile([0.5, 1.0, 1.5], (2, 1)))
    np.testing.assert_allclose(b.grad.numpy(), [1.0, 1.0, 1.0])
    np.testing.assert_allclose(c.grad.numpy(), [[1.5], [1.5]])


def test_reflected_ops_and_scalars_keep_dtype():
    x = paddle.to_tensor([1.0, 2.0], stop_gradient=False)
    y = 2.0 - x * 3 + 1 / x + 2 ** x
    assert y.dtype == np.float32
    y.sum().backward()
    v = np.array([1.0, 2.0])
    np.testing.assert_allclose(x.grad.numpy(), -3 - 1 / v**2 + np.log(2) * 2**v, rtol=1e-6)


def test_int_division_gives_default_float():
    q = paddle.to_tensor([1, 3]) / paddle.to_tensor([2, 2])
    assert q.dtype == np.float32 and q.tolist() == [0.5, 1.5]


def test_comparisons_return_bool_tensors_without_grad():
    x = _leaf([1.0, 2.0, 3.0])
    m = x > 1.5
    assert m.dtype == np.bool_ and m.stop_gradient and m.tolist() == [False, True, True]
    assert (x == 2.0).tolist() == [False, True, False]


def test_gradients_accumulate_and_clear():
    x = _leaf([1.0, 2.0])
    (x * x).sum().backward()
    (x * x).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [4.0, 8.0])
    x.clear_grad()
    assert x.grad is None


def test_fan_out_sums_all_paths():
    x = _leaf([3.0])
    h = x * 2
    (h * h + h).sum().backward()  # d/dx (4x^2 + 2x) = 8x + 2
    np.testing.assert_allclose(x.grad.numpy(), [26.0])


def test_graph_is_freed_unless_retained():
    x = _leaf([1.0, 2.0])
    y = (x * x).sum()
    y.backward(retain_graph=True)
    y.backward()
    np.testing.assert_allclose(x.grad.numpy(), [4.0, 8.0])
    with pytest.raises(RuntimeError, match="retain_graph=True"):
        y.backward()


def test_backward_with_grad_tensor_and_shape_check():
    x = _leaf([1.0, 2.0])
    y = x * 3
    y.backward(paddle.to_tensor([1.0, 10.0], dtype="float64"))
    np.testing.assert_allclose(x.grad.numpy(), [3.0, 30.0])
    with pytest.raises(ValueError, match="grad_tensor has shape"):
        (x * 3).backward(paddle.ones([3], dtype="float64"))


def test_no_grad_context_decorator_and_set_grad_enabled():
    x = _leaf([1.0])
    with paddle.no_grad():
        assert (x * 2).stop_gradient

    @paddle.no_grad()
    def f(t):
        return t * 2

    @paddle.no_grad
    def g(t):
        return t * 2

    assert f(x).stop_gradient and g(x).stop_gradient
    assert paddle.is_grad_enabled()
    with paddle.set_grad_enabled(False):
        assert not paddle.is_grad_enabled()
        assert (x + 1).stop_gradient
    assert paddle.is_grad_enabled() and not (x + 1).stop_gradient


def test_grad_function_leaves_dot_grad_untouched():
    x = _leaf([1.0, 2.0])
    w = _leaf([3.0, 4.0])
    h = x * w
    out = (h * h).sum()
    gx, gh = paddle.grad(out, [x, h], retain_graph=True)
    np.testing.assert_allclose(gx.numpy(), 2 * (x.numpy() * w.numpy()) * w.numpy())
    np.testing.assert_allclose(gh.numpy(), 2 * h.numpy())
    assert x.grad is None and w.grad is None
    unused = _leaf([0.0])
    with pytest.raises(ValueError, match="allow_unused"):
        paddle.grad(out, [unused], retain_graph=True)
    assert paddle.grad(out, [x, unused], allow_unused=True)[1] is None


def test_detach_item_clone_astype_and_indexing():
    x = _leaf([[1.0, 2.0], [3.0, 4.0]])
    d = x.detach()
    assert d.stop_gradient and np.shares_memory(d.numpy(), x.numpy())
    assert x[1, 0].item() == 3.0
    with pytest.raises(ValueError, match="one element"):
        x.item()
    assert x.astype("float32").dtype == np.float32
    assert x.cast("int64").stop_gradient
    x[0].sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [[1.0, 1.0], [0.0, 0.0]])
    with pytest.raises(RuntimeError, match="in-place"):
        x[0, 0] = 5.0
    c = paddle.zeros([2])
    c[1] = 3.0
    assert c.tolist() == [0.0, 3.0]


def test_tensor_methods_and_errors_name_the_problem():
    x = paddle.to_tensor(np.arange(6.0).reshape(2, 3))
    assert x.reshape([3, 2]).shape == [3, 2] and x.T.shape == [3, 2]
    assert x.sum(axis=1).tolist() == [3.0, 12.0] and x.mean().item() == 2.5
    assert x.max().item() == 5.0 and x.tanh().shape == [2, 3]
    with pytest.raises(ValueError, match="cannot reshape"):
        x.reshape([4, 2])
    with pytest.raises(ValueError, match="inner dimensions"):
        paddle.matmul(x, x)
    with pytest.raises(ValueError, match="not divisible"):
        paddle.split(x, 2, axis=1)
    with pytest.raises(ValueError, match="not a permutation"):
        paddle.transpose(x, [0, 0])
    assert "Tensor(shape=[2, 3]" in repr(x)


def test_autograd_backward_several_roots():
    x = _leaf([1.0, 2.0])
    a, b = x * 2, x * x
    paddle.autograd.backward([a, b], [paddle.ones([2], "float64"), None])
    np.testing.assert_allclose(x.grad.numpy(), 2 + 2 * x.numpy())
