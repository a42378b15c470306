"""Recurrent cell kernels: one time step of LSTM, GRU and plain RNN, forward and backward.

Every function works on the ``n`` rows of the sequences active at one step (a prefix of the
previous step's rows, see :mod:`sculler.math.seq2batch`), in place, into buffers the caller
owns, so nothing is allocated per step. ``None`` for the previous state means "first step"
(``h_{-1} = c_{-1} = 0``): the recurrent terms are skipped, not computed with zeros.

Layouts are PaddlePaddle's (``reference/sequence_layers.md`` section 4):

- LSTM gates ``[c~ | i | f | o]`` (each ``H`` wide); peepholes ``(3, H)`` rows ``p_i, p_f, p_o``;
  ``o`` looks at the new cell ``c_t``.
- GRU gates ``[z | r | c~]``; the reset product ``r * h_{t-1}`` (not ``h_{t-1}``) feeds the
  candidate's weight; ``h_t = (1 - z) h_{t-1} + z c~``.

Cell activations are those PaddlePaddle's kernels support: sigmoid (argument clamped to
[-40, 13] as in ``hl_cpu_functions.cc``), tanh, relu and linear. A backward takes the
activation's *output* ``y`` and scales ``dy`` by ``f'`` written in terms of ``y``.
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "CELL_ACTIVATIONS", "CellActivation", "cell_activation", "lstm_step_forward",
    "lstm_step_backward", "gru_step_forward", "gru_step_backward",
]

SIGMOID_MIN, SIGMOID_MAX = -40.0, 13.0


class CellActivation:
    """An activation used inside a recurrent cell: ``forward(x)`` in place,
    ``backward(y, dy, tmp)``: ``dy *= f'(x)`` computed from ``y = f(x)`` (``tmp``: scratch of
    ``y``'s shape)."""

    def __init__(self, name: str):
        self.name = name
        self.forward = getattr(self, f"_{name}")
        self.backward = getattr(self, f"_{name}_grad")

    @staticmethod
    def _sigmoid(x) -> None:
        np.clip(x, SIGMOID_MIN, SIGMOID_MAX, out=x)
        np.negative(x, out=x)
        np.exp(x, out=x)
        x += 1.0
        np.reciprocal(x, out=x)

    @staticmethod
    def _sigmoid_grad(y, dy, tmp) -> None:
        np.subtract(1.0, y, out=tmp)
        tmp *= y
        dy *= tmp

    @staticmethod
    def _tanh(x) -> None:
        np.tanh(x, out=x)

    @staticmethod
    def _tanh_grad(y, dy, tmp) -> None:
        np.multiply(y, y, out=tmp)
        np.subtract(1.0, tmp, out=tmp)
        dy *= tmp

    @staticmethod
    def _relu(x) -> None:
        np.maximum(x, 0.0, out=x)

    @staticmethod
    def _relu_grad(y, dy, tmp) -> None:
        np.greater(y, 0.0, out=tmp)
        dy *= tmp

    @staticmethod
    def _linear(x) -> None:
        return None

    @staticmethod
    def _linear_grad(y, dy, tmp) -> None:
        return None


CELL_ACTIVATIONS = ("sigmoid", "tanh", "relu", "linear")
_ALIASES = {"": "linear", None: "linear", "identity": "linear"}
_CELL: dict[str, CellActivation] = {}


def cell_activation(name: str | None, what: str = "activation") -> CellActivation:
    """The cell activation called ``name``; ValueError for one the recurrent kernels lack."""
    name = _ALIASES.get(name, name)
    if name not in CELL_ACTIVATIONS:
        raise ValueError(f"{what} {name!r} is not supported inside a recurrent cell; use one of "
                         f"{list(CELL_ACTIVATIONS)} (PaddlePaddle's hppl activations)")
    act = _CELL.get(name)
    if act is None:
        act = _CELL[name] = CellActivation(name)
    return act


