"""CUDA kernels that walk whole sequences: a block per sequence loops over its steps, its
threads sharing the step's state through shared memory and meeting at ``__syncthreads()``.

The recurrences of the LSTM, GRU and plain RNN layers (forward and backward in one launch
each, up to ``SEQUENCE_KERNEL_MAX_HIDDEN`` units: a thread a unit), the linear-chain CRF
(likelihood, gradients, Viterbi: a thread a class) and CTC (a thread a state of the extended
label). Per-step launches cost 10-30 us of host time each (and a 100-step batch makes hundreds);
these make one. Each is a ``cupy.RawKernel`` built on first use for its configuration and dtype
and cached; the NumPy code they replace is the reference the tests marked ``gpu`` compare
against (through the CuPy stand-in of tests/cupy_stand_in on machines without a GPU).

The weights are read from L2 every step (a block's share does not fit in L1), so a step's
product is bound by load latency: each dot-product loop is unrolled so that about 32 loads
are in flight a thread (8 iterations of 4 loads, 16 of 2, 32 of 1). Unrolling keeps the
summation order, so the results are those of the loop as written.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from sculler.backend import cached_on_gpu
from sculler.math.cuda import _act, _contiguous, _grad, _raw, _scalar, device_int64


def _run_sequences(key: tuple, dtype: np.dtype, make: Callable[[str], str], width: int,
                   starts: np.ndarray, sizes: np.ndarray, arrays: tuple, *scalars: int) -> None:
    """Launch the sequence kernel ``_raw(key, dtype, make)``: a block per sequence (the
    ``sizes[0]`` of the first step), ``width`` threads, with the arguments ``arrays``, the
    steps' row ``starts`` and ``sizes`` and their count, then ``scalars`` (as int64)."""
    n_seq = int(sizes[0]) if len(sizes) else 0
    if n_seq == 0:
        return
    kernel = _raw(key, dtype, make)
    kernel((n_seq,), (width,), (*arrays, device_int64(starts), device_int64(sizes),
                                np.int64(len(sizes)), *(np.int64(v) for v in scalars)))


SEQUENCE_KERNEL_MAX_HIDDEN = 256  # one thread a unit, the block's state in shared memory


def lstm_forward_sequences(gates: Any, c: Any, state: Any, h: Any, peepholes: Any | None,
                           acts: tuple, weight: Any, starts: np.ndarray,
                           sizes: np.ndarray) -> None:
    """The whole LSTM forward recurrence (:func:`sculler.math.rnn.lstm_forward`) in one
    launch: a block per sequence, a thread per hidden unit, looping over the sequence's
    steps. The block keeps ``h_{t-1}`` in shared memory and each thread its ``c_{t-1}`` in a
    register; ``h_{t-1} W`` is summed in the kernel (the same order as a step kernel would).
    Arrays are time-major (rows of step ``t`` from ``starts[t]``, ``sizes[t]`` of them, the
    sequences sorted longest first), C-contiguous; ``gates`` (4, R, H) holds the
    pre-activations with the input projection and the bias and gets the activated gates.
    Up to ``SEQUENCE_KERNEL_MAX_HIDDEN`` hidden units."""
    names = tuple(a.name for a in acts)
    act, gate, state_act = names
    has_peep = peepholes is not None
    hs = h.shape[1]

    def make(name: str) -> str:
        peep_in = "gi += cp * peep[j]; gf += cp * peep[H + j];" if has_peep else ""
        peep_out = "go += cc * peep[2 * H + j];" if has_peep else ""
        return f"""
extern "C" __global__ void {name}(T* g, T* c, T* state, T* h, const T* __restrict__ w,
                                  const T* peep,
                                  const long long* starts, const long long* sizes,
                                  long long steps, long long R, long long H) {{
  __shared__ T h_prev[{SEQUENCE_KERNEL_MAX_HIDDEN}];
  const long long b = blockIdx.x, j = threadIdx.x, s = R * H;
  T cp = 0;
  for (long long t = 0; t < steps && sizes[t] > b; ++t) {{
    const long long o = (starts[t] + b) * H + j;
    T ga = g[o], gi = g[s + o], gf = g[2 * s + o], go = g[3 * s + o];
    if (t > 0) {{
      #pragma unroll 8
      for (long long m = 0; m < H; ++m) {{
        const T v = h_prev[m];
        const long long wm = m * 4 * H + j;
        ga += v * w[wm]; gi += v * w[wm + H]; gf += v * w[wm + 2 * H]; go += v * w[wm + 3 * H];
      }}
      {peep_in}
    }}
    const T a = {_act(act, "ga")}, ig = {_act(gate, "gi")}, fg = {_act(gate, "gf")};
    const T cc = a * ig + (t > 0 ? cp * fg : (T)0);
    {peep_out}
    const T og = {_act(gate, "go")};
    const T st = {_act(state_act, "cc")};
    g[o] = a; g[s + o] = ig; g[2 * s + o] = fg; g[3 * s + o] = og;
    c[o] = cc; state[o] = st; h[o] = og * st;
    cp = cc;
    __syncthreads();
    h_prev[j] = og * st;
    __syncthreads();
  }}
}}
"""

    _run_sequences(("lstm_seq_fwd", *names, has_peep), h.dtype, make, hs, starts, sizes,
                   (gates, c, state, h, weight, peepholes if has_peep else weight),
                   h.shape[0], hs)


