"""Reorder packed sequences into time-major steps and back (PaddlePaddle's SequenceToBatch).

A batch of variable-length sequences is packed without padding: the rows of sequence ``s`` are
``x[seq_starts[s]:seq_starts[s + 1]]``. A recurrent layer wants, for each time step ``t``, the
rows of the sequences still active at ``t`` side by side, so that step ``t`` is one GEMM. Sorting
the sequences longest first makes the active sequences of step ``t`` a prefix of those of step
``t - 1``:

    step t holds batch_sizes[t] rows, one per active sequence, in the order ``order``;
    row j of step t and row j of step t - 1 belong to the same sequence.

So the previous hidden state of step ``t`` is ``h[step_starts[t - 1]:][:batch_sizes[t]]`` and no
sequence is computed past its end. Nothing here pads.
"""

from __future__ import annotations

import numpy as np

__all__ = ["SequenceBatch"]


class SequenceBatch:
    """The time-major plan of one batch of packed sequences.

    Args:
        seq_starts: (num_sequences + 1,) start offsets ending with the number of rows.
        reverse: run each sequence from its last row to its first (step 0 is the last row).

    Attributes:
        lengths: (num_sequences,) rows per sequence.
        order: (num_sequences,) sequence index of each slot, longest first (ties keep their
            input order).
        batch_sizes: (num_steps,) sequences active at each step (non-increasing).
        step_starts: (num_steps + 1,) offset of each step in the time-major layout.
        batch_rows: (rows,) packed row read by each time-major row.

    Example:
        >>> plan = SequenceBatch(np.array([0, 2, 5]))
        >>> plan.batch_sizes.tolist(), plan.batch_rows.tolist()
        ([2, 2, 1], [2, 0, 3, 1, 4])
    """

    def __init__(self, seq_starts, reverse: bool = False):
        starts = np.asarray(seq_starts, dtype=np.int64)
        if starts.ndim != 1 or starts.size < 1 or starts[0] != 0 or np.any(np.diff(starts) < 0):
            raise ValueError(f"seq_starts must be non-decreasing offsets starting at 0, got "
                             f"{starts.tolist()[:10]}")
        self.seq_starts = starts
        self.reverse = bool(reverse)
        self.lengths = np.diff(starts)
        self.order = np.argsort(-self.lengths, kind="stable")
        sorted_lengths = self.lengths[self.order]
        num_steps = int(sorted_lengths[0]) if sorted_lengths.size else 0
        # sequences longer than t, for every step t: a count over the descending lengths
        self.batch_sizes = np.searchsorted(-sorted_lengths, -np.arange(num_steps), side="left")
        self.step_starts = np.zeros(num_steps + 1, dtype=np.int64)
        np.cumsum(self.batch_sizes, out=self.step_starts[1:])

        rank = np.empty_like(self.order)
        rank[self.order] = np.arange(self.order.size)
        rows = int(starts[-1])
        seq_of_row = np.repeat(np.arange(self.lengths.size), self.lengths)
        t = np.arange(rows) - starts[seq_of_row]
        if self.reverse:
            t = self.lengths[seq_of_row] - 1 - t
        self.batch_rows = np.empty(rows, dtype=np.int64)
        self.batch_rows[self.step_starts[t] + rank[seq_of_row]] = np.arange(rows)

    @property
    def num_steps(self) -> int:
        return int(self.batch_sizes.size)

    @property
    def num_sequences(self) -> int:
        return int(self.lengths.size)

    def step(self, t: int) -> slice:
        """Rows of step ``t`` in the time-major layout."""
        return slice(int(self.step_starts[t]), int(self.step_starts[t + 1]))

    def prev_rows(self, t: int) -> slice:
        """Rows of step ``t - 1`` that continue into step ``t`` (the first ``batch_sizes[t]``)."""
        start = int(self.step_starts[t - 1])
        return slice(start, start + int(self.batch_sizes[t]))

    def to_batch(self, x, out=None):
        """Packed (rows, ...) -> time-major (rows, ...): ``out[i] = x[batch_rows[i]]``."""
        return np.take(x, self.batch_rows, axis=0, out=out)

    def to_sequence(self, y, out=None, add: bool = False):
        """Time-major -> packed: ``out[batch_rows[i]] (+)= y[i]``."""
        if out is None:
            out = np.empty_like(y)
        if add:
            out[self.batch_rows] += y
        else:
            out[self.batch_rows] = y
        return out

    def last_rows(self):
        """Time-major row of each sequence's final step, in slot order (``order``); -1 for a
        zero-length sequence (it takes part in no step)."""
        lengths = self.lengths[self.order]
        rows = self.step_starts[np.maximum(lengths - 1, 0)] + np.arange(self.order.size)
        return np.where(lengths > 0, rows, -1)