def lstm_step_forward(gates, c_prev, peepholes, c, state, h, acts, tmp) -> None:
    """One LSTM step for ``n`` active rows; ``gates`` becomes ``[a | i | f | o]``.

    ``a = act(g_c)``, ``i = gate(g_i + c_prev p_i)``, ``f = gate(g_f + c_prev p_f)``,
    ``c = a i + c_prev f``, ``o = gate(g_o + c p_o)``, ``h = o state_act(c)``.

    Args:
        gates: (n, 4H) pre-activations ``[g_c | g_i | g_f | g_o]`` (input + bias + h_prev W).
        c_prev: (n, H) previous cell, or None at the first step.
        peepholes: (3, H) ``[p_i; p_f; p_o]``, or None.
        c, state, h: (n, H) outputs: the cell, ``state_act(c)`` and the hidden output.
        acts: ``(act, gate_act, state_act)`` :class:`CellActivation` s.
        tmp: flat scratch of at least 2nH elements.
    """
    act, gate_act, state_act = acts
    n, hs = c.shape
    a, i_f, o = gates[:, :hs], gates[:, hs:3 * hs], gates[:, 3 * hs:]
    if c_prev is not None and peepholes is not None:
        peep = tmp[:2 * n * hs].reshape(n, 2, hs)
        np.multiply(c_prev[:, None, :], peepholes[None, :2], out=peep)
        i_f += peep.reshape(n, 2 * hs)
    act.forward(a)
    gate_act.forward(i_f)
    np.multiply(a, i_f[:, :hs], out=c)
    t1 = tmp[:n * hs].reshape(n, hs)
    if c_prev is not None:
        np.multiply(c_prev, i_f[:, hs:], out=t1)
        c += t1
    if peepholes is not None:
        np.multiply(c, peepholes[2], out=t1)
        o += t1
    gate_act.forward(o)
    state[...] = c
    state_act.forward(state)
    np.multiply(o, state, out=h)


def lstm_step_backward(gates, c_prev, peepholes, state, dh, dc, dgates, dc_prev, acts,
                       tmp) -> None:
    """Backward of :func:`lstm_step_forward` for one step.

    ``dh`` (n, H) is dL/dh_t complete; ``dc`` (n, H) holds what later steps gave dL/dc_t and
    receives this step's total. Writes ``dgates`` (n, 4H), dL/d(pre-activations); adds
    ``dc f + dg_i p_i + dg_f p_f`` into ``dc_prev`` (n, H) unless it is None (first step).
    ``gates`` are the activated ``[a | i | f | o]``; ``tmp`` is flat scratch of at least nH.
    """
    act, gate_act, state_act = acts
    n, hs = dh.shape
    tmp = tmp[:n * hs].reshape(n, hs)
    a, i, f, o = gates[:, :hs], gates[:, hs:2 * hs], gates[:, 2 * hs:3 * hs], gates[:, 3 * hs:]
    dga, dgi, dgf, dgo = (dgates[:, :hs], dgates[:, hs:2 * hs], dgates[:, 2 * hs:3 * hs],
                          dgates[:, 3 * hs:])
    np.multiply(dh, state, out=dgo)
    gate_act.backward(o, dgo, tmp)
    np.multiply(dh, o, out=dga)  # dL/dstate, then through state_act into dc
    state_act.backward(state, dga, tmp)
    dc += dga
    if peepholes is not None:
        np.multiply(dgo, peepholes[2], out=tmp)
        dc += tmp
    np.multiply(dc, i, out=dga)
    act.backward(a, dga, tmp)
    np.multiply(dc, a, out=dgi)
    gate_act.backward(i, dgi, tmp)
    if c_prev is None:
        dgf[...] = 0.0
        return
    np.multiply(dc, c_prev, out=dgf)
    gate_act.backward(f, dgf, tmp)
    np.multiply(dc, f, out=tmp)
    dc_prev += tmp
    if peepholes is not None:
        np.multiply(dgi, peepholes[0], out=tmp)
        dc_prev += tmp
        np.multiply(dgf, peepholes[1], out=tmp)
        dc_prev += tmp


