"""Machine-load bookkeeping shared by the benchmarks: how busy the other processes kept the
CPUs while a figure was taken, so a figure taken on a busy machine is flagged, not trusted.

``other`` is the fraction of all CPUs' time spent by processes other than this one (and its
children) during the measurement: ``busy jiffies / total jiffies`` from ``/proc/stat`` minus
this process's own CPU time. Above ``RELIABLE_BELOW`` (5 %) a figure is marked unreliable.
:func:`paired_ratio` compares contenders run round by round.
"""

from __future__ import annotations

import os
import statistics
import time

from sculler.math.parallel import cpu_counters, other_busy_cpus

RELIABLE_BELOW = 0.05


def paired_ratio(mine: list[float], theirs: list[float]) -> float:
    """The median of the round-by-round ratios ``mine[i] / theirs[i]``: a round's contenders
    run seconds apart on the same machine, whose own speed drifts between rounds."""
    return statistics.median(a / b for a, b in zip(mine, theirs))


def bench_threads() -> int:
    """Threads every contender gets (``BENCH_THREADS``, else all CPUs): Sculler's BLAS and
    elementwise pool, torch's intra-op pool and Paddle's math library (whose default is 1)."""
    return max(1, int(os.environ.get("BENCH_THREADS") or os.cpu_count() or 1))


def same_threads(framework) -> None:
    """Give ``torch`` or ``paddle`` :func:`bench_threads` threads (the common policy)."""
    n = bench_threads()
    if hasattr(framework, "set_num_threads"):  # torch
        framework.set_num_threads(n)
    else:  # paddle: FLAGS_paddle_num_threads defaults to 1
        framework.base.core.set_num_threads(n)


class LoadMeter:
    """``with LoadMeter() as m: ...`` then ``m.other`` (fraction, None off Linux) and
    ``m.note`` ("load 3%" or "load 37% UNRELIABLE")."""

    def __enter__(self) -> LoadMeter:
        self._start, self._wall = cpu_counters(), time.perf_counter()
        return self

    def __exit__(self, *exc) -> None:
        end = cpu_counters()
        self.wall = time.perf_counter() - self._wall
        self.other = None
        if self._start is not None and end is not None:
            cpus = os.cpu_count() or 1
            busy = other_busy_cpus(self._start, end, cpus)
            self.other = None if busy is None else busy / cpus

    @property
    def reliable(self) -> bool:
        return self.other is not None and self.other < RELIABLE_BELOW

    @property
    def note(self) -> str:
        if self.other is None:
            return "load unknown"
        return f"load {self.other:.0%}" + ("" if self.reliable else " UNRELIABLE")
