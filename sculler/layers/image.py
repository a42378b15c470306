"""Image geometry shared by the image layers, and the small image layers: ``maxout``, ``spp``,
``bilinear_interp``, ``blockexpand``, ``pad`` and ``crop``.

Image data is a dense ``(batch, C*H*W)`` row-major NCHW value. A layer finds the geometry of
input ``i`` (see :func:`image_geometry`) from, in order: that input's ``InputConfig.attrs``,
its own ``attrs`` (``channels``, ``height``, ``width``), then the input layer's config
(``out_channels``/``out_height``/``out_width`` written by an image layer's ``infer_size``, or a
data layer's ``height``/``width``). Every image layer writes its output geometry as
``out_channels``, ``out_height``, ``out_width`` so the next layer can read it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from sculler import backend
from sculler import pooling as P
from sculler.backend import get_array_module
from sculler.core.expression import (
    LayerOutput,
    as_inputs,
    make_layer,
    one_input,
)
from sculler.core.faces import layer_function
from sculler.core.layer import Layer, register_layer
from sculler.core.model_config import LayerConfig
from sculler.math.conv import col2im, im2col
from sculler.math.norm import maxout_backward, maxout_forward
from sculler.math.pool import (
    avg_pool2d_backward,
    avg_pool2d_forward,
    max_pool2d_backward,
    max_pool2d_forward,
)


def _first(*values):
    for v in values:
        if v is not None:
            return int(v)
    return None


def image_geometry(
    config: LayerConfig, inputs: list[LayerConfig], i: int = 0, flat_ok: bool = False
) -> tuple[int, int, int]:
    """``(channels, height, width)`` of input ``i`` of ``config``.

    A missing width equals the height (and vice versa), as Paddle's ``img_size_y`` defaults to
    ``img_size``; with channels known but no height the image is square,
    ``H = W = sqrt(size / channels)``; with neither, ``flat_ok`` gives ``(size, 1, 1)``.
    Raises ValueError naming the layer when ``channels * height * width`` is not the input size.
    """
    own = dict(config.attrs)
    if i < len(config.inputs):
        own.update(config.inputs[i].attrs)
    src = inputs[i]
    size = int(src.size)
    h = _first(own.get("height"), src.attrs.get("out_height"), src.attrs.get("height"))
    w = _first(own.get("width"), src.attrs.get("out_width"), src.attrs.get("width"))
    h, w = (h if h is not None else w), (w if w is not None else h)
    c = _first(own.get("channels"))
    if h is None:
        c = c if c is not None else _first(src.attrs.get("out_channels"))
        if c is None:
            if flat_ok:
                return size, 1, 1
            raise ValueError(
                f"layer {config.name!r} ({config.type}): cannot tell the image geometry of input "
                f"{src.name!r} (size {size}); set channels/height/width in the layer's attrs"
            )
        side = math.isqrt(size // c) if size % c == 0 else 0
        if side * side * c != size:
            raise ValueError(
                f"layer {config.name!r} ({config.type}): input {src.name!r} of size {size} is not "
                f"{c} channels of a square image; set height/width in the layer's attrs"
            )
        return c, side, side
    if c is None:
        c = size // (h * w) if h * w and size % (h * w) == 0 else 0
    if c * h * w != size or c < 1:
        raise ValueError(
            f"layer {config.name!r} ({config.type}): input {src.name!r} has size {size}, which is "
            f"not channels*height*width = {c}*{h}*{w}; check channels/height/width"
        )
    return c, h, w


def set_output_geometry(config: LayerConfig, c: int, h: int, w: int) -> int:
    """Record the output geometry for the next layer; returns the output width ``c*h*w``."""
    config.attrs.update(out_channels=int(c), out_height=int(h), out_width=int(w))
    return int(c) * int(h) * int(w)


def volume_geometry(config: LayerConfig, inputs: list[LayerConfig],
                    i: int = 0) -> tuple[int, int, int, int]:
    """``(channels, depth, height, width)`` of input ``i`` of a 3-D layer: depth from the
    layer's (or input's) ``depth`` attr, else the input layer's ``out_depth`` or a data layer's
    ``depth`` (1 when none says); height, width and channels as :func:`image_geometry` finds
    them for the ``depth`` stacked frames. Raises ValueError naming the layer when
    ``channels * depth * height * width`` is not the input size."""
    own = dict(config.attrs)
    if i < len(config.inputs):
        own.update(config.inputs[i].attrs)
    src = inputs[i]
    d = _first(own.get("depth"), src.attrs.get("out_depth"), src.attrs.get("depth")) or 1
    h = _first(own.get("height"), src.attrs.get("out_height"), src.attrs.get("height"))
    w = _first(own.get("width"), src.attrs.get("out_width"), src.attrs.get("width"))
    h, w = (h if h is not None else w), (w if w is not None else h)
    size = int(src.size)
    if h is None:
        raise ValueError(f"layer {config.name!r} ({config.type}): cannot tell the volume geometry "
                         f"of input {src.name!r} (size {size}); give the data layer depth/height/"
                         "width or set them in the layer's attrs")
    c = _first(own.get("channels"))
    if c is None:
        c = size // (d * h * w) if size % (d * h * w) == 0 else 0
    if c < 1 or c * d * h * w != size:
        raise ValueError(f"layer {config.name!r} ({config.type}): input {src.name!r} has size "
                         f"{size}, which is not channels*depth*height*width = {c}*{d}*{h}*{w}; "
                         "check num_channels/depth/height/width")
    return c, d, h, w


def set_volume_geometry(config: LayerConfig, c: int, d: int, h: int, w: int) -> int:
    """Record a 3-D output geometry (``out_depth`` beside the image's three) for the next
    layer; returns the output width ``c*d*h*w``."""
    config.attrs["out_depth"] = int(d)
    return set_output_geometry(config, c, h, w) * int(d)


class ImageLayer(Layer):
    """Base of the image layers: ``self.geom[i]`` is input ``i``'s ``(C, H, W)``."""

    flat_ok = False
    image_inputs: int | None = None  # how many leading inputs are images (None: all)

    def init(self, layer_map, parameter_map) -> None:
        super().init(layer_map, parameter_map)
        cfgs = [inp.config for inp in self.inputs]
        n = len(cfgs) if self.image_inputs is None else self.image_inputs
        self.geom = [self.input_geometry(self.config, cfgs, i) for i in range(n)]
        self.out_geom = tuple(self.attr(k) for k in ("out_channels", "out_height", "out_width"))

    @classmethod
    def input_geometry(cls, config: LayerConfig, inputs: list[LayerConfig],
                       i: int) -> tuple[int, int, int]:
        """Input ``i``'s ``(C, H, W)`` as the layer computes on it."""
        return image_geometry(config, inputs, i, cls.flat_ok)

    def input_image(self, i: int):
        """Input ``i``'s value as ``(N, C, H, W)``, after checking its width."""
        c, h, w = self.geom[i]
        self.check_input_width(i, c * h * w)
        x = self.get_input_value(i)
        return x.reshape(x.shape[0], c, h, w)

    def input_grad_image(self, i: int):
        g = self.get_input_grad(i)
        return None if g is None else g.reshape((g.shape[0],) + tuple(self.geom[i]))

    def output_image(self, which: str = "value"):
        buf = self.output.value if which == "value" else self.output.grad
        return buf.reshape((buf.shape[0],) + self.out_geom)


@register_layer("maxout")
class MaxOutLayer(ImageLayer):
    """Maxout over channel groups (Paddle's ``MaxOutLayer``): ``y[:, o] = max_k x[:, o*g + k]``.

    Attrs: ``groups`` (required, divides the channels); ``channels``/``height``/``width`` of the
    input. Output: ``(C/groups, H, W)``. The gradient goes to the first maximum on ties.
    """

    max_inputs = 1

    @classmethod
    def infer_size(cls, config, inputs):
        c, h, w = image_geometry(config, inputs)
        g = int(config.attrs.get("groups", 0))
        if g < 1 or c % g:
            raise ValueError(
                f"layer {config.name!r} (maxout): groups={g} must be a positive divisor of the "
                f"input channels {c}"
            )
        return set_output_geometry(config, c // g, h, w)

    def forward(self, pass_type: str) -> None:
        super().forward(pass_type)
        x = self.input_image(0)
        y, self._idx = maxout_forward(x, int(self.attr("groups")))
        self.reserve_output(x.shape[0], self.size)
        self.output_image()[...] = y
        self.add_bias()
        self.forward_activation()

    def backward(self, callback=None) -> None:
        self.backward_activation_and_bias(callback)
        gx = self.input_grad_image(0)
        if gx is not None:
            maxout_backward(self.output_image("grad"), self._idx, int(self.attr("groups")), out=gx)


def _pool_type(config: LayerConfig) -> str:
    t = str(config.attrs.get("pool_type", "max-projection"))
    kind = "max" if "max" in t else "avg" if ("avg" in t or "average" in t) else None
    if kind is None:
        raise ValueError(
            f"layer {config.name!r} ({config.type}): unknown pool_type {t!r}; expected "
            "'max-projection' or 'avg-projection'"
        )
    return kind


@register_layer("spp")
class SpatialPyramidPoolLayer(ImageLayer):
    """Spatial pyramid pooling (Paddle's ``SpatialPyramidPoolLayer``).

    Level ``l`` (``0 <= l < pyramid_height``) pools the image into ``b x b`` bins, ``b = 2^l``,
    with window ``k = ceil(img / b)``, stride ``k`` and padding ``(k*b - img + 1) // 2`` per
    axis (as the C++ ``getConfig``); the levels' ``(C, b, b)`` outputs are concatenated per
    sample, so the width is ``C * (4^pyramid_height - 1) / 3``. As in Paddle, a bin whose
    window lies wholly in the padding (e.g. 5 rows in 4 bins) gives the lowest float for max
    pooling and 0 for average pooling.

    Attrs: ``pyramid_height`` (required, >= 1), ``pool_type`` ("max-projection" default or
    "avg-projection"), ``channels``/``height``/``width`` of the input.
    """

    max_inputs = 1

    @classmethod
    def infer_size(cls, config, inputs):
        c, _, _ = image_geometry(config, inputs)
        levels = int(config.attrs.get("pyramid_height", 0))
        if levels < 1:
            raise ValueError(f"layer {config.name!r} (spp): pyramid_height must be >= 1, "
                             f"got {levels}")
        _pool_type(config)
        return set_output_geometry(config, c * (4**levels - 1) // 3, 1, 1)

    def _level(self, b: int):
        _, h, w = self.geom[0]
        kh, kw = -(-h // b), -(-w // b)
        return (kh, kw), (kh, kw), ((kh * b - h + 1) // 2, (kw * b - w + 1) // 2)

    def forward(self, pass_type: str) -> None:
        super().forward(pass_type)
        x = self.input_image(0)
        n, c = x.shape[:2]
        out = self.reserve_output(n, self.size)
        self._saved, col = [], 0
        for level in range(int(self.attr("pyramid_height"))):
            b = 2**level
            k, st, pad = self._level(b)
            if _pool_type(self.config) == "max":
                y, arg = max_pool2d_forward(x, k, st, pad, ceil_mode=False)
            else:
                y, arg = avg_pool2d_forward(x, k, st, pad, ceil_mode=False), None
            self._saved.append((y.shape, arg))
            out[:, col : col + c * b * b] = y[:, :, :b, :b].reshape(n, -1)
            col += c * b * b
        self.add_bias()
        self.forward_activation()

    def backward(self, callback=None) -> None:
        self.backward_activation_and_bias(callback)
        gx = self.input_grad_image(0)
        if gx is None:
            return
        dy, col = self.output.grad, 0
        n, c = gx.shape[:2]
        for level, (shape, arg) in enumerate(self._saved):
            b = 2**level
            k, st, pad = self._level(b)
            full = get_array_module(dy).zeros(shape, dtype=dy.dtype)
            full[:, :, :b, :b] = dy[:, col : col + c * b * b].reshape(n, c, b, b)
            col += c * b * b
            if arg is None:
                avg_pool2d_backward(full, gx.shape, k, st, pad, out=gx)
            else:
                max_pool2d_backward(full, arg, gx.shape, k, st, pad, out=gx)


def _interp_matrix(n_in: int, n_out: int, dtype):
    """``(n_out, n_in)`` linear interpolation weights along one axis (Paddle's
    ``ratio = (in - 1) / (out - 1)``, source ``ratio * o``, corners aligned)."""
    ratio = (n_in - 1) / (n_out - 1) if n_out > 1 else 0.0
    pos = ratio * np.arange(n_out)
    lo = pos.astype(np.int64)
    hi = np.minimum(lo + 1, n_in - 1)
    lam = pos - lo
    m = np.zeros((n_out, n_in), dtype=dtype)
    rows = np.arange(n_out)
    np.add.at(m, (rows, lo), 1 - lam)
    np.add.at(m, (rows, hi), lam)
    return m


@register_layer("bilinear_interp")
class BilinearInterpLayer(ImageLayer):
    """Bilinear resize with aligned corners (Paddle's ``BilinearInterpLayer``).

    ``y = A_h x A_w^T`` per channel, ``A`` the ``(out, in)`` interpolation matrix of each axis
    (source row ``o * (in-1)/(out-1)``); backward ``dx = A_h^T dy A_w``.

    Attrs: ``out_size_x`` (width), ``out_size_y`` (height), both required;
    ``channels``/``height``/``width`` of the input.
    """

    max_inputs = 1

    @classmethod
    def infer_size(cls, config, inputs):
        c, _, _ = image_geometry(config, inputs)
        ox, oy = int(config.attrs.get("out_size_x", 0)), int(config.attrs.get("out_size_y", 0))
        if ox < 1 or oy < 1:
            raise ValueError(f"layer {config.name!r} (bilinear_interp): out_size_x and out_size_y "
                             f"must be >= 1, got {ox} and {oy}")
        return set_output_geometry(config, c, oy, ox)

    def init(self, layer_map, parameter_map) -> None:
        super().init(layer_map, parameter_map)
        _, h, w = self.geom[0]
        xp = backend.xp()
        self._ah = xp.asarray(_interp_matrix(h, self.out_geom[1], self.dtype))
        self._aw = xp.asarray(_interp_matrix(w, self.out_geom[2], self.dtype))

    def forward(self, pass_type: str) -> None:
        super().forward(pass_type)
        x = self.input_image(0)
        self.reserve_output(x.shape[0], self.size)
        self.output_image()[...] = self._ah @ x @ self._aw.T
        self.add_bias()
        self.forward_activation()

    def backward(self, callback=None) -> None:
        self.backward_activation_and_bias(callback)
        gx = self.input_grad_image(0)
        if gx is not None:
            gx += self._ah.T @ self.output_image("grad") @ self._aw


def _block_out(img: int, block: int, pad: int, stride: int) -> int:
    return 1 + (img + 2 * pad - block + stride - 1) // stride


@register_layer("blockexpand")
class BlockExpandLayer(ImageLayer):
    """Image to a sequence of blocks (Paddle's ``BlockExpandLayer``, im2col per image).

    Each image becomes a sequence of ``oh * ow`` steps (blocks in row-major order), step width
    ``C * block_y * block_x`` ordered ``(c, ky, kx)``; ``o = 1 + ceil((img + 2*pad - block) /
    stride)`` as in the C++ ``getBlockNum``, the last blocks zero-padded as needed.

    Attrs: ``block_x``, ``block_y`` (required), ``stride_x``/``stride_y`` (1), ``padding_x``/
    ``padding_y`` (0), ``channels``/``height``/``width`` of the input. Input: not a sequence.
    """

    max_inputs = 1

    @classmethod
    def _conf(cls, config):
        a = config.attrs
        k = (int(a.get("block_y", 0)), int(a.get("block_x", 0)))
        st = (int(a.get("stride_y", 1)), int(a.get("stride_x", 1)))
        pad = (int(a.get("padding_y", 0)), int(a.get("padding_x", 0)))
        if min(k) < 1 or min(st) < 1 or min(pad) < 0:
            raise ValueError(f"layer {config.name!r} (blockexpand): need block >= 1, stride >= 1, "
                             f"padding >= 0; got block {k}, stride {st}, padding {pad}")
        return k, st, pad

    @classmethod
    def infer_size(cls, config, inputs):
        c, h, w = image_geometry(config, inputs)
        k, st, pad = cls._conf(config)
        oh, ow = (_block_out(n, k[i], pad[i], st[i]) for i, n in enumerate((h, w)))
        config.attrs.update(block_num_y=oh, block_num_x=ow)
        return c * k[0] * k[1]

    def _padded_shape(self, n: int):
        c, h, w = self.geom[0]
        k, st, pad = self._conf(self.config)
        oh, ow = int(self.attr("block_num_y")), int(self.attr("block_num_x"))
        return (n, c, (oh - 1) * st[0] + k[0], (ow - 1) * st[1] + k[1]), k, st, pad, (oh, ow)

    def forward(self, pass_type: str) -> None:
        super().forward(pass_type)
        x = self.input_image(0)
        n, _, h, w = x.shape
        shape, k, st, pad, ohw = self._padded_shape(n)
        xp_ = get_array_module(x).zeros(shape, dtype=x.dtype)
        hh, ww = min(h, shape[2] - pad[0]), min(w, shape[3] - pad[1])
        xp_[:, :, pad[0] : pad[0] + hh, pad[1] : pad[1] + ww] = x[:, :, :hh, :ww]
        cols = im2col(xp_, k, st, 0, 1, ohw)
        out = self.reserve_output(n * ohw[0] * ohw[1], self.size)
        out[...] = cols.T
        self.output.seq_starts = np.arange(n + 1, dtype=np.int64) * (ohw[0] * ohw[1])  # host
        self.output.sub_seq_starts = None
        self.forward_activation()

    def backward(self, callback=None) -> None:
        self.backward_activation()
        gx = self.input_grad_image(0)
        if gx is None:
            return
        n, _, h, w = gx.shape
        shape, k, st, pad, ohw = self._padded_shape(n)
        gpad = col2im(self.output.grad.T, shape, k, st, 0, 1, ohw)
        hh, ww = min(h, shape[2] - pad[0]), min(w, shape[3] - pad[1])
        gx[:, :, :hh, :ww] += gpad[:, :, pad[0] : pad[0] + hh, pad[1] : pad[1] + ww]


def _pairs(config, key: str) -> tuple[int, int]:
    v = config.attrs.get(key, [0, 0])
    if len(v) != 2 or min(v) < 0:
        raise ValueError(f"layer {config.name!r} (pad): {key} must be two non-negative ints "
                         f"[before, after], got {v!r}")
    return int(v[0]), int(v[1])


@register_layer("pad")
class PadLayer(ImageLayer):
    """Zero padding of channels, rows and columns (Paddle's ``PadLayer``).

    Attrs: ``pad_c``, ``pad_h``, ``pad_w``: ``[before, after]`` each (default ``[0, 0]``);
    ``channels``/``height``/``width`` of the input. Output ``(C+pc, H+ph, W+pw)``.
    """

    max_inputs = 1

    @classmethod
    def infer_size(cls, config, inputs):
        c, h, w = image_geometry(config, inputs)
        pc, ph, pw = (sum(_pairs(config, k)) for k in ("pad_c", "pad_h", "pad_w"))
        return set_output_geometry(config, c + pc, h + ph, w + pw)

    def _window(self):
        c, h, w = self.geom[0]
        (c0, _), (h0, _), (w0, _) = (_pairs(self.config, k) for k in ("pad_c", "pad_h", "pad_w"))
        return slice(None), slice(c0, c0 + c), slice(h0, h0 + h), slice(w0, w0 + w)

    def forward(self, pass_type: str) -> None:
        super().forward(pass_type)
        x = self.input_image(0)
        self.reserve_output(x.shape[0], self.size)
        y = self.output_image()
        y[...] = 0
        y[self._window()] = x
        self.forward_activation()

    def backward(self, callback=None) -> None:
        self.backward_activation()
        gx = self.input_grad_image(0)
        if gx is not None:
            gx += self.output_image("grad")[self._window()]


@register_layer("crop")
class CropLayer(ImageLayer):
    """Crop a window of an image (Paddle's ``CropLayer``).

    Dimensions are ``(N, C, H, W)`` numbered 0..3; those from ``axis`` (default 2) on are
    cropped to ``shape`` (the trailing entries of attr ``shape``, or the geometry of the second
    input when there is one, as in ``crop_layer(input=[img, ref])``) starting at ``offset``
    (one entry per cropped dimension). The reference input gets no gradient.

    Attrs: ``axis`` (1..3), ``offset`` (list), ``shape`` (list, without a second input).
    """

    max_inputs = 2

    @classmethod
    def _target(cls, config, inputs):
        c, h, w = image_geometry(config, inputs)
        axis = int(config.attrs.get("axis", 2))
        if not 1 <= axis <= 3:
            raise ValueError(f"layer {config.name!r} (crop): axis must be 1, 2 or 3, got {axis}")
        if len(inputs) == 2:
            ref = image_geometry(config, inputs, 1)
        else:
            ref = list(config.attrs.get("shape", []))[-3:]
            ref = [None] * (3 - len(ref)) + ref
        offset = list(config.attrs.get("offset", [0] * (4 - axis)))
        if len(offset) != 4 - axis:
            raise ValueError(f"layer {config.name!r} (crop): offset {offset} needs {4 - axis} "
                             f"entries for axis {axis}")
        start, size = [0, 0, 0], [c, h, w]
        for d in range(axis - 1, 3):
            start[d], size[d] = int(offset[d - axis + 1]), int(ref[d] or 0)
            if size[d] < 1 or start[d] < 0 or start[d] + size[d] > (c, h, w)[d]:
                raise ValueError(f"layer {config.name!r} (crop): crop of size {size[d]} at "
                                 f"offset {start[d]} does not fit dimension {d + 1} of input "
                                 f"geometry {(c, h, w)}")
        return start, size

    @classmethod
    def infer_size(cls, config, inputs):
        _, size = cls._target(config, inputs)
        return set_output_geometry(config, *size)

    def forward(self, pass_type: str) -> None:
        super().forward(pass_type)
        start, size = self._target(self.config, [inp.config for inp in self.inputs])
        self._win = (slice(None),) + tuple(slice(s, s + n) for s, n in zip(start, size))
        x = self.input_image(0)
        self.reserve_output(x.shape[0], self.size)
        self.output_image()[...] = x[self._win]
        self.forward_activation()

    def backward(self, callback=None) -> None:
        self.backward_activation()
        gx = self.input_grad_image(0)
        if gx is not None:
            gx[self._win] += self.output_image("grad")


def xy_pair(value: Any, value_y: Any, what: str, fn: str) -> tuple[int, int]:
    """Paddle's ``(x, y)`` convention: an int for both axes, or a pair ``(x, y)``; an explicit
    ``*_y`` argument wins for the y axis."""
    if isinstance(value, (list, tuple)):
        if len(value) != 2:
            raise ValueError(f"{fn}: {what} must be an int or a pair (x, y), got {value!r}")
        x, y = value
    else:
        x = y = value
    if value_y is not None:
        y = value_y
    for v in (x, y):
        if isinstance(v, bool) or not isinstance(v, int):
            raise TypeError(f"{fn}: {what} must be an int or a pair of ints (x, y), got "
                            f"{value!r} (y: {value_y!r})")
    return int(x), int(y)


def channels_attr(num_channels: int | None, fn: str) -> dict[str, int]:
    if num_channels is None:
        return {}
    if isinstance(num_channels, bool) or not isinstance(num_channels, int) or num_channels < 1:
        raise ValueError(f"{fn}: num_channels must be a positive int or None, got "
                         f"{num_channels!r}")
    return {"channels": int(num_channels)}


def pool_type_name(pool_type: Any, fn: str) -> str:
    """Engine ``pool_type`` for a ``paddle.pooling`` object (Max default)."""
    if pool_type is None:
        pool_type = P.Max()
    if not isinstance(pool_type, P.BasePool):
        raise TypeError(f"{fn}: pool_type must be paddle.pooling.Max() or Avg(), got "
                        f"{pool_type!r}")
    if pool_type.name == "max":
        return "max-projection"
    if pool_type.name == "average":
        return "avg-projection"
    raise NotImplementedError(f"{fn}: pool_type {pool_type!r} is not supported for images; use "
                              "paddle.pooling.Max() or Avg()")


@layer_function(v1="maxout_layer", types=("maxout",))
def maxout(input: LayerOutput, groups: int, num_channels: int | None = None,  # noqa: A002
           name: str | None = None, layer_attr: Any = None) -> LayerOutput:
    """Maxout over channel groups: ``y[o] = max_k x[o*groups + k]``, ``C/groups`` channels."""
    fn = "maxout"
    return make_layer("maxout", [one_input(input, fn)], name=name, name_prefix="maxout_layer",
                      bias_attr=False, layer_attr=layer_attr,
                      attrs={"groups": int(groups), **channels_attr(num_channels, fn)})


@layer_function(v1="spp_layer", types=("spp",), prefix="spp")
def spp(input: LayerOutput, name: str | None = None, num_channels: int | None = None,  # noqa: A002
        pool_type: Any = None, pyramid_height: int | None = None,
        layer_attr: Any = None) -> LayerOutput:
    """Spatial pyramid pooling: level ``l`` pools into ``2^l x 2^l`` bins; width
    ``C * (4^pyramid_height - 1) / 3``."""
    fn = "spp"
    if pyramid_height is None:
        raise ValueError(f"{fn}: pyramid_height is required (an int >= 1)")
    attrs = {"pyramid_height": int(pyramid_height), "pool_type": pool_type_name(pool_type, fn),
             **channels_attr(num_channels, fn)}
    return make_layer("spp", [one_input(input, fn)], name=name, name_prefix="spp",
                      bias_attr=False, layer_attr=layer_attr, attrs=attrs)


@layer_function(v1="bilinear_interp_layer", types=("bilinear_interp",))
def bilinear_interp(input: LayerOutput, out_size_x: int | None = None,  # noqa: A002
                    out_size_y: int | None = None, name: str | None = None,
                    layer_attr: Any = None) -> LayerOutput:
    """Bilinear resize to ``out_size_y x out_size_x`` with aligned corners."""
    fn = "bilinear_interp"
    if out_size_x is None or out_size_y is None:
        raise ValueError(f"{fn}: out_size_x and out_size_y are required, got {out_size_x!r} "
                         f"and {out_size_y!r}")
    return make_layer("bilinear_interp", [one_input(input, fn)], name=name,
                      name_prefix="bilinear_interp_layer", bias_attr=False,
                      layer_attr=layer_attr,
                      attrs={"out_size_x": int(out_size_x), "out_size_y": int(out_size_y)})


@layer_function(v1="block_expand_layer", types=("blockexpand",))
def block_expand(input: LayerOutput, block_x: int = 0, block_y: int = 0,  # noqa: A002
                 stride_x: int = 0, stride_y: int = 0, padding_x: int = 0, padding_y: int = 0,
                 num_channels: int | None = None, name: str | None = None,
                 layer_attr: Any = None) -> LayerOutput:
    """Image to a sequence of ``block_y x block_x`` blocks (im2col per image): each sample
    becomes ``oh * ow`` steps of width ``C * block_y * block_x``. Blocks and strides must be
    given (>= 1), as in Paddle."""
    fn = "block_expand"
    attrs = {"block_x": int(block_x), "block_y": int(block_y), "stride_x": int(stride_x),
             "stride_y": int(stride_y), "padding_x": int(padding_x),
             "padding_y": int(padding_y), **channels_attr(num_channels, fn)}
    return make_layer("blockexpand", [one_input(input, fn)], name=name,
                      name_prefix="block_expand_layer", bias_attr=False, layer_attr=layer_attr,
                      attrs=attrs)


def _pad_pair(value: Any, what: str) -> list[int]:
    if value is None:
        return [0, 0]
    if isinstance(value, (list, tuple)) and len(value) == 2:
        return [int(value[0]), int(value[1])]
    raise ValueError(f"pad: {what} must be [before, after], got {value!r}")


@layer_function(v1="pad_layer", types=("pad",), prefix="pad")
def pad(input: LayerOutput, pad_c: Sequence[int] | None = None,  # noqa: A002
        pad_h: Sequence[int] | None = None, pad_w: Sequence[int] | None = None,
        name: str | None = None, layer_attr: Any = None) -> LayerOutput:
    """Zero padding of channels, rows and columns, each ``[before, after]``: output
    ``(C + sum(pad_c), H + sum(pad_h), W + sum(pad_w))``."""
    attrs = {"pad_c": _pad_pair(pad_c, "pad_c"), "pad_h": _pad_pair(pad_h, "pad_h"),
             "pad_w": _pad_pair(pad_w, "pad_w")}
    return make_layer("pad", [one_input(input, "pad")], name=name, name_prefix="pad",
                      bias_attr=False, layer_attr=layer_attr, attrs=attrs)


@layer_function(v1="crop_layer", types=("crop",))
def crop(input: Any, offset: Sequence[int], axis: int = 2,  # noqa: A002
         shape: Sequence[int] | None = None, name: str | None = None,
         layer_attr: Any = None) -> LayerOutput:
    """Crop dimensions ``axis..3`` of the ``(N, C, H, W)`` image, starting at ``offset``, to
    ``shape`` or, with ``input=[image, reference]``, to the reference layer's geometry."""
    fn = "crop"
    inputs = as_inputs(input, fn)
    if len(inputs) > 2:
        raise ValueError(f"{fn}: input is one image layer or [image, reference], got "
                         f"{len(inputs)} layers")
    if len(inputs) == 1 and shape is None:
        raise ValueError(f"{fn}: give shape=[...] or a reference layer input=[image, ref]")
    attrs: dict[str, Any] = {"axis": int(axis), "offset": [int(v) for v in offset]}
    if shape is not None:
        attrs["shape"] = [int(v) for v in shape]
    return make_layer("crop", inputs, name=name, name_prefix="crop_layer", bias_attr=False,
                      layer_attr=layer_attr, attrs=attrs)
