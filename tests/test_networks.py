"""v2 networks: layer names, structure and shapes of the image blocks and VGG nets."""

import numpy as np
import pytest

import sculler as paddle
from sculler.topology import Topology


@pytest.fixture(autouse=True)
def fresh_names():
    paddle.layer.reset_names()


def image(c, h, w=None):
    w = w or h
    return paddle.layer.data(name="img", type=paddle.data_type.dense_vector(c * h * w),
                             height=h, width=w)


def layer_types(out):
    return [lc.type for lc in Topology(out).proto().layers]


def test_simple_img_conv_pool_names_and_size():
    img = image(1, 8)
    out = paddle.networks.simple_img_conv_pool(input=img, filter_size=3, num_filters=8,
                                               pool_size=2, pool_stride=2, conv_padding=1)
    assert out.name == "__conv_pool_0___pool"
    assert out.parents[0].name == "__conv_pool_0___conv"
    assert out.size == 8 * 4 * 4
    named = paddle.networks.simple_img_conv_pool(input=img, filter_size=3, num_filters=2,
                                                 pool_size=2, name="cp",
                                                 act=paddle.activation.Tanh())
    assert named.name == "cp_pool" and named.parents[0].activation == "tanh"
    assert named.size == 2 * 5 * 5  # 8-3+1 = 6, pool 2 stride 1 -> 5


def test_img_conv_bn_pool_moves_activation_to_batch_norm():
    out = paddle.networks.img_conv_bn_pool(input=image(3, 6), filter_size=3, num_filters=4,
                                           pool_size=2, pool_stride=2, name="g")
    bn = out.parents[0]
    conv = bn.parents[0]
    assert (conv.name, bn.name, out.name) == ("g_conv", "g_bn", "g_pool")
    assert conv.activation == "linear" and bn.activation == "relu"
    assert out.size == 4 * 2 * 2


def test_img_conv_group_with_batchnorm_and_dropout():
    out = paddle.networks.img_conv_group(
        input=image(3, 8), conv_num_filter=[4, 6], pool_size=2, pool_stride=2,
        conv_with_batchnorm=True, conv_batchnorm_drop_rate=[0.3, 0])
    assert layer_types(out) == ["data", "exconv", "batch_norm", "exconv", "batch_norm", "pool"]
    model = Topology(out).proto()
    bns = [lc for lc in model.layers if lc.type == "batch_norm"]
    assert [lc.drop_rate for lc in bns] == [pytest.approx(0.3), 0.0]
    assert out.size == 6 * 4 * 4
    with pytest.raises(ValueError, match="conv_padding"):
        paddle.networks.img_conv_group(input=image(3, 8), conv_num_filter=[4, 6],
                                       pool_size=2, conv_padding=[1, 1, 1])
    with pytest.raises(TypeError, match="conv_num_filter"):
        paddle.networks.img_conv_group(input=image(3, 8), conv_num_filter=4, pool_size=2)


def test_small_vgg_structure_and_parameter_shapes():
    out = paddle.networks.small_vgg(image(3, 32), num_channels=3, num_classes=10)
    types = layer_types(out)
    assert types.count("exconv") == 10 and types.count("pool") == 5
    assert types.count("batch_norm") == 11 and out.size == 10 and out.activation == "softmax"
    params = paddle.parameters.create(out)
    assert params.get_shape("___conv_0__.w0") == (64, 27)
    assert params.get_shape("___conv_9__.w0") == (512, 512 * 9)
    assert params.get_shape("___fc_layer_0__.w0") == (512, 512)  # 512 x 1 x 1 after 5 pools


def test_vgg_16_network_runs_forward_on_a_small_image():
    paddle.init(seed=1)
    out = paddle.networks.vgg_16_network(image(1, 32), num_channels=1, num_classes=7)
    assert layer_types(out).count("exconv") == 13
    params = paddle.parameters.create(out)
    assert params.get_shape("___fc_layer_0__.w0") == (512, 4096)
    x = np.random.RandomState(0).rand(2, 32 * 32).astype(np.float32)
    probs = paddle.infer(output_layer=out, parameters=params, input=[(r,) for r in x])
    assert probs.shape == (2, 7)
    np.testing.assert_allclose(probs.sum(axis=1), 1.0, rtol=1e-5)


def test_img_separable_conv_is_a_depthwise_then_a_pointwise_convolution():
    import numpy as np

    import sculler as paddle

    paddle.layer.reset_names()
    img = paddle.layer.data(name="img", type=paddle.data_type.dense_vector(2 * 5 * 5),
                            height=5, width=5)
    out = paddle.networks.img_separable_conv(input=img, num_channels=2, num_out_channels=3,
                                             filter_size=3, padding=1, depth_multiplier=2,
                                             bias_attr=False, act=paddle.activation.Linear())
    assert (out.name, out.size) == ("__separable_conv_0___pointwise_conv", 3 * 5 * 5)
    params = paddle.parameters.create(out)
    dw = params.get("___separable_conv_0___depthwise_conv.w0")
    pw = params.get("___separable_conv_0___pointwise_conv.w0")
    assert dw.shape == (4, 9) and pw.shape == (3, 4)  # groups=2: one input channel a filter
    x = np.random.default_rng(0).normal(size=(2, 5, 5)).astype(np.float32)
    got = paddle.infer(output_layer=out, parameters=params, input=[(x.reshape(-1),)])
    xp = np.pad(x, ((0, 0), (1, 1), (1, 1)))
    depth = np.zeros((4, 5, 5))
    for f in range(4):
        k = dw[f].reshape(3, 3)
        for i in range(5):
            for j in range(5):
                depth[f, i, j] = (xp[f // 2, i:i + 3, j:j + 3] * k).sum()
    want = np.einsum("oc,chw->ohw", pw, depth)
    np.testing.assert_allclose(got.reshape(3, 5, 5), want, rtol=1e-4, atol=1e-5)
