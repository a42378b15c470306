"""Image layers against direct-loop references, geometry propagation and error messages."""

import numpy as np
import pytest

from sculler import backend
from sculler.core.argument import Argument
from sculler.core.builder import ModelBuilder
from sculler.core.layer import PASS_GC, PASS_TEST, PASS_TRAIN
from sculler.core.model_config import InputConfig, LayerConfig
from sculler.core.network import Network
from sculler.core.parameter import ParameterSet

STATIC = {"is_static": True, "initial_mean": 0.0, "initial_std": 0.0}


@pytest.fixture(autouse=True)
def float64():
    with backend.default_dtype(np.float64):
        yield


def build(c, h, w, layer_type, attrs, weight_attrs=None, bias=None, n_inputs=1, extra=()):
    """data (C*H*W, image-shaped) -> the layer under test named 'out'."""
    b = ModelBuilder()
    b.add_layer(LayerConfig("img", "data", size=c * h * w, attrs={"height": h, "width": w}))
    for lc in extra:
        b.add_layer(lc)
    inputs = [InputConfig("img") for _ in range(n_inputs)]
    b.add_layer(LayerConfig("out", layer_type, inputs=inputs, attrs=dict(attrs)),
                weight_attrs=weight_attrs, bias_attr=bias)
    net = Network(b.build(["out"]), ParameterSet(seed=3))
    return net


def forward(net, x, pass_type=PASS_TEST):
    return net.forward({"img": Argument(value=x.reshape(x.shape[0], -1))}, pass_type)[0]


def param(net, suffix):
    return net.parameters[f"_out.{suffix}"].value


# ---------------- direct-loop references ----------------
def ref_conv(x, w, b, stride, pad, dil, groups):
    n, c, h, wd = x.shape
    f, cg, kh, kw = w.shape
    xp = np.zeros((n, c, h + 2 * pad[0], wd + 2 * pad[1]))
    xp[:, :, pad[0]:pad[0] + h, pad[1]:pad[1] + wd] = x
    oh = (h + 2 * pad[0] - (kh - 1) * dil[0] - 1) // stride[0] + 1
    ow = (wd + 2 * pad[1] - (kw - 1) * dil[1] - 1) // stride[1] + 1
    y = np.zeros((n, f, oh, ow))
    fg = f // groups
    for fi in range(f):
        g = fi // fg
        for oy in range(oh):
            for ox in range(ow):
                for ky in range(kh):
                    for kx in range(kw):
                        iy, ix = oy * stride[0] + ky * dil[0], ox * stride[1] + kx * dil[1]
                        y[:, fi, oy, ox] += xp[:, g * cg:(g + 1) * cg, iy, ix] @ w[fi, :, ky, kx]
    return y + b.reshape(1, -1, 1, 1)


def ref_convt(x, w, b, stride, pad):
    n, c, h, wd = x.shape
    _, f, kh, kw = w.shape
    hh, ww = (h - 1) * stride[0] + kh, (wd - 1) * stride[1] + kw
    y = np.zeros((n, f, hh, ww))
    for iy in range(h):
        for ix in range(wd):
            for ky in range(kh):
                for kx in range(kw):
                    oy, ox = iy * stride[0] + ky, ix * stride[1] + kx
                    y[:, :, oy, ox] += x[:, :, iy, ix] @ w[:, :, ky, kx]
    y = y[:, :, pad[0]:hh - pad[0], pad[1]:ww - pad[1]]
    return y + b.reshape(1, -1, 1, 1)


def ref_pool(x, k, s, p, kind, ceil=True):
    n, c, h, w = x.shape
    rnd = np.ceil if ceil else np.floor
    oh = int(rnd((h + 2 * p[0] - k[0]) / s[0])) + 1
    ow = int(rnd((w + 2 * p[1] - k[1]) / s[1])) + 1
    y = np.zeros((n, c, oh, ow))
    for oy in range(oh):
        for ox in range(ow):
            y0, x0 = oy * s[0] - p[0], ox * s[1] - p[1]
            win = x[:, :, max(y0, 0):min(y0 + k[0], h), max(x0, 0):min(x0 + k[1], w)]
            y[:, :, oy, ox] = win.max(axis=(2, 3)) if kind == "max" else win.mean(axis=(2, 3))
    return y