def gru_step_forward(gates, h_prev, w_gate, w_cand, reset_h, h, acts, tmp) -> None:
    """One GRU step for ``n`` active rows; ``gates`` becomes ``[z | r | c~]``.

    ``[z|r] = gate(g_zr + h_prev W_g)``, ``c~ = act(g_c + (r h_prev) W_c)``,
    ``h = h_prev + z (c~ - h_prev)`` (``z c~`` at the first step).

    Args:
        gates: (n, 3H) input + bias ``[g_z | g_r | g_c]``.
        h_prev: (n, H) previous output, or None at the first step.
        w_gate: (H, 2H) ``[U_z | U_r]``; w_cand: (H, H).
        reset_h: (n, H) receives ``r h_prev`` (kept for backward; untouched at the first step).
        h: (n, H) output.
        acts: ``(act, gate_act)``; tmp: flat scratch of at least 2nH elements.
    """
    act, gate_act = acts
    n, hs = h.shape
    zr, cand = gates[:, :2 * hs], gates[:, 2 * hs:]
    if h_prev is not None:
        prod_zr = tmp[:2 * n * hs].reshape(n, 2 * hs)
        np.matmul(h_prev, w_gate, out=prod_zr)
        zr += prod_zr
    gate_act.forward(zr)
    z = zr[:, :hs]
    if h_prev is None:
        act.forward(cand)
        np.multiply(z, cand, out=h)
        return
    np.multiply(zr[:, hs:], h_prev, out=reset_h)
    prod = tmp[:n * hs].reshape(n, hs)
    np.matmul(reset_h, w_cand, out=prod)
    cand += prod
    act.forward(cand)
    np.subtract(cand, h_prev, out=h)
    h *= z
    h += h_prev


def gru_step_backward(gates, h_prev, w_gate, w_cand, dh, dgates, dh_prev, acts, tmp) -> None:
    """Backward of :func:`gru_step_forward` for one step.

    ``dh`` (n, H) is dL/dh_t complete; writes ``dgates`` (n, 3H) (dL/d pre-activations) and
    adds dL/dh_prev into ``dh_prev`` unless ``h_prev`` is None. ``tmp`` is flat scratch of at
    least 2nH elements.
    """
    act, gate_act = acts
    n, hs = dh.shape
    z, r, cand = gates[:, :hs], gates[:, hs:2 * hs], gates[:, 2 * hs:]
    dgz, dgr, dgc = dgates[:, :hs], dgates[:, hs:2 * hs], dgates[:, 2 * hs:]
    t1, t2 = tmp[:n * hs].reshape(n, hs), tmp[n * hs:2 * n * hs].reshape(n, hs)
    np.multiply(dh, z, out=dgc)
    act.backward(cand, dgc, t1)
    if h_prev is None:
        np.multiply(dh, cand, out=dgz)
        gate_act.backward(z, dgz, t1)
        dgr[...] = 0.0
        return
    np.subtract(cand, h_prev, out=dgz)
    dgz *= dh
    gate_act.backward(z, dgz, t1)
    np.multiply(dh, z, out=t1)  # dh_prev += dh (1 - z)
    np.subtract(dh, t1, out=t1)
    dh_prev += t1
    np.matmul(dgc, w_cand.T, out=t1)  # dL/d(r h_prev)
    np.multiply(t1, h_prev, out=dgr)
    gate_act.backward(r, dgr, t2)
    t1 *= r
    dh_prev += t1
    np.matmul(dgates[:, :2 * hs], w_gate.T, out=t1)
    dh_prev += t1


# ---- whole batches of sequences, time-major (see sculler.math.seq2batch.SequenceBatch) ----

def _steps(plan) -> tuple[list[int], list[int]]:
    return plan.step_starts.tolist(), plan.batch_sizes.tolist()


