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
            and tuple(stride) == (1, 1) and tuple(dilation) == (1, 1)
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
    """One stride-1 convolution's buffers and calls: ``forward`` keeps the padded input for
    ``backward_filter``; all buffers are reused from batch to batch (grown when needed)."""

    def __init__(self, kernel: tuple[int, int], padding: tuple[int, int]):
        self.kernel, self.padding = tuple(kernel), tuple(padding)
        self._bufs: dict[str, np.ndarray] = {}
        self._xflat = None

    def _buf(self, key: str, shape: tuple, dtype) -> np.ndarray:
        buf = self._bufs.get(key)
        if buf is None or buf.shape != shape or buf.dtype != dtype:
            buf = self._bufs[key] = np.empty(shape, dtype)
        return buf

    def _grid(self, key: str, src, rows: int, pad: tuple[int, int], wp: int, positions: int):
        """``src`` ``(N, C, H, W)`` placed ``pad`` rows and columns in on a flat grid of width
        ``wp``, ``rows`` channels, zeros elsewhere, long enough for the taps of the last
        block of ``positions``."""
        kh, kw = self.kernel
        n, _, h, _ = src.shape
        computed = -(-positions // _block(positions)) * _block(positions)
        length = max((h + 2 * pad[0]) * wp, computed + (kh - 1) * wp + kw - 1)
        buf = self._buf(key, (rows, n, length), src.dtype)
        run_ranges(_kernels().pad, n * rows, src, buf, pad[0], pad[1], wp, rows)
        return buf

    def _offsets(self, wp: int) -> np.ndarray:
        kh, kw = self.kernel
        return np.array([ky * wp + kx for ky in range(kh) for kx in range(kw)], np.int64)

    def forward(self, x, w, out, bias=None, accumulate: bool = False) -> None:
        """``out (N, F, Ho, Wo)`` (+)= conv(x, w) + bias, ``w`` shaped ``(F, C, kh, kw)``."""
        f, c, kh, kw = w.shape
        ho, wo = out.shape[2:]
        wp = x.shape[3] + 2 * self.padding[1]
        xflat = self._xflat = self._grid("x", x, x.shape[1], self.padding, wp, ho * wp)
        wk = self._buf("w", (_rows(f), c, kh * kw), w.dtype)
        wk[:f] = w.reshape(f, c, kh * kw)
        wk[f:] = 0
        b = self._buf("b", (_rows(f),), w.dtype)
        b[:] = 0
        if bias is not None:
            b[:f] = bias.reshape(-1)
        _conv(xflat, wk, self._offsets(wp), b, out, wp, accumulate)

    def backward_filter(self, dy, out, beta: float = 0.0) -> None:
        """``out (F, C, kh, kw)`` = beta*out + the filter gradient, from the input kept by the
        last ``forward``."""
        f = dy.shape[1]
        ho, wo = dy.shape[2:]
        wp = wo + self.kernel[1] - 1
        positions = ho * wp
        # dy on the padded input's grid, zeros in the dropped positions
        dyg = self._grid("dy", dy, _rows(f), (0, 0), wp, positions)
        if dyg.shape[2] != self._xflat.shape[2]:
            raise ValueError(f"DirectConv.backward_filter: dy {dy.shape} does not match the "
                             f"input of the last forward")
        sums = self._buf("dw", (_rows(f), out.shape[1], out[0, 0].size), dy.dtype)
        run_ranges(_kernels().filter_grad, self._xflat.shape[0], self._xflat, dyg,
                   self._offsets(wp), sums, dy.dtype.type(0))
        if beta == 0.0:
            out[...] = sums[:f].reshape(out.shape)
        else:
            out *= beta
            out += sums[:f].reshape(out.shape)

    def backward_data(self, dy, w, out, beta: float = 0.0) -> None:
        """``out (N, C, H, W)`` = beta*out + the input gradient, ``dx = conv(pad'(dy),
        flip(w)^T)``."""
        f, c, kh, kw = w.shape
        h, wd = out.shape[2:]
        pad = (kh - 1 - self.padding[0], kw - 1 - self.padding[1])
        wp = dy.shape[3] + 2 * pad[1]
        dyflat = self._grid("dy_pad", dy, dy.shape[1], pad, wp, h * wp)
        wt = self._buf("wt", (_rows(c), f, kh * kw), w.dtype)
        wt[:c] = w.reshape(f, c, kh * kw)[:, :, ::-1].transpose(1, 0, 2)
        wt[c:] = 0
        zero = self._buf("zero", (_rows(c),), w.dtype)
        zero[:] = 0
        if beta not in (0.0, 1.0):
            out *= beta
        _conv(dyflat, wt, self._offsets(wp), zero, out, wp, beta != 0.0)
