"""The direct (numba) convolution against the GEMM route, in float64 and float32, and the
conv layer taking it or not."""

import numpy as np
import pytest

from sculler import backend
from sculler.core.argument import Argument
from sculler.core.builder import ModelBuilder
from sculler.core.layer import PASS_TRAIN
from sculler.core.model_config import InputConfig, LayerConfig
from sculler.core.network import Network
from sculler.core.parameter import ParameterSet
from sculler.math import conv_direct
from sculler.math.conv import (
    conv2d_backward_data,
    conv2d_backward_filter,
    conv2d_forward,
)

pytestmark = pytest.mark.skipif(not conv_direct.available(),
                                reason="numba is not installed (pip install sculler[fast])")

# (N, C, F, H, W, kh, kw, pad_y, pad_x): channel counts off the 4-filter block, pads 0..k-1,
# 1x1 and 5x5, maps narrower and wider than a register block
SHAPES = [(2, 3, 5, 7, 6, 3, 3, 1, 1), (3, 4, 8, 5, 5, 3, 3, 0, 0), (2, 6, 3, 6, 7, 5, 5, 2, 4),
          (2, 5, 4, 6, 6, 1, 1, 0, 0), (1, 2, 6, 4, 9, 3, 2, 2, 0), (2, 16, 16, 12, 12, 3, 3, 1, 1)]


def gemm_route(x, w, b, dy, pad):
    y = conv2d_forward(x, w, 1, pad, 1) + b.reshape(1, -1, 1, 1)
    gw = conv2d_backward_filter(x, dy, w.shape, 1, pad, 1)
    gx = conv2d_backward_data(dy, w, x.shape, 1, pad, 1)
    return y, gw, gx


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("dtype,rtol", [(np.float64, 1e-12), (np.float32, 2e-5)])
def test_direct_equals_gemm_route(shape, dtype, rtol):
    n, c, f, h, wd, kh, kw, py, px = shape
    rng = np.random.RandomState(sum(shape))
    x = rng.randn(n, c, h, wd).astype(dtype)
    w = rng.randn(f, c, kh, kw).astype(dtype)
    b = rng.randn(f).astype(dtype)
    dy = rng.randn(*conv2d_forward(x, w, 1, (py, px), 1).shape).astype(dtype)
    y_ref, gw_ref, gx_ref = gemm_route(*(a.astype(np.float64) for a in (x, w, b, dy)), (py, px))
    conv = conv_direct.DirectConv((kh, kw), (py, px))
    same = 2 * py == kh - 1 and 2 * px == kw - 1  # the layers take the kernels then only
    assert conv_direct.applicable(x, (kh, kw), (1, 1), (py, px), (1, 1), 1) == same
    y = np.empty(y_ref.shape, dtype)
    conv.forward(x, w, y, bias=b)
    gw = np.full_like(w, np.nan)  # beta = 0 overwrites whatever is there
    gx = np.full_like(x, 0.5)
    conv.backward(dy, w, gw, 0.0, gx, 1.0)  # beta = 1 adds
    scale = lambda a: np.abs(a).max()  # noqa: E731
    assert np.abs(y - y_ref).max() <= rtol * scale(y_ref)
    assert np.abs(gw - gw_ref).max() <= rtol * scale(gw_ref)
    assert np.abs(gx - 0.5 - gx_ref).max() <= rtol * scale(gx_ref)


# (N, C, F, H, W, k, pad, (sy, sx)): the stride splits the input into phase planes (a 1x1
# kernel at stride 2 reaches one phase of four: the others' dx is zero)
STRIDED = [(2, 3, 5, 7, 6, 3, 1, (2, 2)), (2, 6, 3, 11, 10, 5, 2, (3, 2)),
           (2, 5, 4, 8, 8, 1, 0, (2, 2)), (1, 2, 6, 9, 13, 3, 0, (1, 2)),
           (2, 4, 3, 9, 7, 1, 0, (3, 2))]


@pytest.mark.parametrize("shape", STRIDED)
@pytest.mark.parametrize("dtype,rtol", [(np.float64, 1e-12), (np.float32, 2e-5)])
def test_strided_forward_and_gradients(shape, dtype, rtol):
    n, c, f, h, wd, k, pad, stride = shape
    rng = np.random.RandomState(sum(shape[:-1]))
    x, w = rng.randn(n, c, h, wd).astype(dtype), rng.randn(f, c, k, k).astype(dtype)
    y_ref = conv2d_forward(x.astype(np.float64), w.astype(np.float64), stride, pad, 1)
    dy = rng.randn(*y_ref.shape).astype(dtype)
    gw_ref = conv2d_backward_filter(x.astype(np.float64), dy.astype(np.float64), w.shape,
                                    stride, pad, 1)
    gx_ref = conv2d_backward_data(dy.astype(np.float64), w.astype(np.float64), x.shape,
                                  stride, pad, 1)
    conv = conv_direct.DirectConv((k, k), (pad, pad), stride)
    y = np.empty(y_ref.shape, dtype)
    conv.forward(x, w, y)
    gw, gx = np.empty_like(w), np.full_like(x, np.nan)  # every phase of dx is written
    conv.backward(dy, w, gw, 0.0, gx, 0.0)
    assert np.abs(y - y_ref).max() <= rtol * np.abs(y_ref).max()
    assert np.abs(gw - gw_ref).max() <= rtol * np.abs(gw_ref).max()
    assert np.abs(gx - gx_ref).max() <= rtol * np.abs(gx_ref).max()
    added = np.ones_like(x)
    conv.backward(dy, w, grad_x=added, beta_x=1.0)  # and added to, phase by phase
    assert np.abs(added - 1 - gx_ref).max() <= rtol * np.abs(gx_ref).max()


