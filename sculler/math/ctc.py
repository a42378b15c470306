"""Connectionist temporal classification: -log p(label | x) by the alpha/beta recursions.

For a label ``l`` the extended label is ``l' = [blank, l_1, blank, l_2, ..., blank]``
(S = 2|l| + 1 states). With log-probabilities ``y_t[k]`` (T x C):

    alpha_0 = (y_0[l'_0], y_0[l'_1], -inf, ...)
    alpha_t[s] = logsumexp(alpha_{t-1}[s], alpha_{t-1}[s-1], alpha_{t-1}[s-2] if l'_s != blank
                 and l'_s != l'_{s-2}) + y_t[l'_s]
    log p = logsumexp(alpha_{T-1}[S-1], alpha_{T-1}[S-2])

and ``gamma_t[k] = sum_{s: l'_s = k} exp(alpha_t[s] + beta_t[s] - log p)`` (beta without the
emission at t) is the gradient of ``-log p`` w.r.t. ``-y_t[k]``. The recursions run over the
time steps of a :class:`~sculler.math.seq2batch.SequenceBatch`, all active sequences at once;
the state axis of every sequence is padded to the longest extended label (impossible states
hold -inf).
"""

from __future__ import annotations

import numpy as np

from sculler.math.seq2batch import SequenceBatch
from sculler.math.workspace import Alloc, work_array

__all__ = ["ctc_loss", "ctc_feasible", "label_repeats"]

NEG_INF = -np.inf


def ctc_feasible(label_lengths, repeats, input_lengths):
    """True where a sequence is long enough for its label: ``T_n >= |l_n| + repeats_n``."""
    return np.asarray(input_lengths) >= np.asarray(label_lengths) + np.asarray(repeats)


def label_repeats(labels, label_starts) -> np.ndarray:
    """Per label sequence, how many ids equal the one before them (each needs a blank
    between, so one more input step)."""
    lab, starts = np.asarray(labels), np.asarray(label_starts)
    n = starts.size - 1
    same = np.zeros(lab.size, dtype=bool)
    same[1:] = lab[1:] == lab[:-1]
    same[starts[:-1][np.diff(starts) > 0]] = False
    repeats = np.zeros(n, dtype=np.int64)
    np.add.at(repeats, np.repeat(np.arange(n), np.diff(starts))[same], 1)
    return repeats


def _lse(*terms):
    stack = np.stack(terms)
    m = stack.max(axis=0)
    safe = np.where(np.isfinite(m), m, 0.0)
    with np.errstate(divide="ignore"):
        return np.log(np.exp(stack - safe).sum(axis=0)) + safe


def _extended(labels, label_starts, blank: int, order):
    """(N, S_max) extended labels in slot order, their lengths, and the skip mask."""
    lab_len = np.diff(label_starts)[order]
    s_max = 2 * int(lab_len.max(initial=0)) + 1
    ext = np.full((order.size, s_max), blank, dtype=np.int64)
    seq = np.repeat(np.arange(order.size), lab_len)
    pos = np.arange(seq.size) - np.repeat(np.cumsum(lab_len) - lab_len, lab_len)
    src = np.repeat(label_starts[:-1][order], lab_len) + pos
    ext[seq, 2 * pos + 1] = labels[src]
    skip = np.zeros(ext.shape, dtype=bool)
    skip[:, 2:] = (ext[:, 2:] != blank) & (ext[:, 2:] != ext[:, :-2])
    return ext, 2 * lab_len + 1, skip


