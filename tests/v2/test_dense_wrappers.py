"""v2 wrappers of the mixed layer, projections and dense layers: names, sizes, parameter
shapes, the ``with mixed(...) as m: m += ...`` form, inference values, unsupported arguments."""

import numpy as np
import pytest

import sculler as paddle

L = paddle.layer


@pytest.fixture(autouse=True)
def fresh_names():
    L.reset_names()


def _data(name, dim, seq=False):
    t = paddle.data_type.dense_vector_sequence(dim) if seq else paddle.data_type.dense_vector(dim)
    return L.data(name=name, type=t)


def test_mixed_input_list_and_with_form_build_the_same_layer():
    x, y = _data("x", 4), _data("y", 3)
    m1 = L.mixed(size=2, input=[L.full_matrix_projection(x), L.full_matrix_projection(y)])
    with L.mixed(size=2, bias_attr=True) as m2:
        m2 += L.full_matrix_projection(input=x)
        m2 += L.trans_full_matrix_projection(input=y)
    assert (m1.name, m2.name, m1.size, m2.size) == ("__mixed_0__", "__mixed_1__", 2, 2)
    assert m1.activation == "linear"
    params = paddle.parameters.create([m1, m2])
    shapes = {n: params.get_shape(n) for n in params.names()}
    assert shapes == {"___mixed_0__.w0": (4, 2), "___mixed_0__.w1": (3, 2),
                      "___mixed_1__.w0": (4, 2), "___mixed_1__.w1": (2, 3),
                      "___mixed_1__.wbias": (1, 2)}


def test_mixed_size_from_projection_and_errors():
    x = _data("x", 4)
    assert L.mixed(input=L.full_matrix_projection(x, size=5)).size == 5
    assert L.mixed(input=[L.identity_projection(x), L.dotmul_projection(x)]).size == 4
    assert L.mixed(input=L.identity_projection(x, offset=1)).size == 3
    with pytest.raises(ValueError, match="give size"):
        L.mixed(input=L.full_matrix_projection(x))
    with pytest.raises(TypeError, match="projection or operator"):
        L.mixed(size=3, input=[x])
    with pytest.raises(ValueError, match="no projection"):
        with L.mixed(size=3):
            pass
    with pytest.raises(ValueError, match="conv input 0: transposed convolution .* empty"):
        img = L.data(name="tiny", type=paddle.data_type.dense_vector(4), height=2, width=2)
        L.mixed(input=L.conv_projection(img, filter_size=2, num_filters=1, padding=3,
                                        trans=True))


def test_conv_projection_and_operator_match_direct_convolution():
    """mixed(conv_projection) equals img-free direct convolution; conv_operator convolves
    each sample with its own filters."""
    from sculler.math.conv import conv2d_forward

    paddle.layer.reset_names()
    img = paddle.layer.data(name="img", type=paddle.data_type.dense_vector(2 * 5 * 4),
                            height=5, width=4)
    filt = _data("filt", 3 * 2 * 3 * 3)
    proj = L.mixed(input=L.conv_projection(img, filter_size=3, num_filters=3, num_channels=2,
                                           padding=1), bias_attr=False)
    op = L.mixed(input=L.conv_operator(img=img, filter=filt, filter_size=3, num_filters=3,
                                       num_channels=2))
    assert proj.size == 3 * 5 * 4 and op.size == 3 * 3 * 2
    params = paddle.parameters.create([proj, op])
    rng = np.random.RandomState(0)
    x = rng.randn(2, 40).astype(np.float32)
    f = rng.randn(2, 54).astype(np.float32)
    out_proj, out_op = paddle.infer(output_layer=[proj, op], parameters=params,
                                    input=[(x[n], f[n]) for n in range(2)],
                                    feeding={"img": 0, "filt": 1}, flatten_result=False)
    w = params.get(params.names()[0]).reshape(3, 2, 3, 3)
    np.testing.assert_allclose(out_proj, conv2d_forward(x.reshape(2, 2, 5, 4), w, 1, 1)
                               .reshape(2, -1), rtol=1e-5, atol=1e-5)
    for n in range(2):
        ref = conv2d_forward(x[n].reshape(1, 2, 5, 4), f[n].reshape(3, 2, 3, 3))
        np.testing.assert_allclose(out_op[n], ref.reshape(-1), rtol=1e-5, atol=1e-5)


def scatter_transposed(x, w, stride, pad):
    """Direct transposed convolution: ``y[f, o*s + k - p] += w[c, f, k] * x[c, o]``."""
    c, h, wd = x.shape
    _, f, fy, fx = w.shape
    full = np.zeros((f, (h - 1) * stride + fy, (wd - 1) * stride + fx))
    for ci in range(c):
        for oy in range(h):
            for ox in range(wd):
                full[:, oy * stride:oy * stride + fy, ox * stride:ox * stride + fx] += (
                    w[ci] * x[ci, oy, ox])
    return full[:, pad:full.shape[1] - pad, pad:full.shape[2] - pad]


