"""CuPy kernels for the GPU paths of the training loop.

Each fuses what NumPy does in several passes (and CuPy would launch as several kernels, each
costing ~10 us of host time) into one launch: the classification cost and its gradient past
the softmax, the optimizers' updates, and an LSTM time step forward and backward. A kernel is
built on first use for its configuration (activations, which optional terms) and cached;
these functions are only called with CuPy arrays. Their NumPy twins are the reference: the
tests marked ``gpu`` compare the two.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

_kernels: dict[tuple, Any] = {}

# f(x) and f'(x) written in terms of y = f(x), for the cell activations of sculler.math.rnn
# (sigmoid's argument clamped to [-40, 13] as there)
_ACTIVATION = {
    "sigmoid": "((T)1 / ((T)1 + exp(-min(max({x}, (T)-40), (T)13))))",
    "tanh": "tanh({x})",
    "relu": "max({x}, (T)0)",
    "linear": "({x})",
}
_DERIVATIVE = {
    "sigmoid": "({y} * ((T)1 - {y}))",
    "tanh": "((T)1 - {y} * {y})",
    "relu": "({y} > (T)0 ? (T)1 : (T)0)",
    "linear": "((T)1)",
}


def _elementwise(key: tuple, make: Callable[[], tuple[str, str, str]]) -> Any:
    """The cached ``cupy.ElementwiseKernel`` for ``key``; ``make()`` gives its input
    parameters, output parameters and body."""
    kernel = _kernels.get(key)
    if kernel is None:
        import cupy

        ins, outs, body = make()
        name = "sculler_" + "_".join(str(k) for k in key)
        kernel = _kernels[key] = cupy.ElementwiseKernel(ins, outs, body, name)
    return kernel


def _contiguous(a: Any) -> Any:
    import cupy

    return cupy.ascontiguousarray(a)


def _scalar(like: Any, value: float) -> Any:
    """``value`` as a scalar of ``like``'s dtype (a kernel's ``T`` argument)."""
    return like.dtype.type(value)


def pick_nll(x: Any, labels: Any, out: Any) -> None:
    """``out[r] = -log x[r, labels[r]]``: the classification cost of probabilities ``x``."""
    x = _contiguous(x)
    kernel = _elementwise(("pick_nll",), lambda: (
        "raw T x, I label, int64 width", "T cost", "cost = -log(x[i * width + label]);"))
    kernel(x, labels, x.shape[1], out)


def softmax_ce_grad(p: Any, labels: Any, dcost: Any, dz: Any) -> None:
    """``dz[r, j] = dcost[r] * (p[r, j] - [j == labels[r]])``: the gradient of the
    classification cost past a softmax, for the softmax's pre-activations."""
    kernel = _elementwise(("softmax_ce_grad",), lambda: (
        "T p, raw I label, raw T dcost, int64 width", "T dz",
        "ptrdiff_t r = i / width;"
        "dz = dcost[r] * (p - ((i - r * width) == label[r] ? (T)1 : (T)0));"))
    kernel(p, _contiguous(labels), _contiguous(dcost), p.shape[1], dz)


def momentum_step(value: Any, grad: Any, mom: Any | None, rate: float, momentum: float,
                  decay: float) -> None:
    """``m = momentum m - rate (g + decay w);  w += m`` (``w -= rate (g + decay w)`` without a
    momentum buffer), as :func:`sculler.math.optim.momentum_step`."""
    if mom is None:
        kernel = _elementwise(("sgd",), lambda: (
            "T g, T rate, T decay", "T w", "w -= rate * (g + decay * w);"))
        kernel(grad, _scalar(value, rate), _scalar(value, decay), value)
        return
    kernel = _elementwise(("momentum",), lambda: (
        "T g, T rate, T mu, T decay", "T w, T m",
        "m = mu * m - rate * (g + decay * w); w += m;"))
    kernel(grad, _scalar(value, rate), _scalar(value, momentum), _scalar(value, decay), value,
           mom)


def heavy_ball(value: Any, grad: Any, velocity: Any, lr: float, momentum: float) -> None:
    """``v = momentum v + g;  w -= lr v`` (Paddle 2.x momentum)."""
    kernel = _elementwise(("heavy_ball",), lambda: (
        "T g, T lr, T mu", "T w, T v", "v = mu * v + g; w -= lr * v;"))
    kernel(grad, _scalar(value, lr), _scalar(value, momentum), value, velocity)


def adam(value: Any, grad: Any, m: Any, v: Any, alpha: float, beta1: float, beta2: float,
         epsilon: float) -> None:
    """``m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2;  w -= alpha m / (sqrt(v) + eps)`` (the
    bias corrections are in ``alpha`` and ``epsilon``)."""
    kernel = _elementwise(("adam",), lambda: (
        "T g, T b1, T c1, T b2, T c2, T alpha, T eps", "T w, T m, T v",
        "m = b1 * m + c1 * g; v = b2 * v + c2 * (g * g); w -= alpha * (m / (sqrt(v) + eps));"))
    s = value.dtype.type
    kernel(grad, s(beta1), s(1.0 - beta1), s(beta2), s(1.0 - beta2), s(alpha), s(epsilon), value,
           m, v)


def _act(name: str, x: str) -> str:
    return _ACTIVATION[name].format(x=x)


def _grad(name: str, y: str) -> str:
    return _DERIVATIVE[name].format(y=y)