def ctc_loss(log_probs, seq_starts, labels, label_starts, blank: int, want_grad: bool = True,
             alloc: Alloc | None = None):
    """Per-sequence CTC cost and the occupation probabilities.

    Args:
        log_probs: (T, C) packed log-probabilities; seq_starts: (N + 1,) its sequences.
        labels: (L,) packed label ids; label_starts: (N + 1,) label sequences.
        blank: the blank class id.
        want_grad: also return ``gamma``.
        alloc: where the (T, C) and (T, states) work arrays come from (default: new arrays).

    Returns:
        cost (N,) ``-log p(l_n | x_n)``, 0 where infeasible; ``gamma`` (T, C) with
        ``d cost_n / d log_probs_t = -gamma_t`` (zero rows for infeasible sequences), or None;
        ``scored`` (N,) bool: False where the sequence was infeasible (cost 0).
    """
    plan = SequenceBatch(seq_starts)
    order = plan.order
    ext, ext_len, skip = _extended(labels, np.asarray(label_starts), blank, order)
    n, s_max = ext.shape
    starts_l = np.asarray(label_starts)
    feasible = ctc_feasible(np.diff(starts_l), label_repeats(labels, starts_l), plan.lengths)
    feasible_slot = feasible[order]
    rows = log_probs.shape[0]
    lpb = plan.to_batch(log_probs,
                        out=work_array(alloc, "ctc_lp", log_probs.shape, log_probs.dtype))
    steps = plan.num_steps
    # slot (position within its step) of every time-major row
    slot_rows = np.arange(lpb.shape[0]) - np.repeat(plan.step_starts[:-1], plan.batch_sizes)
    valid = np.arange(s_max)[None, :] < ext_len[:, None]
    emit = work_array(alloc, "ctc_emit", (rows, s_max), lpb.dtype)
    emit[...] = np.take_along_axis(lpb, ext[slot_rows], axis=1)
    emit[~valid[slot_rows]] = NEG_INF
    alpha = work_array(alloc, "ctc_alpha", emit.shape, emit.dtype)
    alpha[...] = NEG_INF
    if steps:
        first = plan.step(0)
        alpha[first, :2] = emit[first, :2]
    for t in range(1, steps):
        k = int(plan.batch_sizes[t])
        prev = alpha[plan.prev_rows(t)]
        shift1 = np.full_like(prev, NEG_INF)
        shift1[:, 1:] = prev[:, :-1]
        shift2 = np.full_like(prev, NEG_INF)
        shift2[:, 2:] = np.where(skip[:k, 2:], prev[:, :-2], NEG_INF)
        alpha[plan.step(t)] = _lse(prev, shift1, shift2) + emit[plan.step(t)]
    last = plan.last_rows()
    slots = np.arange(n)
    has_rows = last >= 0
    if not steps:
        cost = np.zeros(n, dtype=log_probs.dtype)
        return cost, (np.zeros_like(log_probs) if want_grad else None), np.zeros(n, bool)
    end_a = alpha[np.maximum(last, 0)]
    tail2 = np.where(ext_len >= 2, end_a[slots, np.maximum(ext_len - 2, 0)], NEG_INF)
    log_p = _lse(end_a[slots, ext_len - 1], tail2)
    ok = feasible_slot & has_rows & np.isfinite(log_p)
    cost = np.zeros(n, dtype=log_probs.dtype)
    cost[order[ok]] = -log_p[ok]
    scored = np.zeros(n, dtype=bool)
    scored[order[ok]] = True
    if not want_grad:
        return cost, None, scored
    beta = work_array(alloc, "ctc_beta", emit.shape, emit.dtype)
    beta[...] = NEG_INF
    for t in range(steps - 1, -1, -1):
        cur = plan.step(t)
        k = int(plan.batch_sizes[t])
        bt = beta[cur]
        ends = slice(int(plan.batch_sizes[t + 1]) if t + 1 < steps else 0, k)
        end_slots = np.arange(ends.start, ends.stop)
        bt[end_slots, ext_len[end_slots] - 1] = 0.0
        has2 = end_slots[ext_len[end_slots] >= 2]
        bt[has2, ext_len[has2] - 2] = 0.0
        if t + 1 < steps:
            k1 = int(plan.batch_sizes[t + 1])
            nb = beta[plan.step(t + 1)] + emit[plan.step(t + 1)]
            up1 = np.full_like(nb, NEG_INF)
            up1[:, :-1] = nb[:, 1:]
            up2 = np.full_like(nb, NEG_INF)
            up2[:, :-2] = np.where(skip[:k1, 2:], nb[:, 2:], NEG_INF)
            bt[:k1] = _lse(nb, up1, up2)
    ok_rows = ok[slot_rows]
    with np.errstate(invalid="ignore"):
        occ = np.exp(alpha + beta - log_p[slot_rows][:, None])
    occ[~ok_rows] = 0.0
    gamma_b = work_array(alloc, "ctc_gamma_batch", lpb.shape, lpb.dtype)
    gamma_b[...] = 0.0
    np.add.at(gamma_b, (np.arange(rows)[:, None], ext[slot_rows]), occ)
    gamma = plan.to_sequence(gamma_b, out=work_array(alloc, "ctc_gamma", lpb.shape, lpb.dtype))
    return cost, gamma, scored