def lstm_backward_sequences(gates: Any, c: Any, state: Any, dh: Any, dc: Any, dgates: Any,
                            peepholes: Any | None, acts: tuple, weight_t: Any,
                            starts: np.ndarray, sizes: np.ndarray) -> None:
    """Backward of :func:`lstm_forward_sequences` through time in one launch, as
    :func:`sculler.math.rnn.lstm_backward`: a block per sequence walks its steps last to
    first, keeping the later step's gate gradients in shared memory to add
    ``dg_{t+1} W^T`` to ``dh_t`` (``weight_t`` is ``W^T``, (4H, H) C-contiguous, so the
    threads read it coalesced) and ``dL/dc`` carried in a register. Writes ``dgates`` (4, R,
    H), ``dc`` and the recurrent terms into ``dh``."""
    names = tuple(a.name for a in acts)
    act, gate, state_act = names
    has_peep = peepholes is not None
    hs = dh.shape[1]

    def make(name: str) -> str:
        peep_o = "dcc += dgo * peep[2 * H + j];" if has_peep else ""
        peep_c = " + dgi * peep[j] + dgf * peep[H + j]" if has_peep else ""
        return f"""
extern "C" __global__ void {name}(const T* g, const T* c, const T* state, T* dh, T* dc,
                                  T* dg, const T* __restrict__ wt, const T* peep,
                                  const long long* starts,
                                  const long long* sizes, long long steps, long long R,
                                  long long H) {{
  __shared__ T d_next[{4 * SEQUENCE_KERNEL_MAX_HIDDEN}];
  const long long b = blockIdx.x, j = threadIdx.x, s = R * H;
  long long len = 0;
  while (len < steps && sizes[len] > b) ++len;
  T dc_next = 0;
  for (long long t = len - 1; t >= 0; --t) {{
    const long long o = (starts[t] + b) * H + j;
    const T a = g[o], ig = g[s + o], fg = g[2 * s + o], og = g[3 * s + o];
    T dht = dh[o];
    if (t < len - 1) {{
      T acc = 0;
      #pragma unroll 32
      for (long long k = 0; k < 4 * H; ++k) acc += d_next[k] * wt[k * H + j];
      dht += acc;
    }}
    dh[o] = dht;
    const T st = state[o];
    const T dgo = dht * st * {_grad(gate, "og")};
    T dcc = dc_next + dht * og * {_grad(state_act, "st")};
    {peep_o}
    dc[o] = dcc;
    const T dga = dcc * ig * {_grad(act, "a")};
    const T dgi = dcc * a * {_grad(gate, "ig")};
    T dgf = 0;
    if (t > 0) {{
      dgf = dcc * c[(starts[t - 1] + b) * H + j] * {_grad(gate, "fg")};
      dc_next = dcc * fg{peep_c};
    }}
    dg[o] = dga; dg[s + o] = dgi; dg[2 * s + o] = dgf; dg[3 * s + o] = dgo;
    __syncthreads();
    d_next[j] = dga; d_next[H + j] = dgi; d_next[2 * H + j] = dgf; d_next[3 * H + j] = dgo;
    __syncthreads();
  }}
}}
"""

    _run_sequences(("lstm_seq_bwd", *names, has_peep), dh.dtype, make, hs, starts, sizes,
                   (gates, c, state, dh, dc, dgates, weight_t,
                    peepholes if has_peep else weight_t), dh.shape[0], hs)


