"""PyLayer: the seed page's examples verbatim and every rule Paddle 2.x enforces."""

import numpy as np
import pytest

import sculler as paddle
from sculler.autograd import PyLayer
from sculler.testing.pylayer_check import check_pylayer_grad


def _leaf(shape, seed=0):
    t = paddle.to_tensor(np.random.default_rng(seed).uniform(-1, 1, shape))
    t.stop_gradient = False
    return t


# --- the three examples of the paddle.autograd.PyLayer page (import changed) -------------
def test_seed_example_class_docstring():
    # Inherit from PyLayer
    class cus_tanh(PyLayer):
        @staticmethod
        def forward(ctx, x, func1, func2=paddle.square):
            # ctx is a context object that store some objects for backward.
            ctx.func = func2
            y = func1(x)
            # Pass tensors to backward.
            ctx.save_for_backward(y)
            return y

        @staticmethod
        # forward has only one output, so there is only one gradient in the input of backward.
        def backward(ctx, dy):
            # Get the tensors passed by forward.
            y, = ctx.saved_tensor()
            grad = dy * (1 - ctx.func(y))
            # forward has only one input, so only one gradient tensor is returned.
            return grad

    data = paddle.randn([2, 3], dtype="float64")
    data.stop_gradient = False
    z = cus_tanh.apply(data, func1=paddle.tanh)
    z.mean().backward()
    print(data.grad)
    want = (1 - np.tanh(data.numpy()) ** 2) / 6
    np.testing.assert_allclose(data.grad.numpy(), want, rtol=1e-12)


def _seed_forward_backward_example():
    class cus_tanh(PyLayer):
        @staticmethod
        def forward(ctx, x):
            y = paddle.tanh(x)
            # Pass tensors to backward.
            ctx.save_for_backward(y)
            return y

        @staticmethod
        def backward(ctx, dy):
            # Get the tensors passed by forward.
            y, = ctx.saved_tensor()
            grad = dy * (1 - paddle.square(y))
            return grad

    return cus_tanh


@pytest.mark.parametrize("page_section", ["forward", "backward"])
def test_seed_examples_forward_and_backward_sections(page_section):
    cus_tanh = _seed_forward_backward_example()
    data = paddle.randn([2, 3], dtype="float64")
    data.stop_gradient = False
    z = cus_tanh.apply(data)
    z.sum().backward()
    np.testing.assert_allclose(data.grad.numpy(), 1 - np.tanh(data.numpy()) ** 2, rtol=1e-12)
    check_pylayer_grad(cus_tanh, data)


def test_seed_example_apply_section_records_graph():
    class cus_tanh(PyLayer):
        @staticmethod
        def forward(ctx, x, func1, func2=paddle.square):
            ctx.func = func2
            y = func1(x)
            # Pass tensors to backward.
            ctx.save_for_backward(y)
            return y

        @staticmethod
        def backward(ctx, dy):
            # Get the tensors passed by forward.
            y, = ctx.saved_tensor()
            grad = dy * (1 - ctx.func(y))
            return grad

    data = paddle.randn([2, 3], dtype="float64")
    data.stop_gradient = False
    # run custom Layer.
    z = cus_tanh.apply(data, func1=paddle.tanh)
    assert z.stop_gradient is False and not z.is_leaf
    check_pylayer_grad(cus_tanh, data, func1=paddle.tanh)


