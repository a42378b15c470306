"""Segment operations on packed sequences: reductions, windows and index maps.

A batch of sequences is packed without padding; ``starts`` (``(n + 1,)`` host int64, ending with
the number of rows) cuts the rows into ``n`` segments ``x[starts[i]:starts[i + 1]]``. Segments may
be empty. Every function here works on whole batches with array operations (``reduceat``,
``repeat``, fancy indexing); nothing loops over segments in Python.

Example:
    >>> import numpy as np
    >>> x = np.arange(5.0).reshape(5, 1)
    >>> out = np.empty((3, 1))
    >>> segment_sum(x, np.array([0, 2, 2, 5]), out)[:, 0].tolist()
    [1.0, 0.0, 9.0]
"""

from __future__ import annotations

import numpy as np

from sculler.backend import cached_like, get_array_module, to_numpy
from sculler.math import cuda

__all__ = [
    "lengths", "segment_of_rows", "ranges", "segment_sum", "segment_max", "window_starts",
    "degrade", "starts_from_lengths", "gather_rows", "shifted_add",
]


def lengths(starts) -> np.ndarray:
    """Rows per segment, ``(n,)``: ``starts[1:] - starts[:-1]`` (one ufunc call; ``np.diff``'s
    Python wrapper costs 3x as much, and a recurrent group asks for lengths every step)."""
    starts = np.asarray(starts, dtype=np.int64)
    return starts[1:] - starts[:-1]


def starts_from_lengths(lens) -> np.ndarray:
    """``[0, l0, l0 + l1, ...]``: the starts of consecutive segments of these lengths."""
    out = np.zeros(len(lens) + 1, dtype=np.int64)
    np.cumsum(lens, out=out[1:])
    return out


def segment_of_rows(starts) -> np.ndarray:
    """Segment index of every row, ``(starts[-1],)``."""
    lens = lengths(starts)
    return np.repeat(np.arange(lens.size, dtype=np.int64), lens)


def ranges(begins, lens) -> np.ndarray:
    """Concatenated ``arange(begins[i], begins[i] + lens[i])`` for all i."""
    begins, lens = np.asarray(begins, dtype=np.int64), np.asarray(lens, dtype=np.int64)
    offsets = starts_from_lengths(lens)
    pos = np.arange(offsets[-1], dtype=np.int64)
    return pos - np.repeat(offsets[:-1] - begins, lens)


def segment_sum(x, starts, out):
    """``out[i] = sum of the rows of segment i`` (zero for an empty segment); returns ``out``.

    ``x`` is ``(starts[-1], d)``, ``out`` is ``(n, d)``.
    """
    xp = get_array_module(out)
    if xp is not np and x.ndim == out.ndim == 2:
        cuda.segment_sum(x, starts, out)
        return out
    lens = lengths(starts)
    out[...] = 0
    full = lens > 0
    if full.any():
        sums = np.add.reduceat(to_numpy(x), np.asarray(starts[:-1])[full], axis=0)
        out[xp.asarray(np.flatnonzero(full))] = xp.asarray(sums)
    return out


def add_segment_sums(dst, x, starts, work):
    """``dst[i] += sum of the rows of segment i`` of ``x``; returns ``dst``. On the GPU one
    kernel; on the host :func:`segment_sum` into ``work`` (dst's shape) and an add."""
    if get_array_module(dst) is not np and x.ndim == dst.ndim == 2:
        cuda.segment_sum(x, starts, dst, add=True)
        return dst
    dst += segment_sum(x, starts, work)
    return dst


def add_to_rows(dst, rows, src):
    """``dst[rows] += src`` for distinct ``rows`` (a scatter's gradient: the rows a gather
    or a reordering took); returns ``dst``. On the GPU one kernel, with host ``rows`` sent
    once per content (:func:`sculler.backend.cached_like`); CuPy's indexed add is a gather,
    an add and a scatter."""
    if get_array_module(dst) is not np and dst.ndim == 2 \
            and src.shape == (len(rows), dst.shape[1]):
        cuda.add_to_rows(dst, cuda.device_int64(rows), src)
        return dst
    dst[cached_like(rows, dst)] += src
    return dst


def segment_max(x, starts, out, rep=None, hit=None, argmax: bool = True):
    """``out[i, j] = max over the rows of segment i of x[:, j]``; returns the absolute row of
    each maximum, ``(n, d)`` int (the first row on ties), or None without ``argmax``. Every
    segment must be non-empty. ``rep`` ((T, d), x's dtype) and ``hit`` ((T, d) int32) are
    optional work buffers. On the GPU one kernel (:func:`sculler.math.cuda.segment_max`)
    writes the maxima and, into ``hit``'s first ``n d`` entries, their rows."""
    xp = get_array_module(out)
    if xp is not np:  # one kernel, nothing through the host
        n, d = out.shape
        found = None
        if argmax:
            found = (hit.reshape(-1)[:n * d].reshape(n, d) if hit is not None
                     and get_array_module(hit) is xp and hit.size >= n * d
                     else xp.empty((n, d), dtype=np.int64))
        cuda.segment_max(x, starts, out, found)
        return found
    s = np.asarray(starts[:-1])
    hx = to_numpy(x)
    t = hx.shape[0]
    best = np.maximum.reduceat(hx, s, axis=0)
    out[...] = xp.asarray(best)
    if not argmax:
        return None
    rep = np.take(best, segment_of_rows(starts), axis=0, out=rep)
    index_type = np.int32 if t < 2**31 - 1 else np.int64
    if hit is None or hit.dtype != index_type:
        hit = np.empty(hx.shape, dtype=index_type)
    hit[...] = t
    np.copyto(hit, np.arange(t, dtype=index_type)[:, None], where=hx == rep)
    return xp.asarray(np.minimum.reduceat(hit, s, axis=0))


