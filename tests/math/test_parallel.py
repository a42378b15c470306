"""Thread-split elementwise work gives bit-identical results to one call."""

import threading

import numpy as np
import pytest

from sculler import optimizer as O
from sculler.core.activation import get_activation
from sculler.math import activation as K
from sculler.math import parallel


@pytest.fixture
def split(monkeypatch):
    """Every array of 8+ elements is split over 3 threads."""
    monkeypatch.setattr(parallel, "PARALLEL_MIN_ELEMENTS", 8)
    monkeypatch.setattr(parallel, "_cpu_to_spare", lambda: True)
    monkeypatch.setenv("SCULLER_NUM_THREADS", "3")


def test_run_splits_large_arrays_over_threads(split, monkeypatch):
    seen = []

    def fn(a, b, k):
        seen.append((a.size, threading.get_ident()))
        np.multiply(a, k, out=b)

    a = np.arange(10, dtype=np.float32).reshape(2, 5)
    b = np.empty_like(a)
    parallel.run(fn, (a, b), 3.0)
    np.testing.assert_array_equal(b, a * 3)
    assert sorted(n for n, _ in seen) == [3, 3, 4]
    assert threading.get_ident() in {t for _, t in seen}
    seen.clear()
    parallel.run(fn, (a[:, :3], np.empty((2, 3), np.float32)), 1.0)  # not contiguous: one call
    assert len(seen) == 1
    seen.clear()
    monkeypatch.setattr(parallel, "_cpu_to_spare", lambda: False)  # a busy machine: one call
    parallel.run(fn, (a, b), 2.0)
    assert len(seen) == 1 and (b == 2 * a).all()


@pytest.mark.parametrize("name", ["tanh", "sigmoid", "relu", "exp", "softmax"])
def test_activation_in_place_paths_match_the_reference_kernels(name, split):
    rng = np.random.default_rng(0)
    z = rng.standard_normal((7, 9)).astype(np.float32)
    dy = rng.standard_normal((7, 9)).astype(np.float32)
    act = get_activation(name)
    y = z.copy()
    act.forward(y)
    ref_y = getattr(K, name)(z.copy())
    np.testing.assert_array_equal(y, ref_y)
    g = dy.copy()
    act.backward(None, y, g)
    np.testing.assert_array_equal(g, getattr(K, name + "_grad")(None, ref_y, dy))


def test_split_optimizer_update_is_bit_identical(split, monkeypatch):
    rng = np.random.default_rng(1)
    w0 = rng.standard_normal((6, 5)).astype(np.float32)
    grads = [rng.standard_normal((6, 5)).astype(np.float32) for _ in range(3)]
    results = []
    for threshold in (8, 10**9):
        monkeypatch.setattr(parallel, "PARALLEL_MIN_ELEMENTS", threshold)
        opt = O.Adam(learning_rate=0.01, regularization=O.L1Regularization(0.01),
                     gradient_clipping_threshold=0.8)
        w = w0.copy()
        for g in grads:
            opt.update("w", w, g.copy())
            opt.finish_batch(4)
        results.append(w)
    np.testing.assert_array_equal(results[0], results[1])


def test_eager_elementwise_ops_split_identically(split):
    import sculler as paddle
    from sculler.testing.pylayer_check import TanhPyLayer

    rng = np.random.default_rng(2)
    a = rng.standard_normal((6, 7)).astype(np.float32)
    b = rng.standard_normal((6, 7)).astype(np.float32)
    x = paddle.to_tensor(a, stop_gradient=False)
    y = paddle.to_tensor(b, stop_gradient=False)
    out = (x * y + paddle.tanh(x) - 2.0 * paddle.square(y)) * 3
    np.testing.assert_array_equal(out.numpy(), (a * b + np.tanh(a) - 2.0 * (b * b)) * 3)
    out.backward(paddle.ones([6, 7]))
    t = np.tanh(a)
    np.testing.assert_array_equal(x.grad.numpy(), 3 * b + 3 * (1 - t * t))
    np.testing.assert_allclose(y.grad.numpy(), 3 * a - 12 * b, rtol=1e-6)
    z = paddle.to_tensor(a, stop_gradient=False)
    TanhPyLayer.apply(z).backward(paddle.ones([6, 7]))
    np.testing.assert_array_equal(z.grad.numpy(), 1 - t * t)


def test_other_busy_cpus_leaves_out_this_process():
    tick = parallel.os.sysconf("SC_CLK_TCK")
    before = (1000, 600, 5.0)
    # 400 jiffies over 2 CPUs, all busy; this process used 100 of them
    after = (1400, 600, 5.0 + 100 / tick)
    assert parallel.other_busy_cpus(before, after, 2) == pytest.approx(1.5)
    assert parallel.other_busy_cpus(before, (1400, 1000, 5.0), 2) == 0.0  # all idle
    assert parallel.other_busy_cpus(before, before, 2) is None  # no time passed


def test_split_gate_ignores_own_work_but_not_others(monkeypatch):
    tick = parallel.os.sysconf("SC_CLK_TCK")
    readings = iter([(0, 0, 0.0), (200, 100, 100 / tick), (400, 200, 100 / tick)])
    monkeypatch.setattr(parallel, "cpu_counters", lambda: next(readings))
    monkeypatch.setattr(parallel.os, "cpu_count", lambda: 2)
    monkeypatch.setattr(parallel, "_spare", [-10.0, False, None])
    clock = iter([0.0, 2.0, 4.0])
    monkeypatch.setattr(parallel.time, "monotonic", lambda: next(clock))
    parallel._cpu_to_spare()  # first reading: the load average decides
    assert parallel._cpu_to_spare()  # one CPU busy, all of it this process's: split
    assert not parallel._cpu_to_spare()  # one CPU busy with another process: do not


