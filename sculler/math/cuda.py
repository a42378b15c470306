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


ROW_SOFTMAX_MAX_WIDTH = 256  # wider rows: CuPy's reductions (one thread a row loops)


def relu_grad(y: Any, dy: Any) -> None:
    """``dy <- dy * (y > 0)`` in place."""
    kernel = _elementwise(("relu_grad",), lambda: (
        "T y", "T dy", "if (!(y > (T)0)) dy = (T)0;"))
    kernel(y, dy)


def softmax_rows(x: Any, out: Any) -> Any:
    """Row-wise softmax of a 2-D ``x`` into ``out`` (which may be ``x``), one thread a row:
    one launch where the max, shift, exp, sum and division would be five."""
    kernel = _elementwise(("softmax_rows",), lambda: (
        "raw T x, int64 w", "raw T y",
        "ptrdiff_t at = i * w;"
        "T m = x[at];"
        "for (ptrdiff_t j = 1; j < w; ++j) m = max(m, (T)x[at + j]);"
        "T s = 0;"
        "for (ptrdiff_t j = 0; j < w; ++j) { T e = exp((T)x[at + j] - m); y[at + j] = e; s += e; }"
        "for (ptrdiff_t j = 0; j < w; ++j) y[at + j] /= s;"))
    kernel(x, x.shape[1], out, size=x.shape[0])
    return out


def segment_sum(x: Any, starts: Any, out: Any) -> None:
    """``out[k] = sum of the rows starts[k] .. starts[k+1] of x`` (2-D; zero for an empty
    segment), one thread per (segment, column), in row order: deterministic, and one upload
    of the (host) ``starts`` instead of a round trip of ``x`` through the host."""
    import cupy

    kernel = _elementwise(("segment_sum",), lambda: (
        "raw T x, raw int64 starts, int64 d", "T out",
        "ptrdiff_t k = i / d, col = i - k * d; T s = 0;"
        "for (ptrdiff_t r = starts[k]; r < starts[k + 1]; ++r) s += x[r * d + col];"
        "out = s;"))
    kernel(_contiguous(x), cupy.asarray(starts), x.shape[1], out)


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


def lstm_forward_step(gates: Any, c: Any, state: Any, h: Any, peepholes: Any | None,
                      recurrent: Any | None, acts: tuple, row0: int, prev0: int, n: int) -> None:
    """One LSTM step (:func:`sculler.math.rnn.lstm_step_forward`) in one kernel, on the
    whole time-major arrays: rows ``row0 .. row0+n`` of ``gates`` (4, R, H; pre-activations
    in, activated gates out), ``c``, ``state`` and ``h`` (R, H), the previous step's cells at
    rows ``prev0 ..``. ``recurrent`` (n, 4H) = ``h_prev W`` is added to the gates first (None
    at the first step). All arrays C-contiguous; nothing is sliced per step."""
    names = tuple(a.name for a in acts)
    has_prev, has_peep = recurrent is not None, peepholes is not None
    act, gate, state_act = names

    def make() -> tuple[str, str, str]:
        ins = (["raw T rec"] if has_prev else []) + [
            "int64 H", "int64 R", "int64 row0", "int64 prev0"] + (
            ["raw T peep"] if has_peep else [])
        body = ["ptrdiff_t r = i / H, j = i - r * H, s = R * H, o = (row0 + r) * H + j;",
                "T ga = g[o], gi = g[s + o], gf = g[2 * s + o], go = g[3 * s + o];"]
        if has_prev:
            body += ["ptrdiff_t q = r * 4 * H + j;",
                     "ga += rec[q]; gi += rec[q + H]; gf += rec[q + 2 * H];"
                     " go += rec[q + 3 * H];",
                     "T cp = c[(prev0 + r) * H + j];"]
            if has_peep:
                body.append("gi += cp * peep[j]; gf += cp * peep[H + j];")
        body += [f"T a = {_act(act, 'ga')}, ig = {_act(gate, 'gi')}, fg = {_act(gate, 'gf')};",
                 "T cc = a * ig" + (" + cp * fg;" if has_prev else ";")]
        if has_peep:
            body.append("go += cc * peep[2 * H + j];")
        body += [f"T og = {_act(gate, 'go')};",
                 f"T st = {_act(state_act, 'cc')};",
                 "g[o] = a; g[s + o] = ig; g[2 * s + o] = fg; g[3 * s + o] = og;",
                 "c[o] = cc; state[o] = st; h[o] = og * st;"]
        return ", ".join(ins), "raw T g, raw T c, raw T state, raw T h", "\n".join(body)

    kernel = _elementwise(("lstm_fwd", *names, has_prev, has_peep), make)
    hs = h.shape[1]
    args = ([recurrent] if has_prev else []) + [hs, h.shape[0], row0, prev0]
    if has_peep:
        args.append(peepholes)
    kernel(*args, gates, c, state, h, size=n * hs)


