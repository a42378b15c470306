"""Linear-chain CRF kernels: log-likelihood with its gradients, and Viterbi decoding.

The (C + 2) x C parameter holds PaddlePaddle's layout: row 0 the start scores ``a``, row 1 the
end scores ``b``, rows 2.. the transitions ``w[i, j]`` (class i at t - 1, then class j at t).
For one sequence of emissions ``x`` (L x C) and tags ``s``:

    score(s) = a[s_0] + b[s_{L-1}] + sum_t x_t[s_t] + sum_{t>=1} w[s_{t-1}, s_t]
    nll      = log Z - score(labels),   Z = sum over all tag paths of exp(score)

Every recursion runs over the time steps of a :class:`~sculler.math.seq2batch.SequenceBatch`
(one vectorised step for all sequences active at that step), in log space with max-shifts.
"""

from __future__ import annotations

import numpy as np

from sculler.math.seq2batch import SequenceBatch
from sculler.math.workspace import Alloc, work_array

__all__ = ["CrfForward", "crf_nll", "crf_nll_backward", "crf_viterbi", "split_crf_weight"]


def split_crf_weight(weight, num_classes: int):
    """Views ``(a, b, w)`` of a (C + 2, C) CRF parameter (any buffer of (C + 2) * C values)."""
    c = num_classes
    if (c + 2) * c != weight.size:
        raise ValueError(f"a CRF parameter for {c} classes holds {(c + 2) * c} values, got "
                         f"{weight.size}")
    full = weight.reshape(c + 2, c)
    return full[0], full[1], full[2:]


