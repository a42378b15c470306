"""Direct convolution on the CPU, compiled with numba (``pip install sculler[fast]``).

Why: the im2col + GEMM route (``sculler/math/conv.py``) spends as long copying as it spends
in OpenBLAS on the small-channel maps of CIFAR networks (16-64 channels, 8x8-32x32), and
OpenBLAS runs a 16-row GEMM at a third of its peak. These kernels read the padded input in
place: an output block of ``FB`` filters x ``BL`` positions stays in vector registers while
the taps stream past it (``out[f, p] += w[f, c, t] * xpad[c, p + off[t]]``), so there is no
unfolded copy and each weight load serves ``BL`` positions.

Layout: an image ``(C, H, W)``, padded, is stored flat per channel, in rows of ``Wq = W + pad``
(a row's right padding is the next row's left padding); a channel's row of the grid holds the
batch's images end to end, ``(H + pad)*Wq`` floats each (an image's bottom padding rows are
the next one's top padding), then a zero tail. Output position ``(y, x)`` is computed at
``p = y*Wq + x`` from its image's start, where tap ``(ky, kx)`` reads ``p + ky*Wq + kx``. The
``Wq - Wo`` positions per row past the output's width are computed and dropped. The three
passes of a convolution all run on this grid:

- forward: ``y = conv(pad(x), w) + b``;
- input gradient: ``dx = conv(pad'(dy), flip(w)^T)``, with ``pad' = k - 1 - pad`` and the
  filter's taps reversed (``flip``) and its two channel axes swapped;
- filter gradient: ``dw[f, c, t] = sum_{n, p} dy[n, f, p] * xpad[n, c, p + off[t]]``,
  ``dy`` laid on the same grid with zeros in the dropped positions.

Convolutions with "same" padding, dilation 1 and one group take this path
(:func:`applicable`); everything else, CuPy arrays, and a machine without numba use the GEMM
route. ``SCULLER_CONV=gemm`` turns the path off (to compare the two). Results equal the GEMM
route's within float rounding (the sums are reassociated). numba compiles the kernels at the
first convolution (several seconds) and caches the machine code on disk.
"""

from __future__ import annotations

import os
from typing import Any, NamedTuple

import numpy as np

from sculler.math.jit import compilable, numba_available
from sculler.math.openblas import shorten_thread_spin
from sculler.math.parallel import run_ranges, scratch, threads

BLOCKS = (32, 48, 64, 80, 96)  # positions per register block (4 * BL / 16 <= 24 vectors)
TAIL = 112  # zero floats past a grid row's reach: a register block and a vector

_state: dict[str, Any] = {}


def available() -> bool:
    """Whether the direct path can run here (numba installed, not turned off by
    ``SCULLER_CONV=gemm`` or ``SCULLER_JIT=0``)."""
    return os.environ.get("SCULLER_CONV", "direct") != "gemm" and numba_available()


def applicable(x: Any, kernel: tuple[int, int], stride, padding, dilation, groups: int) -> bool:
    """Whether a convolution of ``x`` with these settings runs on the direct kernels: "same"
    padding (``2*pad = k - 1``), dilation 1, one group, NumPy float arrays. Chosen by
    measurement: on ResNet's 3x3 convolutions the direct kernels beat the GEMM route 1.6-2x
    (no unfolded copies), while LeNet's unpadded 5x5 ones ran 0.8x (a quarter to a third of
    the computed positions fall past the output's width, and the GEMM route's batch-last
    unfolding suits those small maps); the kernels themselves handle any padding up to k-1."""
    return (groups == 1 and min(stride) >= 1 and tuple(dilation) == (1, 1)
            and all(2 * p == k - 1 for p, k in zip(padding, kernel))
            and compilable(x) and available())


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


