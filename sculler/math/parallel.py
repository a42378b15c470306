"""Work split over threads (NumPy releases the GIL in its loops, so each thread runs the same
vectorised code on its own slice of memory).

``run(fn, arrays, *args)`` calls ``fn(*slices, *args)`` on ``threads()`` contiguous pieces of
the flattened, same-shaped C-contiguous ``arrays`` at once when they hold at least
``PARALLEL_MIN_ELEMENTS`` elements, else ``fn(*arrays, *args)`` once. ``fn`` must be
elementwise (each output element depends only on the same element of the inputs), so the
result is bit-identical to the single-threaded call. ``scratch(n, dtype)`` is a per-thread
reusable work buffer for such functions.

The extra threads are long-lived workers, one per extra CPU, each handed its task through a
lock (the caller runs the first piece itself). What a split costs is the wake-up of sleeping
threads on this project's virtual machines, whose idle CPUs halt: a worker starts about 15 us
after the release when its CPU ran recently (30-50 us after a few idle milliseconds), and a
caller that finishes first and sleeps waits as long again, so a split of tiny pieces costs
55-90 us on an idle machine (a ``ThreadPoolExecutor`` 75-90 us, measured side by side). So,
where numba is installed, a worker spins for ``SPIN_US`` (300 us; ``SCULLER_SPIN_US``, 0 turns
it off) on a flag after each task before it sleeps, and a caller waiting for a worker spins
the same way (``sculler.math.spin``: without the GIL, with ``pause``). ResNet-20's 130 splits
a step came 6.6-8.2 % faster (median of 20 interleaved rounds, won 18 and 20 of 20). A split
asked for while another one runs (from another thread, or nested) runs its pieces one after
another in the caller.

The threshold comes from ``bench/elementwise_threshold.py`` (the size from which two threads
beat one on this machine class: 2^20 float32 elements, re-measured with these workers; at 2^18
the split still took 1.3-2x one call); ``SCULLER_PARALLEL_MIN`` overrides
``PARALLEL_MIN_ELEMENTS`` and ``SCULLER_NUM_THREADS`` the thread count (1 turns the splitting
off). Work is split only
while other processes leave a CPU idle (``/proc/stat`` minus this process's own CPU time).
numexpr was measured as the alternative and rejected: its float32 ``tanh`` is two orders of
magnitude slower than NumPy's SIMD loop, and fused expressions round differently.
"""

from __future__ import annotations

import _thread
import os
import platform
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

PARALLEL_MIN_ELEMENTS = int(os.environ.get("SCULLER_PARALLEL_MIN", 1 << 20))
_LOAD_CHECK_S = 1.0

_local = threading.local()
# ticks per CPU a /proc/stat difference must span to decide (a tick is 10 ms: over fewer, a
# tick of someone else's work would look like a busy CPU)
_MIN_SPAN_PER_CPU = 5