def _logsumexp(v, axis: int):
    m = v.max(axis=axis, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    return np.log(np.exp(v - m).sum(axis=axis)) + np.squeeze(m, axis=axis)


def _gold_score(x, labels, seq_starts, a, b, w):
    """score(labels) per sequence, from the packed rows (no loop)."""
    rows = x.shape[0]
    lengths = np.diff(seq_starts)
    seq_of_row = np.repeat(np.arange(lengths.size), lengths)
    score = np.bincount(seq_of_row, weights=x[np.arange(rows), labels], minlength=lengths.size)
    nonempty = lengths > 0
    first, last = seq_starts[:-1][nonempty], seq_starts[1:][nonempty] - 1
    score[nonempty] += a[labels[first]] + b[labels[last]]
    inner = np.ones(rows, dtype=bool)
    inner[first] = False
    r = np.nonzero(inner)[0]
    score += np.bincount(seq_of_row[r], weights=w[labels[r - 1], labels[r]],
                         minlength=lengths.size)
    return score


class CrfForward:
    """What :func:`crf_nll_backward` needs from the forward pass: the time-major plan, the
    emissions and log-alphas in that layout, and ``log Z`` per sequence."""

    __slots__ = ("plan", "xb", "alpha", "log_z")

    def __init__(self, plan: SequenceBatch, xb, alpha, log_z):
        self.plan, self.xb, self.alpha, self.log_z = plan, xb, alpha, log_z


def crf_nll(x, labels, seq_starts, weight, alloc: Alloc | None = None):
    """Negative log-likelihood of each sequence's tags.

    Args:
        x: (T, C) packed emission scores; labels: (T,) tag ids; seq_starts: (N + 1,).
        weight: the (C + 2, C) parameter (any buffer of that many values).
        alloc: where the (T, C) work arrays come from (default: new arrays).

    Returns:
        ``(nll, saved)``: (N,) nll per sequence (0 for an empty sequence) and the
        :class:`CrfForward` state for :func:`crf_nll_backward`.
    """
    a, b, w = split_crf_weight(weight, x.shape[1])
    plan = SequenceBatch(seq_starts)
    n = plan.num_sequences
    xb = plan.to_batch(x, out=work_array(alloc, "crf_xb", x.shape, x.dtype))
    alpha = work_array(alloc, "crf_alpha", x.shape, x.dtype)
    if plan.num_steps:
        alpha[plan.step(0)] = a + xb[plan.step(0)]
    for t in range(1, plan.num_steps):
        prev = alpha[plan.prev_rows(t)]
        alpha[plan.step(t)] = _logsumexp(prev[:, :, None] + w[None], axis=1) + xb[plan.step(t)]
    last = plan.last_rows()
    log_z = np.zeros(n, dtype=x.dtype)
    slots = last >= 0
    log_z_slot = _logsumexp(alpha[last[slots]] + b, axis=1)
    log_z[plan.order[slots]] = log_z_slot
    nll = log_z - _gold_score(x, labels, plan.seq_starts, a, b, w)
    return nll, CrfForward(plan, xb, alpha, log_z)


def crf_nll_backward(saved: CrfForward, labels, weight, dcost, dx=None, dweight=None,
                     alloc: Alloc | None = None) -> None:
    """ADD ``dcost_n * d nll_n / d(.)`` into ``dx`` (T, C) and ``dweight`` (C + 2, C) (either
    may be None): ``dx_t = marginal_t - onehot(s_t)``; ``da``/``db`` the same at the first /
    last step; ``dw`` = expected minus observed transition counts."""
    plan, xb, alpha, log_z = saved.plan, saved.xb, saved.alpha, saved.log_z
    _, b, w = split_crf_weight(weight, xb.shape[1])
    c = w.shape[0]
    scale_slot = np.asarray(dcost, dtype=xb.dtype)[plan.order]
    log_z_slot = log_z[plan.order]
    beta = work_array(alloc, "crf_beta", xb.shape, xb.dtype)
    marg = work_array(alloc, "crf_marg", xb.shape, xb.dtype)
    dw = np.zeros((c, c), dtype=xb.dtype)
    for t in range(plan.num_steps - 1, -1, -1):
        cur = plan.step(t)
        k = int(plan.batch_sizes[t])
        bt = beta[cur]
        bt[...] = b  # sequences ending at step t
        if t + 1 < plan.num_steps:
            nxt = plan.step(t + 1)
            k1 = int(plan.batch_sizes[t + 1])
            emit = xb[nxt] + beta[nxt]  # (k1, C)
            bt[:k1] = _logsumexp(w[None] + emit[:, None, :], axis=2)
            pair = alpha[cur][:k1, :, None] + w[None] + emit[:, None, :]
            pair = np.exp(pair - log_z_slot[:k1, None, None]) * scale_slot[:k1, None, None]
            dw += pair.sum(axis=0)
        marg[cur] = np.exp(alpha[cur] + bt - log_z_slot[:k, None]) * scale_slot[:k, None]
    marg_seq = plan.to_sequence(marg, out=work_array(alloc, "crf_marg_seq", xb.shape, xb.dtype))
    rows = np.arange(marg_seq.shape[0])
    lengths_seq = plan.lengths
    seq_of_row = np.repeat(np.arange(lengths_seq.size), lengths_seq)
    scale_row = np.asarray(dcost, dtype=xb.dtype)[seq_of_row]
    if dx is not None:
        dx += marg_seq
        np.subtract.at(dx, (rows, labels), scale_row)
    if dweight is None:
        return
    da, db, dwt = split_crf_weight(dweight, c)
    nonempty = plan.lengths > 0
    first = plan.seq_starts[:-1][nonempty]
    final = plan.seq_starts[1:][nonempty] - 1
    da += marg_seq[first].sum(axis=0)
    db += marg_seq[final].sum(axis=0)
    np.subtract.at(da, labels[first], scale_row[first])
    np.subtract.at(db, labels[final], scale_row[final])
    dwt += dw
    inner = np.ones(rows.size, dtype=bool)
    inner[first] = False
    r = np.nonzero(inner)[0]
    np.subtract.at(dwt, (labels[r - 1], labels[r]), scale_row[r])


def crf_viterbi(x, seq_starts, weight, alloc: Alloc | None = None):
    """The best tag path of each sequence: (T,) int64 ids in packed order.

    ``delta_0 = a + x_0``; ``delta_t[j] = max_i(delta_{t-1}[i] + w[i, j]) + x_t[j]``; the last
    tag is ``argmax(delta_{L-1} + b)``, then backtracking. Ties go to the lowest index.
    """
    a, b, w = split_crf_weight(weight, x.shape[1])
    plan = SequenceBatch(seq_starts)
    xb = plan.to_batch(x, out=work_array(alloc, "vit_xb", x.shape, x.dtype))
    delta = work_array(alloc, "vit_delta", x.shape, x.dtype)
    back = work_array(alloc, "vit_back", x.shape, np.int64)
    if plan.num_steps:
        delta[plan.step(0)] = a + xb[plan.step(0)]
    for t in range(1, plan.num_steps):
        cand = delta[plan.prev_rows(t)][:, :, None] + w[None]
        back[plan.step(t)] = cand.argmax(axis=1)
        delta[plan.step(t)] = cand.max(axis=1) + xb[plan.step(t)]
    tags = work_array(alloc, "vit_tags_batch", (x.shape[0],), np.int64)
    nxt_tags = np.empty(0, dtype=np.int64)
    for t in range(plan.num_steps - 1, -1, -1):
        cur = plan.step(t)
        k = int(plan.batch_sizes[t])
        k1 = nxt_tags.size
        tt = tags[cur]
        if k1:
            tt[:k1] = back[plan.step(t + 1)][np.arange(k1), nxt_tags]
        tt[k1:] = (delta[cur][k1:] + b).argmax(axis=1)
        nxt_tags = tt[:k]
    return plan.to_sequence(tags, out=work_array(alloc, "vit_tags", (x.shape[0],), np.int64))
