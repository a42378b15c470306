"""conv3d, deconv3d, pool3d and 3-D batch_norm: forward values against direct NumPy loops over
voxels written from the formulas, Paddle's weight layouts and sizes, and the errors (the
gradient checks are their rows in the gradient-check table)."""

import itertools

import numpy as np
import pytest

import sculler as paddle
from sculler import backend
from sculler.core.argument import Argument
from sculler.core.builder import ModelBuilder
from sculler.core.layer import PASS_TRAIN
from sculler.core.model_config import InputConfig, LayerConfig
from sculler.core.network import Network
from sculler.core.parameter import ParameterSet

STATIC = {"is_static": True, "initial_mean": 0.0, "initial_std": 0.0}

C, D, H, W = 2, 3, 4, 5


def volume_data(name="x", c=C):
    return paddle.layer.data(name=name, type=paddle.data_type.dense_vector(c * D * H * W),
                             depth=D, height=H, width=W)


def run(layer, x):
    params = paddle.parameters.create(layer)
    rng = np.random.default_rng(1)
    for key in params.keys():
        params.set(key, rng.normal(size=params.get_shape(key)).astype(np.float32))
    out = paddle.infer(output_layer=layer, parameters=params,
                       input=[(row.reshape(-1),) for row in x])
    return out, params