def previous_rows(plan):
    """For every time-major row of steps 1.. (rows ``step_starts[1]:``), the time-major row of
    the same sequence one step earlier: ``h_prev[step_starts[1]:] = h[previous_rows(plan)]``."""
    starts, sizes = plan.step_starts, plan.batch_sizes
    step_of_row = np.repeat(np.arange(1, sizes.size), sizes[1:])
    return np.arange(int(starts[1]) if sizes.size else 0, int(starts[-1])) - (
        starts[step_of_row] - starts[step_of_row - 1])


def lstm_forward(plan, gates, weight, peepholes, c, state, h, acts, tmp) -> None:
    """LSTM over all steps: ``gates`` (rows, 4H) time-major input + bias in, activated gates
    out; fills ``c``, ``state``, ``h`` (rows, H). ``weight`` (H, 4H); ``tmp`` flat scratch of
    at least ``4 * batch_sizes[0] * H`` elements."""
    starts, sizes = _steps(plan)
    four_h = gates.shape[1]
    for t, n in enumerate(sizes):
        rows = slice(starts[t], starts[t + 1])
        g = gates[rows]
        c_prev = None
        if t:
            prev = slice(starts[t - 1], starts[t - 1] + n)
            prod = tmp[:n * four_h].reshape(n, four_h)
            np.matmul(h[prev], weight, out=prod)
            g += prod
            c_prev = c[prev]
        lstm_step_forward(g, c_prev, peepholes, c[rows], state[rows], h[rows], acts, tmp)


def lstm_backward(plan, gates, weight, peepholes, c, state, dh, dc, dgates, acts,
                  tmp) -> None:
    """Backward of :func:`lstm_forward` through time: ``dh`` (rows, H) holds dL/dh from the
    output and receives the recurrent terms; ``dc`` (rows, H) is work space; writes
    ``dgates`` (rows, 4H). Parameter gradients are left to :func:`lstm_param_grads`."""
    starts, sizes = _steps(plan)
    hs = dh.shape[1]
    dc[...] = 0.0
    for t in range(len(sizes) - 1, -1, -1):
        n = sizes[t]
        rows = slice(starts[t], starts[t + 1])
        c_prev = dc_prev = None
        if t:
            prev = slice(starts[t - 1], starts[t - 1] + n)
            c_prev, dc_prev = c[prev], dc[prev]
        lstm_step_backward(gates[rows], c_prev, peepholes, state[rows], dh[rows], dc[rows],
                           dgates[rows], dc_prev, acts, tmp)
        if t:
            prod = tmp[:n * hs].reshape(n, hs)
            np.matmul(dgates[rows], weight.T, out=prod)
            dh[prev] += prod


def accumulate_prev_product(h, prev, dgates, dweight, gathered, dw_tmp) -> None:
    """``dW += h_prev^T dg`` over the rows of steps 1..: ``h_prev = h[prev]`` (gathered into
    ``gathered``, (len(prev), H)), ``dg`` the last ``len(prev)`` rows of ``dgates``; ``dw_tmp``
    is scratch shaped like ``dweight``."""
    if dweight is None or not prev.size:
        return
    np.take(h, prev, axis=0, out=gathered)
    np.matmul(gathered.T, dgates[dgates.shape[0] - prev.size:], out=dw_tmp)
    dweight += dw_tmp


