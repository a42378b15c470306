"""v2 image layer wrappers: Paddle names and defaults, geometry, values through infer, errors."""

import numpy as np
import pytest

import sculler as paddle

L = paddle.layer


@pytest.fixture(autouse=True)
def fresh_names():
    paddle.layer.reset_names()
    paddle.init(seed=3)


def image(c=1, h=6, w=6, name="img"):
    return L.data(name=name, type=paddle.data_type.dense_vector(c * h * w), height=h, width=w)


def run(layer, x):
    """Forward ``x`` (N, C*H*W) through ``layer`` in test mode."""
    params = paddle.parameters.create(layer)
    return params, paddle.infer(output_layer=layer, parameters=params,
                                input=[(row,) for row in x])


def correlate(x, w, pad=0):
    """Direct NCHW cross-correlation reference (stride 1)."""
    x = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    f, _, kh, kw = w.shape
    oh, ow = x.shape[2] - kh + 1, x.shape[3] - kw + 1
    y = np.zeros((x.shape[0], f, oh, ow))
    for i in range(oh):
        for j in range(ow):
            y[:, :, i, j] = np.einsum("nckl,fckl->nf", x[:, :, i:i + kh, j:j + kw], w)
    return y


def test_img_conv_names_defaults_and_smart_init():
    img = image(2, 8, 8)
    c = L.img_conv(input=img, filter_size=3, num_filters=5, padding=1)
    assert (c.name, c.layer_type, c.activation, c.size) == ("__conv_0__", "exconv", "relu",
                                                            5 * 8 * 8)
    params = paddle.parameters.create(c)
    assert params.names() == ["___conv_0__.w0", "___conv_0__.wbias"]
    assert params.get_shape("___conv_0__.w0") == (5, 2 * 9)
    # Paddle's conv "smart" init: std sqrt(2 / (k^2 * C)) = 1/3 for k=3, C=2
    big = L.img_conv(input=image(2, 8, 8, "big"), filter_size=3, num_filters=400)
    w = paddle.parameters.create(big).get("___conv_1__.w0")
    assert abs(w.std() - 1 / 3) < 0.02 and abs(w.mean()) < 0.02
    fixed = L.img_conv(input=img, filter_size=3, num_filters=2,
                       param_attr=paddle.attr.Param(initial_std=0.0, initial_mean=0.5))
    assert np.all(paddle.parameters.create(fixed).get("___conv_2__.w0") == 0.5)


def test_img_conv_matches_direct_correlation():
    rng = np.random.RandomState(0)
    img = image(2, 5, 7)
    c = L.img_conv(input=img, filter_size=3, num_filters=3, padding=1,
                   act=paddle.activation.Linear())
    x = rng.randn(4, 2 * 5 * 7).astype(np.float32)
    params = paddle.parameters.create(c)
    w = rng.randn(3, 2 * 9).astype(np.float32)
    params.set("___conv_0__.w0", w)
    params.set("___conv_0__.wbias", np.array([[1.0, -2.0, 0.5]], np.float32))
    y = paddle.infer(output_layer=c, parameters=params, input=[(r,) for r in x])
    ref = correlate(x.reshape(4, 2, 5, 7), w.reshape(3, 2, 3, 3), pad=1)
    ref += np.array([1.0, -2.0, 0.5])[None, :, None, None]
    np.testing.assert_allclose(y, ref.reshape(4, -1), rtol=1e-4, atol=1e-4)


def test_img_conv_rectangular_filter_stride_and_trans():
    img = image(1, 9, 12)
    c = L.img_conv(input=img, filter_size=(5, 3), num_filters=2, stride=(2, 1))
    # x: 1 + (12 - 5) // 2 = 4 columns; y: 1 + (9 - 3) // 1 = 7 rows
    assert c.config.attrs["out_height"] == 7 and c.config.attrs["out_width"] == 4
    assert paddle.parameters.create(c).get_shape("___conv_0__.w0") == (2, 15)
    t = L.img_conv(input=c, filter_size=2, num_filters=3, stride=2, trans=True)
    assert t.layer_type == "exconvt"
    assert (t.config.attrs["out_height"], t.config.attrs["out_width"]) == (14, 8)
    with pytest.raises(ValueError, match="layer_type"):
        L.img_conv(input=c, filter_size=2, num_filters=3, trans=True, layer_type="exconv")
    with pytest.raises(TypeError, match="filter_size"):
        L.img_conv(input=c, filter_size="3", num_filters=3)


