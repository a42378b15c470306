"""Bounded busy-waits on a flag, for the hand-over between ``sculler.math.parallel``'s caller
and its workers (imported only where numba is installed: ``pip install sculler[fast]``).

Why: a thread that sleeps on a lock on this project's virtual machines wakes 15-50 us after
the lock is released (its CPU halts when idle). ResNet-20 makes about 130 splits a step; a
worker that slept between them started each one about 37 us late. A thread that spins,
without the GIL, on a flag the other one sets sees it within a fraction of a microsecond.
The spin is bounded (then the thread sleeps on its lock as before), and each round executes
``pause``, which tells the CPU it is a spin loop.
"""

from __future__ import annotations

import time

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

from sculler.math.jit import KERNEL_OPTIONS


@intrinsic
def _load_acquire(typingctx, flags):
    """``flags[0]`` read as an atomic acquire load (the compiler may not hoist it out of the
    loop), after a ``pause``."""
    def codegen(context, builder, signature, args):
        pause = cgutils.get_or_insert_function(builder.module, ir.FunctionType(ir.VoidType(), []),
                                               "llvm.x86.sse2.pause")
        builder.call(pause, [])
        array = context.make_array(signature.args[0])(context, builder, args[0])
        return builder.load_atomic(array.data, "acquire", 8)

    return types.int64(flags), codegen


@njit(**KERNEL_OPTIONS)
def wait_for(flags, rounds):
    """Whether ``flags[0]`` (an int64 array) became non-zero within ``rounds`` rounds."""
    for _ in range(rounds):
        if _load_acquire(flags) != 0:
            return True
    return False


def rounds_per_us() -> float:
    """How many rounds of :func:`wait_for` take a microsecond here (measured once)."""
    idle = np.zeros(1, np.int64)
    wait_for(idle, 10)  # compiled (or loaded from the cache) before the clock starts
    t = time.perf_counter()
    wait_for(idle, 20000)
    return 20000 / max((time.perf_counter() - t) * 1e6, 1.0)