def lstm_step_forward(gates: Any, c_prev: Any | None, peepholes: Any | None, c: Any, state: Any,
                      h: Any, acts: tuple, recurrent: Any | None) -> None:
    """One LSTM step for ``n`` rows in one kernel, as :func:`sculler.math.rnn.lstm_step_forward`
    plus the recurrent product: ``gates`` (4, n, H) pre-activations ``[g_c | g_i | g_f | g_o]``
    (input + bias) become the activated gates; ``recurrent`` (n, 4H), ``h_prev W``, is added
    to them first (None at the first step, with ``c_prev``)."""
    names = tuple(a.name for a in acts)
    has_prev, has_peep = c_prev is not None, peepholes is not None
    act, gate, state_act = names

    def make() -> tuple[str, str, str]:
        ins = ["int64 H", "int64 n"]
        if has_prev:
            ins = ["T cp", "raw T rec", *ins]
        if has_peep:
            ins.append("raw T peep")
        body = [
            "ptrdiff_t r = i / H, j = i - r * H, s = n * H, o = r * H + j;",
            "T ga = g[o], gi = g[s + o], gf = g[2 * s + o], go = g[3 * s + o];",
        ]
        if has_prev:
            body += ["ptrdiff_t q = r * 4 * H + j;",
                     "ga += rec[q]; gi += rec[q + H]; gf += rec[q + 2 * H];"
                     "go += rec[q + 3 * H];"]
            if has_peep:
                body.append("gi += cp * peep[j]; gf += cp * peep[H + j];")
        body += [f"T a = {_act(act, 'ga')}, ig = {_act(gate, 'gi')}, fg = {_act(gate, 'gf')};",
                 "T cc = a * ig" + (" + cp * fg;" if has_prev else ";")]
        if has_peep:
            body.append("go += cc * peep[2 * H + j];")
        body += [f"T og = {_act(gate, 'go')};",
                 f"T st = {_act(state_act, 'cc')};",
                 "g[o] = a; g[s + o] = ig; g[2 * s + o] = fg; g[3 * s + o] = og;",
                 "c = cc; state = st; h = og * st;"]
        return ", ".join(ins), "raw T g, T c, T state, T h", "\n".join(body)

    kernel = _elementwise(("lstm_fwd", *names, has_prev, has_peep), make)
    n, hs = c.shape
    args = [c_prev, _contiguous(recurrent)] if has_prev else []
    args += [hs, n]
    if has_peep:
        args.append(_contiguous(peepholes))
    kernel(*args, gates, c, state, h)


def lstm_step_backward(gates: Any, c_prev: Any | None, peepholes: Any | None, state: Any,
                       dh: Any, dc: Any, dgates: Any, dc_prev: Any | None, acts: tuple,
                       dgates_rows: Any | None) -> None:
    """Backward of :func:`lstm_step_forward` in one kernel, as
    :func:`sculler.math.rnn.lstm_step_backward`: writes ``dgates`` (4, n, H) and, when there is
    a previous step, the same numbers in row layout into ``dgates_rows`` (n, 4H), for the one
    GEMM ``dh_prev += dgates_rows W^T`` the caller does."""
    names = tuple(a.name for a in acts)
    has_prev, has_peep = c_prev is not None, peepholes is not None
    act, gate, state_act = names

    def make() -> tuple[str, str, str]:
        ins = ["T dh", "T state", "raw T g", "int64 H", "int64 n"]
        outs = ["raw T dg", "T dc"]
        if has_prev:
            ins.insert(2, "T cp")
            outs += ["raw T drow", "T dcp"]
        if has_peep:
            ins.append("raw T peep")
        body = [
            "ptrdiff_t r = i / H, j = i - r * H, s = n * H, o = r * H + j;",
            "T a = g[o], ig = g[s + o], fg = g[2 * s + o], og = g[3 * s + o];",
            f"T dgo = dh * state * {_grad(gate, 'og')};",
            f"T dcc = dc + dh * og * {_grad(state_act, 'state')};",
        ]
        if has_peep:
            body.append("dcc += dgo * peep[2 * H + j];")
        body += ["dc = dcc;",
                 f"T dga = dcc * ig * {_grad(act, 'a')};",
                 f"T dgi = dcc * a * {_grad(gate, 'ig')};",
                 f"T dgf = {'dcc * cp * ' + _grad(gate, 'fg') if has_prev else '(T)0'};",
                 "dg[o] = dga; dg[s + o] = dgi; dg[2 * s + o] = dgf; dg[3 * s + o] = dgo;"]
        if has_prev:
            body += ["dcp += dcc * fg" + (" + dgi * peep[j] + dgf * peep[H + j];"
                                          if has_peep else ";"),
                     "ptrdiff_t q = r * 4 * H + j;",
                     "drow[q] = dga; drow[q + H] = dgi; drow[q + 2 * H] = dgf;"
                     "drow[q + 3 * H] = dgo;"]
        return ", ".join(ins), ", ".join(outs), "\n".join(body)

    kernel = _elementwise(("lstm_bwd", *names, has_prev, has_peep), make)
    n, hs = dh.shape
    args = [dh, state]
    if has_prev:
        args.append(c_prev)
    args += [gates, hs, n]
    if has_peep:
        args.append(_contiguous(peepholes))
    args += [dgates, dc]
    if has_prev:
        args += [dgates_rows, dc_prev]
    kernel(*args)