def conv3d_reference(x, w, b, stride, pad, groups):
    """``y[n, f, o] = sum_{c in group(f), k} w[f, c, k] * xpad[n, c, o*s + k] + b[f]``."""
    n, c = x.shape[:2]
    f, cg, *k = w.shape
    xpad = np.pad(x, [(0, 0), (0, 0)] + [(p, p) for p in pad])
    out = [(x.shape[2 + a] + 2 * pad[a] - k[a]) // stride[a] + 1 for a in range(3)]
    y = np.zeros((n, f, *out))
    for fi, oz, oy, ox in itertools.product(range(f), *(range(o) for o in out)):
        g = fi // (f // groups)
        patch = xpad[:, g * cg:(g + 1) * cg, oz * stride[0]:oz * stride[0] + k[0],
                     oy * stride[1]:oy * stride[1] + k[1], ox * stride[2]:ox * stride[2] + k[2]]
        y[:, fi, oz, oy, ox] = (patch * w[fi]).sum(axis=(1, 2, 3, 4)) + b[fi]
    return y


def test_conv3d_matches_the_voxel_loop_with_groups_strides_and_padding():
    x = np.random.default_rng(0).normal(size=(2, C, D, H, W)).astype(np.float32)
    layer = paddle.layer.img_conv3d(input=volume_data(), name="c3", filter_size=[2, 3, 2],
                                    num_filters=4,
                                    stride=[2, 1, 1], padding=[1, 0, 1], groups=2,
                                    act=paddle.activation.Linear())
    out, params = run(layer, x)
    w = params.get("_c3.w0")
    assert w.shape == (4, 1 * 2 * 3 * 2)  # (F, C/groups * kd*kh*kw), Paddle's layout
    want = conv3d_reference(x, w.reshape(4, 1, 2, 3, 2), params.get("_c3.wbias")[0],
                            (1, 1, 2), (1, 0, 1), 2)
    assert layer.size == want[0].size
    np.testing.assert_allclose(out, want.reshape(2, -1), rtol=1e-5, atol=1e-5)


def test_deconv3d_scatters_each_input_voxel_through_the_filter():
    """``y[n, f, i*s + k - p] += sum_c W[(f, k), c] * x[n, c, i]`` (Paddle's col2vol of W x)."""
    x = np.random.default_rng(2).normal(size=(2, C, D, H, W)).astype(np.float32)
    layer = paddle.layer.img_conv3d(input=volume_data(), name="d3", filter_size=2,
                                    num_filters=3, stride=2, padding=1, trans=True,
                                    act=paddle.activation.Linear())
    assert layer.config.type == "deconv3d"
    out, params = run(layer, x)
    w = params.get("_d3.w0")
    assert w.shape == (3 * 8, C)  # (F * kd*kh*kw, C/groups)
    wk = w.reshape(3, 2, 2, 2, C)
    full = [(n - 1) * 2 + 2 for n in (D, H, W)]
    y = np.zeros((2, 3, *full))
    for i in itertools.product(*(range(n) for n in (D, H, W))):
        for k in itertools.product(range(2), repeat=3):
            pos = tuple(i[a] * 2 + k[a] for a in range(3))
            y[(slice(None), slice(None)) + pos] += x[(slice(None), slice(None)) + i] @ \
                wk[(slice(None),) + k].T
    y = y[:, :, 1:-1, 1:-1, 1:-1] + params.get("_d3.wbias")[0][None, :, None, None,
                                                                          None]
    assert layer.size == y[0].size == 3 * 4 * 6 * 8
    np.testing.assert_allclose(out, y.reshape(2, -1), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("kind", ["max", "avg"])
def test_pool3d_matches_the_window_loop_in_ceil_mode(kind):
    x = np.random.default_rng(3).normal(size=(2, C, D, H, W)).astype(np.float32)
    pool_type = paddle.pooling.Max() if kind == "max" else paddle.pooling.Avg()
    layer = paddle.layer.img_pool3d(input=volume_data(), pool_size=[3, 2, 2], stride=2,
                                    padding=[1, 0, 0], pool_type=pool_type)
    out, _ = run(layer, x)
    k, s, p = (2, 2, 3), (2, 2, 2), (0, 0, 1)
    sizes = (D, H, W)
    outs = [1 + -(-(sizes[a] + 2 * p[a] - k[a]) // s[a]) for a in range(3)]
    assert outs == [2, 2, 3]
    want = np.zeros((2, C, *outs))
    for o in itertools.product(*(range(n) for n in outs)):
        lo = [max(o[a] * s[a] - p[a], 0) for a in range(3)]
        hi = [min(o[a] * s[a] - p[a] + k[a], sizes[a]) for a in range(3)]
        win = x[:, :, lo[0]:hi[0], lo[1]:hi[1], lo[2]:hi[2]]
        want[(slice(None), slice(None)) + o] = (win.max(axis=(2, 3, 4)) if kind == "max"
                                                else win.mean(axis=(2, 3, 4)))
    np.testing.assert_allclose(out, want.reshape(2, -1), rtol=1e-6, atol=1e-6)


def test_batch_norm_3d_normalises_each_channel_over_all_its_voxels():
    """Training pass: ``y = scale * (x - mean) / sqrt(var + eps) + bias`` with the statistics
    of each channel over ``N*D*H*W``; the moving ones move towards them."""
    b = ModelBuilder()
    b.add_layer(LayerConfig("vol", "data", size=C * D * H * W,
                            attrs={"depth": D, "height": H, "width": W}))
    b.add_layer(LayerConfig("out", "batch_norm", inputs=[InputConfig("vol") for _ in range(3)],
                            attrs={"img3D": True}),
                weight_attrs=[None, STATIC, STATIC])
    net = Network(b.build(["out"]), ParameterSet(seed=3))
    assert net.parameters["_out.w0"].value.shape == (1, C)
    with backend.default_dtype(np.float64):
        x = np.random.default_rng(4).normal(size=(3, C, D, H, W)) * 3 + 1
        out = net.forward({"vol": Argument(value=x.reshape(3, -1))}, PASS_TRAIN)[0].value
    mean = x.mean(axis=(0, 2, 3, 4), keepdims=True)
    var = x.var(axis=(0, 2, 3, 4), keepdims=True)
    scale, bias = (net.parameters[f"_out.{k}"].value.reshape(1, C, 1, 1, 1)
                   for k in ("w0", "wbias"))
    want = (x - mean) / np.sqrt(var + 1e-5) * scale + bias
    np.testing.assert_allclose(out, want.reshape(3, -1), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(net.parameters["_out.w1"].value.ravel(), 0.1 * mean.ravel(),
                               rtol=1e-6)


def test_a_next_3d_layer_reads_the_output_volume():
    conv = paddle.layer.img_conv3d(input=volume_data(), filter_size=2, num_filters=6)
    pool = paddle.layer.img_pool3d(input=conv, pool_size=2, stride=2)
    # conv: 6 x 2 x 3 x 4; pool (ceil mode): 6 x 1 x 2 x 2
    assert (pool.config.attrs["out_depth"], pool.config.attrs["out_height"],
            pool.config.attrs["out_width"], pool.size) == (1, 2, 2, 6 * 1 * 2 * 2)


def test_bad_settings_are_refused_by_name():
    with pytest.raises(ValueError, match=r"img_conv3d: filter_size must be an int or \[x, y, z\]"):
        paddle.layer.img_conv3d(input=volume_data(), filter_size=[2, 2], num_filters=2)
    with pytest.raises(ValueError, match="layer_type 'conv3d' does not match trans=True"):
        paddle.layer.img_conv3d(input=volume_data(), filter_size=2, num_filters=2, trans=True,
                                layer_type="conv3d")
    with pytest.raises(ValueError, match="groups=3 must divide the input channels 2"):
        paddle.layer.img_conv3d(input=volume_data(), filter_size=2, num_filters=3, groups=3)
    flat = paddle.layer.data(name="flat", type=paddle.data_type.dense_vector(10))
    with pytest.raises(ValueError, match="cannot tell the volume geometry of input 'flat'"):
        paddle.layer.img_pool3d(input=flat, pool_size=2)
    with pytest.raises(ValueError, match=r"not channels\*depth\*height\*width = 3\*3\*4\*5"):
        paddle.layer.img_pool3d(input=volume_data(), pool_size=2, num_channels=3)
    with pytest.raises(ValueError, match="smaller than the dilated filter"):
        paddle.layer.img_conv3d(input=volume_data(), filter_size=[2, 2, 4], num_filters=2)