def gru_forward_sequences(gates: Any, w_gate: Any, w_cand: Any, reset_h: Any, h: Any,
                          acts: tuple, starts: np.ndarray, sizes: np.ndarray) -> None:
    """The whole GRU forward recurrence (:func:`sculler.math.rnn.gru_forward`) in one launch:
    a block per sequence, a thread per hidden unit, looping over the sequence's steps with
    ``h_{t-1}`` and ``r h_{t-1}`` in shared memory; the recurrent products are summed in the
    kernel (the order of :func:`gru_step_forward`). ``gates`` (3, R, H) time-major
    ``[g_z | g_r | g_c]`` in, activated ``[z | r | c~]`` out; ``w_gate`` (H, 2H)
    ``[U_z | U_r]`` and ``w_cand`` (H, H) C-contiguous. Up to ``SEQUENCE_KERNEL_MAX_HIDDEN``
    hidden units."""
    names = tuple(a.name for a in acts)
    act, gate = names
    hs = h.shape[1]

    def make(name: str) -> str:
        return f"""
extern "C" __global__ void {name}(T* g, const T* __restrict__ wg, const T* __restrict__ wc, T* rh,
                                  T* h,
                                  const long long* starts, const long long* sizes,
                                  long long steps, long long R, long long H) {{
  __shared__ T h_prev[{SEQUENCE_KERNEL_MAX_HIDDEN}];
  __shared__ T rh_prev[{SEQUENCE_KERNEL_MAX_HIDDEN}];
  const long long b = blockIdx.x, j = threadIdx.x, s = R * H;
  T hp = 0;
  for (long long t = 0; t < steps && sizes[t] > b; ++t) {{
    const long long o = (starts[t] + b) * H + j;
    T gz = g[o], gr = g[s + o], gc = g[2 * s + o], hj;
    if (t > 0) {{
      #pragma unroll 16
      for (long long m = 0; m < H; ++m) {{
        const T v = h_prev[m];
        gz += v * wg[m * 2 * H + j]; gr += v * wg[H + m * 2 * H + j];
      }}
    }}
    const T z = {_act(gate, "gz")}, rr = {_act(gate, "gr")};
    g[o] = z; g[s + o] = rr;
    if (t == 0) {{
      const T cc = {_act(act, "gc")};
      g[2 * s + o] = cc; hj = z * cc;
    }} else {{
      const T rhj = rr * hp;
      rh[o] = rhj; rh_prev[j] = rhj;
      __syncthreads();
      #pragma unroll 32
      for (long long m = 0; m < H; ++m) gc += rh_prev[m] * wc[m * H + j];
      const T cc = {_act(act, "gc")};
      g[2 * s + o] = cc; hj = (cc - hp) * z + hp;
    }}
    h[o] = hj; hp = hj;
    __syncthreads();
    h_prev[j] = hj;
    __syncthreads();
  }}
}}
"""

    _run_sequences(("gru_seq_fwd", *names), h.dtype, make, hs, starts, sizes,
                   (gates, w_gate, w_cand, reset_h, h), h.shape[0], hs)


