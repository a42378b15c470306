"""Eager convolution and pooling (``nn.Conv2D``, ``nn.MaxPool2D``, ``nn.AvgPool2D`` and their
functional forms), on the same kernels as the engine's ``exconv`` and ``pool`` layers.

Paddle 2.x semantics: NCHW, ``ceil_mode=False`` and ``exclusive=True`` by default,
``stride=None`` for pooling meaning the window size.
"""

from __future__ import annotations

from typing import Any

from sculler.eager.device import check_same_device
from sculler.eager.ops import _make
from sculler.eager.tensor import Tensor
from sculler.math import conv as K
from sculler.math import pool as P
from sculler.nn.initializer import Normal
from sculler.nn.layer import Layer
from sculler.validate import integer, positive_int


def conv2d(x: Tensor, weight: Tensor, bias: Tensor | None = None, stride: Any = 1,
           padding: Any = 0, dilation: Any = 1, groups: int = 1,
           data_format: str = "NCHW", name: str | None = None) -> Tensor:
    """``y = conv(x, weight) + bias``; x [N, C, H, W], weight [F, C/groups, kh, kw].

    dx = conv^T(dy, w), dw = dy (*) x, db = sum of dy over N, H, W.
    """
    if data_format != "NCHW":
        raise NotImplementedError(f"conv2d: data_format={data_format!r}; only 'NCHW'")
    if x.ndim != 4 or weight.ndim != 4 or x.shape[1] != weight.shape[1] * groups:
        raise ValueError(f"conv2d: input {x.shape} and weight {weight.shape} (groups={groups}) "
                         "do not fit: expected x [N, C, H, W] and weight [F, C/groups, kh, kw]")
    xa, wa = x._array, weight._array
    if type(xa) is not type(wa) or (bias is not None and type(bias._array) is not type(wa)):
        check_same_device("conv2d", xa, wa, *(() if bias is None else (bias._array,)))
    out = K.conv2d_forward(xa, wa, stride, padding, dilation, groups)
    if bias is not None:
        out += bias._array.reshape(1, -1, 1, 1)

    def backward(g):
        dx = None if x.stop_gradient else K.conv2d_backward_data(
            g, wa, xa.shape, stride, padding, dilation, groups)
        dw = None if weight.stop_gradient else K.conv2d_backward_filter(
            xa, g, wa.shape, stride, padding, dilation, groups)
        db = None if bias is None or bias.stop_gradient else g.sum(axis=(0, 2, 3))
        return dx, dw, db

    return _make(out, (x, weight, bias), backward)


def max_pool2d(x: Tensor, kernel_size: Any, stride: Any = None, padding: Any = 0,
               ceil_mode: bool = False, return_mask: bool = False,
               data_format: str = "NCHW", name: str | None = None) -> Tensor:
    """Max over each window; the gradient goes to the window's (first) maximum."""
    if return_mask or data_format != "NCHW":
        raise NotImplementedError("max_pool2d: return_mask and non-NCHW formats are not supported")
    stride = kernel_size if stride is None else stride
    xa = x._array
    out, argmax = P.max_pool2d_forward(xa, kernel_size, stride, padding, ceil_mode)
    return _make(out, (x,), lambda g: (P.max_pool2d_backward(
        g, argmax, xa.shape, kernel_size, stride, padding),))


def avg_pool2d(x: Tensor, kernel_size: Any, stride: Any = None, padding: Any = 0,
               ceil_mode: bool = False, exclusive: bool = True,
               data_format: str = "NCHW", name: str | None = None) -> Tensor:
    """Mean over each window (``exclusive``: padded cells do not count)."""
    if data_format != "NCHW":
        raise NotImplementedError("avg_pool2d: only 'NCHW'")
    stride = kernel_size if stride is None else stride
    xa = x._array
    out = P.avg_pool2d_forward(xa, kernel_size, stride, padding, ceil_mode, exclusive)
    return _make(out, (x,), lambda g: (P.avg_pool2d_backward(
        g, xa.shape, kernel_size, stride, padding, exclusive),))


def _pair(v: Any, what: str = "kernel_size") -> tuple[int, int]:
    """``v`` or ``(v0, v1)`` as two positive ints."""
    items = [v, v] if not isinstance(v, (list, tuple)) else list(v)
    if len(items) != 2:
        raise ValueError(f"{what} must be an int or a pair of ints, got {v!r}")
    return tuple(positive_int(i, what) for i in items)


def _check_window(module: str, kernel_size: Any, stride: Any, padding: Any) -> None:
    """Pooling windows: kernel and stride positive ints (or pairs), padding ints >= 0."""
    _pair(kernel_size, f"{module}(kernel_size=...)")
    if stride is not None:
        _pair(stride, f"{module}(stride=...)")
    pads = list(padding) if isinstance(padding, (list, tuple)) else [padding]
    for p in pads:
        integer(p, f"{module}(padding=...)", minimum=0)


class Conv2D(Layer):
    """2-D convolution layer: weight [out_channels, in_channels/groups, kh, kw], bias
    [out_channels] (``bias_attr=False`` drops it)."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: Any, stride: Any = 1,
                 padding: Any = 0, dilation: Any = 1, groups: int = 1,
                 padding_mode: str = "zeros", weight_attr: Any = None, bias_attr: Any = None,
                 data_format: str = "NCHW") -> None:
        super().__init__()
        if padding_mode != "zeros" or data_format != "NCHW":
            raise NotImplementedError("Conv2D: only padding_mode='zeros' and NCHW")
        in_channels = positive_int(in_channels, "Conv2D(in_channels=...)")
        out_channels = positive_int(out_channels, "Conv2D(out_channels=...)")
        groups = positive_int(groups, "Conv2D(groups=...)")
        if in_channels % groups or out_channels % groups:
            raise ValueError(f"Conv2D: channels {in_channels}->{out_channels} are not divisible "
                             f"by groups={groups}")
        kh, kw = _pair(kernel_size, "Conv2D(kernel_size=...)")
        self._options = dict(stride=stride, padding=padding, dilation=dilation, groups=groups)
        fan_in = in_channels // groups * kh * kw  # Paddle's default: N(0, sqrt(2 / fan_in))
        self.weight = self.create_parameter([out_channels, in_channels // groups, kh, kw],
                                            attr=weight_attr,
                                            default_initializer=Normal(0.0, (2.0 / fan_in) ** 0.5))
        self.bias = None if bias_attr is False else self.create_parameter(
            [out_channels], attr=bias_attr, is_bias=True)

    def forward(self, x: Tensor) -> Tensor:
        return conv2d(x, self.weight, self.bias, **self._options)


class MaxPool2D(Layer):
    def __init__(self, kernel_size: Any, stride: Any = None, padding: Any = 0,
                 ceil_mode: bool = False) -> None:
        super().__init__()
        _check_window("MaxPool2D", kernel_size, stride, padding)
        self._options = dict(kernel_size=kernel_size, stride=stride, padding=padding,
                             ceil_mode=ceil_mode)

    def forward(self, x: Tensor) -> Tensor:
        return max_pool2d(x, **self._options)


class AvgPool2D(Layer):
    def __init__(self, kernel_size: Any, stride: Any = None, padding: Any = 0,
                 ceil_mode: bool = False, exclusive: bool = True) -> None:
        super().__init__()
        _check_window("AvgPool2D", kernel_size, stride, padding)
        self._options = dict(kernel_size=kernel_size, stride=stride, padding=padding,
                             ceil_mode=ceil_mode, exclusive=exclusive)

    def forward(self, x: Tensor) -> Tensor:
        return avg_pool2d(x, **self._options)
