"""Direct stride-1 convolution on the CPU, compiled with numba (``pip install sculler[fast]``).

Why: the im2col + GEMM route (``sculler/math/conv.py``) spends as long copying as it spends
in OpenBLAS on the small-channel maps of CIFAR networks (16-64 channels, 8x8-32x32), and
OpenBLAS runs a 16-row GEMM at a third of its peak. These kernels read the padded input in
place: an output block of ``FB`` filters x ``BL`` positions stays in vector registers while
the taps stream past it (``out[f, p] += w[f, c, t] * xpad[c, p + off[t]]``), so there is no
unfolded copy and each weight load serves ``BL`` positions.

Layout: an image ``(C, H, W)`` padded to ``(Hp, Wp)`` is stored flat per channel; output
position ``(y, x)`` is computed at ``p = y*Wp + x``, where tap ``(ky, kx)`` reads
``p + ky*Wp + kx``. The ``Wp - Wo`` positions per row past the output's width are computed
and dropped. The three passes of a convolution all run on this grid:

- forward: ``y = conv(pad(x), w) + b``;
- input gradient: ``dx = conv(pad'(dy), flip(w)^T)``, with ``pad' = k - 1 - pad`` and the
  filter's taps reversed (``flip``) and its two channel axes swapped;
- filter gradient: ``dw[f, c, t] = sum_{n, p} dy[n, f, p] * xpad[n, c, p + off[t]]``,
  ``dy`` laid on the same grid with zeros in the dropped positions.

Only stride 1, dilation 1, one group and ``pad <= k - 1`` take this path
(:func:`applicable`); everything else, CuPy arrays, and a machine without numba use the GEMM
route. ``SCULLER_CONV=gemm`` turns the path off (to compare the two). Results equal the GEMM
route's within float rounding (the sums are reassociated). numba compiles each kernel once per
process and block size, about a second in all, at the first convolution.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from sculler.math.openblas import shorten_thread_spin
from sculler.math.parallel import run_ranges

BLOCKS = (32, 48, 64, 80, 96)  # positions per register block (4 * BL / 16 <= 24 vectors)

_state: dict[str, Any] = {"numba": None}


def _numba():
    """The numba module, or False when it is not installed (imported at first use: it costs
    a third of a second)."""
    if _state["numba"] is None:
        try:
            import numba  # noqa: PLC0415
        except ImportError:
            _state["numba"] = False
        else:
            _state["numba"] = numba
    return _state["numba"]


def available() -> bool:
    """Whether the direct path can run here (numba installed, not turned off)."""
    return os.environ.get("SCULLER_CONV", "direct") != "gemm" and bool(_numba())


def applicable(x: Any, kernel: tuple[int, int], stride, padding, dilation, groups: int) -> bool:
    """Whether a convolution of ``x`` with these settings runs on the direct kernels."""
    return (type(x) is np.ndarray and x.dtype in (np.float32, np.float64) and groups == 1
            and min(stride) >= 1 and tuple(dilation) == (1, 1)
            and all(0 <= p <= k - 1 for p, k in zip(padding, kernel)) and available())


def _block(positions: int) -> int:
    """The block size that wastes the fewest computed positions (ties: the larger)."""
    return min(BLOCKS, key=lambda b: (-(-positions // b) * b - positions, -b))


def _kernels():
    """The compiled kernels (``sculler/math/conv_kernels.py``, imported at first use, when
    OpenBLAS's idle threads are also told to stop spinning soon: see
    :func:`sculler.math.openblas.shorten_thread_spin`)."""
    from sculler.math import conv_kernels  # noqa: PLC0415

    if not _state.get("spin"):
        _state["spin"] = True
        shorten_thread_spin()
    return conv_kernels


def _conv(xflat, w, offs, bias, out, wp: int, accumulate: bool) -> None:
    """The conv kernel over all its (image, filter block, position block) jobs."""
    positions = out.shape[2] * wp
    block = _block(positions)
    jobs = xflat.shape[1] * (w.shape[0] // _kernels().FB) * -(-positions // block)
    run_ranges(_kernels().conv, jobs, xflat, w, offs, bias, out, wp, accumulate, block)


def _rows(n: int) -> int:
    """``n`` rounded up to whole register blocks of filters."""
    fb = _kernels().FB
    return -(-n // fb) * fb


class DirectConv:
    """One convolution's buffers and calls: ``forward`` keeps the laid-out input for
    ``backward_filter``; all buffers are reused from batch to batch (grown when needed).

    A stride ``s`` splits the padded input into ``sy*sx`` phase planes (pixel ``(Y, X)`` in
    plane ``(Y % sy, X % sx)`` at ``(Y // sy, X // sx)``), on which tap ``(ky, kx)`` of output
    ``(y, x)`` reads plane ``(ky % sy, kx % sx)`` at ``(y + ky // sy, x + kx // sx)``: the
    same stride-1 kernels with other offsets. The input gradient of a strided convolution is
    not a convolution of ``dy`` on such a grid; :attr:`input_grad_direct` is False for it and
    the caller takes the GEMM route."""

    def __init__(self, kernel: tuple[int, int], padding: tuple[int, int],
                 stride: tuple[int, int] = (1, 1)):
        self.kernel, self.padding, self.stride = tuple(kernel), tuple(padding), tuple(stride)
        self.input_grad_direct = self.stride == (1, 1)
        self._bufs: dict[str, np.ndarray] = {}
        self._xflat = None
        self._x_grid: tuple[int, int] | None = None  # (grid width, row length) of the input

    def _buf(self, key: str, shape: tuple, dtype) -> np.ndarray:
        buf = self._bufs.get(key)
        if buf is None or buf.shape != shape or buf.dtype != dtype:
            buf = self._bufs[key] = np.empty(shape, dtype)
        return buf

    def _layout(self, h: int, w: int, pad: tuple[int, int], stride: tuple[int, int],
                out_rows: int) -> tuple[int, int, np.ndarray]:
        """(grid width, plane length, tap offsets) of an ``(h, w)`` image padded by ``pad``
        and split by ``stride``, for ``out_rows`` output rows: a plane holds the padded image
        and the taps of the last block of positions."""
        (kh, kw), (sy, sx) = self.kernel, stride
        hq, wq = -(-(h + 2 * pad[0]) // sy), -(-(w + 2 * pad[1]) // sx)
        positions = out_rows * wq
        computed = -(-positions // _block(positions)) * _block(positions)
        plane = max(hq * wq, computed + (kh - 1) // sy * wq + (kw - 1) // sx)
        offs = np.array([((ky % sy) * sx + kx % sx) * plane + ky // sy * wq + kx // sx
                         for ky in range(kh) for kx in range(kw)], np.int64)
        return wq, plane, offs

    def _grid(self, key: str, src, rows: int, pad: tuple[int, int], wq: int, plane: int,
              stride: tuple[int, int], length: int):
        """``src (N, C, H, W)`` laid out as :func:`conv_kernels.pad` does, ``rows``
        channels, rows of ``length``."""
        n = src.shape[0]
        buf = self._buf(key, (rows, n, length), src.dtype)
        run_ranges(_kernels().pad, n * rows, src, buf, pad[0], pad[1], wq, plane, *stride, rows)
        return buf

    def forward(self, x, w, out, bias=None, accumulate: bool = False) -> None:
        """``out (N, F, Ho, Wo)`` (+)= conv(x, w) + bias, ``w`` shaped ``(F, C, kh, kw)``."""
        f, c, kh, kw = w.shape
        sy, sx = self.stride
        wq, plane, offs = self._layout(*x.shape[2:], self.padding, self.stride, out.shape[2])
        self._xflat = self._grid("x", x, c, self.padding, wq, plane, self.stride,
                                 sy * sx * plane)
        self._x_grid = (wq, offs)
        wk = self._buf("w", (_rows(f), c, kh * kw), w.dtype)
        wk[:f] = w.reshape(f, c, kh * kw)
        wk[f:] = 0
        b = self._buf("b", (_rows(f),), w.dtype)
        b[:] = 0
        if bias is not None:
            b[:f] = bias.reshape(-1)
        _conv(self._xflat, wk, offs, b, out, wq, accumulate)

    def backward_filter(self, dy, out, beta: float = 0.0) -> None:
        """``out (F, C, kh, kw)`` = beta*out + the filter gradient, from the input kept by the
        last ``forward``."""
        f = dy.shape[1]
        wq, offs = self._x_grid
        length = self._xflat.shape[2]
        if dy.shape[2] * wq + offs.max() > length or dy.shape[3] > wq:
            raise ValueError(f"DirectConv.backward_filter: dy {dy.shape} does not match the "
                             f"input of the last forward")
        n, f4 = dy.shape[0], _rows(f)
        sums = self._buf("dw", (f4, out.shape[1], out[0, 0].size), dy.dtype)
        xflat = self._xflat
        if self.stride == (1, 1):
            # dy on the input's grid, rows as long as x's: the batch is one long row
            dyg = self._grid("dy", dy, f4, (0, 0), wq, length, (1, 1), length)
            xflat = xflat.reshape(xflat.shape[0], 1, n * length)
            dyg, positions = dyg.reshape(f4, 1, n * length), n * length - int(offs.max())
        else:  # dy on the output grid of the phase planes, image by image
            positions = dy.shape[2] * wq
            dyg = self._grid("dy", dy, f4, (0, 0), wq, positions, (1, 1), positions)
        run_ranges(_kernels().filter_grad, xflat.shape[0], xflat, dyg, offs, positions, sums,
                   dy.dtype.type(0))
        if beta == 0.0:
            out[...] = sums[:f].reshape(out.shape)
        else:
            out *= beta
            out += sums[:f].reshape(out.shape)

    def backward_data(self, dy, w, out, beta: float = 0.0) -> None:
        """``out (N, C, H, W)`` = beta*out + the input gradient, ``dx = conv(pad'(dy),
        flip(w)^T)`` (stride 1 only: :attr:`input_grad_direct`)."""
        if not self.input_grad_direct:
            raise ValueError(f"DirectConv.backward_data: stride {self.stride} takes the GEMM "
                             "route (input_grad_direct is False)")
        f, c, kh, kw = w.shape
        pad = (kh - 1 - self.padding[0], kw - 1 - self.padding[1])
        wq, plane, offs = self._layout(*dy.shape[2:], pad, (1, 1), out.shape[2])
        dyflat = self._grid("dy_pad", dy, f, pad, wq, plane, (1, 1), plane)
        wt = self._buf("wt", (_rows(c), f, kh * kw), w.dtype)
        wt[:c] = w.reshape(f, c, kh * kw)[:, :, ::-1].transpose(1, 0, 2)
        wt[c:] = 0
        zero = self._buf("zero", (_rows(c),), w.dtype)
        zero[:] = 0
        if beta not in (0.0, 1.0):
            out *= beta
        _conv(dyflat, wt, offs, zero, out, wq, beta != 0.0)