def gru_backward_sequences(gates: Any, h: Any, w_gate_t: Any, w_cand_t: Any, dh: Any,
                           dgates: Any, acts: tuple, starts: np.ndarray,
                           sizes: np.ndarray) -> None:
    """Backward of :func:`gru_forward_sequences` through time in one launch, as
    :func:`sculler.math.rnn.gru_backward`: a block per sequence walks its steps last to
    first; the step's gate gradients go through shared memory to form ``dL/dh_{t-1}``
    (``dh (1 - z) + r (dg_c W_c^T) + [dg_z|dg_r] [U_z|U_r]^T``), carried in a register to
    the earlier step. ``w_gate_t`` (2H, H) and ``w_cand_t`` (H, H) are the transposed
    weights, C-contiguous (coalesced reads). Writes ``dgates`` (3, R, H) and the recurrent
    terms into ``dh``."""
    names = tuple(a.name for a in acts)
    act, gate = names
    hs = dh.shape[1]

    def make(name: str) -> str:
        return f"""
extern "C" __global__ void {name}(const T* g, const T* h, const T* __restrict__ wgt,
                                  const T* __restrict__ wct, T* dh,
                                  T* dg, const long long* starts, const long long* sizes,
                                  long long steps, long long R, long long H) {{
  __shared__ T d_cand[{SEQUENCE_KERNEL_MAX_HIDDEN}];
  __shared__ T d_zr[{2 * SEQUENCE_KERNEL_MAX_HIDDEN}];
  const long long b = blockIdx.x, j = threadIdx.x, s = R * H;
  long long len = 0;
  while (len < steps && sizes[len] > b) ++len;
  T carry = 0;
  for (long long t = len - 1; t >= 0; --t) {{
    const long long o = (starts[t] + b) * H + j;
    const T z = g[o], rr = g[s + o], cc = g[2 * s + o];
    const T d = dh[o] + carry;
    dh[o] = d;
    const T dgc = d * z * {_grad(act, "cc")};
    dg[2 * s + o] = dgc;
    if (t == 0) {{
      dg[o] = d * cc * {_grad(gate, "z")};
      dg[s + o] = 0;
    }} else {{
      const T v = h[(starts[t - 1] + b) * H + j];
      const T dgz = (cc - v) * d * {_grad(gate, "z")};
      dg[o] = dgz;
      d_cand[j] = dgc;
      __syncthreads();
      T tt = 0;
      #pragma unroll 32
      for (long long k = 0; k < H; ++k) tt += d_cand[k] * wct[k * H + j];
      const T dgr = tt * v * {_grad(gate, "rr")};
      dg[s + o] = dgr;
      d_zr[j] = dgz; d_zr[H + j] = dgr;
      __syncthreads();
      T acc = 0;
      #pragma unroll 16
      for (long long k = 0; k < H; ++k)
        acc += d_zr[k] * wgt[k * H + j] + d_zr[H + k] * wgt[(H + k) * H + j];
      carry = (d - d * z) + tt * rr + acc;
    }}
  }}
}}
"""

    _run_sequences(("gru_seq_bwd", *names), dh.dtype, make, hs, starts, sizes,
                   (gates, h, w_gate_t, w_cand_t, dh, dgates), dh.shape[0], hs)


def rnn_forward_sequences(y: Any, weight: Any, act: str, starts: np.ndarray,
                          sizes: np.ndarray) -> None:
    """The plain RNN recurrence (:func:`sculler.math.rnn.rnn_forward`) in one launch, a block
    per sequence and a thread per unit: ``y_t = act(y_t + y_{t-1} W)`` in place on the
    time-major ``y`` (R, H), ``y_{t-1}`` in shared memory. Up to
    ``SEQUENCE_KERNEL_MAX_HIDDEN`` units."""
    hs = y.shape[1]

    def make(name: str) -> str:
        return f"""
extern "C" __global__ void {name}(T* y, const T* __restrict__ w, const long long* starts,
                                  const long long* sizes, long long steps, long long H) {{
  __shared__ T y_prev[{SEQUENCE_KERNEL_MAX_HIDDEN}];
  const long long b = blockIdx.x, j = threadIdx.x;
  for (long long t = 0; t < steps && sizes[t] > b; ++t) {{
    const long long o = (starts[t] + b) * H + j;
    T v = y[o];
    if (t > 0)
      #pragma unroll 32
      for (long long m = 0; m < H; ++m) v += y_prev[m] * w[m * H + j];
    v = {_act(act, "v")};
    y[o] = v;
    __syncthreads();
    y_prev[j] = v;
    __syncthreads();
  }}
}}
"""

    _run_sequences(("rnn_seq_fwd", act), y.dtype, make, hs, starts, sizes, (y, weight), hs)


