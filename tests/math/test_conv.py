"""Convolution kernels against direct loops, finite differences and (if present) torch."""

import numpy as np
import pytest

from sculler.math.conv import (
    col2im,
    conv2d_backward_data,
    conv2d_backward_filter,
    conv2d_forward,
    conv2d_transpose_backward_data,
    conv2d_transpose_backward_filter,
    conv2d_transpose_forward,
    conv_image_size,
    conv_output_size,
    im2col,
)
from sculler.testing.numeric import numeric_grad

try:
    import torch
except ImportError:  # pragma: no cover - depends on the machine
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="torch is not installed")


def _p(v):
    return (v, v) if isinstance(v, int) else tuple(v)


def conv_loop(x, w, stride, padding, dilation, groups):
    """Reference convolution: a loop over output pixels and filters."""
    (sy, sx), (py, px), (dy, dx) = _p(stride), _p(padding), _p(dilation)
    n, c, h, wd = x.shape
    f, cg, kh, kw = w.shape
    oh = (h + 2 * py - (kh - 1) * dy - 1) // sy + 1
    ow = (wd + 2 * px - (kw - 1) * dx - 1) // sx + 1
    xpad = np.zeros((n, c, h + 2 * py, wd + 2 * px), x.dtype)
    xpad[:, :, py : py + h, px : px + wd] = x
    y = np.zeros((n, f, oh, ow), x.dtype)
    fg = f // groups
    for fi in range(f):
        g = fi // fg
        for oy in range(oh):
            for ox in range(ow):
                patch = xpad[:, g * cg : (g + 1) * cg,
                             oy * sy : oy * sy + (kh - 1) * dy + 1 : dy,
                             ox * sx : ox * sx + (kw - 1) * dx + 1 : dx]
                y[:, fi, oy, ox] = (patch * w[fi]).sum(axis=(1, 2, 3))
    return y



# (x shape, w shape, stride, padding, dilation, groups)
CASES = [
    ((2, 3, 7, 5), (4, 3, 3, 3), 1, 0, 1, 1),
    ((2, 3, 7, 5), (4, 3, 3, 2), (2, 1), (1, 2), 1, 1),
    ((2, 4, 7, 6), (6, 2, 3, 3), 2, 1, 1, 2),
    ((1, 2, 9, 7), (3, 2, 3, 3), 1, 2, (2, 1), 1),
    ((2, 3, 8, 7), (2, 3, 2, 2), 3, 0, 1, 1),  # stride > filter
    ((1, 6, 5, 5), (6, 1, 3, 3), 1, 1, 1, 6),  # depthwise
    ((1, 1, 17, 17), (2, 1, 3, 3), 1, 1, 1, 1),  # output > 16x16: batch-first unfold layout
    ((2, 4, 20, 19), (4, 2, 3, 2), 1, (1, 0), 1, 2),
]


def test_conv_output_size_follows_paddle():
    assert conv_output_size(28, 5, 0, 1) == 24
    assert conv_output_size(7, 3, 1, 2) == 4
    assert conv_output_size(7, 2, 0, 2, caffe_mode=True) == 3
    assert conv_output_size(7, 2, 0, 2, caffe_mode=False) == 4
    assert conv_output_size(9, 3, 0, 1, dilation=2) == 5
    assert conv_image_size(4, 3, 1, 2) == 7
    with pytest.raises(ValueError, match="smaller than the dilated filter"):
        conv_output_size(3, 5, 0, 1)


@pytest.mark.parametrize("xs, ws, stride, padding, dilation, groups", CASES)
def test_forward_matches_loop(xs, ws, stride, padding, dilation, groups):
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal(xs), rng.standard_normal(ws)
    y = conv2d_forward(x, w, stride, padding, dilation, groups)
    np.testing.assert_allclose(y, conv_loop(x, w, stride, padding, dilation, groups),
                               rtol=1e-10, atol=1e-10)
    y32 = conv2d_forward(x.astype(np.float32), w.astype(np.float32), stride, padding, dilation,
                         groups)
    assert y32.dtype == np.float32
    np.testing.assert_allclose(y32, y, rtol=1e-5, atol=1e-5)