def gather_rows(x, rows, out):
    """``out = x[rows]`` without a temporary. Host ``rows`` for a device ``x`` go there once
    per content (:func:`sculler.backend.cached_like`): CuPy would copy them from pageable
    memory each call, and wait for the GPU to do so."""
    return get_array_module(out).take(x, cached_like(rows, x), axis=0, out=out)


def add_segment_rows(dst, src, segment_of_row, scale, work):
    """``dst[r] += src[k] * scale[k]`` for each row r of segment ``k = segment_of_row[r]``
    (``scale`` None: times 1): what a sequence sum or average gives back to its rows. On the
    GPU one kernel; on the host a gather into ``work`` (dst's shape) and an add."""
    if get_array_module(dst) is not np:
        cuda.add_segment_rows(dst, src, segment_of_row, scale)
        return dst
    scaled = src if scale is None else src * scale[:, None]
    dst += gather_rows(scaled, segment_of_row, work)
    return dst


def shifted_add(dst, src, offset: int, starts, transpose: bool = False):
    """``dst[t] += src[t + offset]`` for every row t whose row ``t + offset`` lies in t's own
    segment of ``starts`` (``transpose``: ``dst[t + offset] += src[t]``); returns ``dst``. This
    is one tap of a context window: ``dst``, ``src`` and the segments have the same rows.

    Why not ``add.at``: a shift maps distinct rows to distinct rows, so one slice add over all
    rows is exact for the rows inside their segment (each destination row receives one term)
    and reads both arrays in order, where ``add.at`` goes row by row (0.3 ms against 24 ms for
    one tap of a text CNN's 8,168 x 128 float32 gradient). The few destination rows of a
    window crossing a segment boundary (``|offset|`` per segment, found from ``starts`` alone)
    are saved before and written back after, so they end bit for bit as they were.
    """
    xp = get_array_module(dst)
    starts = np.asarray(starts, dtype=np.int64)
    rows = int(starts[-1])
    lo, hi = max(0, -offset), rows - max(0, offset)
    if hi <= lo:
        return dst
    cut = np.minimum(lengths(starts), abs(offset))
    crossing = ranges(starts[:-1] if offset < 0 else starts[1:] - cut, cut)
    crossing = crossing[(crossing >= lo) & (crossing < hi)]  # the others are outside the slice
    untouched = xp.asarray(crossing + offset if transpose else crossing)
    near, far = slice(lo, hi), slice(lo + offset, hi + offset)
    to, frm = (far, near) if transpose else (near, far)
    kept = dst[untouched]
    dst[to] += src[frm]
    dst[untouched] = kept
    return dst


def window_starts(starts, stride: int, from_end: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Cut every segment into windows of ``stride`` rows.

    Windows start at the segment's front (the last one may be short) or, with ``from_end``,
    are aligned to its end (the first one may be short): length 9, stride 5 gives windows of
    5 + 4 rows, or of 4 + 5 rows from the end. Returns ``(win, out_starts)``: ``win`` cuts the
    rows into all windows of all segments (an empty segment has none) and ``out_starts`` groups
    the windows by segment (``ceil(L / stride)`` each).
    """
    starts = np.asarray(starts, dtype=np.int64)
    lens = lengths(starts)
    counts = -(-lens // stride)
    out_starts = starts_from_lengths(counts)
    j = np.arange(out_starts[-1], dtype=np.int64) - np.repeat(out_starts[:-1], counts)
    begin, seg_len, seg_count = (np.repeat(a, counts) for a in (starts[:-1], lens, counts))
    if from_end:
        offset = np.maximum(0, seg_len - (seg_count - j) * stride)
    else:
        offset = j * stride
    win = np.append(begin + offset, starts[-1])
    return win, out_starts


def degrade(seq_starts, sub_starts) -> np.ndarray:
    """Top-level starts counted in sub-sequences (PaddlePaddle's degradeSequence): sequence i
    holds sub-sequences ``out[i]:out[i + 1]``. An empty sub-sequence lying on a boundary
    between two sequences is counted in the later one (the packed layout cannot tell)."""
    sub = np.asarray(sub_starts, dtype=np.int64)
    out = np.searchsorted(sub[:-1], np.asarray(seq_starts, dtype=np.int64), side="left")
    out[-1] = sub.size - 1
    return out.astype(np.int64)