def test_transposed_conv_projection_and_operator_scatter_each_pixel():
    """trans=True: PaddlePaddle's ConvTransProjection (filters (C, F, fy, fx), learned) and
    ConvTransOperator (each sample's own filters)."""
    img = paddle.layer.data(name="img", type=paddle.data_type.dense_vector(2 * 3 * 4),
                            height=3, width=4)
    filt = _data("filt", 2 * 3 * 3 * 3)
    proj = L.mixed(input=L.conv_projection(img, filter_size=3, num_filters=3, num_channels=2,
                                           stride=2, padding=1, trans=True), bias_attr=False)
    op = L.mixed(input=L.conv_operator(img=img, filter=filt, filter_size=3, num_filters=3,
                                       num_channels=2, stride=2, trans=True))
    assert proj.size == 3 * 5 * 7  # (3-1)*2+3-2 = 5, (4-1)*2+3-2 = 7
    assert op.size == 3 * 7 * 9  # no padding
    params = paddle.parameters.create([proj, op])
    assert params.get_shape(params.names()[0]) == (2, 3 * 3 * 3)
    rng = np.random.RandomState(1)
    x = rng.randn(2, 24).astype(np.float32)
    f = rng.randn(2, 54).astype(np.float32)
    out_proj, out_op = paddle.infer(output_layer=[proj, op], parameters=params,
                                    input=[(x[n], f[n]) for n in range(2)],
                                    feeding={"img": 0, "filt": 1}, flatten_result=False)
    w = params.get(params.names()[0]).reshape(2, 3, 3, 3)
    for n in range(2):
        image = x[n].reshape(2, 3, 4)
        np.testing.assert_allclose(out_proj[n], scatter_transposed(image, w, 2, 1).ravel(),
                                   rtol=1e-5, atol=1e-5)
        own = f[n].reshape(2, 3, 3, 3)
        np.testing.assert_allclose(out_op[n], scatter_transposed(image, own, 2, 0).ravel(),
                                   rtol=1e-5, atol=1e-5)


def test_slice_projection_takes_channel_ranges_of_a_convolution():
    img = paddle.layer.data(name="img", type=paddle.data_type.dense_vector(2 * 3 * 3),
                            height=3, width=3)
    conv = L.img_conv(input=img, filter_size=1, num_filters=5, bias_attr=False,
                      act=paddle.activation.Linear())
    sliced = L.mixed(input=L.slice_projection(conv, slices=[[0, 2], [3, 5]]))
    assert sliced.size == 4 * 9
    params = paddle.parameters.create(sliced)
    x = np.random.RandomState(2).randn(2, 18).astype(np.float32)
    feature, got = paddle.infer(output_layer=[conv, sliced], parameters=params,
                                input=[(r,) for r in x], flatten_result=False)
    channels = feature.reshape(2, 5, 9)
    want = np.concatenate([channels[:, 0:2], channels[:, 3:5]], axis=1).reshape(2, -1)
    np.testing.assert_array_equal(got, want)
    with pytest.raises(ValueError, match=r"slice \[4, 6\] reaches past the 5 channels"):
        L.slice_projection(conv, slices=[[4, 6]])
    with pytest.raises(ValueError, match="ascending, disjoint, non-empty"):
        L.mixed(input=L.slice_projection(conv, slices=[[2, 3], [1, 2]]))
    with pytest.raises(ValueError, match="input must be an image layer with channels"):
        L.slice_projection(_data("flat", 4), slices=[[0, 1]])


def test_mixed_inference_values():
    x = _data("x", 3)
    with L.mixed(size=3, act=paddle.activation.Tanh()) as m:
        m += L.identity_projection(x)
        m += L.dotmul_operator(a=x, b=x, scale=2.0)
        m += L.scaling_projection(x, param_attr=paddle.attr.Param(name="s"))
    params = paddle.parameters.create(m)
    params.set("s", np.array([[0.5]], dtype=np.float32))
    data = np.array([[0.1, -0.2, 0.3], [0.4, 0.0, -0.5]], dtype=np.float32)
    got = paddle.infer(output_layer=m, parameters=params, input=[(r,) for r in data])
    np.testing.assert_allclose(got, np.tanh(1.5 * data + 2.0 * data * data), rtol=1e-5)


