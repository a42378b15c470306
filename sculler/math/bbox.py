"""Bounding-box kernels of SSD detection, as PaddlePaddle's DetectionUtil.cpp computes them.

A box is ``[xmin, ymin, xmax, ymax]`` in coordinates normalised to the image (0..1). A prior
row is ``[xmin, ymin, xmax, ymax, var0, var1, var2, var3]``. The functions work on NumPy
arrays of boxes (``(n, 4)``) and are shared by ``priorbox``, ``multibox_loss``,
``detection_output`` and the ``detection_map`` evaluator.
"""

from __future__ import annotations

import numpy as np

MIN_OVERLAP = 1e-6  # an overlap at or below this counts as none when matching


def smooth_l1(d: np.ndarray) -> np.ndarray:
    """Elementwise smooth L1 of a difference: ``d^2 / 2`` where ``|d| < 1``, ``|d| - 1/2``
    beyond."""
    a = np.abs(d)
    return np.where(a < 1.0, 0.5 * a * a, a - 0.5)


def smooth_l1_grad(d: np.ndarray) -> np.ndarray:
    """Derivative of :func:`smooth_l1`: ``clip(d, -1, 1)``."""
    return np.clip(d, -1.0, 1.0)


def iou_matrix(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Jaccard overlap ``|a ∩ b| / |a ∪ b|`` of every box of ``a`` (n, 4) with every box of
    ``b`` (m, 4); boxes that do not meet overlap 0."""
    a = np.asarray(a, dtype=np.float64).reshape(-1, 4)
    b = np.asarray(b, dtype=np.float64).reshape(-1, 4)
    ix = np.minimum(a[:, None, 2], b[None, :, 2]) - np.maximum(a[:, None, 0], b[None, :, 0])
    iy = np.minimum(a[:, None, 3], b[None, :, 3]) - np.maximum(a[:, None, 1], b[None, :, 1])
    inter = np.where((ix >= 0) & (iy >= 0), ix * iy, 0.0)
    area_a = (a[:, 2] - a[:, 0]) * (a[:, 3] - a[:, 1])
    area_b = (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1])
    union = area_a[:, None] + area_b[None, :] - inter
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(inter > 0, inter / np.where(union > 0, union, 1.0), 0.0)


def _centre_size(boxes: np.ndarray) -> tuple[np.ndarray, ...]:
    w, h = boxes[:, 2] - boxes[:, 0], boxes[:, 3] - boxes[:, 1]
    return boxes[:, 0] + w / 2, boxes[:, 1] + h / 2, w, h


def encode(priors: np.ndarray, variances: np.ndarray, boxes: np.ndarray) -> np.ndarray:
    """The regression targets of ``boxes`` against their priors (all (k, 4)):
    ``[(cx - pcx) / pw / v0, (cy - pcy) / ph / v1, log(w / pw) / v2, log(h / ph) / v3]``."""
    pcx, pcy, pw, ph = _centre_size(priors)
    cx, cy, w, h = _centre_size(boxes)
    return np.stack([(cx - pcx) / pw / variances[:, 0], (cy - pcy) / ph / variances[:, 1],
                     np.log(np.abs(w / pw)) / variances[:, 2],
                     np.log(np.abs(h / ph)) / variances[:, 3]], axis=1)


def decode(priors: np.ndarray, variances: np.ndarray, loc: np.ndarray) -> np.ndarray:
    """The boxes that predictions ``loc`` (k, 4) encode against their priors (inverse of
    :func:`encode`); not clipped."""
    pcx, pcy, pw, ph = _centre_size(priors)
    cx = variances[:, 0] * loc[:, 0] * pw + pcx
    cy = variances[:, 1] * loc[:, 1] * ph + pcy
    w = np.exp(variances[:, 2] * loc[:, 2]) * pw
    h = np.exp(variances[:, 3] * loc[:, 3]) * ph
    return np.stack([cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2], axis=1)


def match(priors: np.ndarray, truths: np.ndarray,
          overlap_threshold: float) -> tuple[np.ndarray, np.ndarray]:
    """Match priors (p, 4) to ground-truth boxes (g, 4).

    First bipartite: repeatedly the (prior, box) pair of largest overlap among unmatched
    priors and boxes, so every box gets its best prior; then every other prior takes the box
    it overlaps most if that overlap is ``>= overlap_threshold``. Returns each prior's box
    index (-1: none) and its overlap (for an unmatched prior, its largest overlap with any
    box). Ties go to the lower prior, then the lower box index.
    """
    overlaps = iou_matrix(priors, truths)
    overlaps = np.where(overlaps > MIN_OVERLAP, overlaps, 0.0)
    n_priors, n_truths = overlaps.shape
    matched = np.full(n_priors, -1, dtype=np.int64)
    best = overlaps.max(axis=1) if n_truths else np.zeros(n_priors)
    free = overlaps.copy()
    for _ in range(n_truths):
        flat = int(free.argmax())
        i, j = divmod(flat, n_truths)
        if free[i, j] <= 0:
            break
        matched[i], best[i] = j, free[i, j]
        free[i, :] = 0
        free[:, j] = 0
    rest = np.flatnonzero(matched == -1)
    if n_truths and rest.size:
        j = overlaps[rest].argmax(axis=1)
        top = overlaps[rest, j]
        ok = (top > 0) & (top >= overlap_threshold)
        matched[rest[ok]] = j[ok]
    return matched, best


def nms(boxes: np.ndarray, scores: np.ndarray, score_threshold: float, nms_threshold: float,
        top_k: int) -> list[int]:
    """Greedy non-maximum suppression: the boxes scoring above ``score_threshold``, at most
    ``top_k`` (0: all) of the best, best first; a box is kept when its overlap with every box
    kept before it is ``<= nms_threshold``. Returns the kept indices, best first."""
    candidates = np.flatnonzero(scores > score_threshold)
    order = candidates[np.argsort(-scores[candidates], kind="stable")]
    if top_k > 0:
        order = order[:top_k]
    overlaps = iou_matrix(boxes[order], boxes[order])
    suppressed = np.zeros(len(order), dtype=bool)
    kept: list[int] = []
    for k, idx in enumerate(order):
        if not suppressed[k]:
            kept.append(int(idx))
            suppressed |= overlaps[k] > nms_threshold
    return kept


def per_prior(value: np.ndarray, channels: int, height: int, width: int,
              per_prior_width: int) -> np.ndarray:
    """A conv output (batch, C*H*W, channel-major) as (batch, H*W*C/k, k): the values of each
    prior, priors ordered by row, column, then prior at that position (Paddle's NCHW to NHWC
    permutation)."""
    batch = value.shape[0]
    nhwc = value.reshape(batch, channels, height * width).transpose(0, 2, 1)
    return nhwc.reshape(batch, -1, per_prior_width)


def from_per_prior(grad: np.ndarray, channels: int, height: int, width: int) -> np.ndarray:
    """Inverse of :func:`per_prior`: (batch, priors, k) back to (batch, C*H*W)."""
    batch = grad.shape[0]
    return grad.reshape(batch, height * width, channels).transpose(0, 2, 1).reshape(batch, -1)