def test_split_runs_on_long_lived_workers_that_are_reused(split):
    seen = []

    def fn(a):
        seen.append((threading.current_thread().name, threading.get_ident()))
        a += 1

    a = np.zeros(30, np.float32)
    parallel.run(fn, (a,))
    first = set(seen)
    seen.clear()
    parallel.run(fn, (a,))
    assert (a == 2).all()
    assert set(seen) == first  # the same two worker threads, not new ones
    assert sorted(n for n, _ in first if n != threading.current_thread().name) == [
        "sculler-split-1", "sculler-split-2"]


def test_worker_error_reaches_the_caller_and_the_workers_stay_usable(split):
    def fn(a):
        if a[0] >= 10:  # the workers' pieces
            raise ZeroDivisionError("piece failed")
        a += 1

    a = np.arange(30, dtype=np.float32)
    with pytest.raises(ZeroDivisionError, match="piece failed"):
        parallel.run(fn, (a,))
    b = np.zeros(30, np.float32)
    parallel.run(lambda x: np.add(x, 1, out=x), (b,))
    assert (b == 1).all()


def test_a_split_inside_a_split_runs_in_its_callers_thread(split):
    inner_pieces = []

    def inner(x):
        inner_pieces.append((threading.current_thread().name, x.size))

    def outer(a):
        parallel.run(inner, (np.zeros(30, np.float32),))
        outers.append(threading.current_thread().name)

    outers = []
    parallel.run(outer, (np.zeros(30, np.float32),))
    # three outer pieces on three threads; while they hold the workers, each inner run makes
    # its three pieces one after another in the thread that asked for it
    assert len(set(outers)) == 3
    assert sorted(inner_pieces) == sorted((name, 10) for name in outers for _ in range(3))


def test_split_gate_first_judges_the_time_since_import_not_the_load_average(monkeypatch):
    # a short-lived process (a benchmark run of a second) is judged on what other processes
    # did since it imported sculler, not on the load average of the processes before it
    tick = parallel.os.sysconf("SC_CLK_TCK")
    monkeypatch.setattr(parallel.os, "cpu_count", lambda: 2)
    monkeypatch.setattr(parallel.os, "getloadavg", lambda: (1.9, 1.9, 1.9))
    clock = iter([5.0, 5.01, 5.1, 5.2])
    monkeypatch.setattr(parallel.time, "monotonic", lambda: next(clock))
    at_import = (1000, 600, 5.0)
    monkeypatch.setattr(parallel, "_spare", [float("-inf"), True, at_import])
    readings = iter([
        (1004, 601, 5.0),  # 4 jiffies: too short to tell, the verdict stays, no check made
        (1040, 620, 5.0 + 20 / tick),  # 40 jiffies, 20 busy, all this process's: spare
        (1060, 620, 5.0 + 20 / tick),  # (a second has not passed: not read)
    ])
    monkeypatch.setattr(parallel, "cpu_counters", lambda: next(readings))
    assert parallel._cpu_to_spare()
    assert parallel._spare[0] == float("-inf") and parallel._spare[2] == at_import
    assert parallel._cpu_to_spare()
    assert parallel._spare == [5.01, True, (1040, 620, 5.0 + 20 / tick)]
    assert parallel._cpu_to_spare()  # cached for a second


def test_split_gate_first_check_sees_a_busy_machine_since_import(monkeypatch):
    monkeypatch.setattr(parallel.os, "cpu_count", lambda: 2)
    monkeypatch.setattr(parallel.os, "getloadavg", lambda: (0.0, 0.0, 0.0))
    monkeypatch.setattr(parallel.time, "monotonic", lambda: 5.0)
    # 40 jiffies since import, 20 busy, none of them this process's: a CPU taken
    monkeypatch.setattr(parallel, "_spare", [float("-inf"), True, (1000, 600, 5.0)])
    monkeypatch.setattr(parallel, "cpu_counters", lambda: (1040, 620, 5.0))
    assert not parallel._cpu_to_spare()


def test_wait_for_sees_another_threads_flag_and_gives_up_after_its_rounds():
    spin = pytest.importorskip("sculler.math.spin", reason="numba not installed")
    flag = np.zeros(1, np.int64)
    assert not spin.wait_for(flag, 1000)  # nobody sets it: the rounds run out
    rounds = int(200_000 * spin.rounds_per_us())  # 200 ms, far more than the setter needs
    setter = threading.Timer(0.01, lambda: flag.__setitem__(0, 1))
    setter.start()
    assert spin.wait_for(flag, rounds)
    setter.join()


@pytest.mark.parametrize("spin_us", [0.0, 300.0, 2e4])
def test_split_results_and_errors_are_the_same_however_workers_wait(split, monkeypatch,
                                                                     spin_us):
    """Workers that sleep between tasks (0), spin a while (300 us) or spin past every gap
    (20 ms) hand over the same results and errors."""
    monkeypatch.setattr(parallel, "SPIN_US", spin_us)
    monkeypatch.setattr(parallel, "_spin_state", {})
    if spin_us == 0.0:
        assert parallel._spinner() is None
    monkeypatch.setattr(parallel, "_workers", [])  # new workers, made with this setting
    for _ in range(50):
        a = np.arange(30, dtype=np.float64)
        parallel.run(lambda x: np.multiply(x, 2, out=x), (a,))
        assert (a == 2 * np.arange(30)).all()
    with pytest.raises(ZeroDivisionError):
        parallel.run(lambda x: 1 / 0, (np.zeros(30),))
    b = np.zeros(30)
    parallel.run(lambda x: np.add(x, 1, out=x), (b,))
    assert (b == 1).all()
