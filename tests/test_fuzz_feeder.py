"""Fuzzing the DataFeeder for every data type: well-formed batches convert to exactly what
they hold; a batch with one malformed value is refused with a ValueError naming the data
layer and the sample, never converted (coerced, truncated, ignored) and never a crash from
inside NumPy."""

import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from sculler import data_type as dt
from sculler.data_feeder import DataFeeder

# bounded and reproducible: the same examples on every run (pytest
# --hypothesis-show-statistics prints how many ran)
PER_TYPE = settings(max_examples=50, deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.too_slow])

MAKERS = {
    ("dense", 0): dt.dense_vector, ("dense", 1): dt.dense_vector_sequence,
    ("dense", 2): dt.dense_vector_sub_sequence,
    ("ids", 0): dt.integer_value, ("ids", 1): dt.integer_value_sequence,
    ("ids", 2): dt.integer_value_sub_sequence,
    ("binary", 0): dt.sparse_binary_vector, ("binary", 1): dt.sparse_binary_vector_sequence,
    ("binary", 2): dt.sparse_binary_vector_sub_sequence,
    ("float", 0): dt.sparse_float_vector, ("float", 1): dt.sparse_float_vector_sequence,
    ("float", 2): dt.sparse_float_vector_sub_sequence,
}

finite = st.floats(-1e6, 1e6, allow_nan=False, width=32)


def step(kind: str, dim: int):
    """One well-formed step (a row, an id, a sparse row) of ``kind`` for width ``dim``."""
    col = st.integers(0, dim - 1)
    if kind == "dense":
        row = st.lists(finite, min_size=dim, max_size=dim)
        return st.one_of(row, row.map(lambda r: np.asarray(r, np.float32)),
                         row.map(lambda r: np.asarray(r, np.float64)),
                         st.lists(st.integers(-5, 5), min_size=dim, max_size=dim))
    if kind == "ids":
        return st.one_of(col, col.map(np.int64), col.map(float))
    if kind == "binary":
        return st.lists(col, max_size=4)
    return st.lists(st.tuples(col, finite), max_size=4)


def junk(kind: str, dim: int):
    """A value that is certainly not a step of ``kind`` and width ``dim``."""
    common = st.sampled_from([None, "1", True, {"a": 1}])
    if kind == "dense":
        return st.one_of(common, st.just([0.5] * (dim + 1)), st.just([True] * dim),
                         st.just([0.5] * (dim - 1) + [False]), st.just(["x"] * dim),
                         st.just(np.ones(dim + 2, np.float32)), st.just([[0.5] * dim] * 3))
    if kind == "ids":
        return st.one_of(common, st.sampled_from([0.5, -1, dim, dim + 7, [0], 2.5e9, np.nan]))
    if kind == "binary":
        return st.one_of(common, st.sampled_from([[0.5], [True], [-1], [dim], ["a"], [None],
                                                  [[0]], 3, [0, 1.5]]))
    return st.one_of(common, st.sampled_from([[(0.5, 1.0)], [(0, 1.0, 2.0)], [1], [(True, 1.0)],
                                              [(0, "a")], [(dim, 1.0)], [(-1, 1.0)], [None],
                                              [(0, None)], [(0,)], [(0, [1.0])], 3]))


def sample(kind: str, seq: int, dim: int, one):
    """A sample of nesting ``seq`` whose steps come from the strategy ``one``."""
    if seq == 0:
        return one
    if seq == 1:
        return st.lists(one, min_size=1, max_size=3)
    return st.lists(st.lists(one, min_size=1, max_size=3), min_size=1, max_size=2)


@st.composite
def batches(draw, kind: str, seq: int):
    dim = draw(st.integers(1, 5))
    good = sample(kind, seq, dim, step(kind, dim))
    rows = draw(st.lists(good, min_size=1, max_size=4))
    bad_at = draw(st.one_of(st.none(), st.integers(0, len(rows) - 1)))  # half malformed
    extra = False
    if bad_at is not None:
        if draw(st.integers(0, 5)) == 0:
            extra = True  # a second field no data layer reads
        else:
            rows[bad_at] = (draw(junk(kind, dim)) if seq == 0 else
                            _with_one_junk(draw, kind, seq, dim, rows[bad_at]))
    return kind, seq, dim, rows, bad_at, extra


def _with_one_junk(draw, kind, seq, dim, good):
    """``good`` (a sequence sample) with one step, or the whole sample, replaced by junk."""
    if draw(st.booleans()):
        return draw(st.sampled_from([None, 3, "abc"]))  # not a sequence at all
    value = [list(sub) for sub in good] if seq == 2 else list(good)
    bad = draw(junk(kind, dim))
    if seq == 1:
        value[draw(st.integers(0, len(value) - 1))] = bad
    else:
        sub = value[draw(st.integers(0, len(value) - 1))]
        sub[draw(st.integers(0, len(sub) - 1))] = bad
    return value


def _steps(seq: int, rows: list) -> list:
    if seq == 0:
        return list(rows)
    if seq == 1:
        return [x for r in rows for x in r]
    return [x for r in rows for sub in r for x in sub]


def _expected_dense(kind: str, dim: int, steps: list) -> np.ndarray:
    out = np.zeros((len(steps), dim))
    for i, s in enumerate(steps):
        if kind == "dense":
            out[i] = np.asarray(s, np.float32)
        else:
            for entry in s:
                col, value = (entry, 1.0) if kind == "binary" else entry
                out[i, int(col)] += np.float32(value)
    return out


def _check_converted(kind, seq, dim, rows, arg):
    steps = _steps(seq, rows)
    if kind == "ids":
        np.testing.assert_array_equal(arg.ids, [int(s) for s in steps])
    else:
        value = arg.value if kind == "dense" else arg.value.toarray()
        np.testing.assert_allclose(value, _expected_dense(kind, dim, steps), rtol=1e-6)
    if seq >= 1:
        lengths = [len(r) if seq == 1 else sum(map(len, r)) for r in rows]
        np.testing.assert_array_equal(arg.seq_starts, np.concatenate([[0], np.cumsum(lengths)]))
    if seq == 2:
        subs = [len(sub) for r in rows for sub in r]
        np.testing.assert_array_equal(arg.sub_seq_starts, np.concatenate([[0], np.cumsum(subs)]))


@pytest.mark.parametrize("kind, seq", sorted(MAKERS))
@PER_TYPE
@given(data=st.data(), reuse_buffers=st.booleans())
def test_feeder_converts_or_names_the_bad_sample(kind, seq, data, reuse_buffers):
    """Every data type and nesting, 50 batches each, about a quarter with a malformed value."""
    _check_batch(*data.draw(batches(kind, seq)), reuse_buffers)


def _check_batch(kind, seq, dim, rows, bad_at, extra, reuse_buffers):
    feeder = DataFeeder([("x", MAKERS[kind, seq](dim))], reuse_buffers=reuse_buffers)
    batch = [(r, "extra") if extra and i == bad_at else (r,) for i, r in enumerate(rows)]
    event(f"{kind}, nesting {seq}: " + ("well-formed" if bad_at is None else "malformed"))
    if bad_at is None:
        _check_converted(kind, seq, dim, rows, feeder.convert(batch)["x"])
        return
    with pytest.raises(ValueError) as info:
        feeder.convert(batch)
    message = str(info.value)
    if extra:
        assert f"sample {bad_at} has 2 fields" in message, message
    else:
        assert "data layer 'x'" in message and f"sample {bad_at} " in message, message
