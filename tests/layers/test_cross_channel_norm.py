"""cross_channel_norm: forward values against the formula, Paddle's names and parameter
shape, and the CMR norm still selected by its norm_type (gradients: the table's rows)."""

import numpy as np

import sculler as paddle


def test_each_position_is_normalised_across_channels_and_scaled():
    rng = np.random.default_rng(0)
    paddle.layer.reset_names()
    img = paddle.layer.data(name="img", type=paddle.data_type.dense_vector(3 * 2 * 4),
                            height=2, width=4)
    y = paddle.layer.cross_channel_norm(input=img)
    assert (y.name, y.layer_type, y.size) == ("__cross_channel_norm_0__", "norm", 24)
    params = paddle.parameters.create(y)
    assert params.names() == ["___cross_channel_norm_0__.w0"]
    assert params.get_shape("___cross_channel_norm_0__.w0") == (3, 1)
    np.testing.assert_array_equal(params.get("___cross_channel_norm_0__.w0"), 1.0)
    scale = np.array([[20.0], [1.0], [0.5]], np.float32)
    params.set("___cross_channel_norm_0__.w0", scale)
    xs = rng.normal(size=(2, 24)).astype(np.float32)
    out = paddle.infer(output_layer=y, parameters=params, input=[(r,) for r in xs])
    x4 = xs.reshape(2, 3, 8)
    want = scale[None] * x4 / np.sqrt((x4 ** 2).sum(axis=1, keepdims=True) + 1e-6)
    np.testing.assert_allclose(out.reshape(2, 3, 8), want, rtol=1e-5)


def test_cmr_norm_is_still_the_default_norm_type():
    img = paddle.layer.data(name="img", type=paddle.data_type.dense_vector(3 * 2 * 2),
                            height=2, width=2)
    y = paddle.layer.img_cmrnorm(input=img, size=3)
    params = paddle.parameters.create(y)
    assert params.names() == []
    out = paddle.infer(output_layer=y, parameters=params, input=[(np.ones(12, np.float32),)])
    assert out.shape == (1, 12) and np.all(out < 1.0)
