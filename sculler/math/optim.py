"""Optimizer update kernels: pure, in-place updates of a parameter and its state arrays.

Every kernel writes into the arrays it is given (``value``, the state buffers, a caller-owned
scratch buffer ``tmp`` of ``value``'s shape) and allocates nothing the size of the parameter,
so a training loop can call it every batch. Scalars such as ``lr`` are plain floats; the
decay factors ``rho_old`` / ``coef_new`` of the rho-based methods may also be column arrays of
shape ``(rows, 1)`` so a sparse row update can give every row its own catch-up factor.

The formulas are PaddlePaddle v1's (paddle/math/TrainingAlgorithmOp, BaseMatrix::sgdUpdate,
applyL1/applyL2, LearningRateScheduler); the Paddle 2.x variants that differ (heavy-ball
momentum, Adam's scaled epsilon) are separate kernels or flags.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from sculler.backend import get_array_module, is_gpu_array
from sculler.math import cuda, openblas

SCHEDULES = ("constant", "poly", "caffe_poly", "exp", "discexp", "linear", "manual",
             "pass_manual")


def momentum_step(value: Any, grad: Any, mom: Any | None, lr: float, momentum: float,
                  decay: float, tmp: Any, lr_vec: Any | None = None) -> None:
    """The shared last step of Paddle v1's first-order methods (BaseMatrix::sgdUpdate).

    ``m = momentum*m - r*(g + decay*w);  w += m``; with ``mom=None`` (momentum 0) this is
    ``w -= r*(g + decay*w)`` without a momentum buffer. ``r`` is ``lr`` (which already holds
    the per-parameter multiplier) or, for the adaptive methods, ``lr_vec``: their per-element
    rate with ``lr`` folded in (``lr`` is then not applied again, which saves a pass).
    """
    if lr_vec is None and is_gpu_array(value):
        cuda.momentum_step(value, grad, mom, lr, momentum, decay)
        return
    xp = get_array_module(value)
    rate = lr if lr_vec is None else lr_vec
    if decay:
        xp.multiply(value, decay, out=tmp)
        tmp += grad
        tmp *= rate
    else:
        xp.multiply(grad, rate, out=tmp)
    if mom is None:
        value -= tmp
        return
    _decay_add(mom, momentum, tmp, -1.0, tmp)
    value += mom


def heavy_ball(value: Any, grad: Any, velocity: Any, lr: float, momentum: float,
               tmp: Any) -> None:
    """Paddle 2.x momentum: ``v = momentum*v + g;  w -= lr*v``.

    Equal to :func:`momentum_step` with ``m = -lr*v`` while ``lr`` stays constant; they differ
    once the learning rate changes (2.x rescales the whole velocity by the new rate).
    """
    if is_gpu_array(value):
        cuda.heavy_ball(value, grad, velocity, lr, momentum)
        return
    velocity *= momentum
    velocity += grad
    get_array_module(value).multiply(velocity, lr, out=tmp)
    value -= tmp


def _inverse_sqrt_rate(lr_vec: Any, lr: float) -> None:
    """``lr_vec = lr / sqrt(lr_vec)`` in two passes (the caller has put ``E + eps`` there)."""
    xp = get_array_module(lr_vec)
    xp.sqrt(lr_vec, out=lr_vec)
    xp.divide(lr, lr_vec, out=lr_vec)


def _decay_add(accum: Any, rho_old: Any, new: Any, coef_new: Any, tmp: Any) -> None:
    """``accum = rho_old*accum + coef_new*new`` (``tmp``, which may be ``new``, is scratch):
    one BLAS ``axpby`` pass for large contiguous arrays and scalar factors, else NumPy's
    three passes (two for a ``coef_new`` of +-1: the dense methods' first batch, momentum)."""
    scalars = np.isscalar(rho_old) and np.isscalar(coef_new)
    if scalars and openblas.axpby(float(coef_new), new, float(rho_old), accum):
        return
    accum *= rho_old
    if scalars and coef_new == 1.0:
        accum += new
    elif scalars and coef_new == -1.0:
        accum -= new
    else:
        get_array_module(accum).multiply(new, coef_new, out=tmp)
        accum += tmp


def adagrad(value: Any, grad: Any, mom: Any | None, accum: Any, lr_vec: Any, lr: float,
            epsilon: float, momentum: float, decay: float, tmp: Any) -> None:
    """AdaGrad (Paddle v1 adagradApply).

    ``G += g^2;  lr_vec = lr/sqrt(G + eps)``; then :func:`momentum_step` with ``lr_vec``: seven
    passes over the parameter without momentum or decay (``lr`` folded into the rate).
    """
    xp = get_array_module(value)
    xp.multiply(grad, grad, out=tmp)
    accum += tmp
    xp.add(accum, epsilon, out=lr_vec)
    _inverse_sqrt_rate(lr_vec, lr)
    momentum_step(value, grad, mom, lr, momentum, decay, tmp, lr_vec)


def decayed_adagrad(value: Any, grad: Any, mom: Any | None, accum: Any, lr_vec: Any,
                    lr: float, rho_old: Any, coef_new: Any, epsilon: float, momentum: float,
                    decay: float, tmp: Any) -> None:
    """Decayed AdaGrad (Paddle v1 decayedAdagradApply).

    ``E = rho_old*E + coef_new*g^2;  lr_vec = lr/sqrt(E + eps)``; then :func:`momentum_step`.
    Dense: ``rho_old = rho`` and ``coef_new = 1`` on the first batch (so the first estimate
    is not too small), ``1 - rho`` after; sparse rows use ``rho**(batches since last seen)``.
    """
    xp = get_array_module(value)
    xp.multiply(grad, grad, out=tmp)
    _decay_add(accum, rho_old, tmp, coef_new, tmp)
    xp.add(accum, epsilon, out=lr_vec)
    _inverse_sqrt_rate(lr_vec, lr)
    momentum_step(value, grad, mom, lr, momentum, decay, tmp, lr_vec)


def adadelta(value: Any, grad: Any, mom: Any | None, accum: Any, accum_update: Any,
             lr_vec: Any, lr: float, rho: float, epsilon: float, momentum: float,
             decay: float, tmp: Any) -> None:
    """AdaDelta (Paddle v1 adadeltaApply).

    ``E[g^2] = rho*E[g^2] + (1-rho)*g^2;  r = sqrt((E[dx^2] + eps) / (E[g^2] + eps))``,
    ``E[dx^2] = rho*E[dx^2] + (1-rho)*(g*r)^2``; then :func:`momentum_step` with ``lr_vec =
    lr*r``.
    """
    xp = get_array_module(value)
    xp.multiply(grad, grad, out=tmp)
    _decay_add(accum, rho, tmp, 1.0 - rho, tmp)
    xp.add(accum_update, epsilon, out=lr_vec)
    xp.add(accum, epsilon, out=tmp)
    lr_vec /= tmp
    xp.sqrt(lr_vec, out=lr_vec)
    xp.multiply(grad, lr_vec, out=tmp)
    tmp *= tmp
    _decay_add(accum_update, rho, tmp, 1.0 - rho, tmp)
    lr_vec *= lr
    momentum_step(value, grad, mom, lr, momentum, decay, tmp, lr_vec)


def rmsprop(value: Any, grad: Any, mom: Any | None, sqsum: Any, mean: Any, lr_vec: Any,
            lr: float, rho_old: Any, coef_new: Any, rho: float, epsilon: float,
            momentum: float, decay: float, tmp: Any) -> None:
    """Paddle v1's (centred) RMSProp (rmspropApply).

    ``E[g^2] = rho_old*E[g^2] + coef_new*g^2;  E[g] = rho_old*E[g] + (1-rho)*g``,
    ``lr_vec = lr/sqrt(E[g^2] - E[g]^2 + eps)``; then :func:`momentum_step`.
    ``rho_old``/``coef_new`` as in :func:`decayed_adagrad`.
    """
    xp = get_array_module(value)
    xp.multiply(grad, grad, out=tmp)
    _decay_add(sqsum, rho_old, tmp, coef_new, tmp)
    _decay_add(mean, rho_old, grad, 1.0 - rho, tmp)
    xp.multiply(mean, mean, out=lr_vec)
    xp.subtract(sqsum, lr_vec, out=lr_vec)
    lr_vec += epsilon
    _inverse_sqrt_rate(lr_vec, lr)
    momentum_step(value, grad, mom, lr, momentum, decay, tmp, lr_vec)


def adam(value: Any, grad: Any, m: Any, v: Any, lr: float, beta1: float, beta2: float,
         step: int, epsilon: float, tmp: Any, scale_epsilon: bool = False) -> None:
    """Adam with bias correction (Paddle v1 adamApply; ``scale_epsilon`` gives Paddle 2.x).

    ``m = b1*m + (1-b1)*g;  v = b2*v + (1-b2)*g^2;  a = lr*sqrt(1-b2^t)/(1-b1^t)``,
    ``w -= a*m/(sqrt(v) + eps)`` (v1) or ``a*m/(sqrt(v) + eps*sqrt(1-b2^t))`` (2.x).
    ``step`` is ``t``, counted from 1.
    """
    xp = get_array_module(value)
    corr2 = math.sqrt(1.0 - beta2**step)
    alpha = lr * corr2 / (1.0 - beta1**step)
    if is_gpu_array(value):
        cuda.adam(value, grad, m, v, alpha, beta1, beta2,
                  epsilon * corr2 if scale_epsilon else epsilon)
        return
    m *= beta1
    xp.multiply(grad, 1.0 - beta1, out=tmp)
    m += tmp
    v *= beta2
    xp.multiply(grad, grad, out=tmp)
    tmp *= 1.0 - beta2
    v += tmp
    xp.sqrt(v, out=tmp)
    tmp += epsilon * corr2 if scale_epsilon else epsilon
    xp.divide(m, tmp, out=tmp)
    tmp *= alpha
    value -= tmp


def adamax(value: Any, grad: Any, m: Any, u: Any, lr: float, beta1: float, beta2: float,
           step: int, epsilon: float, tmp: Any) -> None:
    """Adamax (Paddle v1 adamaxApply with ``epsilon=0``; Paddle 2.x with ``epsilon>0``).

    ``m = b1*m + (1-b1)*g;  u = max(b2*u + eps, |g|);  w -= lr/(1-b1^t) * m/u``.
    Where ``u == 0`` (every gradient so far was 0, so ``m == 0`` too) the step is 0, not the
    NaN that v1's ``0/0`` gives.
    """
    xp = get_array_module(value)
    m *= beta1
    xp.multiply(grad, 1.0 - beta1, out=tmp)
    m += tmp
    u *= beta2
    if epsilon:
        u += epsilon
    xp.abs(grad, out=tmp)
    xp.maximum(u, tmp, out=u)
    xp.maximum(u, np.finfo(u.dtype).tiny, out=tmp)
    xp.divide(m, tmp, out=tmp)
    tmp *= lr / (1.0 - beta1**step)
    value -= tmp


def apply_l1(value: Any, lam: Any, tmp: Any, lr_vec: Any | None = None) -> None:
    """L1 shrinkage (Paddle v1 applyL1): ``w = sign(w) * max(|w| - lam*lr_vec, 0)``.

    ``lam = lr * l1_rate`` (times the batches missed, for sparse rows); with an adaptive
    method's ``lr_vec``, which holds ``lr`` already, ``lam = l1_rate`` (times the batches).
    """
    xp = get_array_module(value)
    xp.abs(value, out=tmp)
    if lr_vec is None:
        tmp -= lam
    else:
        tmp -= lr_vec * lam
    xp.maximum(tmp, 0, out=tmp)
    xp.copysign(tmp, value, out=value)


def apply_l2(value: Any, lam: Any, tmp: Any, lr_vec: Any | None = None) -> None:
    """L2 shrinkage (Paddle v1 applyL2): ``w *= 1 / (1 + lam*lr_vec)``, ``lam = lr*l2_rate``
    (``l2_rate`` with an adaptive method's ``lr_vec``, which holds ``lr``)."""
    xp = get_array_module(value)
    if lr_vec is None:
        value /= 1.0 + lam
        return
    xp.multiply(lr_vec, lam, out=tmp)
    tmp += 1.0
    value /= tmp


def clip_by_value(grad: Any, low: float, high: float, out: Any | None = None) -> Any:
    """Elementwise clip ``g = min(max(g, low), high)`` (in place unless ``out`` is given)."""
    xp = get_array_module(grad)
    return xp.clip(grad, low, high, out=grad if out is None else out)


def parse_manual_schedule(args: str) -> tuple[list[int], list[float]]:
    """Parse Paddle's ``learning_rate_args`` ``"seg0:rate0,seg1:rate1,..."``."""
    segments, rates = [], []
    for piece in (p for p in args.split(",") if p.strip()):
        seg, sep, rate = piece.partition(":")
        try:
            if not sep:
                raise ValueError(piece)
            segments.append(int(seg))
            rates.append(float(rate))
        except ValueError:
            raise ValueError(
                f"learning_rate_args must look like 'seg0:rate0,seg1:rate1,...' "
                f"(ints:floats), got {args!r}"
            ) from None
    if not rates:
        raise ValueError(
            f"the 'manual'/'pass_manual' schedules need learning_rate_args such as "
            f"'1000:1.0,2000:0.5', got {args!r}"
        )
    return segments, rates


def scheduled_learning_rate(schedule: str, base: float, a: float, b: float,
                            num_samples: int, pass_id: int,
                            manual: tuple[list[int], list[float]] | None = None) -> float:
    """The learning rate after ``num_samples`` samples (Paddle v1 LearningRateScheduler).

    constant: ``lr``; poly: ``lr*(1 + a*n)^(-b)``; caffe_poly: ``lr*(1 - n/a)^b`` (0 once
    ``n > a``); exp: ``lr*a^(n/b)``; discexp: ``lr*a^floor(n/b)``; linear:
    ``max(lr - a*n, b)``; manual / pass_manual: ``lr*rate_i`` for the first segment with
    ``n <= seg_i`` (``n`` = samples resp. pass id), the last rate beyond the last segment.
    """
    n = num_samples
    if schedule == "constant":
        return base
    if schedule == "poly":
        return base * (1.0 + a * n) ** (-b)
    if schedule == "caffe_poly":
        return 0.0 if n > a else base * (1.0 - n / a) ** b
    if schedule == "exp":
        return base * a ** (n / b)
    if schedule == "discexp":
        return base * a ** math.floor(n / b)
    if schedule == "linear":
        return max(base - a * n, b)
    if schedule in ("manual", "pass_manual"):
        if manual is None:
            raise ValueError(f"schedule {schedule!r} needs parsed learning_rate_args")
        segments, rates = manual
        x = pass_id if schedule == "pass_manual" else n
        for seg, rate in zip(segments, rates):
            if x <= seg:
                return base * rate
        return base * rates[-1]
    raise ValueError(f"unknown learning_rate_schedule {schedule!r}; expected one of {SCHEDULES}")
