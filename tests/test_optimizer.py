"""Optimizers against updates written out by hand (float64, 2-3 steps on tiny arrays)."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest

from sculler import optimizer as O
from sculler.math import optim as K

W0 = np.array([[0.5, -1.0], [2.0, 0.25]])
GRADS = [np.array([[0.1, -0.2], [0.3, 0.0]]),
         np.array([[-0.4, 0.5], [0.05, 0.2]]),
         np.array([[0.2, 0.1], [-0.3, 0.6]])]


def run(opt, steps=3, key="w", config=None, w=None, batch=4):
    w = W0.copy() if w is None else w
    for g in GRADS[:steps]:
        opt.update(key, w, g.astype(w.dtype), config)
        opt.finish_batch(batch)
    return w


def close(a, b):
    np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-14)


# ---------------------------------------------------------------- each optimizer by hand
def test_sgd_plain():
    w = run(O.Momentum(learning_rate=0.1))
    close(w, W0 - 0.1 * (GRADS[0] + GRADS[1] + GRADS[2]))


def test_momentum_with_l2_is_paddle_v1_formula():
    lr, mu, l2 = 0.1, 0.9, 0.01
    w = run(O.Momentum(momentum=mu, learning_rate=lr, regularization=O.L2Regularization(l2)))
    ref, m = W0.copy(), np.zeros_like(W0)
    for g in GRADS:
        m = mu * m - lr * g - lr * l2 * ref
        ref = ref + m
    close(w, ref)


def test_adagrad():
    lr, eps = 0.1, 1e-6
    w = run(O.AdaGrad(learning_rate=lr))
    ref, G = W0.copy(), np.zeros_like(W0)
    for g in GRADS:
        G = G + g * g
        ref = ref - lr * g / np.sqrt(G + eps)
    close(w, ref)


def test_decayed_adagrad_first_batch_uses_full_square():
    lr, rho, eps = 0.1, 0.9, 1e-6
    w = run(O.DecayedAdaGrad(rho=rho, epsilon=eps, learning_rate=lr))
    ref, E = W0.copy(), np.zeros_like(W0)
    for i, g in enumerate(GRADS):
        E = rho * E + (1.0 if i == 0 else 1 - rho) * g * g
        ref = ref - lr * g / np.sqrt(E + eps)
    close(w, ref)


def test_adadelta():
    lr, rho, eps = 1.0, 0.9, 1e-6
    w = run(O.AdaDelta(rho=rho, epsilon=eps, learning_rate=lr))
    ref, Eg, Ex = W0.copy(), np.zeros_like(W0), np.zeros_like(W0)
    for g in GRADS:
        Eg = rho * Eg + (1 - rho) * g * g
        r = np.sqrt((Ex + eps) / (Eg + eps))
        Ex = rho * Ex + (1 - rho) * (g * r) ** 2
        ref = ref - lr * r * g
    close(w, ref)


def test_rmsprop_centred_with_momentum():
    lr, rho, eps, mu = 0.01, 0.9, 1e-6, 0.5
    cfg = SimpleNamespace(momentum=mu)
    w = run(O.RMSProp(rho=rho, epsilon=eps, learning_rate=lr), config=cfg)
    ref, Eg2, Eg, m = W0.copy(), np.zeros_like(W0), np.zeros_like(W0), np.zeros_like(W0)
    for i, g in enumerate(GRADS):
        Eg2 = rho * Eg2 + (1.0 if i == 0 else 1 - rho) * g * g
        Eg = rho * Eg + (1 - rho) * g
        m = mu * m - lr * g / np.sqrt(Eg2 - Eg * Eg + eps)
        ref = ref + m
    close(w, ref)


def test_adam_v1():
    lr, b1, b2, eps = 0.01, 0.9, 0.999, 1e-8
    w = run(O.Adam(learning_rate=lr))
    ref, m, v = W0.copy(), np.zeros_like(W0), np.zeros_like(W0)
    for t, g in enumerate(GRADS, start=1):
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        ref = ref - lr * math.sqrt(1 - b2**t) / (1 - b1**t) * m / (np.sqrt(v) + eps)
    close(w, ref)


def test_adamax_v1_and_zero_gradient_gives_no_nan():
    lr, b1, b2 = 0.01, 0.9, 0.999
    w = run(O.Adamax(learning_rate=lr))
    ref, m, u = W0.copy(), np.zeros_like(W0), np.zeros_like(W0)
    for t, g in enumerate(GRADS, start=1):
        m = b1 * m + (1 - b1) * g
        u = np.maximum(b2 * u, np.abs(g))
        step = np.divide(m, u, out=np.zeros_like(m), where=u > 0)
        ref = ref - lr / (1 - b1**t) * step
    close(w, ref)
    assert np.isfinite(w).all() and w[1, 1] != W0[1, 1]  # element with g=0 at step 1


# ---------------------------------------------------------------- regularization / clipping
def test_l1_soft_threshold_after_update():
    lr, l1 = 0.1, 1.5
    w = run(O.Momentum(learning_rate=lr, regularization=O.L1Regularization(l1)), steps=2)
    ref = W0.copy()
    for g in GRADS[:2]:
        ref = ref - lr * g
        ref = np.sign(ref) * np.maximum(np.abs(ref) - lr * l1, 0)
    close(w, ref)
    assert w[1, 1] == 0.0


def test_l1_and_l2_with_adaptive_lr_vector():
    lr, l1, l2, eps = 0.1, 0.05, 0.2, 1e-6
    opt = O.AdaGrad(learning_rate=lr,
                    regularization=[O.L1Regularization(l1), O.L2Regularization(l2)])
    w = run(opt, steps=2)
    ref, G = W0.copy(), np.zeros_like(W0)
    for g in GRADS[:2]:
        G = G + g * g
        r = 1 / np.sqrt(G + eps)
        ref = ref - lr * r * g                       # decay taken out of the kernel ...
        ref = np.sign(ref) * np.maximum(np.abs(ref) - lr * l1 * r, 0)
        ref = ref / (1 + lr * l2 * r)                # ... and applied with the lr vector
    close(w, ref)


def test_adam_l2_applied_after_step():
    lr, l2 = 0.01, 0.1
    w = run(O.Adam(learning_rate=lr, regularization=O.L2Regularization(l2)), steps=1)
    g = GRADS[0]
    m, v = 0.1 * g, 0.001 * g * g
    ref = W0 - lr * math.sqrt(0.001) / 0.1 * m / (np.sqrt(v) + 1e-8)
    close(w, ref / (1 + lr * l2))


def test_gradient_clipping_is_elementwise():
    t = 0.15
    w = run(O.Momentum(learning_rate=1.0, gradient_clipping_threshold=t), steps=2)
    close(w, W0 - np.clip(GRADS[0], -t, t) - np.clip(GRADS[1], -t, t))


def test_per_parameter_config_overrides():
    lr = 0.1
    cfg = SimpleNamespace(learning_rate=0.5, momentum=None, decay_rate=0.2,
                          gradient_clipping_threshold=0.25, is_static=False)
    w = run(O.Momentum(learning_rate=lr, regularization=O.L2Regularization(99.0)), steps=2,
            config=cfg)
    ref = W0.copy()
    for g in GRADS[:2]:
        ref = ref - lr * 0.5 * (np.clip(g, -0.25, 0.25) + 0.2 * ref)
    close(w, ref)


def test_is_static_skips_update_and_state():
    opt = O.Adam()
    w = run(opt, config=SimpleNamespace(is_static=True))
    close(w, W0)
    assert not any(k.startswith("w.") for k in opt.state_dict())


# ---------------------------------------------------------------- learning-rate schedules
@pytest.mark.parametrize("schedule,a,b,args,expect", [
    ("constant", 0.0, 0.0, "", lambda n, p: 0.1),
    ("poly", 0.01, 0.5, "", lambda n, p: 0.1 * (1 + 0.01 * n) ** -0.5),
    ("exp", 0.5, 8.0, "", lambda n, p: 0.1 * 0.5 ** (n / 8)),
    ("discexp", 0.5, 8.0, "", lambda n, p: 0.1 * 0.5 ** (n // 8)),
    ("linear", 0.005, 0.02, "", lambda n, p: max(0.1 - 0.005 * n, 0.02)),
    ("manual", 0.0, 0.0, "4:1.0,8:0.5,12:0.1",
     lambda n, p: 0.1 * (1.0 if n <= 4 else 0.5 if n <= 8 else 0.1)),
    ("pass_manual", 0.0, 0.0, "0:1.0,1:0.3", lambda n, p: 0.1 * (1.0 if p == 0 else 0.3)),
])
def test_schedules(schedule, a, b, args, expect):
    opt = O.Momentum(learning_rate=0.1, learning_rate_schedule=schedule,
                     learning_rate_decay_a=a, learning_rate_decay_b=b, learning_rate_args=args)
    seen = []
    for p in range(3):
        opt.start_pass(p)
        for _ in range(2):
            seen.append((opt.learning_rate_now(), expect(opt._num_samples, p)))
            opt.finish_batch(3)
    got, want = zip(*seen)
    np.testing.assert_allclose(got, want, rtol=1e-12)
    if schedule != "constant":
        assert len(set(np.round(got, 12))) > 1


def test_schedule_drives_the_update():
    opt = O.Momentum(learning_rate=0.1, learning_rate_schedule="discexp",
                     learning_rate_decay_a=0.5, learning_rate_decay_b=4.0)
    w = run(opt, steps=2, batch=4)
    close(w, W0 - 0.1 * GRADS[0] - 0.05 * GRADS[1])


# ---------------------------------------------------------------- sparse rows
def test_sparse_rows_touch_only_given_rows_and_catch_up_decay():
    lr, l2 = 0.1, 0.5
    opt = O.AdaGrad(learning_rate=lr, regularization=O.L2Regularization(l2))
    table = np.arange(8.0).reshape(4, 2) / 4
    orig = table.copy()
    g = np.array([[0.2, -0.1], [0.4, 0.3]])
    opt.update("emb", table, g.copy(), rows=np.array([1, 3]))
    opt.finish_batch(2)
    opt.finish_batch(2)  # a batch in which "emb" got no rows
    opt.update("emb", table, g[:1].copy(), rows=np.array([3]))
    close(table[[0, 2]], orig[[0, 2]])
    r1 = 1 / np.sqrt(g[0] ** 2 + 1e-6)
    close(table[1], (orig[1] - lr * r1 * g[0]) / (1 + lr * l2 * r1))
    G = g[1] ** 2
    row3 = (orig[3] - lr * g[1] / np.sqrt(G + 1e-6)) / (1 + lr * l2 / np.sqrt(G + 1e-6))
    G = G + g[0] ** 2
    r = 1 / np.sqrt(G + 1e-6)
    close(table[3], (row3 - lr * r * g[0]) / (1 + lr * l2 * 2 * r))  # 2 batches of decay
    state = opt.state_dict()
    np.testing.assert_array_equal(state["emb.t0"], [0, 1, 0, 3])
    assert state["emb.sqsum"][0].sum() == 0


def test_sparse_momentum_is_lazy():
    opt = O.Momentum(momentum=0.9, learning_rate=1.0)
    table = np.zeros((3, 2))
    opt.update("e", table, np.ones((1, 2)), rows=[0])
    opt.finish_batch(1)
    opt.update("e", table, np.ones((1, 2)), rows=[1])
    close(table, [[-1, -1], [-1, -1], [0, 0]])  # row 0 does not coast on its momentum


def test_sparse_bad_shapes():
    opt = O.Momentum()
    with pytest.raises(ValueError, match="len\\(rows\\)"):
        opt.update("e", np.zeros((3, 2)), np.zeros((2, 2)), rows=[0])
    with pytest.raises(TypeError, match="integer"):
        opt.update("e", np.zeros((3, 2)), np.zeros((1, 2)), rows=np.array([0.5]))
    with pytest.raises(ValueError, match="unique"):
        opt.update("e", np.zeros((3, 2)), np.zeros((2, 2)), rows=[1, 1])


# ---------------------------------------------------------------- state dict round trip
@pytest.mark.parametrize("cls", [O.Momentum, O.Adam, O.Adamax, O.AdaGrad, O.DecayedAdaGrad,
                                 O.AdaDelta, O.RMSProp])
def test_state_dict_resume_is_bit_identical(cls):
    kw = dict(momentum=0.9) if cls is O.Momentum else {}
    mk = lambda: cls(learning_rate=0.01, learning_rate_schedule="poly",  # noqa: E731
                     learning_rate_decay_a=0.1, learning_rate_decay_b=0.5, **kw)
    full = mk()
    w_full = run(full, steps=3, w=W0.astype(np.float32))
    first = mk()
    w = run(first, steps=1, w=W0.astype(np.float32))
    saved = first.state_dict()
    resumed = mk()
    resumed.load_state_dict(saved)
    for g in GRADS[1:]:
        resumed.update("w", w, g.astype(np.float32))
        resumed.finish_batch(4)
    np.testing.assert_array_equal(w, w_full)
    assert saved["__optimizer__.batch_id"].shape == ()
    for k, v in full.state_dict().items():
        np.testing.assert_array_equal(resumed.state_dict()[k], v)


def test_state_dict_is_a_copy_and_bad_keys_rejected():
    opt = O.Adam()
    run(opt, steps=1)
    d = opt.state_dict()
    d["w.moment"][...] = 7.0
    assert not (opt.state_dict()["w.moment"] == 7.0).any()
    with pytest.raises(ValueError, match="counter"):
        opt.load_state_dict({"__optimizer__.bogus": np.array(1)})
    with pytest.raises(TypeError):
        opt.load_state_dict([1, 2])


# ---------------------------------------------------------------- eager mode
class FakeTensor:
    def __init__(self, name, array, lr_mult=None):
        self.name, self._array, self.grad, self.stop_gradient = name, array, None, False
        if lr_mult is not None:
            self.optimize_attr = {"learning_rate": lr_mult}

    def set_grad(self, g):
        self.grad = SimpleNamespace(_array=np.array(g, dtype=float))


def test_eager_momentum_heavy_ball_and_clear_grad():
    p = FakeTensor("p", W0.copy())
    frozen = FakeTensor("f", W0.copy())
    frozen.stop_gradient = True
    opt = O.Momentum(learning_rate=0.1, parameters=[p, frozen])
    assert opt.momentum == 0.9
    v, ref = np.zeros_like(W0), W0.copy()
    for g in GRADS:
        p.set_grad(g)
        frozen.set_grad(g)
        opt.step()
        v = 0.9 * v + g
        ref = ref - 0.1 * v
        opt.clear_grad()
        assert p.grad is None
    close(p._array, ref)
    close(frozen._array, W0)


def test_eager_adam_2x_epsilon_weight_decay_and_lr_multiplier():
    lr, b1, b2, eps, wd = 0.01, 0.9, 0.999, 1e-3, 0.1
    p = FakeTensor("p", W0.copy(), lr_mult=2.0)
    opt = O.Adam(learning_rate=lr, epsilon=eps, parameters=[p], weight_decay=O.L2Decay(wd))
    ref, m, v = W0.copy(), np.zeros_like(W0), np.zeros_like(W0)
    for t, g in enumerate(GRADS[:2], start=1):
        p.set_grad(g)
        opt.step()
        ge = g + wd * ref
        m = b1 * m + (1 - b1) * ge
        v = b2 * v + (1 - b2) * ge * ge
        c2 = math.sqrt(1 - b2**t)
        ref = ref - 2 * lr * c2 / (1 - b1**t) * m / (np.sqrt(v) + eps * c2)
    close(p._array, ref)
    close(p.grad._array, GRADS[1])  # the user's gradient is not modified


@pytest.mark.parametrize("clip,expect", [
    (O.ClipGradByValue(0.1), lambda g1, g2: (np.clip(g1, -0.1, 0.1), np.clip(g2, -0.1, 0.1))),
    (O.ClipGradByNorm(0.3), lambda g1, g2: (g1 * 0.3 / max(np.linalg.norm(g1), 0.3),
                                            g2 * 0.3 / max(np.linalg.norm(g2), 0.3))),
    (O.ClipGradByGlobalNorm(0.3), lambda g1, g2: tuple(
        g * 0.3 / max(math.hypot(np.linalg.norm(g1), np.linalg.norm(g2)), 0.3)
        for g in (g1, g2))),
])
def test_eager_grad_clip(clip, expect):
    a, b = FakeTensor("a", W0.copy()), FakeTensor("b", W0.copy())
    opt = O.SGD(learning_rate=1.0, parameters=[a, b], grad_clip=clip)
    a.set_grad(GRADS[0])
    b.set_grad(GRADS[1])
    opt.step()
    ca, cb = expect(GRADS[0], GRADS[1])
    close(a._array, W0 - ca)
    close(b._array, W0 - cb)
    assert not np.allclose(ca, GRADS[0]) or not np.allclose(cb, GRADS[1])


def test_eager_lr_get_set_and_state():
    p = FakeTensor("p", W0.copy())
    opt = O.Adagrad(learning_rate=0.1, parameters=[p])
    assert opt.get_lr() == 0.1
    opt.set_lr(0.05)
    p.set_grad(GRADS[0])
    opt.step()
    close(p._array, W0 - 0.05 * GRADS[0] / np.sqrt(GRADS[0] ** 2 + 1e-6))
    other = O.Adagrad(learning_rate=0.1, parameters=[p])
    other.set_state_dict(opt.state_dict())
    assert other.get_lr() == 0.05
    np.testing.assert_array_equal(other.state_dict()["p.sqsum"], GRADS[0] ** 2)


# ---------------------------------------------------------------- errors
@pytest.mark.parametrize("kwargs,err,msg", [
    (dict(learning_rate=-0.1), ValueError, "learning_rate"),
    (dict(learning_rate="fast"), TypeError, "learning_rate"),
    (dict(learning_rate_schedule="cosine"), ValueError, "cosine"),
    (dict(learning_rate_schedule="manual"), ValueError, "learning_rate_args"),
    (dict(learning_rate_schedule="manual", learning_rate_args="10-0.5"), ValueError, "seg0"),
    (dict(learning_rate_schedule="exp", learning_rate_decay_a=0.5), ValueError, "decay_b"),
    (dict(regularization=0.1), TypeError, "L2Regularization"),
    (dict(gradient_clipping_threshold=-1), ValueError, "gradient_clipping_threshold"),
    (dict(grad_clip=1.0), TypeError, "ClipGradByValue"),
    (dict(parameters="abc"), TypeError, "parameters"),
    (dict(regularization=O.L2Regularization(0.1), weight_decay=0.1), ValueError, "not both"),
])
def test_bad_arguments(kwargs, err, msg):
    with pytest.raises(err, match=msg):
        O.Momentum(**kwargs)


def test_bad_hyper_parameters_and_misuse():
    with pytest.raises(ValueError, match="beta1"):
        O.Adam(beta1=1.0)
    with pytest.raises(ValueError, match="rho"):
        O.RMSProp(rho=1.5)
    with pytest.raises(ValueError, match="same name|share the name"):
        O.SGD(parameters=[FakeTensor("x", W0.copy()), FakeTensor("x", W0.copy())])
    with pytest.raises(ValueError, match="parameters="):
        O.Adam().step()
    with pytest.raises(ValueError, match="shape"):
        O.Adam().update("w", np.zeros((2, 2)), np.zeros((3,)))


def test_kernels_keep_float32_and_write_in_place():
    w = W0.astype(np.float32)
    m, v, tmp = np.zeros_like(w), np.zeros_like(w), np.empty_like(w)
    wid = id(w)
    K.adam(w, GRADS[0].astype(np.float32), m, v, 0.01, 0.9, 0.999, 1, 1e-8, tmp)
    assert w.dtype == np.float32 and m.dtype == np.float32 and id(w) == wid
    assert not np.array_equal(w, W0.astype(np.float32))


def adaptive_reference(kind, w0, grads, lr, rho, eps, mu, decay, l1):
    """Paddle v1's AdaGrad-family updates in float64, as written before the kernels folded
    ``lr`` into the rate: ``m = mu*m - lr*r*(g + decay*w);  w += m``, then L1 with ``lr*r``."""
    w, m = w0.copy(), np.zeros_like(w0)
    a, b = np.zeros_like(w0), np.zeros_like(w0)
    for i, g in enumerate(grads):
        coef = 1.0 if i == 0 else 1 - rho
        if kind == "adagrad":
            a = a + g * g
            r = 1 / np.sqrt(a + eps)
        elif kind == "decayed":
            a = rho * a + coef * g * g
            r = 1 / np.sqrt(a + eps)
        elif kind == "adadelta":
            a = rho * a + (1 - rho) * g * g
            r = np.sqrt((b + eps) / (a + eps))
            b = rho * b + (1 - rho) * (g * r) ** 2
        else:
            a = rho * a + coef * g * g
            b = rho * b + (1 - rho) * g
            r = 1 / np.sqrt(a - b * b + eps)
        m = mu * m - lr * r * (g + decay * w)
        w = w + m
        w = np.sign(w) * np.maximum(np.abs(w) - lr * l1 * r, 0)
    return w


@pytest.mark.parametrize("kind,cls", [("adagrad", O.AdaGrad), ("decayed", O.DecayedAdaGrad),
                                      ("adadelta", O.AdaDelta), ("rmsprop", O.RMSProp)])
@pytest.mark.parametrize("mu,l2,l1", [(0.0, 0.0, 0.0), (0.5, 0.3, 0.0), (0.0, 0.0, 0.02)])
@pytest.mark.parametrize("rows", [2, 400])
def test_adaptive_float32_steps_match_the_float64_formula(kind, cls, mu, l2, l1, rows):
    """The fused passes (``lr`` folded into the rate; BLAS ``axpby`` for the decaying averages
    and the momentum of arrays from 2^16 elements, as the 400 x 200 one is) change the float32
    result only by rounding: three steps of each method, with momentum and in-kernel L2 decay
    or with L1 after the step, agree with the float64 formula to float32 precision (to the
    1e-5 the unfused float32 passes also needed: up to 3e-6 relative after three steps)."""
    lr, rho, eps = 0.1, 0.9, 1e-6
    rng = np.random.RandomState(rows)
    w0 = W0 if rows == 2 else rng.uniform(-1, 1, (rows, 200))
    grads = GRADS if rows == 2 else [rng.uniform(-1, 1, w0.shape) for _ in range(3)]
    kwargs = {} if kind == "adagrad" else {"rho": rho}
    reg = [O.L2Regularization(l2)] if l2 else [O.L1Regularization(l1)] if l1 else None
    opt = cls(learning_rate=lr, epsilon=eps, regularization=reg, **kwargs)
    w = w0.astype(np.float32)
    for g in grads:
        opt.update("w", w, g.astype(np.float32), SimpleNamespace(momentum=mu))
        opt.finish_batch(4)
    assert w.dtype == np.float32
    np.testing.assert_allclose(w, adaptive_reference(kind, w0, grads, lr, rho, eps, mu, l2, l1),
                               rtol=1e-5, atol=1e-6)


def test_model_average_is_kept_by_the_optimizer():
    ma = O.ModelAverage(average_window=0.5, max_average_window=100)
    opt = O.Adam(model_average=ma)
    assert opt.model_average.max_average_window == 100


def test_sparse_decayed_adagrad_decays_old_statistics_by_rho_power():
    lr, rho, eps = 0.1, 0.5, 1e-6
    opt = O.DecayedAdaGrad(rho=rho, epsilon=eps, learning_rate=lr)
    table = np.ones((2, 2))
    g1, g2 = np.array([[0.4, -0.2]]), np.array([[0.1, 0.3]])
    opt.update("e", table, g1.copy(), rows=[0])
    opt.finish_batch(1)
    opt.finish_batch(1)
    opt.update("e", table, g2.copy(), rows=[0])
    E = g1[0] ** 2                                   # first sight: full square
    ref = 1 - lr * g1[0] / np.sqrt(E + eps)
    E = rho**2 * E + (1 - rho) * g2[0] ** 2          # seen 2 batches ago
    close(table[0], ref - lr * g2[0] / np.sqrt(E + eps))
    close(table[1], [1, 1])


def test_sparse_rmsprop_decays_both_statistics_by_rho_power():
    lr, rho, eps = 0.1, 0.5, 1e-6
    opt = O.RMSProp(rho=rho, epsilon=eps, learning_rate=lr)
    table = np.ones((2, 2))
    g1, g2 = np.array([0.4, -0.2]), np.array([0.1, 0.3])
    opt.update("e", table, g1[None].copy(), rows=[1])
    for _ in range(3):
        opt.finish_batch(1)
    opt.update("e", table, g2[None].copy(), rows=[1])
    Eg2, Eg = g1**2, (1 - rho) * g1
    ref = 1 - lr * g1 / np.sqrt(Eg2 - Eg**2 + eps)
    Eg2 = rho**3 * Eg2 + (1 - rho) * g2**2
    Eg = rho**3 * Eg + (1 - rho) * g2
    close(table[1], ref - lr * g2 / np.sqrt(Eg2 - Eg**2 + eps))
