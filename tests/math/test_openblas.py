"""Momentum updates on NumPy's OpenBLAS axpby/axpy (sculler.math.openblas): the NumPy kernels'
values within rounding, refused (arrays untouched) where they do not apply, the same bits on a
busy machine, and taken by the v2 trainer's fused update and the eager step."""

from __future__ import annotations

import os

import numpy as np
import pytest

import sculler as paddle
from sculler import optimizer as O
from sculler.math import cblas, openblas
from sculler.math import optim as K


def _have(dtype) -> bool:
    return None not in (cblas.routine("axpy", dtype), cblas.routine("axpby", dtype))


needs_blas = pytest.mark.skipif(not _have(np.float32),
                                reason="NumPy's BLAS has no 64-bit axpy/axpby symbols here")


@pytest.fixture
def idle_cpu(monkeypatch):
    from sculler.math import parallel

    monkeypatch.setattr(parallel, "_cpu_to_spare", lambda: True)


def _arrays(n, dtype, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(n).astype(dtype) for _ in range(3)]


@needs_blas
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_heavy_ball_matches_the_numpy_kernel(idle_cpu, dtype):
    n = openblas.MIN_ELEMENTS + 3
    w, g, v = _arrays(n, dtype)
    w2, g2, v2 = w.copy(), g.copy(), v.copy()
    for _ in range(3):
        assert openblas.heavy_ball(w, g, v, 0.05, 0.9)
        K.heavy_ball(w2, g2, v2, 0.05, 0.9, np.empty_like(w2))
    tol = 1e-6 if dtype == np.float32 else 1e-14
    np.testing.assert_allclose(v, v2, rtol=tol, atol=tol)
    np.testing.assert_allclose(w, w2, rtol=tol, atol=tol)


@needs_blas
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("with_momentum", [True, False])
@pytest.mark.parametrize("decay", [0.0, 0.01])
def test_momentum_step_matches_the_numpy_kernel(idle_cpu, dtype, with_momentum, decay):
    n = openblas.MIN_ELEMENTS + 5
    w, g, m = _arrays(n, dtype, seed=2)
    if not with_momentum:
        m = None
    w2, g2 = w.copy(), g.copy()
    m2 = None if m is None else m.copy()
    for k in range(3):
        assert openblas.momentum_step(w, g * (k + 1), m, 0.05, 0.9, decay)
        K.momentum_step(w2, g2 * (k + 1), m2, 0.05, 0.9, decay, np.empty_like(w2))
    tol = 1e-6 if dtype == np.float32 else 1e-14
    np.testing.assert_allclose(w, w2, rtol=tol, atol=tol)
    if m is not None:
        np.testing.assert_allclose(m, m2, rtol=tol, atol=tol)
    assert not np.array_equal(w, _arrays(n, dtype, seed=2)[0])  # it moved