def test_num_channels_declares_geometry_of_an_unshaped_input():
    x = L.data(name="x", type=paddle.data_type.dense_vector(3 * 4 * 4))
    c = L.img_conv(input=x, filter_size=3, num_filters=2, num_channels=3)
    assert (c.config.attrs["out_height"], c.config.attrs["out_width"]) == (2, 2)
    assert paddle.parameters.create(c).get_shape("___conv_0__.w0") == (2, 27)


def test_img_pool_max_and_avg_values():
    x = np.arange(2 * 16, dtype=np.float32).reshape(1, 32)
    img = image(2, 4, 4)
    p = L.img_pool(input=img, pool_size=2, stride=2)
    a = L.img_pool(input=img, pool_size=2, stride=2, pool_type=paddle.pooling.Avg())
    assert (p.name, a.name, p.size) == ("__pool_0__", "__pool_1__", 8)
    assert p.config.attrs["pool_type"] == "max-projection"
    params, y = run(p, x)
    assert params.names() == []
    np.testing.assert_allclose(y[0, :4], [5, 7, 13, 15])
    _, ya = run(a, x)
    np.testing.assert_allclose(ya[0, 4:], [18.5, 20.5, 26.5, 28.5])
    # ceil mode keeps the last partial window: 5 -> 3
    assert L.img_pool(input=image(1, 5, 5, "i5"), pool_size=2, stride=2).size == 9
    assert L.img_pool(input=image(1, 5, 5, "i6"), pool_size=2, stride=2,
                      ceil_mode=False).size == 4
    with pytest.raises(NotImplementedError, match="pool_type"):
        L.img_pool(input=img, pool_size=2, pool_type=paddle.pooling.Sum())
    with pytest.raises(TypeError, match="pool_type"):
        L.img_pool(input=img, pool_size=2, pool_type="max")


def test_batch_norm_parameters_and_test_mode():
    img = image(3, 2, 2)
    bn = L.batch_norm(input=img, mean_var_names=["bn_mean", "bn_var"],
                      act=paddle.activation.Linear())
    assert (bn.name, bn.size, bn.layer_type) == ("__batch_norm_0__", 12, "batch_norm")
    assert L.batch_norm(input=img).activation == "relu"  # Paddle's default
    params = paddle.parameters.create(bn)
    assert sorted(params.names()) == sorted(["___batch_norm_0__.w0", "bn_mean", "bn_var",
                                             "___batch_norm_0__.wbias"])
    np.testing.assert_array_equal(params.get("___batch_norm_0__.w0"), np.ones((1, 3)))
    topo = paddle.topology.Topology(bn).proto()
    static = {p.name: p.is_static for p in topo.parameters}
    assert static["bn_mean"] and static["bn_var"] and not static["___batch_norm_0__.w0"]
    # test pass: moving statistics (mean m, var v) per channel
    params.set("bn_mean", np.array([[1.0, 2.0, 3.0]], np.float32))
    params.set("bn_var", np.array([[4.0, 1.0, 0.25]], np.float32))
    x = np.random.RandomState(1).randn(2, 12).astype(np.float32)
    y = paddle.infer(output_layer=bn, parameters=params, input=[(r,) for r in x])
    m = np.repeat([1.0, 2.0, 3.0], 4)
    v = np.repeat([4.0, 1.0, 0.25], 4)
    np.testing.assert_allclose(y, (x - m) / np.sqrt(v + 1e-5), rtol=1e-4, atol=1e-5)
    flat3d = L.batch_norm(input=img, img3D=True)  # no depth given: a volume of depth 1
    assert (flat3d.size, flat3d.config.attrs["out_depth"]) == (bn.size, 1)
    with pytest.raises(ValueError, match="mean_var_names"):
        L.batch_norm(input=img, mean_var_names="m")


def test_batch_norm_on_fc_output_normalises_columns():
    x = L.data(name="x", type=paddle.data_type.dense_vector(5))
    bn = L.batch_norm(input=x, act=paddle.activation.Linear())
    assert paddle.parameters.create(bn).get_shape("___batch_norm_0__.w0") == (1, 5)