def lstm_backward_step(gates: Any, c: Any, state: Any, dh: Any, dc: Any, dgates: Any,
                       peepholes: Any | None, drow: Any | None, dh_rec: Any, n_rec: int,
                       acts: tuple, row0: int, prev0: int, n: int) -> None:
    """Backward of :func:`lstm_forward_step` (:func:`sculler.math.rnn.lstm_step_backward`) in
    one kernel on the whole arrays. First adds ``dh_rec`` (the later step's ``dg W^T``, its
    first ``n_rec`` rows) into this step's ``dh``; writes ``dgates`` (4, R, H) and ``dc``,
    adds into the previous step's ``dc`` (rows ``prev0 ..``), and, with ``drow`` (n, 4H; None
    at the first step), the same ``dgates`` rows in row layout for the caller's GEMM
    ``dh_rec = drow W^T``."""
    names = tuple(a.name for a in acts)
    has_prev, has_peep = drow is not None, peepholes is not None
    act, gate, state_act = names

    def make() -> tuple[str, str, str]:
        ins = ["raw T g", "raw T state", "raw T c", "raw T dhrec", "int64 nrec", "int64 H",
               "int64 R", "int64 row0", "int64 prev0"] + (["raw T peep"] if has_peep else [])
        outs = ["raw T dh", "raw T dc", "raw T dg"] + (["raw T drow"] if has_prev else [])
        body = [
            "ptrdiff_t r = i / H, j = i - r * H, s = R * H, o = (row0 + r) * H + j;",
            "T a = g[o], ig = g[s + o], fg = g[2 * s + o], og = g[3 * s + o];",
            "T dht = dh[o];",
            "if (r < nrec) dht += dhrec[r * H + j];",
            "dh[o] = dht;",
            "T st = state[o];",
            f"T dgo = dht * st * {_grad(gate, 'og')};",
            f"T dcc = dc[o] + dht * og * {_grad(state_act, 'st')};",
        ]
        if has_peep:
            body.append("dcc += dgo * peep[2 * H + j];")
        body += ["dc[o] = dcc;",
                 f"T dga = dcc * ig * {_grad(act, 'a')};",
                 f"T dgi = dcc * a * {_grad(gate, 'ig')};"]
        if has_prev:
            body += ["ptrdiff_t p = (prev0 + r) * H + j;",
                     f"T dgf = dcc * c[p] * {_grad(gate, 'fg')};",
                     "dc[p] += dcc * fg" + (" + dgi * peep[j] + dgf * peep[H + j];"
                                            if has_peep else ";"),
                     "ptrdiff_t q = r * 4 * H + j;",
                     "drow[q] = dga; drow[q + H] = dgi; drow[q + 2 * H] = dgf;"
                     " drow[q + 3 * H] = dgo;"]
        else:
            body.append("T dgf = 0;")
        body.append("dg[o] = dga; dg[s + o] = dgi; dg[2 * s + o] = dgf; dg[3 * s + o] = dgo;")
        return ", ".join(ins), ", ".join(outs), "\n".join(body)

    kernel = _elementwise(("lstm_bwd", *names, has_prev, has_peep), make)
    hs = dh.shape[1]
    args = [gates, state, c, dh_rec, n_rec, hs, dh.shape[0], row0, prev0]
    if has_peep:
        args.append(peepholes)
    args += [dh, dc, dgates] + ([drow] if has_prev else [])
    kernel(*args, size=n * hs)