def lstm_param_grads(plan, dgates, h, c, prev, dweight, dbias, gathered, tmp, dw_tmp) -> None:
    """``dW += h_prev^T dgates``; ``dbias`` (7H,) gets ``sum dgates`` and, past 4H, the
    peephole terms ``sum dg_i c_prev``, ``sum dg_f c_prev``, ``sum dg_o c`` (when it is 7H).
    ``prev`` = :func:`previous_rows`; ``gathered``, ``tmp``, ``dw_tmp``: (len(prev), H),
    flat (2 rows H) and (H, 4H) scratch."""
    hs = h.shape[1]
    first = int(plan.step_starts[1]) if plan.num_steps else 0
    accumulate_prev_product(h, prev, dgates, dweight, gathered, dw_tmp)
    if dbias is None:
        return
    dbias[:4 * hs] += dgates.sum(axis=0)
    if dbias.size == 4 * hs:
        return
    dgo_c = tmp[:c.size].reshape(c.shape)
    np.multiply(dgates[:, 3 * hs:], c, out=dgo_c)
    dbias[6 * hs:] += dgo_c.sum(axis=0)
    if prev.size:
        np.take(c, prev, axis=0, out=gathered)
        m = prev.size
        prod = tmp[:2 * m * hs].reshape(m, 2, hs)
        np.multiply(dgates[first:, hs:3 * hs].reshape(m, 2, hs), gathered[:, None, :], out=prod)
        dbias[4 * hs:6 * hs] += prod.sum(axis=0).reshape(-1)


def gru_forward(plan, gates, w_gate, w_cand, reset_h, h, acts, tmp) -> None:
    """GRU over all steps: ``gates`` (rows, 3H) time-major input + bias in, activated
    ``[z | r | c~]`` out; fills ``h`` and ``reset_h`` (rows, H) (``r h_prev``; rows of step 0
    untouched). ``tmp``: flat scratch of ``2 * batch_sizes[0] * H``."""
    starts, sizes = _steps(plan)
    for t, n in enumerate(sizes):
        rows = slice(starts[t], starts[t + 1])
        h_prev = h[starts[t - 1]:starts[t - 1] + n] if t else None
        gru_step_forward(gates[rows], h_prev, w_gate, w_cand, reset_h[rows], h[rows], acts, tmp)


def gru_backward(plan, gates, h, w_gate, w_cand, dh, dgates, acts, tmp) -> None:
    """Backward of :func:`gru_forward` through time: ``dh`` (rows, H) holds dL/dh from the
    output and receives the recurrent terms; writes ``dgates`` (rows, 3H)."""
    starts, sizes = _steps(plan)
    for t in range(len(sizes) - 1, -1, -1):
        n = sizes[t]
        rows = slice(starts[t], starts[t + 1])
        h_prev = dh_prev = None
        if t:
            prev = slice(starts[t - 1], starts[t - 1] + n)
            h_prev, dh_prev = h[prev], dh[prev]
        gru_step_backward(gates[rows], h_prev, w_gate, w_cand, dh[rows], dgates[rows], dh_prev,
                          acts, tmp)


def rnn_forward(plan, y, weight, act, tmp) -> None:
    """Plain RNN over all steps: ``y`` (rows, H) time-major ``x + b`` in,
    ``y_t = act(x_t + b + y_{t-1} W)`` out, in place; ``tmp`` flat scratch of
    ``batch_sizes[0] * H``."""
    starts, sizes = _steps(plan)
    hs = y.shape[1]
    for t, n in enumerate(sizes):
        rows = y[starts[t]:starts[t + 1]]
        if t:
            prod = tmp[:n * hs].reshape(n, hs)
            np.matmul(y[starts[t - 1]:starts[t - 1] + n], weight, out=prod)
            rows += prod
        act.forward(rows)


def rnn_backward(plan, y, weight, dy, act, tmp) -> None:
    """Backward of :func:`rnn_forward`: ``dy`` (rows, H) dL/dy in, dL/d(pre-activation) out
    (recurrent terms included); ``tmp`` flat scratch of ``batch_sizes[0] * H``."""
    starts, sizes = _steps(plan)
    hs = y.shape[1]
    for t in range(len(sizes) - 1, -1, -1):
        n = sizes[t]
        rows = slice(starts[t], starts[t + 1])
        act.backward(y[rows], dy[rows], tmp[:n * hs].reshape(n, hs))
        if t:
            prod = tmp[:n * hs].reshape(n, hs)
            np.matmul(dy[rows], weight.T, out=prod)
            dy[starts[t - 1]:starts[t - 1] + n] += prod