def ref_cmrnorm(x, size, scale, power):
    c = x.shape[1]
    y = np.empty_like(x)
    lo = (size - 1) // 2
    for ch in range(c):
        a, b = max(ch - lo, 0), min(ch - lo + size, c)
        y[:, ch] = x[:, ch] * (1 + scale / size * (x[:, a:b] ** 2).sum(axis=1)) ** (-power)
    return y


# ---------------- forward vs reference ----------------
@pytest.mark.parametrize("groups,stride,pad,dil", [(1, (1, 1), (0, 0), (1, 1)),
                                                   (2, (2, 1), (1, 2), (1, 2)),
                                                   (1, (3, 2), (2, 1), (2, 1))])
def test_conv_matches_loop(groups, stride, pad, dil):
    rng = np.random.RandomState(0)
    c, h, w, f = 4, 9, 7, 6
    attrs = dict(num_filters=f, filter_size=3, filter_size_y=2, stride=stride[1],
                 stride_y=stride[0], padding=pad[1], padding_y=pad[0], dilation=dil[1],
                 dilation_y=dil[0], groups=groups)
    net = build(c, h, w, "exconv", attrs, bias={"initial_std": 1.0})
    x = rng.randn(3, c, h, w)
    out = forward(net, x).value
    wt = param(net, "w0").reshape(f, c // groups, 2, 3)
    ref = ref_conv(x, wt, param(net, "wbias"), stride, pad, dil, groups)
    assert param(net, "w0").shape == (f, c // groups * 6)
    assert out.shape == (3, ref[0].size)
    np.testing.assert_allclose(out, ref.reshape(3, -1), rtol=1e-5, atol=1e-8)
    lc = net.get_layer("out").config
    geom = (lc.attrs["out_channels"], lc.attrs["out_height"], lc.attrs["out_width"])
    assert geom == ref.shape[1:]


@pytest.mark.parametrize("stride,pad", [((1, 1), (0, 0)), ((2, 3), (1, 0))])
def test_convt_matches_loop(stride, pad):
    rng = np.random.RandomState(1)
    c, h, w, f = 3, 5, 4, 2
    attrs = dict(num_filters=f, filter_size=3, filter_size_y=4, stride=stride[1],
                 stride_y=stride[0], padding=pad[1], padding_y=pad[0])
    net = build(c, h, w, "exconvt", attrs, bias={"initial_std": 1.0})
    x = rng.randn(2, c, h, w)
    out = forward(net, x).value
    assert param(net, "w0").shape == (c, f * 12)
    ref = ref_convt(x, param(net, "w0").reshape(c, f, 4, 3), param(net, "wbias"), stride, pad)
    np.testing.assert_allclose(out, ref.reshape(2, -1), rtol=1e-5, atol=1e-8)


@pytest.mark.parametrize("kind", ["max", "avg"])
@pytest.mark.parametrize("k,s,p,ceil", [((3, 3), (2, 2), (0, 0), True),
                                        ((2, 3), (1, 2), (1, 1), True),
                                        ((3, 2), (2, 3), (1, 0), False)])
def test_pool_matches_loop(kind, k, s, p, ceil):
    rng = np.random.RandomState(2)
    c, h, w = 3, 7, 9
    attrs = dict(pool_type=f"{kind}-projection", pool_size=k[1], pool_size_y=k[0], stride=s[1],
                 stride_y=s[0], padding=p[1], padding_y=p[0], ceil_mode=ceil)
    net = build(c, h, w, "pool", attrs)
    x = rng.randn(2, c, h, w)
    ref = ref_pool(x, k, s, p, kind, ceil)
    np.testing.assert_allclose(forward(net, x).value, ref.reshape(2, -1), rtol=1e-5, atol=1e-8)


def bn_net(c, h, w, attrs=None):
    return build(c, h, w, "batch_norm", attrs or {}, weight_attrs=[None, STATIC, STATIC],
                 n_inputs=3)


def test_batch_norm_train_test_and_moving_stats():
    rng = np.random.RandomState(3)
    c, h, w = 3, 5, 3
    net = bn_net(c, h, w, {"moving_average_fraction": 0.8})
    x = rng.randn(4, c, h, w) * 2 + 1
    scale, bias = param(net, "w0").ravel(), param(net, "wbias").ravel()
    mean, var = x.mean(axis=(0, 2, 3)), x.var(axis=(0, 2, 3))
    want = (x - mean[:, None, None]) / np.sqrt(var[:, None, None] + 1e-5)
    want = want * scale[:, None, None] + bias[:, None, None]
    out = forward(net, x, PASS_GC).value
    np.testing.assert_allclose(out, want.reshape(4, -1), rtol=1e-5, atol=1e-8)
    assert not param(net, "w1").any() and not param(net, "w2").any()  # GC leaves them alone
    forward(net, x, PASS_TRAIN)
    np.testing.assert_allclose(param(net, "w1").ravel(), 0.2 * mean, rtol=1e-10)
    np.testing.assert_allclose(param(net, "w2").ravel(), 0.2 * var, rtol=1e-10)
    mm, mv = param(net, "w1").ravel().copy(), param(net, "w2").ravel().copy()
    out = forward(net, x, PASS_TEST).value.reshape(x.shape)
    want = (x - mm[:, None, None]) / np.sqrt(mv[:, None, None] + 1e-5)
    want = want * scale[:, None, None] + bias[:, None, None]
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-8)
    np.testing.assert_array_equal(param(net, "w1").ravel(), mm)  # test pass: untouched


def test_batch_norm_use_global_stats_false_uses_batch_stats_in_test():
    x = np.random.RandomState(4).randn(5, 2, 2, 2)
    net = bn_net(2, 2, 2, {"use_global_stats": False})
    out = forward(net, x, PASS_TEST).value.reshape(x.shape)
    scale = param(net, "w0").ravel()
    np.testing.assert_allclose(out.mean(axis=(0, 2, 3)), param(net, "wbias").ravel(), atol=1e-8)
    np.testing.assert_allclose(out.std(axis=(0, 2, 3)), np.abs(scale), rtol=1e-4)


def test_batch_norm_requires_static_moving_stats():
    trainable = {"is_static": False}
    with pytest.raises(ValueError, match="moving mean.*must be static"):
        build(2, 2, 2, "batch_norm", {}, weight_attrs=[None, trainable, trainable], n_inputs=3)


@pytest.mark.parametrize("size,scale,power", [(5, 0.0128, 0.75), (2, 1.5, 0.5), (4, 0.3, 1.0)])
def test_cmrnorm_matches_loop(size, scale, power):
    x = np.random.RandomState(5).randn(2, 7, 3, 5)
    net = build(7, 3, 5, "norm", dict(norm_type="cmrnorm-projection", norm_size=size,
                                       scale=scale, power=power))
    ref = ref_cmrnorm(x, size, scale, power)
    np.testing.assert_allclose(forward(net, x).value, ref.reshape(2, -1), rtol=1e-5, atol=1e-8)


# ---------------- other layers, geometry and errors ----------------
def test_conv_then_pool_reads_geometry_from_the_conv():
    b = ModelBuilder()
    b.add_layer(LayerConfig("img", "data", size=2 * 11 * 9, attrs={"height": 11, "width": 9}))
    b.add_layer(LayerConfig("c", "exconv", inputs=[InputConfig("img")],
                            attrs=dict(num_filters=4, filter_size=3, padding=1)))
    b.add_layer(LayerConfig("p", "pool", inputs=[InputConfig("c")],
                            attrs=dict(pool_size=2, stride=2)))
    model = b.build(["p"])
    p = [lc for lc in model.layers if lc.name == "p"][0]
    assert (p.attrs["out_channels"], p.attrs["out_height"], p.attrs["out_width"]) == (4, 6, 5)
    assert p.size == 4 * 6 * 5


def test_square_image_from_channels_only():
    net = build(3, 4, 4, "maxout", {"groups": 3})
    net2 = Network(net.config)  # geometry came from the data layer's height/width
    assert net2.get_layer("out").geom == [(3, 4, 4)]
    b = ModelBuilder()
    b.add_layer(LayerConfig("img", "data", size=48))
    b.add_layer(LayerConfig("m", "maxout", inputs=[InputConfig("img")],
                            attrs={"channels": 3, "groups": 3}))
    assert b.build(["m"]).layers[-1].attrs["out_height"] == 4


def test_shape_errors_name_the_layer_and_sizes():
    b = ModelBuilder()
    b.add_layer(LayerConfig("img", "data", size=50))
    b.add_layer(LayerConfig("c", "exconv", inputs=[InputConfig("img")],
                            attrs=dict(channels=3, height=4, width=4, num_filters=2,
                                       filter_size=3)))
    with pytest.raises(ValueError, match=r"'c'.*size 50.*3\*4\*4"):
        b.build(["c"])
    with pytest.raises(ValueError, match="groups=3 must divide"):
        build(4, 5, 5, "exconv", dict(num_filters=6, filter_size=3, groups=3))
    with pytest.raises(ValueError, match="'out' .*image size 5"):
        build(1, 5, 5, "exconv", dict(num_filters=1, filter_size=7))
    with pytest.raises(ValueError, match="pool_type"):
        build(1, 4, 4, "pool", dict(pool_size=2, pool_type="median"))
    with pytest.raises(ValueError, match="norm_type"):
        build(2, 2, 2, "norm", dict(norm_type="rnorm", norm_size=3))


def test_maxout_values():
    x = np.random.RandomState(6).randn(2, 6, 2, 3)
    out = forward(build(6, 2, 3, "maxout", {"groups": 2}), x).value
    np.testing.assert_array_equal(out.reshape(2, 3, 2, 3), x.reshape(2, 3, 2, 2, 3).max(axis=2))


def test_spp_sizes_and_first_level_is_global_pool():
    x = np.random.RandomState(7).randn(2, 3, 8, 6)
    net = build(3, 8, 6, "spp", {"pyramid_height": 3, "pool_type": "max-projection"})
    out = forward(net, x).value
    assert out.shape == (2, 3 * (1 + 4 + 16))
    np.testing.assert_array_equal(out[:, :3], x.max(axis=(2, 3)))
    np.testing.assert_array_equal(out[:, 3:15].reshape(2, 3, 2, 2)[:, :, 0, 0],
                                  x[:, :, :4, :3].max(axis=(2, 3)))


def test_bilinear_interp_aligns_corners_and_is_linear():
    x = np.random.RandomState(8).randn(1, 2, 3, 4)
    out = forward(build(2, 3, 4, "bilinear_interp", {"out_size_x": 7, "out_size_y": 5}),
                  x).value.reshape(1, 2, 5, 7)
    np.testing.assert_allclose(out[:, :, ::2, ::2], x, rtol=1e-12)
    np.testing.assert_allclose(out[:, :, 1, 0], (x[:, :, 0, 0] + x[:, :, 1, 0]) / 2)


def test_blockexpand_makes_one_sequence_per_image():
    x = np.arange(2 * 1 * 3 * 4, dtype=float).reshape(2, 1, 3, 4)
    net = build(1, 3, 4, "blockexpand", dict(block_x=2, block_y=2, stride_x=2, stride_y=2))
    out = forward(net, x)
    assert out.value.shape == (2 * 2 * 2, 4)  # ceil: 2x2 blocks per image, the last padded
    np.testing.assert_array_equal(out.seq_starts, [0, 4, 8])
    np.testing.assert_array_equal(out.value[0], [0, 1, 4, 5])
    np.testing.assert_array_equal(out.value[3], [10, 11, 0, 0])


def test_pad_and_crop():
    x = np.random.RandomState(9).randn(2, 2, 3, 3)
    y = forward(build(2, 3, 3, "pad", dict(pad_c=[1, 0], pad_h=[0, 1], pad_w=[2, 0])), x).value
    y = y.reshape(2, 3, 4, 5)
    np.testing.assert_array_equal(y[:, 1:, :3, 2:], x)
    assert y.sum() == pytest.approx(x.sum())
    z = forward(build(2, 3, 3, "crop", dict(axis=2, offset=[1, 0], shape=[2, 2])), x).value
    np.testing.assert_array_equal(z.reshape(2, 2, 2, 2), x[:, :, 1:3, 0:2])
    with pytest.raises(ValueError, match="does not fit"):
        build(2, 3, 3, "crop", dict(axis=2, offset=[2, 0], shape=[2, 2]))


def test_batch_norm_defaults_static_moving_stats_and_unit_scale():
    from sculler.core.builder import ModelBuilder
    from sculler.core.model_config import InputConfig, LayerConfig

    b = ModelBuilder()
    b.add_layer(LayerConfig("img", "data", size=12, attrs={"height": 2, "width": 2}))
    b.add_layer(LayerConfig("bn", "batch_norm", inputs=[InputConfig("img") for _ in range(3)]))
    params = {p.name: p for p in b.build(["bn"]).parameters}
    assert params["_bn.w0"].initial_mean == 1.0 and params["_bn.w0"].initial_std == 0.0
    assert params["_bn.w1"].is_static and params["_bn.w2"].is_static
    assert not params["_bn.w0"].is_static