# --- rules --------------------------------------------------------------------------
class TwoOut(PyLayer):
    """y1 = 2x, y2 = x^2, mixed with non-tensor values."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * 2, 1, paddle.square(x), None

    @staticmethod
    def backward(ctx, d1, d2):
        (x,) = ctx.saved_tensor()
        return d1 * 2 + d2 * 2 * x


def test_mixed_outputs_keep_structure_and_backward_gets_one_grad_per_tensor():
    x = _leaf([3])
    y1, one, y2, none = TwoOut.apply(x)
    assert one == 1 and none is None
    (y1.sum() + y2.sum()).backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 + 2 * x.numpy())
    check_pylayer_grad(TwoOut, x)


@pytest.mark.parametrize("ret", [None, (None,), (1, "a"), 3.0])
def test_forward_without_tensor_output_raises(ret):
    class NoTensor(PyLayer):
        @staticmethod
        def forward(ctx, x):
            return ret

        @staticmethod
        def backward(ctx, dy):
            return dy

    with pytest.raises(ValueError, match="NoTensor.forward returned"):
        NoTensor.apply(_leaf([2]))


def test_missing_forward_raises_not_implemented():
    class NoForward(PyLayer):
        @staticmethod
        def backward(ctx, dy):
            return dy

    with pytest.raises(NotImplementedError, match="NoForward"):
        NoForward.apply(_leaf([2]))


def _two_input_layer(result):
    class TwoIn(PyLayer):
        @staticmethod
        def forward(ctx, x, y):
            return x * y

        @staticmethod
        def backward(ctx, dz):
            return result(dz)

    return TwoIn


@pytest.mark.parametrize("result,what", [
    (lambda dz: dz, "too few"),
    (lambda dz: (dz, dz, dz), "too many"),
    (lambda dz: 1.0, "plain number"),
    (lambda dz: (dz, 2.0), "number inside"),
    (lambda dz: (dz, paddle.ones([5], dtype="float64")), "wrong shape"),
])
def test_backward_with_wrong_gradients_raises_value_error(result, what):
    layer = _two_input_layer(result)
    out = layer.apply(_leaf([2]), _leaf([2], 1))
    with pytest.raises(ValueError, match="TwoIn.backward"):
        out.sum().backward()


def test_none_gradient_leaves_input_grad_none():
    x, y = _leaf([2]), _leaf([2], 1)
    layer = _two_input_layer(lambda dz: (None, dz * 3))
    layer.apply(x, y).sum().backward()
    assert x.grad is None
    np.testing.assert_allclose(y.grad.numpy(), [3.0, 3.0])
    x2, y2 = _leaf([2]), _leaf([2], 1)
    _two_input_layer(lambda dz: (None, None)).apply(x2, y2).sum().backward()
    assert x2.grad is None and y2.grad is None


def test_backward_returning_none_altogether():
    """None counts as one gradient (as Paddle): fine for one input, an error for two."""

    class One(PyLayer):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, dy):
            return None

    x = _leaf([2])
    One.apply(x).sum().backward()
    assert x.grad is None
    with pytest.raises(ValueError, match="returned 1 gradients but forward received 2"):
        _two_input_layer(lambda dz: None).apply(_leaf([2]), _leaf([2], 1)).sum().backward()


def test_non_tensor_arguments_pass_through_positionally_and_by_keyword():
    class Affine(PyLayer):
        @staticmethod
        def forward(ctx, x, a, fn=None, b=0.0):
            ctx.a = a
            return fn(x) * a + b

        @staticmethod
        def backward(ctx, dy):
            return dy * ctx.a

    x = _leaf([3])
    out = Affine.apply(x, 3.0, fn=paddle.clone, b=1.0)
    np.testing.assert_allclose(out.numpy(), x.numpy() * 3 + 1)
    out.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [3.0] * 3)


def test_list_of_tensors_gets_one_gradient_per_tensor():
    class SumList(PyLayer):
        @staticmethod
        def forward(ctx, xs, w):
            ctx.n = len(xs)
            return paddle.stack(xs).sum(axis=0) * w

        @staticmethod
        def backward(ctx, dy):
            return [dy * 1.0, dy * 2.0], dy * 0.0 + 5.0

    a, b, w = _leaf([2]), _leaf([2], 1), _leaf([2], 2)
    SumList.apply([a, b], w).sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), [1.0, 1.0])
    np.testing.assert_allclose(b.grad.numpy(), [2.0, 2.0])
    np.testing.assert_allclose(w.grad.numpy(), [5.0, 5.0])

    class FlatList(SumList):
        @staticmethod
        def backward(ctx, dy):
            return dy, dy, dy  # Paddle wants a list in the list argument's position

    with pytest.raises(ValueError, match="returned 3 gradients but forward received 2"):
        FlatList.apply([_leaf([2]), _leaf([2], 1)], _leaf([2], 2)).sum().backward()


def test_backward_not_called_when_no_input_needs_gradient():
    calls = []

    class Tracked(PyLayer):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, dy):
            calls.append(1)
            return dy * 2

    x = paddle.to_tensor([1.0, 2.0])
    out = Tracked.apply(x)
    assert out.stop_gradient is True
    with pytest.warns(UserWarning, match="does nothing"):
        out.sum().backward()
    with paddle.no_grad():
        assert Tracked.apply(_leaf([2])).stop_gradient is True
    assert calls == []


def test_ops_inside_forward_are_not_recorded():
    seen = {}

    class Peek(PyLayer):
        @staticmethod
        def forward(ctx, x):
            y = x * 3
            seen["inner"] = (y.stop_gradient, paddle.is_grad_enabled())
            return y

        @staticmethod
        def backward(ctx, dy):
            seen["backward_grad_enabled"] = paddle.is_grad_enabled()
            return dy * 3

    Peek.apply(_leaf([2])).sum().backward()
    assert seen == {"inner": (True, False), "backward_grad_enabled": False}
    assert paddle.is_grad_enabled()


class ArgMaxAndValue(PyLayer):
    """Returns (index, value) with the index marked non-differentiable."""

    @staticmethod
    def forward(ctx, x):
        idx = paddle.argmax(x, axis=-1).astype("float64")
        val = x * 1.0
        ctx.mark_non_differentiable(idx)
        ctx.log = []
        ArgMaxAndValue.ctx = ctx
        return idx, val

    @staticmethod
    def backward(ctx, didx, dval):
        ctx.log.append(didx.numpy().copy())
        return dval


def test_non_differentiable_outputs_get_zero_gradient_and_alone_skip_backward():
    x = _leaf([2, 3])
    idx, val = ArgMaxAndValue.apply(x)
    assert idx.stop_gradient is True and val.stop_gradient is False
    val.sum().backward()
    np.testing.assert_array_equal(ArgMaxAndValue.ctx.log[0], np.zeros(2))
    x2 = _leaf([2, 3])
    idx2, _ = ArgMaxAndValue.apply(x2)
    with pytest.warns(UserWarning, match="does nothing"):
        idx2.sum().backward()
    assert ArgMaxAndValue.ctx.log == [] and x2.grad is None


@pytest.mark.parametrize("materialize", [True, False])
def test_unused_outputs_get_zeros_or_none(materialize):
    got = {}

    class Pair(PyLayer):
        @staticmethod
        def forward(ctx, x):
            ctx.set_materialize_grads(materialize)
            return x * 2, x * 3

        @staticmethod
        def backward(ctx, d1, d2):
            got["d2"] = d2
            return d1 * 2

    x = _leaf([3])
    a, _unused = Pair.apply(x)
    a.sum().backward()
    if materialize:
        np.testing.assert_array_equal(got["d2"].numpy(), np.zeros(3))
    else:
        assert got["d2"] is None
    np.testing.assert_allclose(x.grad.numpy(), [2.0] * 3)


def test_returning_own_leaf_input_raises():
    class Identity(PyLayer):
        @staticmethod
        def forward(ctx, x):
            return x

        @staticmethod
        def backward(ctx, dy):
            return dy

    with pytest.raises(ValueError, match="input leaf tensor"):
        Identity.apply(_leaf([2]))
    # a non-leaf input returned unchanged is wrapped in a new tensor and stays differentiable
    x = _leaf([2])
    h = x * 2
    out = Identity.apply(h)
    assert out is not h
    out.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [2.0, 2.0])


def test_mark_not_inplace_and_context_attributes():
    class Keep(PyLayer):
        @staticmethod
        def forward(ctx, x):
            ctx.mark_not_inplace(x)
            ctx.anything = {"k": 1}
            return x * 1.0

        @staticmethod
        def backward(ctx, dy):
            assert ctx.anything == {"k": 1}
            return dy

    x = _leaf([2])
    Keep.apply(x).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [1.0, 1.0])


def test_pylayer_composes_with_ops_and_accumulates():
    Tanh = _seed_forward_backward_example()
    x = _leaf([2, 2])
    for _ in range(2):
        (Tanh.apply(x * 2) * 3).sum().backward()
    want = 2 * 3 * 2 * (1 - np.tanh(2 * x.numpy()) ** 2)
    np.testing.assert_allclose(x.grad.numpy(), want, rtol=1e-12)


def test_check_pylayer_grad_is_exported_and_reports_like_check_layer_grad():
    from sculler.testing import GradCheckReport, GradientCheckError
    from sculler.testing import check_pylayer_grad as exported
    from sculler.testing.pylayer_check import TanhPyLayer

    x, frozen = _leaf([2, 3]), paddle.to_tensor(np.ones(3))
    report = exported(TanhPyLayer, x)
    assert isinstance(report, GradCheckReport) and report.layer_type == "TanhPyLayer"
    assert list(report.errors) == ["input 0"] and report.max_error < 1e-6

    class Doubling(PyLayer):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, dy):
            return dy * 3

    with pytest.raises(GradientCheckError, match=r"Doubling: gradient of input 0"):
        exported(Doubling, x)
    with pytest.raises(ValueError, match=r"no input has stop_gradient=False"):
        exported(TanhPyLayer, frozen)


def test_instantiating_a_pylayer_points_to_apply():
    class Square(PyLayer):
        @staticmethod
        def forward(ctx, x):
            return x * x

    with pytest.raises(TypeError, match=r"call Square\.apply\(\.\.\.\) rather than Square"):
        Square(_leaf([2]))