def rnn_backward_sequences(y: Any, weight_t: Any, dy: Any, act: str, starts: np.ndarray,
                           sizes: np.ndarray) -> None:
    """Backward of :func:`rnn_forward_sequences` in one launch: walking each sequence last
    step first, ``dy`` (R, H) becomes dL/d(pre-activation), the recurrent term
    ``d_{t+1} W^T`` included (``weight_t`` = ``W^T``, C-contiguous)."""
    hs = dy.shape[1]

    def make(name: str) -> str:
        return f"""
extern "C" __global__ void {name}(const T* y, const T* __restrict__ wt, T* dy,
                                  const long long* starts,
                                  const long long* sizes, long long steps, long long H) {{
  __shared__ T d_next[{SEQUENCE_KERNEL_MAX_HIDDEN}];
  const long long b = blockIdx.x, j = threadIdx.x;
  long long len = 0;
  while (len < steps && sizes[len] > b) ++len;
  for (long long t = len - 1; t >= 0; --t) {{
    const long long o = (starts[t] + b) * H + j;
    T g = dy[o];
    if (t < len - 1)
      #pragma unroll 32
      for (long long k = 0; k < H; ++k) g += d_next[k] * wt[k * H + j];
    const T yo = y[o];
    g *= {_grad(act, "yo")};
    dy[o] = g;
    __syncthreads();
    d_next[j] = g;
    __syncthreads();
  }}
}}
"""

    _run_sequences(("rnn_seq_bwd", act), dy.dtype, make, hs, starts, sizes,
                   (y, weight_t, dy), hs)


CRF_MAX_CLASSES = 1024  # one thread a class, a block a sequence

# log-sum-exp over i of TERM (an expression in i), max-shifted as sculler.math.crf's (a
# non-finite maximum shifts by 0); leaves the result in OUT
_CRF_LOGSUMEXP = """
  {{ T m_ = neg_inf;
    for (long long i = 0; i < C; ++i) {{ const T v_ = {term}; m_ = v_ > m_ ? v_ : m_; }}
    if (!(m_ > neg_inf && m_ < -neg_inf)) m_ = 0;
    T s_ = 0;
    for (long long i = 0; i < C; ++i) s_ += exp({term} - m_);
    {out} = log(s_) + m_; }}
"""


def _crf_logsumexp(term: str, out: str) -> str:
    return _CRF_LOGSUMEXP.format(term=term, out=out)


