import numpy as np
import pytest

from sculler.math.seq2batch import SequenceBatch


def reference_steps(starts, reverse):
    """Direct loops: for each step, (sequence, packed row) of the active sequences, longest
    first, ties in input order."""
    lengths = np.diff(starts)
    order = sorted(range(len(lengths)), key=lambda s: -lengths[s])
    steps = []
    for t in range(max(lengths, default=0)):
        active = [s for s in order if lengths[s] > t]
        rows = [starts[s] + (lengths[s] - 1 - t if reverse else t) for s in active]
        steps.append((active, rows))
    return steps


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("lengths", [[1], [3], [2, 3], [4, 1, 4, 2], [5, 0, 2], [1, 1, 1]])
def test_plan_matches_direct_loops(lengths, reverse):
    starts = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    plan = SequenceBatch(starts, reverse=reverse)
    steps = reference_steps(starts, reverse)
    assert plan.num_steps == len(steps)
    for t, (active, rows) in enumerate(steps):
        assert plan.batch_sizes[t] == len(active)
        assert plan.batch_rows[plan.step(t)].tolist() == rows
        assert plan.order[: len(active)].tolist() == active
        if t:
            prev = plan.batch_rows[plan.prev_rows(t)]
            expect = [r + (-1 if reverse else 1) for r in prev]
            assert plan.batch_rows[plan.step(t)].tolist() == expect


def test_round_trip_and_last_rows():
    rng = np.random.default_rng(0)
    lengths = [3, 1, 4, 0, 2]
    starts = np.concatenate([[0], np.cumsum(lengths)])
    x = rng.standard_normal((starts[-1], 3))
    plan = SequenceBatch(starts)
    tm = plan.to_batch(x)
    np.testing.assert_array_equal(plan.to_sequence(tm), x)
    acc = np.ones_like(x)
    plan.to_sequence(tm, out=acc, add=True)
    np.testing.assert_array_equal(acc, x + 1)
    last = plan.last_rows()
    for j, s in enumerate(plan.order):
        if lengths[s]:
            np.testing.assert_array_equal(tm[last[j]], x[starts[s + 1] - 1])
        else:
            assert last[j] == -1


@pytest.mark.parametrize("bad", [[1, 2], [0, 3, 2], [[0, 1]]])
def test_bad_starts(bad):
    with pytest.raises(ValueError, match="seq_starts"):
        SequenceBatch(np.array(bad))