def cpu_counters() -> tuple[int, int, float] | None:
    """``(all jiffies, idle jiffies, this process's CPU seconds)`` now (its threads and
    waited-for children included); None off Linux."""
    try:
        with open("/proc/stat") as f:
            fields = [int(v) for v in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    t = os.times()
    own = t.user + t.system + t.children_user + t.children_system
    return sum(fields), fields[3] + (fields[4] if len(fields) > 4 else 0), own


def other_busy_cpus(before: tuple[int, int, float], after: tuple[int, int, float],
                    cpus: int) -> float | None:
    """CPUs' worth of time that OTHER processes used between two :func:`cpu_counters`
    readings: all busy time minus this process's own. None when no time passed."""
    total = after[0] - before[0]
    if total <= 0:
        return None
    busy = total - (after[1] - before[1])
    own = (after[2] - before[2]) * os.sysconf("SC_CLK_TCK")
    return max(0.0, (busy - own) / total * cpus)


def _cpu_to_spare() -> bool:
    """Whether other processes left a CPU idle since the last check (checked at most once a
    second): the busy time ``/proc/stat`` counts minus this process's own CPU time, so the
    work being split does not count against itself (the load average would). The first
    check compares with the counters read at import; while less than ``_MIN_SPAN_PER_CPU``
    ticks per CPU have passed since the reading compared with, the verdict stays as it is
    (at first: a CPU to spare) and the next call checks again. Without ``/proc/stat`` the
    one-minute load average decides. On a machine busy with other work the handoff to a
    second thread waits for a core and costs far more than it saves, so large work then
    stays on one."""
    now = time.monotonic()
    if now - _spare[0] > _LOAD_CHECK_S:
        cpus = os.cpu_count() or 1
        counters = cpu_counters()
        if counters is not None and _spare[2] is not None:
            if counters[0] - _spare[2][0] < _MIN_SPAN_PER_CPU * cpus:
                return _spare[1]  # too short to tell: keep the verdict, check next call
            others = other_busy_cpus(_spare[2], counters, cpus)
            _spare[1] = others is None or others <= cpus - 1.5  # ours plus half a CPU more
        else:
            try:
                _spare[1] = os.getloadavg()[0] <= cpus - 1
            except OSError:
                _spare[1] = True
        _spare[0], _spare[2] = now, counters
    return _spare[1]


# time of the last check, its verdict, the counters read then: the first check compares with
# the counters read at import, so a short-lived process is judged on the other processes' use
# since it started rather than on the one-minute load average, which counts the processes that
# ran just before it (a benchmark's previous contender, say) as if they were still running
_spare = [float("-inf"), True, cpu_counters()]


def cpu_to_spare() -> bool:
    """Whether other processes leave a CPU idle now (checked at most once a second): the
    condition under which this module splits work, for kernels that choose between one
    thread and several (e.g. a BLAS call's threads) on the same rule."""
    return _cpu_to_spare()


def threads() -> int:
    """Threads used for large elementwise work (``SCULLER_NUM_THREADS``, else the CPUs)."""
    env = os.environ.get("SCULLER_NUM_THREADS")
    if env:
        return max(1, int(env))
    return max(1, min(os.cpu_count() or 1, 8))


# how long a worker spins for its next task before sleeping on its lock (microseconds;
# SCULLER_SPIN_US, 0 turns spinning off)
SPIN_US = float(os.environ.get("SCULLER_SPIN_US", 300))
_spin_state: dict[str, Any] = {}


def _spinner() -> tuple[Callable[[np.ndarray, int], bool], int] | None:
    """(``sculler.math.spin.wait_for``, its rounds per ``SPIN_US``), or None where workers
    only sleep (no numba, ``SCULLER_JIT=0``, not x86-64, or ``SCULLER_SPIN_US=0``)."""
    if "spinner" not in _spin_state:
        found = None
        if SPIN_US > 0 and platform.machine().lower() in ("x86_64", "amd64"):
            from sculler.math.jit import numba_available  # noqa: PLC0415

            if numba_available():
                from sculler.math import spin  # noqa: PLC0415

                found = spin.wait_for, max(1, int(SPIN_US * spin.rounds_per_us()))
        _spin_state["spinner"] = found
    return _spin_state["spinner"]


class _Worker:
    """A daemon thread handed one task at a time. Between tasks it spins for a while on a flag
    (:mod:`sculler.math.spin`, without the GIL), then sleeps on a lock; the caller waiting for
    its end does the same. Each flag is set before its lock is released, so that a spinning
    thread takes the lock at once and a sleeping one is woken by the lock."""

    def __init__(self, index: int) -> None:
        self._go = _thread.allocate_lock()
        self._go.acquire()
        self._done = _thread.allocate_lock()
        self._done.acquire()
        self._go_flag = np.zeros(1, np.int64)
        self._done_flag = np.zeros(1, np.int64)
        self.spinner = _spinner()
        self._task: tuple[Callable[..., Any], tuple] | None = None
        self._error: BaseException | None = None
        threading.Thread(target=self._loop, name=f"sculler-split-{index}", daemon=True).start()

    def _loop(self) -> None:
        while True:
            spinner = self.spinner
            if spinner is not None:
                spinner[0](self._go_flag, spinner[1])
            self._go.acquire()
            self._go_flag[0] = 0
            fn, args = self._task
            try:
                fn(*args)
            except BaseException as e:  # handed to the caller by wait()
                self._error = e
            self._done_flag[0] = 1
            self._done.release()

    def start(self, fn: Callable[..., Any], args: tuple) -> None:
        self._task = (fn, args)
        self._go_flag[0] = 1
        self._go.release()

    def wait(self) -> None:
        spinner = self.spinner
        if spinner is not None:
            spinner[0](self._done_flag, spinner[1])
        self._done.acquire()
        self._done_flag[0] = 0
        self._task = None
        error, self._error = self._error, None
        if error is not None:
            raise error


_workers: list[_Worker] = []
_busy = _thread.allocate_lock()  # held while a split uses the workers


def _forget_workers() -> None:
    """In a forked child the workers' threads do not exist: start new ones on demand."""
    global _busy
    _workers.clear()
    _busy = _thread.allocate_lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_workers)