def crf_nll_forward(x: Any, labels: Any, starts: np.ndarray, weight: Any, alpha: Any,
                    log_z: Any, nll: Any) -> None:
    """A linear-chain CRF's negative log-likelihood per sequence
    (:func:`sculler.math.crf.crf_nll`) in one launch: a block per sequence and a thread per
    class run the forward recursion ``alpha_t[j] = logsumexp_i(alpha_{t-1}[i] + w[i, j]) +
    x_t[j]`` over the packed rows of ``x`` (T, C), keeping ``alpha`` (T, C) for the backward
    pass; one thread then forms ``log Z`` and the labels' score. ``weight`` (C + 2, C):
    start scores, end scores, transitions. An empty sequence costs 0."""
    c = x.shape[1]

    def make(name: str) -> str:
        return f"""
extern "C" __global__ void {name}(const T* x, const long long* labels,
                                  const long long* starts, const T* __restrict__ wt, T* alpha,
                                  T* log_z,
                                  T* nll, long long C, T neg_inf) {{
  __shared__ T prev[{CRF_MAX_CLASSES}];
  const long long n = blockIdx.x, j = threadIdx.x, s0 = starts[n], L = starts[n + 1] - s0;
  const T* a = wt; const T* bb = wt + C; const T* w = wt + 2 * C;
  if (L == 0) {{
    if (j == 0) {{ log_z[n] = 0; nll[n] = 0; }}
    return;
  }}
  T al = a[j] + x[s0 * C + j];
  alpha[s0 * C + j] = al;
  for (long long t = 1; t < L; ++t) {{
    __syncthreads();
    prev[j] = al;
    __syncthreads();
    T acc;
    {_crf_logsumexp("prev[i] + w[i * C + j]", "acc")}
    al = acc + x[(s0 + t) * C + j];
    alpha[(s0 + t) * C + j] = al;
  }}
  __syncthreads();
  prev[j] = al + bb[j];
  __syncthreads();
  if (j == 0) {{
    T lz;
    {_crf_logsumexp("prev[i]", "lz")}
    T gold = a[labels[s0]] + bb[labels[s0 + L - 1]];
    for (long long t = 0; t < L; ++t) gold += x[(s0 + t) * C + labels[s0 + t]];
    for (long long t = 1; t < L; ++t) gold += w[labels[s0 + t - 1] * C + labels[s0 + t]];
    log_z[n] = lz;
    nll[n] = lz - gold;
  }}
}}
"""

    n = len(starts) - 1
    if n <= 0:
        return
    kernel = _raw(("crf_nll_fwd",), x.dtype, make)
    kernel((n,), (c,), (_contiguous(x), _contiguous(labels), device_int64(starts), weight, alpha,
                        log_z, nll, np.int64(c), _scalar(x, -np.inf)))


def crf_nll_backward(x: Any, labels: Any, starts: np.ndarray, weight: Any, alpha: Any,
                     log_z: Any, scale: Any, dx: Any | None, parts: Any) -> None:
    """Backward of :func:`crf_nll_forward` scaled per sequence by ``scale`` (N,), as
    :func:`sculler.math.crf.crf_nll_backward`, in one launch: each block walks its sequence
    last step first with ``beta`` in a register and ``x_{t+1} + beta_{t+1}`` in shared
    memory. Adds ``marginal - onehot(label)`` into ``dx`` (T, C; None to skip) and writes each
    sequence's gradient of the (C + 2, C) weight into ``parts[n]`` (N, C + 2, C; each thread
    its own column, so no atomics: the caller sums over sequences)."""
    c = x.shape[1]
    has_dx = dx is not None

    def make(name: str) -> str:
        dx_line = ("dx[row * C + j] += marg - own;" if has_dx else "")
        return f"""
extern "C" __global__ void {name}(const T* x, const long long* labels,
                                  const long long* starts, const T* __restrict__ wt, const T* alpha,
                                  const T* log_z, const T* scale, T* dx, T* parts,
                                  long long C, T neg_inf) {{
  __shared__ T nxt[{CRF_MAX_CLASSES}];
  const long long n = blockIdx.x, j = threadIdx.x, s0 = starts[n], L = starts[n + 1] - s0;
  const T* bb = wt + C; const T* w = wt + 2 * C;
  T* part = parts + n * (C + 2) * C;
  for (long long r = 0; r < C + 2; ++r) part[r * C + j] = 0;
  if (L == 0) return;
  const T sc = scale[n], lz = log_z[n];
  T be = bb[j];
  for (long long t = L - 1; t >= 0; --t) {{
    const long long row = s0 + t;
    if (t < L - 1) {{
      {_crf_logsumexp("w[j * C + i] + nxt[i]", "be")}
      for (long long i = 0; i < C; ++i)
        part[(2 + i) * C + j] += exp(alpha[row * C + i] + w[i * C + j] + nxt[j] - lz) * sc;
    }}
    const T marg = exp(alpha[row * C + j] + be - lz) * sc;
    const T own = labels[row] == j ? sc : (T)0;
    {dx_line}
    if (t == 0) part[j] += marg - own;
    if (t == L - 1) part[C + j] += marg - own;
    if (t > 0 && labels[row] == j) part[(2 + labels[row - 1]) * C + j] -= sc;
    __syncthreads();
    nxt[j] = x[row * C + j] + be;
    __syncthreads();
  }}
}}
"""

    n = len(starts) - 1
    if n <= 0:
        return
    kernel = _raw(("crf_nll_bwd", has_dx), x.dtype, make)
    kernel((n,), (c,), (_contiguous(x), _contiguous(labels), device_int64(starts), weight, alpha,
                        log_z, _contiguous(scale), dx if has_dx else parts, parts,
                        np.int64(c), _scalar(x, -np.inf)))


