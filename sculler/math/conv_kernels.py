"""The compiled kernels of ``sculler/math/conv_direct.py`` (see there for the layout and the
math). This module imports numba: ``conv_direct`` imports it at the first convolution only.
numba caches the machine code on disk (``cache=True``), so it compiles once per machine and
block size; the kernels are serial and release the GIL, and ``conv_direct`` runs them over job
ranges on ``sculler.math.parallel``'s workers (whole images, so that an image is laid out
and convolved by the same thread, from its cache)."""

from __future__ import annotations

import numba
from numba import literally, njit, types
from numba.core import cgutils
from numba.extending import intrinsic

from sculler.math.jit import KERNEL_OPTIONS

FB = 4  # filters per register block (the conv's body is written out for four)
QB = 1024  # positions per cache chunk of the filter gradient


@intrinsic
def stack_array(typingctx, size, dtype):
    """A fixed-size array on the stack (``size`` a literal), which LLVM keeps in registers."""
    if not isinstance(size, types.IntegerLiteral):
        return None
    n = size.literal_value

    def codegen(context, builder, signature, args):
        return cgutils.alloca_once(builder, context.get_value_type(dtype.dtype), size=n)

    return types.CPointer(dtype.dtype)(size, dtype), codegen


@njit(**KERNEL_OPTIONS)
def conv(lo, hi, src, grid, top, left, wq, plane, sy, sx, w, offs, bias, out, accumulate,
         compute, bl, sums):
    """For the images ``[lo, hi)``: lay ``src`` out in ``grid`` (:func:`pad_image`: image
    ``n`` at ``grid[c, n*sy*sx*plane:]``), then, when ``compute``, :func:`conv_image` into
    ``sums`` (one image's grid of sums, the calling thread's: it stays in the cache;
    :func:`sums_shape`) with ``bl`` positions a register block (one of ``conv_direct.BLOCKS``,
    each compiled as its own specialisation: the stack array needs literal sizes, written out
    as ``FB * bl`` with ``FB`` = 4), and :func:`store_image` of those sums into ``out``."""
    for n in range(lo, hi):
        pad_image(src, grid, n, top, left, wq, plane, sy, sx)
        if not compute:
            continue
        base = n * sy * sx * plane
        if bl == 32:
            conv_image(base, grid, w, offs, bias, sums, 32, 128)
        elif bl == 48:
            conv_image(base, grid, w, offs, bias, sums, 48, 192)
        elif bl == 64:
            conv_image(base, grid, w, offs, bias, sums, 64, 256)
        elif bl == 80:
            conv_image(base, grid, w, offs, bias, sums, 80, 320)
        else:
            conv_image(base, grid, w, offs, bias, sums, 96, 384)
        store_image(sums, out, n, wq, accumulate)