def test_updates_decline_and_leave_arrays_alone(idle_cpu):
    n = openblas.MIN_ELEMENTS
    w, g, v = _arrays(n, np.float32)
    before = [a.copy() for a in (w, g, v)]
    for step in (lambda *a: openblas.heavy_ball(*a, 0.1, 0.9),
                 lambda *a: openblas.momentum_step(*a, 0.1, 0.9, 0.0)):
        assert not step(w[:-1], g[:-1], v[:-1])  # too small
        assert not step(w, g.astype(np.float64), v)  # dtypes differ
        assert not step(w, g, v[: n // 2].reshape(2, -1)[0])  # shapes differ
        w2d, g2d, v2d = (a.reshape(256, -1) for a in (w, g, v))
        assert not step(w2d.T, g2d.T, v2d.T)  # not C-contiguous
        assert not step(w.astype(np.int32), g.astype(np.int32), v.astype(np.int32))
    for a, b in zip((w, g, v), before):
        np.testing.assert_array_equal(a, b)


def get_threads() -> int:
    """The thread count of NumPy's own OpenBLAS (SciPy may have loaded a second one)."""
    from threadpoolctl import threadpool_info

    root = os.path.dirname(os.path.dirname(os.path.abspath(np.__file__)))
    return max(i["num_threads"] for i in threadpool_info()
               if i["user_api"] == "blas" and (i.get("filepath") or "").startswith(root)
               and "numpy" in os.path.basename(os.path.dirname(i["filepath"])))


def _record_axpy_threads(monkeypatch) -> list[int]:
    """The BLAS thread count at each float32 ``axpy`` call, appended as they run."""
    seen: list[int] = []
    axpy = cblas.routine("axpy", np.float32)
    monkeypatch.setitem(cblas._found, ("axpy", "f"),
                        lambda *a: (seen.append(get_threads()), axpy(*a)))
    return seen


@needs_blas
@pytest.mark.parametrize("kernel", ["heavy_ball", "momentum_step"])
def test_a_busy_machine_gives_the_same_values_on_one_thread(monkeypatch, kernel):
    """The machine's load picks the BLAS thread count, never the kernel: a busy machine
    runs the same calls on one thread (and restores the count), with identical values."""
    from sculler.math import parallel

    if get_threads() < 2:
        pytest.skip("one BLAS thread: nothing to lower")
    seen = _record_axpy_threads(monkeypatch)
    step = getattr(openblas, kernel)
    extra = () if kernel == "heavy_ball" else (0.01,)
    results = {}
    for idle in (True, False):
        monkeypatch.setattr(parallel, "_cpu_to_spare", lambda idle=idle: idle)
        w, g, v = _arrays(openblas.MIN_ELEMENTS * 3, np.float32)
        threads = get_threads()
        for _ in range(3):
            assert step(w, g, v, 0.05, 0.9, *extra)
        assert get_threads() == threads
        results[idle] = (w, v)
    assert seen[-1] == 1
    for a, b in zip(results[True], results[False]):
        np.testing.assert_array_equal(a, b)


@needs_blas
def test_eager_momentum_on_a_large_parameter_takes_blas(idle_cpu, monkeypatch):
    used = []
    original = openblas.heavy_ball
    monkeypatch.setattr(openblas, "heavy_ball", lambda *a: used.append(original(*a)) or used[-1])
    n = openblas.MIN_ELEMENTS * 2
    w0, g0, _ = _arrays(n, np.float32, seed=1)
    p = paddle.Parameter(w0.copy(), name="p_large_momentum")
    opt = paddle.optimizer.Momentum(learning_rate=0.01, momentum=0.9, parameters=[p])
    w, v = w0.copy(), np.zeros_like(w0)
    for k in range(3):
        p.grad = paddle.Tensor(g0 * (k + 1))
        opt.step()
        K.heavy_ball(w, g0 * (k + 1), v, 0.01, 0.9, np.empty_like(w))
    np.testing.assert_allclose(p.numpy(), w, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(opt.state_dict()["p_large_momentum.moment"], v, rtol=1e-6)
    assert used == [True] * 3


def _fused_run(make_opt, monkeypatch, blas: bool, steps: int = 3):
    """A packed run of two parameters (300x256 + 1x256: above MIN_ELEMENTS) updated through
    ``update_dense``; ``blas=False`` forces the NumPy kernels."""
    from sculler.core.model_config import ParameterConfig
    from sculler.core.parameter import ParameterSet

    calls = []
    original = openblas.momentum_step
    monkeypatch.setattr(openblas, "momentum_step",
                        lambda *a: calls.append(a[0].size) or (blas and original(*a)))
    ps = ParameterSet(seed=0)
    for name, dims in (("w", [300, 256]), ("b", [1, 256])):
        ps.create(ParameterConfig(name, dims), dtype=np.float32)
    ps.pack()
    opt = make_opt()
    rng = np.random.RandomState(3)
    for _ in range(steps):
        items = []
        for name in ("w", "b"):
            ps[name].grad[...] = rng.standard_normal(ps[name].shape)
            items.append((name, ps[name].value, ps[name].grad, ps[name].config))
        opt.update_dense(items)
        opt.finish_batch(8)
    return {n: ps[n].value.copy() for n in ("w", "b")}, opt.state_dict(), calls


@needs_blas
@pytest.mark.parametrize("make_opt", [
    lambda: O.Momentum(momentum=0.9, learning_rate=0.1),
    lambda: O.Momentum(momentum=0.9, learning_rate=0.1,
                       regularization=O.L2Regularization(0.01)),
    lambda: O.Momentum(learning_rate=0.1),
])
def test_v2_fused_update_takes_blas_with_the_numpy_values(idle_cpu, monkeypatch, make_opt):
    values, state, calls = _fused_run(make_opt, monkeypatch, blas=True)
    ref_values, ref_state, _ = _fused_run(make_opt, monkeypatch, blas=False)
    assert calls == [300 * 256 + 256] * 3  # one call per batch for the whole packed run
    for n in values:
        np.testing.assert_allclose(values[n], ref_values[n], rtol=1e-6, atol=1e-7)
    assert state.keys() == ref_state.keys()
    for k in state:
        np.testing.assert_allclose(state[k], ref_state[k], rtol=1e-5, atol=1e-7)


def test_clipping_keeps_the_numpy_kernels(monkeypatch):
    make = lambda: O.Momentum(momentum=0.9, learning_rate=0.1,  # noqa: E731
                              gradient_clipping_threshold=0.5)
    _, _, calls = _fused_run(make, monkeypatch, blas=True)
    assert calls == []


def test_shorten_thread_spin_once_and_gemm_still_right(monkeypatch):
    """The spin is shortened once per process (OpenBLAS restarts its threads at the next
    threaded call, and GEMMs give the same values); the variable is not left set, and a user's
    own OPENBLAS_THREAD_TIMEOUT is left alone."""
    a = np.random.RandomState(0).rand(300, 300)
    before = a @ a
    monkeypatch.setitem(openblas._spin, "set", False)
    monkeypatch.setenv("OPENBLAS_THREAD_TIMEOUT", "20")
    assert openblas.shorten_thread_spin() is False
    monkeypatch.delenv("OPENBLAS_THREAD_TIMEOUT")
    changed = openblas.shorten_thread_spin()
    assert changed is (cblas.numpy_openblas() is not None
                       and hasattr(cblas.numpy_openblas(), "blas_thread_shutdown_"))
    assert "OPENBLAS_THREAD_TIMEOUT" not in os.environ
    assert openblas.shorten_thread_spin() is False  # once only
    np.testing.assert_array_equal(a @ a, before)