def crf_viterbi(x: Any, starts: np.ndarray, weight: Any, back: Any, tags: Any) -> None:
    """The best tag path of each sequence (:func:`sculler.math.crf.crf_viterbi`) in one
    launch: a block per sequence and a thread per class run ``delta_t[j] = max_i(delta_{t-1}
    [i] + w[i, j]) + x_t[j]``, keeping the winners in ``back`` (T, C, int64); one thread then
    backtracks into ``tags`` (T,). Ties go to the lowest index."""
    c = x.shape[1]

    def make(name: str) -> str:
        return f"""
extern "C" __global__ void {name}(const T* x, const long long* starts, const T* __restrict__ wt,
                                  long long* back, long long* tags, long long C) {{
  __shared__ T prev[{CRF_MAX_CLASSES}];
  const long long n = blockIdx.x, j = threadIdx.x, s0 = starts[n], L = starts[n + 1] - s0;
  const T* a = wt; const T* bb = wt + C; const T* w = wt + 2 * C;
  if (L == 0) return;
  T d = a[j] + x[s0 * C + j];
  for (long long t = 1; t < L; ++t) {{
    __syncthreads();
    prev[j] = d;
    __syncthreads();
    T best = prev[0] + w[j];
    long long arg = 0;
    for (long long i = 1; i < C; ++i) {{
      const T v = prev[i] + w[i * C + j];
      if (v > best) {{ best = v; arg = i; }}
    }}
    back[(s0 + t) * C + j] = arg;
    d = best + x[(s0 + t) * C + j];
  }}
  __syncthreads();
  prev[j] = d + bb[j];
  __syncthreads();
  if (j == 0) {{
    long long last = 0;
    for (long long i = 1; i < C; ++i) if (prev[i] > prev[last]) last = i;
    tags[s0 + L - 1] = last;
    for (long long t = L - 1; t > 0; --t) {{
      last = back[(s0 + t) * C + last];
      tags[s0 + t - 1] = last;
    }}
  }}
}}
"""

    n = len(starts) - 1
    if n <= 0:
        return
    kernel = _raw(("crf_viterbi",), x.dtype, make)
    kernel((n,), (c,), (_contiguous(x), device_int64(starts), weight, back, tags, np.int64(c)))


CTC_MAX_STATES = 1024  # a thread an extended-label state: labels of up to 511 ids