def sums_shape(filter_blocks: int, out_rows: int, wq: int, bl: int) -> tuple[int, int]:
    """The shape of :func:`conv`'s ``sums``: a row per filter (of whole register blocks of
    filters), the output rows' grid positions in whole blocks of ``bl``."""
    return filter_blocks * FB, -(-out_rows * wq // bl) * bl


@njit(**KERNEL_OPTIONS)
def store_image(sums, out, n, wq, accumulate):
    """out[n, f, y, :] (+)= sums[f, y*wq : y*wq + width]: one image's sums, computed on the
    grid, without the positions past the output's width (row by row, vectorized)."""
    for f in range(out.shape[1]):
        for y in range(out.shape[2]):
            src = sums[f, y * wq:y * wq + out.shape[3]]
            dst = out[n, f, y]
            if accumulate:
                for x in range(dst.shape[0]):
                    dst[x] += src[x]
            else:
                for x in range(dst.shape[0]):
                    dst[x] = src[x]


@njit(**KERNEL_OPTIONS)
def conv_image(base, xflat, w, offs, bias, sums, bl, size):
    """sums[f, p] = bias[f] + sum_{c, t} w[f // FB, t, c, f % FB] * xflat[c, base + p + offs[t]]
    for every grid position ``p`` of whole blocks (``w`` blocked by
    :func:`conv_direct.filter_blocks`, rows past the filters zero), a block of FB filters by
    ``bl`` positions at a time (each tap a contiguous 1-D slice of a channel's row: a 2-D
    slice's unknown inner stride would keep LLVM from vectorizing). The block is stored whole
    (constant indices: the sums stay in vector registers); :func:`store_image` then drops the
    positions past the output's width. ``bl`` and ``size`` (``FB * bl``) are compile-time
    constants: one specialisation each."""
    literally(bl)
    literally(size)
    channels = xflat.shape[0]
    taps = offs.shape[0]
    n_blk = sums.shape[1] // bl
    acc = numba.carray(stack_array(size, xflat.dtype), (FB, bl))
    for fb in range(w.shape[0]):
        f0 = fb * FB
        for blk in range(n_blk):
            p0 = blk * bl
            for k in range(FB):
                b = bias[f0 + k]
                for i in range(bl):
                    acc[k, i] = b
            for c in range(channels):
                row = xflat[c]
                for t in range(taps):
                    xs = row[base + p0 + offs[t]:base + p0 + offs[t] + bl]
                    w0, w1, w2, w3 = w[fb, t, c, 0], w[fb, t, c, 1], w[fb, t, c, 2], w[fb, t, c, 3]
                    for i in range(bl):
                        v = xs[i]
                        acc[0, i] += w0 * v
                        acc[1, i] += w1 * v
                        acc[2, i] += w2 * v
                        acc[3, i] += w3 * v
            for k in range(FB):
                dst = sums[f0 + k, p0:p0 + bl]
                for i in range(bl):
                    dst[i] = acc[k, i]


@njit(**KERNEL_OPTIONS)
def pad(lo, hi, src, dst, top, left, wq, plane, sy, sx):
    """:func:`pad_image` for the images ``[lo, hi)``."""
    for n in range(lo, hi):
        pad_image(src, dst, n, top, left, wq, plane, sy, sx)


@njit(**KERNEL_OPTIONS)
def fill_zero(d):
    """d[:] = 0 as a loop from 0 (see :func:`pad_image`)."""
    for i in range(d.shape[0]):
        d[i] = 0


@njit(**KERNEL_OPTIONS)
def pad_image(src, dst, n, top, left, wq, plane, sy, sx):
    """Lay ``src[n, c]`` padded by ``(top, left)`` into image ``n``'s part of ``dst[c]`` (its
    ``sy*sx*plane`` floats from ``n*sy*sx*plane``; the row's tail is not touched), split into
    ``sy*sx`` stride phases: padded pixel ``(Y, X)`` goes to plane ``(Y % sy)*sx + X % sx`` (each
    ``plane`` long) at ``(Y // sy)*wq + X // sx``; zero everywhere else (borders, slack, rows
    ``c >=`` the channels of ``src``). With stride 1 this is one plane of width ``wq``.

    The rows are copied by loops over slices, indexed from 0: an index such as ``start + x``
    may be negative as far as numba knows, so it wraps it element by element and LLVM does
    not vectorize; numba's slice assignment checks the arrays for overlap at each row. Either
    made this 4-5x slower than a plain copy."""
    channels, h, w = src.shape[1], src.shape[2], src.shape[3]
    size = sy * sx * plane
    for c in range(dst.shape[0]):
        d = dst[c, n * size:(n + 1) * size]
        if c >= channels:
            fill_zero(d)
        elif sy == 1 and sx == 1:  # one pass: zeros between the rows, the rows in place
            end = 0
            for y in range(h):
                start = (y + top) * wq + left
                fill_zero(d[end:start])
                row, dst_row = src[n, c, y], d[start:start + w]
                for x in range(w):
                    dst_row[x] = row[x]
                end = start + w
            fill_zero(d[end:])
        else:  # each row's pixels of one x phase: a strided read, a contiguous write
            fill_zero(d)
            for y in range(h):
                yy = y + top
                row = (yy % sy) * sx * plane + (yy // sy) * wq
                for rx in range(sx):
                    x0 = (rx - left) % sx  # the first pixel of the row in phase rx
                    if x0 >= w:
                        continue
                    pixels = src[n, c, y, x0::sx]
                    start = row + rx * plane + (x0 + left) // sx
                    dst_row = d[start:start + pixels.shape[0]]
                    for j in range(pixels.shape[0]):
                        dst_row[j] = pixels[j]


@njit(**KERNEL_OPTIONS)
def filter_grad(lo, hi, xflat, dyg, shift, offs, positions, images, x_size, dy_size, sums,
                zero):
    """sums[p, f, c, t] = sum_{(n, q) in piece p} dyg[f, n*dy_size + shift + q] *
    xflat[c, n*x_size + q + offs[t]] for the pieces ``[lo, hi)`` of ``sums.shape[0]`` equal
    pieces of the ``images * positions`` image positions (the caller adds the pieces up),
    ``dyg`` zero at the dropped positions (``shift`` lets the input gradient's padded ``dy``
    serve where its grid is the input's, moved). Cutting the positions, not the channels, lets
    each thread read its share of ``x`` and ``dy`` once: a thread given some of the channels
    would stream all of ``dy``. A stride-1 caller passes the batch as one image (the images'
    planes end to end, each sharing its bottom padding with the next one's top: the taps of
    the last one read the grids' zero tails), so that the loops are long. Three taps by FB
    filters a pass, twelve sums held in vector registers, over chunks of QB positions: a chunk
    of ``dy`` stays in the cache while every channel and filter block passes over it. ``zero``
    is of the arrays' dtype (a float64 sum of float32 products would keep LLVM from
    vectorizing)."""
    channels = xflat.shape[0]
    n_pieces, total = sums.shape[0], images * positions
    for p in range(lo, hi):
        sums[p] = 0
        start, stop = total * p // n_pieces, total * (p + 1) // n_pieces
        while start < stop:
            n = start // positions
            q_lo = start - n * positions
            q_hi = min(positions, q_lo + stop - start)
            for q0 in range(q_lo, q_hi, QB):
                for c in range(channels):
                    _filter_grad_chunk(xflat[c, n * x_size:], dyg, n * dy_size + shift, offs, q0,
                                       min(QB, q_hi - q0), sums[p, :, c], zero)
            start += q_hi - q_lo


@njit(**KERNEL_OPTIONS)
def _filter_grad_chunk(xs, dyg, start, offs, q0, qn, out, zero):
    """out[f, t] += sum_{q0 <= q < q0 + qn} dyg[f, start + q] * xs[q + offs[t]] (one
    channel's row ``xs``, from its image's start)."""
    taps = offs.shape[0]
    for f0 in range(0, dyg.shape[0] // FB * FB, FB):
        d0 = dyg[f0, start + q0:start + q0 + qn]
        d1 = dyg[f0 + 1, start + q0:start + q0 + qn]
        d2 = dyg[f0 + 2, start + q0:start + q0 + qn]
        d3 = dyg[f0 + 3, start + q0:start + q0 + qn]
        for t0 in range(0, taps, 3):
            if t0 + 1 == taps:  # a last tap alone (a 1x1 kernel's only one): four sums
                _filter_grad_tap(xs[q0 + offs[t0]:q0 + offs[t0] + qn], d0, d1, d2, d3, out,
                                 f0, t0, zero)
                continue
            ta, tb, tc = t0, t0 + 1, min(t0 + 2, taps - 1)
            xa = xs[q0 + offs[ta]:q0 + offs[ta] + qn]
            xb = xs[q0 + offs[tb]:q0 + offs[tb] + qn]
            xc = xs[q0 + offs[tc]:q0 + offs[tc] + qn]
            a0 = a1 = a2 = a3 = b0 = b1 = b2 = b3 = c0 = c1 = c2 = c3 = zero
            for q in range(qn):
                va, vb, vc = xa[q], xb[q], xc[q]
                e0, e1, e2, e3 = d0[q], d1[q], d2[q], d3[q]
                a0 += e0 * va
                a1 += e1 * va
                a2 += e2 * va
                a3 += e3 * va
                b0 += e0 * vb
                b1 += e1 * vb
                b2 += e2 * vb
                b3 += e3 * vb
                c0 += e0 * vc
                c1 += e1 * vc
                c2 += e2 * vc
                c3 += e3 * vc
            out[f0, ta] += a0
            out[f0 + 1, ta] += a1
            out[f0 + 2, ta] += a2
            out[f0 + 3, ta] += a3
            out[f0, tb] += b0  # a group has two taps at least: a lone one went above
            out[f0 + 1, tb] += b1
            out[f0 + 2, tb] += b2
            out[f0 + 3, tb] += b3
            if t0 + 2 < taps:
                out[f0, tc] += c0
                out[f0 + 1, tc] += c1
                out[f0 + 2, tc] += c2
                out[f0 + 3, tc] += c3


@njit(**KERNEL_OPTIONS)
def _filter_grad_tap(xa, d0, d1, d2, d3, out, f0, t, zero):
    """out[f0 + k, t] += sum_q dk[q] * xa[q] for the four filters ``k`` of a block and one tap
    (a group of three would compute it three times)."""
    a0 = a1 = a2 = a3 = zero
    for q in range(xa.shape[0]):
        v = xa[q]
        a0 += d0[q] * v
        a1 += d1[q] * v
        a2 += d2[q] * v
        a3 += d3[q] * v
    out[f0, t] += a0
    out[f0 + 1, t] += a1
    out[f0 + 2, t] += a2
    out[f0 + 3, t] += a3