def _span(positions: int, last_tap: int) -> tuple[int, int]:
    """(block, reach) for ``positions`` output positions on a grid: the register block
    (:func:`_block`) and how far into a row its last block's farthest tap (``last_tap`` past
    the position) reads."""
    block = _block(positions)
    return block, -(-positions // block) * block + last_tap


def _convolve(lo: int, hi: int, src, grid, top: int, left: int, wq: int, plane: int, sy: int,
              sx: int, w, offs, bias, out, accumulate: bool, compute: bool, bl: int) -> None:
    """The compiled ``conv`` over the images ``[lo, hi)`` with the calling thread's buffer of
    sums (``parallel.scratch``: nothing batch-sized is allocated per call)."""
    kernels = _kernels()
    rows, span = kernels.sums_shape(w.shape[0], out.shape[2], wq, bl) if compute else (0, 0)
    sums = scratch(rows * span, out.dtype, slot="conv_sums").reshape(rows, span)
    kernels.conv(lo, hi, src, grid, top, left, wq, plane, sy, sx, w, offs, bias, out,
                 accumulate, compute, bl, sums)


def filter_blocks(w, out):
    """Filters ``w (F, C, T)`` as the conv kernel reads them: ``out[F // 4, T, C, 4]``,
    zero past ``F`` (the four weights of a register block in one cache line)."""
    f, c, t = w.shape
    view = out.transpose(0, 3, 2, 1)  # (F // 4, 4, C, T), a view
    full, rest = divmod(f, 4)
    view[:full] = w[:full * 4].reshape(full, 4, c, t)
    view[full:] = 0
    if rest:
        view[full, :rest] = w[full * 4:]
    return out


def _rows(n: int) -> int:
    """``n`` rounded up to whole register blocks of filters."""
    fb = _kernels().FB
    return -(-n // fb) * fb


class Geometry(NamedTuple):
    """Where things lie on the grids of one convolution shape (see :class:`DirectConv`)."""

    wq: int  # width of the output grid
    plane: int  # length of one stride-phase plane of the input
    offs: np.ndarray  # tap offsets into an input row
    block: int  # output positions per register block
    # the input gradient's grid (stride 1): padding of dy, width, row length, tap offsets
    dx_pad: tuple[int, int] | None
    dx_wq: int
    dx_row: int
    dx_offs: np.ndarray | None
    dx_block: int
    shift: int | None  # where dy's grid is the input's, moved by this much (else None)
    # a strided input gradient, per stride phase (ry, rx): its layout of dy, or None where
    # no tap reaches the phase (see DirectConv._strided_input_grad)
    phases: tuple = ()


class Phase(NamedTuple):
    """One stride phase of a strided input gradient: the sub-filter's taps
    ``w[:, :, ky0::sy, kx0::sx]`` (``jy x jx`` of them), and ``dy`` laid ``top``/``left`` in on a
    grid of width ``wq`` and ``plane`` long, read at ``offs``."""

    ry: int
    rx: int
    ky0: int
    kx0: int
    jy: int
    jx: int
    top: int
    left: int
    wq: int
    plane: int
    offs: np.ndarray
    block: int


class DirectConv:
    """One convolution's buffers and calls: ``forward`` keeps the laid-out input for the
    filter gradient; all buffers are reused from batch to batch (grown when needed).

    A stride ``s`` splits the padded input into ``sy*sx`` phase planes (pixel ``(Y, X)`` in
    plane ``(Y % sy, X % sx)`` at ``(Y // sy, X // sx)``), on which tap ``(ky, kx)`` of output
    ``(y, x)`` reads plane ``(ky % sy, kx % sx)`` at ``(y + ky // sy, x + kx // sx)``: the
    same stride-1 kernels with other offsets. The input gradient of a strided convolution is
    computed phase by phase of the input (:meth:`_strided_input_grad`)."""

    def __init__(self, kernel: tuple[int, int], padding: tuple[int, int],
                 stride: tuple[int, int] = (1, 1)):
        self.kernel, self.padding, self.stride = tuple(kernel), tuple(padding), tuple(stride)
        self._bufs: dict[str, np.ndarray] = {}
        self._geometries: dict[tuple, Geometry] = {}
        self._xflat = None
        self._images = 0  # the batch size of the last forward
        self._geom: Geometry | None = None
        self._out_shape: tuple[int, ...] = ()
        # a strided 1x1 convolution without padding reads only the pixels of stride phase
        # (0, 0): it runs as a stride-1 one on that subsampled view of the input
        self._subsampled = (DirectConv((1, 1), (0, 0))
                            if self.kernel == (1, 1) and self.padding == (0, 0)
                            and self.stride != (1, 1) else None)

    def _buf(self, key: str, shape: tuple, dtype, zeros: bool = False) -> np.ndarray:
        """The buffer ``key``, reused while its shape and dtype stay (a new one is empty, or
        all zeros with ``zeros``)."""
        buf = self._bufs.get(key)
        if buf is None or buf.shape != shape or buf.dtype != dtype:
            buf = self._bufs[key] = (np.zeros if zeros else np.empty)(shape, dtype)
        return buf

    def _plane(self, h: int, w: int, pad, stride, out_rows: int) -> tuple[int, int, int]:
        """(grid width, plane length, block) of an ``(h, w)`` image padded by ``pad`` and split
        by ``stride``, for ``out_rows`` output rows: a plane holds the padded image and the
        taps of the last block of positions. With stride 1 a row's right padding is the next
        row's left padding (``wq = w + pad``: the taps past a row's end read the zeros that
        start the next), so fewer computed positions fall past the output's width."""
        (kh, kw), (sy, sx) = self.kernel, stride
        if (sy, sx) == (1, 1):  # an image's bottom padding is the next one's top padding
            wq = w + pad[1]
            block, _ = _span(out_rows * wq, (kh - 1) * wq + kw - 1)
            return wq, (h + pad[0]) * wq, block
        hq, wq = -(-(h + 2 * pad[0]) // sy), -(-(w + 2 * pad[1]) // sx)
        block, reach = _span(out_rows * wq, (kh - 1) // sy * wq + (kw - 1) // sx)
        return wq, max(hq * wq, reach), block

    def _grid(self, key: str, rows: int, n: int, size: int, reach: int, dtype) -> np.ndarray:
        """``(rows, n*size + tail)``: each row holds ``n`` images of ``size`` floats end to end,
        then a zero tail for the taps and register blocks that ``reach`` past the last one
        (with stride 1 a plane ends at its image's last row: the next image's first rows are
        its bottom padding, and the tail the last image's). A new grid starts all zeros: an
        image's padding rows are read by the previous image's taps before (or while) this one
        is laid out, and are only ever written zeros."""
        return self._buf(key, (rows, n * size + reach + TAIL), dtype, zeros=True)

    def _offsets(self, wq: int, plane: int, stride) -> np.ndarray:
        (kh, kw), (sy, sx) = self.kernel, stride
        return np.array([((ky % sy) * sx + kx % sx) * plane + ky // sy * wq + kx // sx
                         for ky in range(kh) for kx in range(kw)], np.int64)

    def geometry(self, in_hw: tuple[int, int], out_hw: tuple[int, int]) -> Geometry:
        """The grids of an ``in_hw`` input and ``out_hw`` output (computed once a shape)."""
        key = (tuple(in_hw), tuple(out_hw))
        if key in self._geometries:
            return self._geometries[key]
        (kh, kw), (py, px) = self.kernel, self.padding
        wq, plane, block = self._plane(*in_hw, self.padding, self.stride, out_hw[0])
        dx_pad, dx_wq, dx_row, dx_offs, dx_block, shift = None, 0, 0, None, 0, None
        if self.stride == (1, 1):
            dx_pad = (kh - 1 - py, kw - 1 - px)
            dx_wq, dx_row, dx_block = self._plane(*out_hw, dx_pad, (1, 1), in_hw[0])
            if dx_wq == wq:  # "same" padding: dy's grid is the input's, moved
                plane = dx_row = max(plane, dx_row)
                shift = dx_pad[0] * wq + dx_pad[1]
            dx_offs = self._offsets(dx_wq, dx_row, (1, 1))
        geom = self._geometries[key] = Geometry(
            wq, plane, self._offsets(wq, plane, self.stride), block, dx_pad, dx_wq, dx_row,
            dx_offs, dx_block, shift,
            () if self.stride == (1, 1) else self._phases(in_hw, out_hw))
        return geom

    def _phases(self, in_hw, out_hw) -> tuple:
        """The :class:`Phase` of each stride phase of ``dx`` (None where no tap reaches it,
        nor where the phase is empty). ``dx[s*a + ry, ...]`` only meets the taps
        ``ky = ky0 + s*j`` with ``ky0 = (ry + pad) % s``, at ``dy`` row
        ``a + (ry + pad - ky0)/s - j``: with the sub-filter flipped (``j' = jy - 1 - j``) the
        row is ``a + j' - ty``, ``ty = jy - 1 - (ry + pad - ky0)/s``; likewise along x."""
        (kh, kw), (sy, sx), (py, px) = self.kernel, self.stride, self.padding
        (h, w), (ho, wo) = in_hw, out_hw
        phases = []
        for ry in range(sy):
            for rx in range(sx):
                ha, wb = len(range(ry, h, sy)), len(range(rx, w, sx))
                ky0, kx0 = (ry + py) % sy, (rx + px) % sx
                jy, jx = len(range(ky0, kh, sy)), len(range(kx0, kw, sx))
                if ha * wb == 0 or jy * jx == 0:
                    phases.append(None)
                    continue
                ty, tx = jy - 1 - (ry + py - ky0) // sy, jx - 1 - (rx + px - kx0) // sx
                top, left = max(ty, 0), max(tx, 0)
                base_y, base_x = top - ty, left - tx
                wq = max(wo + left, wb + jx - 1 + base_x)
                block, reach = _span(ha * wq, (jy - 1 + base_y) * wq + jx - 1 + base_x)
                offs = np.array([(j + base_y) * wq + i + base_x for j in range(jy)
                                 for i in range(jx)], np.int64)
                phases.append(Phase(ry, rx, ky0, kx0, jy, jx, top, left, wq,
                                    max((ho + top) * wq, reach), offs, block))
        return tuple(phases)

    def forward(self, x, w, out, bias=None, accumulate: bool = False) -> None:
        """``out (N, F, Ho, Wo)`` (+)= conv(x, w) + bias, ``w`` shaped ``(F, C, kh, kw)``."""
        if self._subsampled is not None:
            sy, sx = self.stride
            self._subsampled.forward(x[:, :, ::sy, ::sx], w, out, bias, accumulate)
            return
        f, c, kh, kw = w.shape
        (sy, sx), n = self.stride, x.shape[0]
        g = self._geom = self.geometry(x.shape[2:], out.shape[2:])
        self._out_shape = tuple(out.shape[2:])
        grid = self._xflat = self._grid("x", c, n, sy * sx * g.plane, self._reach(g), x.dtype)
        self._images = n
        wk = filter_blocks(w.reshape(f, c, kh * kw), self._buf("w", (_rows(f) // 4, kh * kw,
                                                                     c, 4), w.dtype))
        b = self._buf("b", (_rows(f),), w.dtype)
        b[:] = 0
        if bias is not None:
            b[:f] = bias.reshape(-1)
        run_ranges(_convolve, n, x, grid, *self.padding, g.wq, g.plane, sy, sx, wk,
                   g.offs, b, out, accumulate, True, g.block)

    def backward(self, dy, w, grad_w=None, beta_w: float = 0.0, grad_x=None,
                 beta_x: float = 0.0) -> None:
        """The filter gradient ``grad_w (F, C, kh, kw) = beta_w*grad_w + dw`` (from the input
        kept by the last ``forward``) and the input gradient ``grad_x (N, C, H, W) =
        beta_x*grad_x + dx``, ``dx = conv(pad'(dy), flip(w)^T)`` with ``pad' = k - 1 - pad``
        (with a stride, phase by phase: :meth:`_strided_input_grad`); either may be None."""
        if self._subsampled is not None:
            self._subsampled_backward(dy, w, grad_w, beta_w, grad_x, beta_x)
            return
        g = self._geom
        if g is None or dy.shape[2:] != self._out_shape or dy.shape[0] != self._images:
            raise ValueError(f"DirectConv.backward: dy {dy.shape} does not match the output of "
                             "the last forward")
        f, c, kh, kw = w.shape
        n = dy.shape[0]
        if grad_x is not None and self.stride != (1, 1):
            self._strided_input_grad(dy, w, grad_x, beta_x)
            grad_x = None
        dy_grid = None
        if grad_x is not None or (grad_w is not None and g.shift is not None):
            dy_grid = self._grid("dy_pad", f, n, g.dx_row, self._reach(g), dy.dtype)
            wt = filter_blocks(w.reshape(f, c, kh * kw)[:, :, ::-1].transpose(1, 0, 2),
                               self._buf("wt", (_rows(c) // 4, kh * kw, f, 4), w.dtype))
            zero = self._buf("zero", (_rows(c),), w.dtype)
            zero[:] = 0
            if grad_x is not None and beta_x not in (0.0, 1.0):
                grad_x *= beta_x
            run_ranges(_convolve, n, dy, dy_grid, *g.dx_pad, g.dx_wq, g.dx_row, 1, 1, wt,
                       g.dx_offs, zero, grad_x if grad_x is not None else dy, beta_x != 0.0,
                       grad_x is not None, g.dx_block)
        if grad_w is not None:
            self._filter_grad(dy, g, dy_grid, grad_w, beta_w)

    def _subsampled_backward(self, dy, w, grad_w, beta_w: float, grad_x, beta_x: float) -> None:
        """:meth:`backward` of a strided 1x1 convolution: the stride-1 one's, whose input
        gradient is that of the pixels of phase (0, 0), zero at the others."""
        (sy, sx), grad_phase = self.stride, None
        if grad_x is not None:
            if beta_x not in (0.0, 1.0):
                grad_x *= beta_x
            if beta_x == 0.0:
                for ry in range(sy):
                    for rx in range(sx):
                        if ry or rx:
                            grad_x[:, :, ry::sy, rx::sx] = 0
            grad_phase = grad_x[:, :, ::sy, ::sx]
        self._subsampled.backward(dy, w, grad_w, beta_w, grad_phase,
                                  0.0 if beta_x == 0.0 else 1.0)

    def _strided_input_grad(self, dy, w, out, beta: float) -> None:
        """``out = beta*out + dx`` for a stride, one stride phase of ``dx`` at a time (the
        phases of :meth:`_phases`): each is a stride-1 correlation of ``dy`` with its
        sub-filter, flipped, on the same kernel, written into the strided view
        ``out[:, :, ry::sy, rx::sx]``."""
        f, c = w.shape[:2]
        (sy, sx), n = self.stride, dy.shape[0]
        if beta not in (0.0, 1.0):
            out *= beta
        zero = self._buf("zero", (_rows(c),), w.dtype)
        zero[:] = 0
        for ry in range(sy):
            for rx in range(sx):
                ph = self._geom.phases[ry * sx + rx]
                view = out[:, :, ry::sy, rx::sx]
                if ph is None:  # no tap reaches this phase
                    if beta == 0.0:
                        view[...] = 0
                    continue
                sub = w[:, :, ph.ky0::sy, ph.kx0::sx][:, :, ::-1, ::-1]
                wt = filter_blocks(sub.reshape(f, c, ph.jy * ph.jx).transpose(1, 0, 2),
                                   self._buf(f"wt{ry}{rx}", (_rows(c) // 4, ph.jy * ph.jx, f, 4),
                                             w.dtype))
                grid = self._grid(f"dy{ry}{rx}", f, n, ph.plane, 0, dy.dtype)
                run_ranges(_convolve, n, dy, grid, ph.top, ph.left, ph.wq, ph.plane, 1, 1,
                           wt, ph.offs, zero, view, beta != 0.0, True, ph.block)

    def _reach(self, g: Geometry) -> int:
        """How far past a grid's last image the stride-1 taps read (the farthest tap offset
        of either pass, and the input gradient's shift)."""
        return int(max(g.offs.max(), 0 if g.dx_offs is None else g.dx_offs.max()))

    def _filter_grad(self, dy, g: Geometry, dy_grid, out, beta: float) -> None:
        f, n = dy.shape[1], dy.shape[0]
        f4, xflat = _rows(f), self._xflat
        pieces = 2 * threads()  # each thread's share in a few pieces, taken in turn
        sums = self._buf("dw", (pieces, f4, out.shape[1], out[0, 0].size), dy.dtype)
        if self.stride == (1, 1):
            if g.shift is not None and f4 == f:  # the input gradient's padded dy, moved
                dyg, shift = dy_grid, g.shift
            else:  # dy on the input's grid
                dyg, shift = self._grid("dy", f4, n, g.plane, self._reach(g), dy.dtype), 0
                run_ranges(_kernels().pad, n, dy, dyg, 0, 0, g.wq, g.plane, 1, 1)
            # the images end to end, one long row: its positions are all the planes'
            images, positions, x_size, dy_size = 1, n * g.plane, 0, 0
        else:  # dy on the output grid of the phase planes, image by image
            images, positions, shift = n, dy.shape[2] * g.wq, 0
            x_size, dy_size = self.stride[0] * self.stride[1] * g.plane, positions
            dyg = self._grid("dy", f4, n, positions, 0, dy.dtype)
            run_ranges(_kernels().pad, n, dy, dyg, 0, 0, g.wq, positions, 1, 1)
        run_ranges(_kernels().filter_grad, pieces, xflat, dyg, shift, g.offs, positions, images,
                   x_size, dy_size, sums, dy.dtype.type(0), chunks=1)
        total = np.sum(sums, axis=0, out=self._buf("dw_total", sums.shape[1:], dy.dtype))
        if beta == 0.0:
            out[...] = total[:f].reshape(out.shape)
        else:
            out *= beta
            out += total[:f].reshape(out.shape)