def ctc_loss(log_probs: Any, starts: np.ndarray, labels: Any, label_starts: np.ndarray,
             feasible: np.ndarray, blank: int, alpha: Any, cost: Any, scored: Any,
             gamma: Any | None) -> None:
    """CTC's ``-log p(label | x)`` per sequence (:func:`sculler.math.ctc.ctc_loss`) in one
    launch: a block per sequence and a thread per state of the extended label
    ``[blank, l_1, blank, ..., blank]`` run the alpha recursion over the packed rows of
    ``log_probs`` (T, C) (``alpha``: (T, states) work space, states = ``2 max|l| + 1``, the
    block's width), then, with ``gamma`` (T, C), the beta recursion, one thread of the block
    adding each step's occupations ``exp(alpha + beta - log p)`` into ``gamma`` per class
    (in state order: deterministic). ``cost`` (N,) gets ``-log p`` and ``scored`` (N,) 1 where
    the sequence is ``feasible`` (host bools, long enough for its label) and ``log p`` finite,
    else 0 and 0 (its ``gamma`` rows 0)."""
    c = log_probs.shape[1]
    want_grad = gamma is not None

    def make(name: str) -> str:
        grad = """
  for (long long t = 0; t < Tn; ++t)
    for (long long kk = s; kk < C; kk += SM) gamma[(t0 + t) * C + kk] = 0;
  T b = (valid && (s == S - 1 || s == S - 2)) ? (T)0 : neg_inf;
  for (long long t = Tn - 1; t >= 0; --t) {
    if (t < Tn - 1) {
      const T up1 = s + 1 < S ? nb[s + 1] : neg_inf;
      const T up2 = s + 2 < S && skips(s + 2) ? nb[s + 2] : neg_inf;
      b = valid ? lse3(nb[s], up1, up2, neg_inf) : neg_inf;
    }
    occ[s] = ok && valid ? exp(alpha[(t0 + t) * SM + s] + b - logp) : (T)0;
    __syncthreads();
    if (s == 0)
      for (long long q = 0; q < S; ++q) gamma[(t0 + t) * C + state(q)] += occ[q];
    __syncthreads();
    nb[s] = valid ? b + lp[(t0 + t) * C + k] : neg_inf;
    __syncthreads();
  }
""" if want_grad else ""
        return f"""
__device__ T lse3(T a, T b, T c, T neg_inf) {{
  T m = a > b ? a : b; m = m > c ? m : c;
  if (!(m > neg_inf && m < -neg_inf)) m = 0;
  return log(exp(a - m) + exp(b - m) + exp(c - m)) + m;
}}
extern "C" __global__ void {name}(const T* lp, const long long* starts, const long long* labels,
                                  const long long* lstarts, const long long* feasible,
                                  T* alpha, T* cost, T* scored, T* gamma, long long C,
                                  long long SM, long long blank, T neg_inf) {{
  __shared__ T prev[{CTC_MAX_STATES}];
  __shared__ T occ[{CTC_MAX_STATES}];
  T* nb = prev;
  const long long n = blockIdx.x, s = threadIdx.x, t0 = starts[n], Tn = starts[n + 1] - t0;
  const long long l0 = lstarts[n], S = 2 * (lstarts[n + 1] - l0) + 1;
  const bool valid = s < S;
  #define state(q) (((q) & 1) ? labels[l0 + ((q) >> 1)] : blank)
  #define skips(q) (((q) & 1) && (q) >= 2 && labels[l0 + ((q) >> 1)] != labels[l0 + ((q) >> 1) - 1])
  const long long k = valid ? state(s) : blank;
  const bool skip = valid && skips(s);
  if (Tn == 0) {{
    if (s == 0) {{ cost[n] = 0; scored[n] = 0; }}
    return;
  }}
  T a = valid && s < 2 ? lp[t0 * C + k] : neg_inf;
  alpha[t0 * SM + s] = a;
  for (long long t = 1; t < Tn; ++t) {{
    __syncthreads();
    prev[s] = a;
    __syncthreads();
    if (valid) {{
      const T one = s >= 1 ? prev[s - 1] : neg_inf, two = skip ? prev[s - 2] : neg_inf;
      a = lse3(prev[s], one, two, neg_inf) + lp[(t0 + t) * C + k];
    }}
    alpha[(t0 + t) * SM + s] = a;
  }}
  __syncthreads();
  prev[s] = a;
  __syncthreads();
  const T logp = lse3(prev[S - 1], S >= 2 ? prev[S - 2] : neg_inf, neg_inf, neg_inf);
  const bool ok = feasible[n] && logp > neg_inf && logp < -neg_inf;
  if (s == 0) {{ cost[n] = ok ? -logp : (T)0; scored[n] = ok ? (T)1 : (T)0; }}
  __syncthreads();
{grad}
  #undef state
  #undef skips
}}
"""

    n = len(starts) - 1
    if n <= 0:
        return
    lab_len = np.diff(np.asarray(label_starts))
    states = 2 * int(lab_len.max(initial=0)) + 1
    kernel = _raw(("ctc_loss", want_grad), log_probs.dtype, make)
    kernel((n,), (states,), (_contiguous(log_probs), device_int64(starts), _contiguous(labels),
                             device_int64(label_starts),
                             cached_on_gpu(np.asarray(feasible, dtype=np.int64)), alpha, cost,
                             scored, gamma if want_grad else cost, np.int64(c),
                             np.int64(states), np.int64(blank), _scalar(log_probs, -np.inf)))