def test_img_cmrnorm_and_maxout():
    img = image(4, 3, 3)
    n = L.img_cmrnorm(input=img, size=3, scale=0.3, power=0.5)
    assert (n.name, n.size, n.layer_type) == ("__crmnorm_0__", 36, "norm")
    x = np.random.RandomState(2).randn(1, 36).astype(np.float32)
    _, y = run(n, x)
    xi = x.reshape(4, 9)
    sq = np.array([(xi[max(c - 1, 0):c + 2] ** 2).sum(0) for c in range(4)])
    np.testing.assert_allclose(y.reshape(4, 9), xi * (1 + 0.3 / 3 * sq) ** -0.5, rtol=1e-4)
    m = L.maxout(input=img, groups=2)
    assert m.size == 18 and m.config.attrs["out_channels"] == 2
    _, ym = run(m, x)
    np.testing.assert_allclose(ym.reshape(2, 9), np.maximum(xi[0::2], xi[1::2]))
    with pytest.raises(ValueError, match="groups"):
        L.maxout(input=img, groups=3)


def test_spp_bilinear_block_expand_sizes():
    img = image(2, 5, 5)
    assert L.spp(input=img, pyramid_height=2).size == 2 * 5
    with pytest.raises(ValueError, match="pyramid_height"):
        L.spp(input=img)
    b = L.bilinear_interp(input=img, out_size_x=9, out_size_y=7)
    assert b.size == 2 * 7 * 9
    x = np.random.RandomState(3).randn(1, 50).astype(np.float32)
    _, y = run(b, x)
    y = y.reshape(2, 7, 9)
    xi = x.reshape(2, 5, 5)
    np.testing.assert_allclose(y[:, [0, -1]][:, :, [0, -1]], xi[:, [0, -1]][:, :, [0, -1]],
                               rtol=1e-5)  # aligned corners
    e = L.block_expand(input=img, block_x=2, block_y=2, stride_x=2, stride_y=2)
    assert e.size == 2 * 2 * 2
    with pytest.raises(ValueError, match="stride"):
        L.block_expand(input=img, block_x=2, block_y=2)  # Paddle's stride default 0


def test_pad_and_crop_values():
    img = image(1, 2, 3)
    p = L.pad(input=img, pad_c=[1, 0], pad_h=[0, 1], pad_w=[2, 0])
    assert p.size == 2 * 3 * 5
    x = np.arange(1, 7, dtype=np.float32).reshape(1, 6)
    _, y = run(p, x)
    y = y.reshape(2, 3, 5)
    assert y[0].sum() == 0 and y[1, 2].sum() == 0
    np.testing.assert_array_equal(y[1, :2, 2:], x.reshape(2, 3))
    c = L.crop(input=p, offset=[1, 0, 2], axis=1, shape=[1, 2, 3])
    _, yc = run(c, x)
    np.testing.assert_array_equal(yc.reshape(2, 3), x.reshape(2, 3))
    ref = image(1, 2, 2, "ref")
    c2 = L.crop(input=[img, ref], offset=[0, 1])
    assert c2.size == 4
    with pytest.raises(ValueError, match="shape"):
        L.crop(input=img, offset=[0, 0])
    with pytest.raises(ValueError, match="before, after"):
        L.pad(input=img, pad_h=3)


def test_cnn_trains_and_gradients_flow_to_conv_weights():
    rng = np.random.RandomState(0)
    img = image(1, 6, 6)
    lab = L.data(name="label", type=paddle.data_type.integer_value(2))
    h = L.img_conv(input=img, filter_size=3, num_filters=4, padding=1)
    h = L.batch_norm(input=h)
    h = L.img_pool(input=h, pool_size=2, stride=2)
    out = L.fc(input=h, size=2, act=paddle.activation.Softmax())
    cost = L.classification_cost(input=out, label=lab)
    params = paddle.parameters.create(cost)
    w0 = params.get("___conv_0__.w0").copy()
    # class 1: bright left half
    x = rng.rand(64, 36).astype(np.float32) * 0.1
    y = rng.randint(0, 2, 64)
    x.reshape(64, 6, 6)[y == 1, :, :3] += 1.0
    data = [(x[i], int(y[i])) for i in range(64)]
    tr = paddle.trainer.SGD(cost, params, paddle.optimizer.Momentum(learning_rate=0.01,
                                                                    momentum=0.9))
    tr.train(paddle.batch(lambda: iter(data), 16), num_passes=5, show_progress=False)
    assert not np.allclose(params.get("___conv_0__.w0"), w0)
    assert not np.allclose(params.get("___batch_norm_0__.w1"), 0)  # moving mean updated
    err = tr.test(paddle.batch(lambda: iter(data), 64)).metrics["classification_error_evaluator"]
    assert err < 0.1