def _accumulate_and_scale(conv, x, w, stride: int, pad: int, rng):
    """Forward added to ones, gradients added to 2x and 3x ones: each equals the GEMM route's
    in float64. Returns ``(dy, gx)``."""
    y = np.ones(conv2d_forward(x, w, stride, pad, 1).shape)
    conv.forward(x, w, y, accumulate=True)
    np.testing.assert_allclose(y, 1 + conv2d_forward(x, w, stride, pad, 1), rtol=1e-12)
    dy = rng.randn(*y.shape)
    gw, gx = np.ones_like(w), np.ones_like(x)
    conv.backward(dy, w, gw, 2.0, gx, 3.0)
    np.testing.assert_allclose(gw, 2 + conv2d_backward_filter(x, dy, w.shape, stride, pad, 1),
                               rtol=1e-12)
    np.testing.assert_allclose(gx, 3 + conv2d_backward_data(dy, w, x.shape, stride, pad, 1),
                               rtol=1e-12)
    return dy, gx


def test_strided_1x1_scaled_gradients():
    """A strided 1x1 convolution runs as a stride-1 one on the subsampled input; scaled
    gradients scale every phase of dx, the unread ones included."""
    rng = np.random.RandomState(1)
    x, w = rng.randn(2, 4, 7, 6), rng.randn(5, 4, 1, 1)
    _accumulate_and_scale(conv_direct.DirectConv((1, 1), (0, 0), (2, 2)), x, w, 2, 0, rng)


def test_accumulating_forward_and_scaled_gradients():
    rng = np.random.RandomState(0)
    x, w = rng.randn(2, 4, 6, 6), rng.randn(8, 4, 3, 3)
    conv = conv_direct.DirectConv((3, 3), (1, 1))
    dy, gx = _accumulate_and_scale(conv, x, w, 1, 1, rng)
    gx_only = np.zeros_like(x)
    conv.backward(dy, w, grad_x=gx_only)
    np.testing.assert_allclose(gx_only, gx - 3, rtol=1e-12)
    with pytest.raises(ValueError, match="does not match the output of the last forward"):
        conv.backward(rng.randn(2, 8, 7, 7), w, np.ones_like(w))


@pytest.mark.parametrize("stride,padding,dilation,groups", [
    ((1, 1), (1, 1), (2, 2), 1), ((1, 1), (1, 1), (1, 1), 2), ((1, 1), (3, 3), (1, 1), 1),
    ((1, 1), (0, 0), (1, 1), 1)])
def test_other_convolutions_take_the_gemm_route(stride, padding, dilation, groups):
    x = np.zeros((1, 4, 8, 8), np.float32)
    assert not conv_direct.applicable(x, (3, 3), stride, padding, dilation, groups)
    assert not conv_direct.applicable(x.astype(np.int32), (3, 3), (1, 1), (1, 1), (1, 1), 1)


def test_sculler_conv_gemm_turns_the_path_off(monkeypatch):
    x = np.zeros((1, 4, 8, 8), np.float32)
    monkeypatch.setenv("SCULLER_CONV", "gemm")
    assert not conv_direct.applicable(x, (3, 3), (1, 1), (1, 1), (1, 1), 1)


def conv_net(stride: int):
    """data -> a 4-filter conv (so the data's gradient is wanted) -> the layer under test:
    two inputs, the second strided as the first, padding 1."""
    b = ModelBuilder()
    b.add_layer(LayerConfig("img", "data", size=3 * 9 * 9, attrs={"height": 9, "width": 9}))
    b.add_layer(LayerConfig("pre", "exconv", inputs=[InputConfig("img")],
                            attrs={"num_filters": 4, "filter_size": 1}))
    b.add_layer(LayerConfig("out", "exconv", inputs=[InputConfig("pre"), InputConfig("pre")],
                            attrs={"num_filters": 6, "filter_size": 3, "padding": 1,
                                   "stride": stride}), bias_attr={"initial_std": 1.0})
    return Network(b.build(["out"]), ParameterSet(seed=3))



def run_layer(x, dy, stride):
    """(output, [weight gradients, bias gradient, the lower conv's weight gradient],
    inputs on the direct path) of a two-input conv layer."""
    net = conv_net(stride)
    net.forward({"img": Argument(value=x)}, PASS_TRAIN)
    layer = net.get_layer("out")
    layer.output.grad[...] = dy
    net.backward()
    grads = [net.parameters[k].grad.copy() for k in ("_out.w0", "_out.w1", "_out.wbias",
                                                     "_pre.w0")]
    return layer.output.value.copy(), grads, list(layer.direct_inputs)


@pytest.mark.parametrize("stride", [1, 2])
@pytest.mark.parametrize("dtype,rtol", [(np.float64, 1e-12), (np.float32, 2e-5)])
def test_conv_layer_same_on_both_routes(monkeypatch, dtype, rtol, stride):
    """The layer's output and every gradient (its weights, bias, and through its input the
    lower layer's weights) agree between the direct and the GEMM route."""
    side = 9 if stride == 1 else 5
    rng = np.random.RandomState(5)
    with backend.default_dtype(dtype):
        x = rng.randn(3, 3 * 81).astype(dtype)
        dy = rng.randn(3, 6 * side * side).astype(dtype)
        y, grads, used = run_layer(x, dy, stride)
        monkeypatch.setenv("SCULLER_CONV", "gemm")
        y_ref, grads_ref, used_ref = run_layer(x, dy, stride)
    assert used == [True, True] and used_ref == [False, False]
    np.testing.assert_allclose(y, y_ref, rtol=rtol, atol=rtol * np.abs(y_ref).max())
    for g, r in zip(grads, grads_ref):
        np.testing.assert_allclose(g, r, rtol=rtol, atol=rtol * np.abs(r).max())