def test_context_and_table_projection_sizes():
    words = L.data(name="w", type=paddle.data_type.integer_value_sequence(20))
    emb = L.mixed(size=8, input=L.table_projection(words))
    ctx = L.mixed(input=L.context_projection(emb, context_len=3, padding_attr=True))
    assert ctx.size == 24
    assert ctx.config.inputs[0].attrs == {"proj": "context", "context_len": 3,
                                          "context_start": -1, "trainable_padding": True}
    params = paddle.parameters.create(ctx)
    assert params.get_shape("___mixed_0__.w0") == (20, 8)
    assert params.get_shape("___mixed_1__.w0") == (2, 8)


def test_dense_wrappers_names_sizes_and_types():
    x, y, w = _data("x", 4), _data("y", 4), _data("w", 1)
    cases = [
        (L.scaling(input=x, weight=w), "__scaling_layer_0__", "scaling", 4),
        (L.slope_intercept(input=x, slope=2.0), "__slope_intercept_layer_0__",
         "slope_intercept", 4),
        (L.power(input=x, weight=w), "__power_layer_0__", "power", 4),
        (L.interpolation(input=[x, y], weight=w), "__interpolation_layer_0__",
         "interpolation", 4),
        (L.sum_to_one_norm(input=x), "__sum_to_one_norm_layer_0__", "sum_to_one_norm", 4),
        (L.row_l2_norm(input=x), "__row_l2_norm_layer_0__", "row_l2_norm", 4),
        (L.tensor(a=x, b=y, size=3), "__tensor_layer_0__", "tensor", 3),
        (L.trans(input=x), "__trans_layer_0__", "trans", 4),
        (L.resize(input=x, size=2), "__resize_0__", "resize", 2),
        (L.clip(input=x, min=-1, max=1), "__clip_0__", "clip", 4),
        (L.scale_shift(input=x), "__scale_shift_0__", "scale_shift", 4),
        (L.prelu(input=x, partial_sum=2), "__prelu_layer_0__", "prelu", 4),
        (L.max_id(input=x), "__maxid_layer_0__", "maxid", 4),  # Paddle: the input width
        (L.sampling_id(input=x), "__sampling_id_layer_0__", "sampling_id", 4),
        (L.out_prod(input1=x, input2=w), "__out_prod_layer_0__", "out_prod", 4),
        (L.linear_comb(weights=w, vectors=x, size=4), "__linear_comb_layer_0__", "convex_comb", 4),
        (L.selective_fc(input=x, size=5), "__selective_fc_layer_0__", "selective_fc", 5),
        (L.l2_distance(x=x, y=y), "__l2_distance_layer_0__", "l2_distance", 1),
        (L.dot_prod(input1=x, input2=y), "__dot_prod_layer_0__", "dot_prod", 1),
        (L.repeat(input=x, num_repeats=3), "__repeat_layer_0__", "featmap_expand", 12),
    ]
    for out, name, layer_type, size in cases:
        assert (out.name, out.layer_type, out.size) == (name, layer_type, size)
    params = paddle.parameters.create([c[0] for c in cases])
    assert params.get_shape("___tensor_layer_0__.w0") == (4, 12)
    assert params.get_shape("___tensor_layer_0__.wbias") == (1, 3)
    assert params.get_shape("___prelu_layer_0__.w0") == (1, 2)
    assert params.get_shape("___selective_fc_layer_0__.w0") == (5, 4)
    assert params.get_shape("___scale_shift_0__.w0") == (1, 1)


def test_dense_wrapper_inference_values():
    x, y = _data("x", 3), _data("y", 3)
    dist = L.l2_distance(x=x, y=y)
    norm = L.row_l2_norm(input=x)
    ids = L.max_id(input=x)
    params = paddle.parameters.create([dist, norm])
    a = np.array([[3.0, 4.0, 0.0], [1.0, 2.0, 2.0]], dtype=np.float32)
    b = np.zeros_like(a)
    got = paddle.infer(output_layer=[dist, norm], parameters=params,
                       input=[(p, q) for p, q in zip(a, b)], flatten_result=False)
    np.testing.assert_allclose(got[0][:, 0], [5.0, 3.0], rtol=1e-6)
    np.testing.assert_allclose(got[1], a / np.array([[5.0], [3.0]]), rtol=1e-6)
    picked = paddle.infer(output_layer=ids, parameters=params, input=[(p,) for p in a],
                          feeding={"x": 0}, field="id")
    np.testing.assert_array_equal(np.ravel(picked), [1, 1])


def test_unsupported_arguments_raise():
    x = _data("x", 4)
    with pytest.raises(NotImplementedError, match="pass_generation"):
        L.selective_fc(input=x, size=3, pass_generation=True)
    with pytest.raises(NotImplementedError, match="size"):
        L.identity_projection(x, size=3)
    with pytest.raises(ValueError, match="num_channels"):
        L.prelu(input=x, channel_shared=False)
    assert L.prelu(input=x, channel_shared=True).config.attrs["partial_sum"] == 4
