"""conv_shift: forward values against the formula, sequences, and its errors (the gradient
check is its row in the gradient-check table)."""

import numpy as np
import pytest

import sculler as paddle


def reference(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    m, n = a.shape[1], b.shape[1]
    out = np.zeros_like(a)
    for i in range(m):
        for j in range(n):
            out[:, i] += a[:, (i + j - (n - 1) // 2) % m] * b[:, j]
    return out


@pytest.mark.parametrize("m, n", [(5, 3), (4, 5), (6, 1)])
def test_forward_is_the_circular_convolution(m, n):
    rng = np.random.default_rng(m * 10 + n)
    a = paddle.layer.data(name="a", type=paddle.data_type.dense_vector(m))
    b = paddle.layer.data(name="b", type=paddle.data_type.dense_vector(n))
    y = paddle.layer.conv_shift(a=a, b=b)
    av = rng.normal(size=(3, m)).astype(np.float32)
    bv = rng.normal(size=(3, n)).astype(np.float32)
    out = paddle.infer(output_layer=y, parameters=paddle.parameters.create(y),
                       input=list(zip(av, bv)))
    np.testing.assert_allclose(out, reference(av, bv), rtol=1e-5, atol=1e-6)


def test_v1_helper_name_and_size():
    paddle.layer.reset_names()
    a = paddle.layer.data(name="a", type=paddle.data_type.dense_vector(8))
    b = paddle.layer.data(name="b", type=paddle.data_type.dense_vector(3))
    y = paddle.layer.conv_shift(a=a, b=b)
    assert (y.name, y.layer_type, y.size) == ("__conv_shift_layer_0__", "conv_shift", 8)
    from sculler.trainer_config_helpers import conv_shift_layer
    assert callable(conv_shift_layer)


def test_an_even_kernel_is_refused():
    a = paddle.layer.data(name="a", type=paddle.data_type.dense_vector(8))
    b = paddle.layer.data(name="b", type=paddle.data_type.dense_vector(4))
    with pytest.raises(ValueError, match="odd width, got 4"):
        paddle.layer.conv_shift(a=a, b=b)