def _run_pieces(pieces: Sequence[tuple[Callable[..., Any], tuple]]) -> None:
    """Run ``fn(*args)`` for every piece: the first in the caller, the others on workers at
    the same time (all in the caller, in turn, while another split holds the workers)."""
    if len(pieces) < 2 or not _busy.acquire(False):
        for fn, args in pieces:
            fn(*args)
        return
    try:
        while len(_workers) < len(pieces) - 1:
            _workers.append(_Worker(len(_workers) + 1))
        started = []
        try:
            for worker, (fn, args) in zip(_workers, pieces[1:]):
                worker.start(fn, args)
                started.append(worker)
            fn, args = pieces[0]
            fn(*args)
        finally:
            errors = []
            for worker in started:
                try:
                    worker.wait()
                except BaseException as e:
                    errors.append(e)
        if errors:
            raise errors[0]
    finally:
        _busy.release()


def scratch(n: int, dtype: Any, slot: int = 0) -> np.ndarray:
    """A per-thread work buffer of ``n`` elements (contents undefined); ``slot`` gives a
    function several independent ones."""
    key = (np.dtype(dtype).str, slot)
    bufs = getattr(_local, "bufs", None)
    if bufs is None:
        bufs = _local.bufs = {}
    buf = bufs.get(key)
    if buf is None or buf.size < n:
        buf = bufs[key] = np.empty(max(n, 1), dtype=dtype)
    return buf[:n]


def splittable(arrays: Sequence[Any]) -> bool:
    """Whether ``run`` would split these arrays (large, same-shaped, C-contiguous numpy)."""
    first = arrays[0]
    if type(first) is not np.ndarray or first.size < PARALLEL_MIN_ELEMENTS or threads() < 2:
        return False
    return all(type(a) is np.ndarray and a.shape == first.shape and a.flags.c_contiguous
               for a in arrays) and _cpu_to_spare()


def run(fn: Callable[..., Any], arrays: Sequence[Any], *args: Any) -> None:
    """``fn(*arrays, *args)``, on thread-sized pieces of the arrays when they are large.

    Args:
        fn: an elementwise function writing its result into (some of) its array arguments.
        arrays: same-shaped arrays; each call gets matching flat pieces of them.
        args: passed unchanged to every call (scalars).
    """
    if not splittable(arrays):
        fn(*arrays, *args)
        return
    flat = [a.reshape(-1) for a in arrays]
    bounds = _bounds(arrays[0].size, threads())
    _run_pieces([(fn, tuple(f[lo:hi] for f in flat) + args)
                 for lo, hi in zip(bounds, bounds[1:])])


def run_ranges(fn: Callable[..., Any], n: int, *args: Any, chunks: int = 2) -> None:
    """``fn(lo, hi, *args)`` over ``[0, n)``, on this module's workers when a CPU is free: for
    compiled kernels that release the GIL and loop over independent jobs, so that they share
    these workers instead of starting a thread pool of their own (two pools that spin while
    they wait take the CPUs from each other).

    The range is cut into ``chunks`` pieces per thread, which the caller and the workers take
    in turn until none is left: a worker that starts late takes fewer, and the caller does not
    wait for it at the end. Two a thread, not four, since the workers spin between tasks and
    start promptly: each piece costs a compiled call's dispatch under the GIL, which the other
    thread may be waiting for (ResNet-20 +2.5 to +4.1 %, won 15 and 20 of 24 interleaved
    rounds)."""
    k = threads() if n > 1 and cpu_to_spare() else 1
    if k == 1:
        fn(0, n, *args)
        return
    bounds = _bounds(n, min(n, k * chunks))
    pieces = iter(list(zip(bounds, bounds[1:])))
    claim = threading.Lock()

    def drain() -> None:
        while True:
            with claim:
                piece = next(pieces, None)
            if piece is None:
                return
            fn(piece[0], piece[1], *args)

    _run_pieces([(drain, ())] * k)


def _bounds(n: int, k: int) -> list[int]:
    k = max(1, min(k, n))
    return [n * i // k for i in range(k + 1)]
