import gzip
import random
import sys
import threading

import pytest

from sculler import reader as rd


def numbers(n):
    return lambda: iter(range(n))


def failing(after):
    def reader():
        yield from range(after)
        raise RuntimeError("reader broke")

    return reader


def test_map_readers_zips_and_stops_at_shortest():
    r = rd.map_readers(lambda a, b: a * 10 + b, numbers(3), numbers(5))
    assert list(r()) == [0, 11, 22]
    assert list(r()) == [0, 11, 22]  # a reader can be called again


def test_shuffle_is_a_permutation_and_respects_window():
    random.seed(1)
    out = list(rd.shuffle(numbers(100), 10)())
    assert sorted(out) == list(range(100))
    assert out != list(range(100))
    for w in range(10):  # each window of 10 stays in place
        assert sorted(out[w * 10 : w * 10 + 10]) == list(range(w * 10, w * 10 + 10))
    with pytest.raises(ValueError, match="shuffle: buf_size must be an int >= 0"):
        rd.shuffle(numbers(3), -1)


def test_zero_sizes_as_paddle_v2():
    # v2: shuffle(r, 0) keeps the order (a window of one); buffered(r, 0) and
    # xmap_readers(..., 0) use unbounded queues
    random.seed(3)
    assert list(rd.shuffle(numbers(50), 0)()) == list(range(50))
    assert list(rd.buffered(numbers(500), 0)()) == list(range(500))
    xm = rd.xmap_readers(lambda x: 2 * x, numbers(20), 2, 0, order=True)
    assert list(xm()) == [2 * i for i in range(20)]
    with pytest.raises(ValueError, match="buffered: size must be an int >= 0"):
        rd.buffered(numbers(3), -2)


def test_chain_concatenates():
    assert list(rd.chain(numbers(2), lambda: iter("ab"))()) == [0, 1, "a", "b"]


def test_compose_flattens_tuples():
    r = rd.compose(lambda: iter([(1, 2), (3, 4)]), numbers(2), lambda: iter([(5,), (6,)]))
    assert list(r()) == [(1, 2, 0, 5), (3, 4, 1, 6)]


def test_compose_not_aligned():
    r = rd.compose(numbers(3), numbers(2))
    with pytest.raises(rd.ComposeNotAligned):
        list(r())
    assert issubclass(rd.ComposeNotAligned, ValueError)
    assert list(rd.compose(numbers(3), numbers(2), check_alignment=False)()) == [(0, 0), (1, 1)]


def test_compose_keeps_none_samples_when_aligned():
    r = rd.compose(lambda: iter([None, 1]), numbers(2))
    assert list(r()) == [(None, 0), (1, 1)]


def test_buffered_keeps_order_and_propagates_errors():
    assert list(rd.buffered(numbers(50), 4)()) == list(range(50))
    got = []
    with pytest.raises(RuntimeError, match="reader broke"):
        for x in rd.buffered(failing(3), 2)():
            got.append(x)
    assert got == [0, 1, 2]


def test_buffered_early_stop_releases_worker():
    before = threading.active_count()
    it = rd.buffered(numbers(10_000), 2)()
    assert next(it) == 0
    it.close()
    for t in threading.enumerate():
        if t is not threading.current_thread() and t.daemon:
            t.join(timeout=2)
    assert threading.active_count() <= before


def test_firstn():
    assert list(rd.firstn(numbers(10), 3)()) == [0, 1, 2]
    assert list(rd.firstn(numbers(2), 5)()) == [0, 1]
    with pytest.raises(ValueError, match="-1"):
        rd.firstn(numbers(2), -1)


@pytest.mark.parametrize("order", [True, False])
def test_xmap_threads(order):
    def slow_square(x):
        # uneven work so that unordered output really can get out of order
        for _ in range((7 - x % 7) * 200):
            pass
        return x * x

    out = list(rd.xmap_readers(slow_square, numbers(200), 4, 8, order=order)())
    if order:
        assert out == [x * x for x in range(200)]
    else:
        assert sorted(out) == [x * x for x in range(200)]


def test_xmap_mapper_error_propagates():
    def mapper(x):
        if x == 5:
            raise KeyError("bad sample 5")
        return x

    with pytest.raises(KeyError, match="bad sample 5"):
        list(rd.xmap_readers(mapper, numbers(100), 3, 4)())


def test_xmap_reader_error_propagates():
    with pytest.raises(RuntimeError, match="reader broke"):
        list(rd.xmap_readers(abs, failing(20), 2, 4, order=True)())


def test_xmap_argument_checks():
    with pytest.raises(ValueError, match="process_num"):
        rd.xmap_readers(abs, numbers(2), 0, 4)
    with pytest.raises(ValueError, match="buffer_size"):
        rd.xmap_readers(abs, numbers(2), 1, -1)


@pytest.mark.skipif(sys.platform == "win32", reason="fork-based pool")
def test_xmap_processes_order_and_errors():
    r = rd.xmap_readers(abs, lambda: iter(range(0, -30, -1)), 2, 4, order=True, use_process=True)
    assert list(r()) == list(range(30))
    r = rd.xmap_readers(abs, lambda: iter([-1, "x"]), 2, 4, use_process=True)
    with pytest.raises(TypeError):
        list(r())


def test_pipe_reader_plain_and_gzip(tmp_path):
    text = "alpha 1\nbeta 2\ngamma 3"  # no trailing newline on the last line
    (tmp_path / "a.txt").write_text(text)
    r = rd.pipe_reader(f"cat {tmp_path / 'a.txt'}", parser=lambda s: s.split()[0], bufsize=4)
    assert list(r()) == ["alpha", "beta", "gamma"]
    with gzip.open(tmp_path / "a.gz", "wt") as f:
        f.write(text + "\n")
    r = rd.pipe_reader(f"cat {tmp_path / 'a.gz'}", file_type="gzip", bufsize=7)
    assert list(r()) == text.split("\n")


def test_pipe_reader_errors(tmp_path):
    with pytest.raises(TypeError, match="command"):
        rd.PipeReader(["cat", "x"])
    with pytest.raises(ValueError, match="zip"):
        rd.pipe_reader("cat x", file_type="zip")
    with pytest.raises(RuntimeError, match="status"):
        list(rd.pipe_reader(f"cat {tmp_path / 'missing'}")())


def test_pipe_reader_early_stop_kills_command():
    it = rd.pipe_reader("sh -c 'echo first; sleep 30'")()
    assert next(it) == "first"
    it.close()  # returns at once instead of waiting 30 s for the command