def test_forward_writes_into_out():
    rng = np.random.default_rng(1)
    x, w = rng.standard_normal((2, 3, 7, 5)), rng.standard_normal((4, 3, 3, 3))
    out = np.full((2, 4, 5, 3), 7.0)
    res = conv2d_forward(x, w, out=out)
    assert res is out
    np.testing.assert_allclose(out, conv_loop(x, w, 1, 0, 1, 1), atol=1e-12)


def test_im2col_col2im_are_adjoint():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((2, 3, 7, 5))
    cols = im2col(x, (3, 2), (2, 1), (1, 2), (1, 2))
    c = rng.standard_normal(cols.shape)
    back = col2im(c, x.shape, (3, 2), (2, 1), (1, 2), (1, 2))
    assert np.isclose((cols * c).sum(), (x * back).sum())


@pytest.mark.parametrize("xs, ws, stride, padding, dilation, groups", CASES[1:5] + CASES[6:7])
def test_backward_matches_finite_differences(xs, ws, stride, padding, dilation, groups):
    rng = np.random.default_rng(3)
    x, w = rng.standard_normal(xs), rng.standard_normal(ws)
    r = rng.standard_normal(conv2d_forward(x, w, stride, padding, dilation, groups).shape)

    def loss():
        return (conv2d_forward(x, w, stride, padding, dilation, groups) * r).sum()

    dx = conv2d_backward_data(r, w, x.shape, stride, padding, dilation, groups)
    dw = conv2d_backward_filter(x, r, w.shape, stride, padding, dilation, groups)
    np.testing.assert_allclose(dx, numeric_grad(loss, x), rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(dw, numeric_grad(loss, w), rtol=1e-6, atol=1e-7)


def test_backward_accumulates_into_out():
    rng = np.random.default_rng(4)
    x, w = rng.standard_normal((2, 4, 6, 5)), rng.standard_normal((4, 2, 3, 3))
    dy = rng.standard_normal((2, 4, 4, 3))
    dw = conv2d_backward_filter(x, dy, w.shape, groups=2)
    dx = conv2d_backward_data(dy, w, x.shape, groups=2)
    bw, bx = np.ones_like(w), np.ones_like(x)
    assert conv2d_backward_filter(x, dy, w.shape, groups=2, out=bw) is bw
    conv2d_backward_data(dy, w, x.shape, groups=2, out=bx)
    np.testing.assert_allclose(bw, dw + 1)
    np.testing.assert_allclose(bx, dx + 1)


@pytest.mark.parametrize("caffe_mode", [True, False])
def test_transpose_is_adjoint_of_conv_and_backward_is_right(caffe_mode):
    rng = np.random.default_rng(5)
    stride, padding, groups = 2, 1, 2
    x = rng.standard_normal((2, 4, 3, 4))
    w = rng.standard_normal((4, 3, 3, 2))  # (C, F/groups, kh, kw): 4 -> 6 channels
    y = conv2d_transpose_forward(x, w, stride, padding, 1, groups, caffe_mode)
    extra = 0 if caffe_mode else 1
    assert y.shape == (2, 6, (3 - 1) * 2 + 3 - 2 + extra, (4 - 1) * 2 + 2 - 2 + extra)
    z = rng.standard_normal(y.shape)
    conv_z = conv2d_forward(z, w, stride, padding, 1, groups, output_size=x.shape[2:])
    assert np.isclose((y * z).sum(), (x * conv_z).sum())

    def loss():
        return (conv2d_transpose_forward(x, w, stride, padding, 1, groups, caffe_mode) * z).sum()

    dx = conv2d_transpose_backward_data(z, w, x.shape, stride, padding, 1, groups)
    dw = conv2d_transpose_backward_filter(x, z, w.shape, stride, padding, 1, groups)
    np.testing.assert_allclose(dx, numeric_grad(loss, x), rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(dw, numeric_grad(loss, w), rtol=1e-6, atol=1e-7)


def test_user_mistakes_raise_value_errors():
    x = np.zeros((1, 3, 5, 5))
    with pytest.raises(ValueError, match="expects 2 input channels"):
        conv2d_forward(x, np.zeros((2, 2, 3, 3)))
    with pytest.raises(ValueError, match="groups=2 must divide"):
        conv2d_forward(x, np.zeros((4, 1, 3, 3)), groups=2)
    with pytest.raises(ValueError, match="stride must be >= 1"):
        conv2d_forward(x, np.zeros((2, 3, 3, 3)), stride=0)
    with pytest.raises(TypeError, match="padding must be an integer"):
        conv2d_forward(x, np.zeros((2, 3, 3, 3)), padding="same")


@needs_torch
@pytest.mark.parametrize("xs, ws, stride, padding, dilation, groups", CASES)
def test_matches_torch(xs, ws, stride, padding, dilation, groups):
    rng = np.random.default_rng(6)
    x, w = rng.standard_normal(xs), rng.standard_normal(ws)
    y = conv2d_forward(x, w, stride, padding, dilation, groups)
    dy = rng.standard_normal(y.shape)
    tx = torch.tensor(x, requires_grad=True)
    tw = torch.tensor(w, requires_grad=True)
    ty = torch.nn.functional.conv2d(tx, tw, None, stride, padding, dilation, groups)
    ty.backward(torch.tensor(dy))
    np.testing.assert_allclose(y, ty.detach().numpy(), atol=1e-10)
    np.testing.assert_allclose(conv2d_backward_data(dy, w, x.shape, stride, padding, dilation,
                                                    groups), tx.grad.numpy(), atol=1e-10)
    np.testing.assert_allclose(conv2d_backward_filter(x, dy, w.shape, stride, padding, dilation,
                                                      groups), tw.grad.numpy(), atol=1e-10)


@needs_torch
def test_transpose_matches_torch():
    rng = np.random.default_rng(7)
    x, w = rng.standard_normal((2, 4, 3, 5)), rng.standard_normal((4, 3, 3, 2))
    y = conv2d_transpose_forward(x, w, (2, 1), (1, 0), (1, 2), 2)
    ty = torch.nn.functional.conv_transpose2d(torch.tensor(x), torch.tensor(w), None, (2, 1),
                                              (1, 0), 0, 2, (1, 2))
    np.testing.assert_allclose(y, ty.numpy(), atol=1e-10)


def test_im2col_unfolds_into_out():
    x = np.random.default_rng(8).standard_normal((2, 3, 6, 5)).astype(np.float32)
    buf = np.full(3 * 2 * 2 * 2 * 4 * 3, np.nan, dtype=np.float32)  # 4x3 windows
    cols = im2col(x, 2, stride=2, padding=1, out=buf)
    assert np.shares_memory(cols, buf)
    np.testing.assert_array_equal(cols, im2col(x, 2, stride=2, padding=1))


@pytest.mark.parametrize("hw", [(3, 5), (20, 20)])  # dy columns ordered (p, n) and (n, p)
@pytest.mark.parametrize("spare", [True, False])  # BLAS's threads, or one on a busy machine
def test_channel_sums_is_the_shared_bias_gradient(hw, spare, monkeypatch):
    from sculler.math import parallel
    from sculler.math.conv import channel_sums, conv2d_dy_columns

    monkeypatch.setattr(parallel, "_cpu_to_spare", lambda: spare)
    rng = np.random.default_rng(11)
    dy = rng.standard_normal((4, 6) + hw)
    want = dy.sum(axis=(0, 2, 3))
    out = np.full((1, 6), np.nan)
    assert channel_sums(dy, out, beta=0.0) is out  # a first write ignores the stale buffer
    np.testing.assert_allclose(out[0], want, rtol=1e-12)
    channel_sums(dy, out, dy_cols=conv2d_dy_columns(dy))  # beta 1 adds
    np.testing.assert_allclose(out[0], 2 * want, rtol=1e-12)
    channel_sums(dy, out, beta=0.5)
    np.testing.assert_allclose(out[0], 2 * want, rtol=1e-12)


@pytest.mark.parametrize("hw", [(19, 18), (10, 10)])  # 17x16 output: per sample; 8x8: (p, n)
def test_bias_row_puts_the_bias_inside_the_gemms(hw):
    from sculler.math.conv import (
        channel_sums,
        conv2d_backward_filter,
        conv2d_bias_in_gemm,
        conv2d_forward,
        conv2d_unfold,
    )

    rng = np.random.default_rng(13)
    x = rng.standard_normal((2, 3) + hw).astype(np.float32)
    w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    b = rng.standard_normal((1, 4)).astype(np.float32)
    oh, ow = hw[0] - 2, hw[1] - 2
    assert conv2d_bias_in_gemm((oh, ow), 1) and not conv2d_bias_in_gemm((oh, ow), 3)
    plain_cols = conv2d_unfold(x, w.shape)
    buf = np.full(28 * 2 * oh * ow, np.nan, np.float32)
    cols = conv2d_unfold(x, w.shape, out=buf, bias_row=True)
    assert cols.shape == (28, 2 * oh * ow) and np.shares_memory(cols, buf)
    np.testing.assert_array_equal(cols[:27], plain_cols)
    assert (cols[27] == 1).all()
    plain = conv2d_forward(x, w)
    y = conv2d_forward(x, w, cols=cols, bias=b)
    np.testing.assert_allclose(y, plain + b.reshape(1, 4, 1, 1), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(conv2d_forward(x, w, cols=cols[:27], bias=b),
                                  plain + b.reshape(1, 4, 1, 1))  # no row: added after
    out = np.full((2, 4, oh, ow), np.nan, np.float32)
    assert conv2d_forward(x, w, cols=cols, bias=b, out=out) is out
    np.testing.assert_array_equal(out, y)
    dy = rng.standard_normal(y.shape).astype(np.float32)
    want_w = conv2d_backward_filter(x, dy, w.shape)
    want_b = dy.astype(np.float64).sum(axis=(0, 2, 3))
    np.testing.assert_array_equal(conv2d_backward_filter(x, dy, w.shape, cols=cols), want_w)
    # the bias gradient from the GEMM's row of ones, written (beta 0) then added (beta 1)
    gw, gb = np.full(w.shape, np.nan, np.float32), np.full((1, 4), np.nan, np.float32)
    assert conv2d_backward_filter(x, dy, w.shape, out=gw, beta=0.0, cols=cols, bias_grad=gb,
                                  bias_beta=0.0) is gw
    np.testing.assert_allclose(gw, want_w, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(gb[0], want_b, rtol=1e-5, atol=1e-5)
    conv2d_backward_filter(x, dy, w.shape, out=gw, cols=cols, bias_grad=gb)
    np.testing.assert_allclose(gw, 2 * want_w, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(gb[0], 2 * want_b, rtol=1e-5, atol=1e-5)
    # without the row (columns not kept) the bias gradient is channel_sums'
    gb2 = np.zeros((1, 4), np.float32)
    conv2d_backward_filter(x, dy, w.shape, bias_grad=gb2, bias_beta=0.0)
    np.testing.assert_array_equal(gb2, channel_sums(dy, np.zeros((1, 4), np.float32), 0.0))
    with pytest.raises(ValueError, match="cols has shape"):  # a bias row but no bias
        conv2d_forward(x, w, cols=cols)

class _FakeBlas:
    """A BLAS thread-pool controller that records what the kernels set."""

    def __init__(self):
        self.num_threads, self.calls = 2, []

    def set_num_threads(self, n):
        self.calls.append(n)
        self.num_threads = n


@pytest.mark.parametrize("hw", [(10, 10), (20, 20)])  # (p, n) columns and per-sample GEMMs
@pytest.mark.parametrize("spare", [True, False])
def test_conv_kernels_leave_the_blas_thread_count_alone_on_a_busy_machine(hw, spare,
                                                                           monkeypatch):
    # OpenBLAS rounds some products differently on one and two threads (LeNet's conv2
    # forward GEMM, a GEMV over 36864 columns), so a kernel that dropped to one thread while
    # the machine is busy would make a run's values depend on what else runs: none does
    from sculler.math import blas, parallel
    from sculler.math.conv import channel_sums, conv2d_unfold

    fake = _FakeBlas()
    monkeypatch.setattr(blas, "_controllers", lambda: [fake])
    monkeypatch.setattr(parallel, "_cpu_to_spare", lambda: spare)
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 3) + hw)
    w = rng.standard_normal((4, 3, 3, 3))
    cols = conv2d_unfold(x, w.shape)
    y = conv2d_forward(x, w, cols=cols)
    dy = rng.standard_normal(y.shape)
    conv2d_backward_data(dy, w, x.shape)
    conv2d_backward_filter(x, dy, w.shape, cols=cols)
    channel_sums(dy, np.zeros(4), 0.0)
    assert fake.calls == []
    np.testing.assert_allclose(y, conv_loop(x, w, 1, 0, 1, 1), rtol=1e-10, atol=1e-10)
