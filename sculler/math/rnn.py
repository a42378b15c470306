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

from sculler.backend import cached_like, get_array_module, is_gpu_array
from sculler.math import cuda, cuda_sequences
from sculler.math.activation import NAME_ALIASES
from sculler.math.blas import gemm, small_gemms
from sculler.math.segment import gather_rows

__all__ = [
    "CELL_ACTIVATIONS", "CellActivation", "cell_activation", "lstm_step_forward",
    "lstm_step_backward", "gru_step_forward", "gru_step_backward",
]

SIGMOID_MIN, SIGMOID_MAX = -40.0, 13.0


class CellActivation:
    """An activation used inside a recurrent cell: ``forward(x, out=None)`` writes ``f(x)``
    into ``out`` (default: ``x`` itself); ``backward(y, dy, tmp)``: ``dy *= f'(x)`` computed
    from ``y = f(x)`` (``tmp``: scratch of ``y``'s shape)."""

    def __init__(self, name: str):
        self.name = name
        self.forward = getattr(self, f"_{name}")
        self.backward = getattr(self, f"_{name}_grad")

    @staticmethod
    def _sigmoid(x, out=None) -> None:
        out = x if out is None else out
        np.negative(x, out=out)
        np.clip(out, -SIGMOID_MAX, -SIGMOID_MIN, out=out)
        np.exp(out, out=out)
        out += 1.0
        np.reciprocal(out, out=out)

    @staticmethod
    def _sigmoid_grad(y, dy, tmp) -> None:
        np.subtract(1.0, y, out=tmp)
        tmp *= y
        dy *= tmp

    @staticmethod
    def _tanh(x, out=None) -> None:
        np.tanh(x, out=x if out is None else out)

    @staticmethod
    def _tanh_grad(y, dy, tmp) -> None:
        np.multiply(y, y, out=tmp)
        np.subtract(1.0, tmp, out=tmp)
        dy *= tmp

    @staticmethod
    def _relu(x, out=None) -> None:
        np.maximum(x, 0.0, out=x if out is None else out)

    @staticmethod
    def _relu_grad(y, dy, tmp) -> None:
        np.greater(y, 0.0, out=tmp)
        dy *= tmp

    @staticmethod
    def _linear(x, out=None) -> None:
        if out is not None:
            out[...] = x

    @staticmethod
    def _linear_grad(y, dy, tmp) -> None:
        return None


CELL_ACTIVATIONS = ("sigmoid", "tanh", "relu", "linear")
_CELL: dict[str, CellActivation] = {}


def cell_activation(name: str | None, what: str = "activation") -> CellActivation:
    """The cell activation called ``name``; ValueError for one the recurrent kernels lack."""
    name = NAME_ALIASES.get(name, name)
    if name not in CELL_ACTIVATIONS:
        raise ValueError(f"{what} {name!r} is not supported inside a recurrent cell; use one of "
                         f"{list(CELL_ACTIVATIONS)} (PaddlePaddle's hppl activations)")
    act = _CELL.get(name)
    if act is None:
        act = _CELL[name] = CellActivation(name)
    return act


def gate_blocks(gates, count: int):
    """``(count, n, H)`` view of gates: a gate-major array as is, an ``(n, count * H)`` row
    layout as a strided view (gate ``k`` is ``view[k]``)."""
    if gates.ndim == 3:
        return gates
    n = gates.shape[0]
    return gates.reshape(n, count, -1).transpose(1, 0, 2)


def lstm_step_forward(gates, c_prev, peepholes, c, state, h, acts, tmp) -> None:
    """One LSTM step for ``n`` active rows; ``gates`` becomes ``[a | i | f | o]``.

    ``a = act(g_c)``, ``i = gate(g_i + c_prev p_i)``, ``f = gate(g_f + c_prev p_f)``,
    ``c = a i + c_prev f``, ``o = gate(g_o + c p_o)``, ``h = o state_act(c)``.

    Args:
        gates: pre-activations ``[g_c | g_i | g_f | g_o]`` (input + bias + h_prev W), either
            gate-major (4, n, H) (fastest: every gate block contiguous) or (n, 4H).
        c_prev: (n, H) previous cell, or None at the first step.
        peepholes: (3, H) ``[p_i; p_f; p_o]``, or None.
        c, state, h: (n, H) outputs: the cell, ``state_act(c)`` and the hidden output.
        acts: ``(act, gate_act, state_act)`` :class:`CellActivation` s.
        tmp: flat scratch of at least 2nH elements.
    """
    act, gate_act, state_act = acts
    n, hs = c.shape
    gates = gate_blocks(gates, 4)
    a, i_f, o = gates[0], gates[1:3], gates[3]
    if c_prev is not None and peepholes is not None:
        peep = tmp[:2 * n * hs].reshape(2, n, hs)
        np.multiply(c_prev[None], peepholes[:2, None, :], out=peep)
        i_f += peep
    act.forward(a)
    gate_act.forward(i_f)
    np.multiply(a, i_f[0], out=c)
    t1 = tmp[:n * hs].reshape(n, hs)
    if c_prev is not None:
        np.multiply(c_prev, i_f[1], out=t1)
        c += t1
    if peepholes is not None:
        np.multiply(c, peepholes[2], out=t1)
        o += t1
    gate_act.forward(o)
    state_act.forward(c, out=state)
    np.multiply(o, state, out=h)


def lstm_step_backward(gates, c_prev, peepholes, state, dh, dc, dgates, dc_prev, acts,
                       tmp) -> None:
    """Backward of :func:`lstm_step_forward` for one step.

    ``dh`` (n, H) is dL/dh_t complete; ``dc`` (n, H) holds what later steps gave dL/dc_t and
    receives this step's total. Writes ``dgates`` (dL/d pre-activations, in the layout of
    ``gates``: (4, n, H) or (n, 4H)); adds ``dc f + dg_i p_i + dg_f p_f`` into ``dc_prev``
    (n, H) unless it is None (first step). ``gates`` are the activated ``[a | i | f | o]``;
    ``tmp`` is flat scratch of at least nH elements (2nH: the i and f gates in one pass).
    """
    act, gate_act, state_act = acts
    n, hs = dh.shape
    gates, dgates = gate_blocks(gates, 4), gate_blocks(dgates, 4)
    t1 = tmp[:n * hs].reshape(n, hs)
    a, i_f, o = gates[0], gates[1:3], gates[3]
    dga, dg_if, dgo = dgates[0], dgates[1:3], dgates[3]
    np.multiply(dh, state, out=dgo)
    gate_act.backward(o, dgo, t1)
    np.multiply(dh, o, out=dga)  # dL/dstate, then through state_act into dc
    state_act.backward(state, dga, t1)
    dc += dga
    if peepholes is not None:
        np.multiply(dgo, peepholes[2], out=t1)
        dc += t1
    np.multiply(dc, i_f[0], out=dga)
    act.backward(a, dga, t1)
    np.multiply(dc, a, out=dg_if[0])
    if c_prev is None:
        gate_act.backward(i_f[0], dg_if[0], t1)
        dg_if[1] = 0.0
        return
    np.multiply(dc, c_prev, out=dg_if[1])
    # i and f together where tmp has room for both (lstmemory), else one at a time
    pair = tmp.size >= 2 * n * hs
    t2 = tmp[:2 * n * hs].reshape(2, n, hs) if pair else None
    for k in (slice(0, 2),) if pair else (0, 1):
        gate_act.backward(i_f[k], dg_if[k], t2 if pair else t1)
    np.multiply(dc, i_f[1], out=t1)
    dc_prev += t1
    if peepholes is not None:
        for k in (0, 1):
            np.multiply(dg_if[k], peepholes[k], out=t1)
            dc_prev += t1


def gate_weight_blocks(weight, count: int):
    """``(count, H, H)`` view of an ``(H, count * H)`` weight: block ``k`` feeds gate ``k``
    (a given ``(count, H, H)`` array is returned as is)."""
    if weight.ndim == 3:
        return weight
    hs = weight.shape[0]
    return weight.reshape(hs, count, hs).transpose(1, 0, 2)


def gru_step_forward(gates, h_prev, w_gate, w_cand, reset_h, h, acts, tmp,
                     source=None) -> None:
    """One GRU step for ``n`` active rows; ``gates`` becomes ``[z | r | c~]``.

    ``[z|r] = gate(g_zr + h_prev W_g)``, ``c~ = act(g_c + (r h_prev) W_c)``,
    ``h = h_prev + z (c~ - h_prev)`` (``z c~`` at the first step).

    Args:
        gates: input + bias ``[g_z | g_r | g_c]``, gate-major (3, n, H) or (n, 3H).
        h_prev: (n, H) previous output, or None at the first step.
        w_gate: (H, 2H) ``[U_z | U_r]`` (or its (2, H, H) blocks); w_cand: (H, H).
        reset_h: (n, H) receives ``r h_prev`` (kept for backward; untouched at the first step).
        h: (n, H) output.
        acts: ``(act, gate_act)``; tmp: flat scratch of at least 2nH elements.
        source: ``(x, bias or None)``, x of ``gates``' layout and bias (3H,): ``gates`` is
            written ``x + bias`` first (on the GPU inside the step's kernel where it can be).
    """
    if is_gpu_array(h):
        if source is not None:
            source = (gate_blocks(source[0], 3), source[1])
        cuda.gru_step_forward(gate_blocks(gates, 3), h_prev, w_gate, w_cand, reset_h, h, acts,
                              source)
        return
    if source is not None:
        x, bias = source
        if bias is None:
            gates[...] = x
        else:
            np.add(gate_blocks(x, 3), bias.reshape(3, 1, -1), out=gate_blocks(gates, 3))
    act, gate_act = acts
    n, hs = h.shape
    gates = gate_blocks(gates, 3)
    zr, cand = gates[0:2], gates[2]
    if h_prev is not None:
        prod_zr = tmp[:2 * n * hs].reshape(2, n, hs)
        np.matmul(h_prev, gate_weight_blocks(w_gate, 2), out=prod_zr)
        zr += prod_zr
    gate_act.forward(zr)
    z = zr[0]
    if h_prev is None:
        act.forward(cand)
        np.multiply(z, cand, out=h)
        return
    np.multiply(zr[1], h_prev, out=reset_h)
    prod = tmp[:n * hs].reshape(n, hs)
    np.matmul(reset_h, w_cand, out=prod)
    cand += prod
    act.forward(cand)
    np.subtract(cand, h_prev, out=h)
    h *= z
    h += h_prev


def gru_step_backward(gates, h_prev, w_gate, w_cand, dh, dgates, dh_prev, acts, tmp,
                      add_into=None) -> None:
    """Backward of :func:`gru_step_forward` for one step.

    ``dh`` (n, H) is dL/dh_t complete; writes ``dgates`` (dL/d pre-activations, in the layout
    of ``gates``) and adds dL/dh_prev into ``dh_prev`` unless ``h_prev`` is None. ``tmp`` is
    flat scratch of at least 2nH elements. ``add_into`` (``dgates``' layout, or None) gets
    ``dgates`` added (on the GPU inside the step's kernel where it can be).
    """
    if is_gpu_array(dh):
        cuda.gru_step_backward(gate_blocks(gates, 3), h_prev, w_gate, w_cand, dh,
                               gate_blocks(dgates, 3), dh_prev, acts,
                               None if add_into is None else gate_blocks(add_into, 3))
        return
    _gru_step_backward_host(gates, h_prev, w_gate, w_cand, dh, dgates, dh_prev, acts, tmp)
    if add_into is not None:
        add_into += dgates


def _gru_step_backward_host(gates, h_prev, w_gate, w_cand, dh, dgates, dh_prev, acts,
                            tmp) -> None:
    act, gate_act = acts
    n, hs = dh.shape
    gates, dgates = gate_blocks(gates, 3), gate_blocks(dgates, 3)
    z, r, cand = gates[0], gates[1], gates[2]
    dgz, dgr, dgc = dgates[0], dgates[1], dgates[2]
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
    prod = tmp[:2 * n * hs].reshape(2, n, hs)
    np.matmul(dgates[0:2], gate_weight_blocks(w_gate, 2).transpose(0, 2, 1), out=prod)
    dh_prev += prod[0]
    dh_prev += prod[1]


# ---- whole batches of sequences, time-major (see sculler.math.seq2batch.SequenceBatch) ----

def _steps(plan, backward: bool = False):
    """``(n, rows, prev)`` per step, first to last (last to first with ``backward``): ``n``
    active sequences, ``rows`` the step's time-major slice, ``prev`` the slice of the previous
    step's rows that continue (None at step 0)."""
    starts, sizes = plan.step_starts.tolist(), plan.batch_sizes.tolist()
    order = range(len(sizes) - 1, -1, -1) if backward else range(len(sizes))
    for t in order:
        n = sizes[t]
        yield n, slice(starts[t], starts[t + 1]), (
            slice(starts[t - 1], starts[t - 1] + n) if t else None)


def _step_gemm(plan, weight) -> int:
    """Multiply-adds of the largest per-step product ``(n, H) @ weight``."""
    return (int(plan.batch_sizes[0]) if plan.num_steps else 0) * weight.size


def previous_rows(plan):
    """For every time-major row of steps 1.. (rows ``step_starts[1]:``), the time-major row of
    the same sequence one step earlier: ``h_prev[step_starts[1]:] = h[previous_rows(plan)]``."""
    starts, sizes = plan.step_starts, plan.batch_sizes
    step_of_row = np.repeat(np.arange(1, sizes.size), sizes[1:])
    return np.arange(int(starts[1]) if sizes.size else 0, int(starts[-1])) - (
        starts[step_of_row] - starts[step_of_row - 1])


def lstm_forward(plan, gates, weight, peepholes, c, state, h, acts, tmp) -> None:
    """LSTM over all steps. ``gates`` (4, rows, H): gate-major time-major input + bias in,
    activated gates out; fills ``c``, ``state``, ``h`` (rows, H). ``weight`` (H, 4H); ``tmp``
    flat scratch of at least ``4 * batch_sizes[0] * H + 4 H^2`` elements."""
    if is_gpu_array(h):
        _lstm_forward_gpu(plan, gates, weight, peepholes, c, state, h, acts, tmp)
        return
    hs = h.shape[1]
    w4 = _contiguous_blocks(weight, 4, tmp)
    tmp = tmp[w4.size:]
    with small_gemms(_step_gemm(plan, weight)):
        for n, rows, prev in _steps(plan):
            g = gates[:, rows]
            if prev is not None:
                prod = tmp[:4 * n * hs].reshape(4, n, hs)
                np.matmul(h[prev], w4, out=prod)
                g += prod
            lstm_step_forward(g, None if prev is None else c[prev], peepholes, c[rows],
                              state[rows], h[rows], acts, tmp)


def lstm_backward(plan, gates, weight, peepholes, c, state, dh, dc, dgates, acts,
                  tmp) -> None:
    """Backward of :func:`lstm_forward` through time: ``dh`` (rows, H) holds dL/dh from the
    output and receives the recurrent terms; ``dc`` (rows, H) is work space; writes
    ``dgates`` (4, rows, H). Parameter gradients are left to :func:`lstm_param_grads`."""
    if is_gpu_array(dh):
        _lstm_backward_gpu(plan, gates, weight, peepholes, c, state, dh, dc, dgates, acts, tmp)
        return
    hs = dh.shape[1]
    w4 = _contiguous_blocks(weight, 4, tmp)
    w4_t = w4.transpose(0, 2, 1)
    tmp = tmp[w4.size:]
    dc[...] = 0.0
    with small_gemms(_step_gemm(plan, weight)):
        for n, rows, prev in _steps(plan, backward=True):
            first = prev is None
            lstm_step_backward(gates[:, rows], None if first else c[prev], peepholes,
                               state[rows], dh[rows], dc[rows], dgates[:, rows],
                               None if first else dc[prev], acts, tmp)
            if not first:
                prod = tmp[:4 * n * hs].reshape(4, n, hs)
                np.matmul(dgates[:, rows], w4_t, out=prod)
                dh_prev = dh[prev]
                for k in range(4):
                    dh_prev += prod[k]


def _gpu_scratch(tmp, size: int):
    """The first ``size`` elements of ``tmp``, or a new array where ``tmp`` is shorter."""
    if tmp.size >= size:
        return tmp[:size]
    return get_array_module(tmp).empty(size, dtype=tmp.dtype)


def _contiguous_or_fail(*arrays) -> None:
    bad = [tuple(a.shape) for a in arrays if a is not None and not a.flags.c_contiguous]
    if bad:
        raise ValueError(f"the GPU recurrence needs C-contiguous arrays; got views shaped {bad}")


def _whole_on_gpu(a, hs: int) -> bool:
    """Whether a recurrence over the device array ``a`` runs as one launch each way
    (:mod:`sculler.math.cuda_sequences`: at most ``SEQUENCE_KERNEL_MAX_HIDDEN`` units)."""
    return is_gpu_array(a) and hs <= cuda_sequences.SEQUENCE_KERNEL_MAX_HIDDEN


def _lstm_forward_gpu(plan, gates, weight, peepholes, c, state, h, acts, tmp) -> None:
    """:func:`lstm_forward` on CuPy arrays. Up to ``SEQUENCE_KERNEL_MAX_HIDDEN`` hidden units,
    one launch for the whole recurrence
    (:func:`sculler.math.cuda_sequences.lstm_forward_sequences`);
    wider, a cuBLAS product ``h_prev W`` and one fused kernel a step
    (:func:`sculler.math.cuda.lstm_forward_step`)."""
    _contiguous_or_fail(gates, c, state, h, peepholes, weight)
    hs = h.shape[1]
    if _whole_on_gpu(h, hs):
        cuda_sequences.lstm_forward_sequences(gates, c, state, h, peepholes, acts, weight,
                                              plan.step_starts, plan.batch_sizes)
        return
    first = int(plan.batch_sizes[0]) if plan.num_steps else 0
    rec_all = _gpu_scratch(tmp, 4 * first * hs).reshape(first, 4 * hs)
    for n, rows, prev in _steps(plan):
        rec = None
        if prev is not None:
            rec = rec_all[:n]
            gemm(h[prev], weight, rec)
        cuda.lstm_forward_step(gates, c, state, h, peepholes, acts, rows.start,
                               0 if prev is None else prev.start, n, recurrent=rec)


def _lstm_backward_gpu(plan, gates, weight, peepholes, c, state, dh, dc, dgates, acts,
                       tmp) -> None:
    """:func:`lstm_backward` on CuPy arrays: up to ``SEQUENCE_KERNEL_MAX_HIDDEN`` hidden units
    one launch (:func:`sculler.math.cuda_sequences.lstm_backward_sequences`, after a
    transposed copy of the weight); wider, one fused kernel a step
    (:func:`sculler.math.cuda.lstm_backward_step`) and a cuBLAS product ``dg W^T`` for the
    recurrent gradient, from that step's gates in row layout."""
    _contiguous_or_fail(gates, c, state, dh, dc, dgates, peepholes, weight)
    hs = dh.shape[1]
    if _whole_on_gpu(dh, hs):
        weight_t = _gpu_scratch(tmp, weight.size).reshape(4 * hs, hs)
        weight_t[...] = weight.T
        cuda_sequences.lstm_backward_sequences(gates, c, state, dh, dc, dgates, peepholes,
                                               acts, weight_t, plan.step_starts,
                                               plan.batch_sizes)
        return
    first = int(plan.batch_sizes[0]) if plan.num_steps else 0
    size = 4 * first * hs
    work = _gpu_scratch(tmp, size + first * hs)
    drow_all = work[:size].reshape(first, 4 * hs)
    dh_rec = work[size:size + first * hs].reshape(first, hs)
    dc[...] = 0.0
    n_rec = 0
    w_t = weight.T
    for n, rows, prev in _steps(plan, backward=True):
        drow = None if prev is None else drow_all
        cuda.lstm_backward_step(gates, c, state, dh, dc, dgates, peepholes, drow, acts,
                                rows.start, 0 if prev is None else prev.start, n,
                                dh_rec=dh_rec, n_rec=n_rec)
        if drow is not None:
            gemm(drow[:n], w_t, dh_rec[:n])
            n_rec = n


def accumulate_prev_product(h, prev, dgates, dweight, gathered, dw_tmp) -> None:
    """``dW += h_prev^T dg`` over the rows of steps 1..: ``h_prev = h[prev]`` (gathered into
    ``gathered``, (len(prev), H)), ``dg`` the last ``len(prev)`` rows of ``dgates``; ``dw_tmp``
    is scratch shaped like ``dweight``."""
    if dweight is None or not prev.size:
        return
    gather_rows(h, prev, gathered)
    with small_gemms(gathered.size * dgates.shape[1]):
        np.matmul(gathered.T, dgates[dgates.shape[0] - prev.size:], out=dw_tmp)
    dweight += dw_tmp


def lstm_param_grads(plan, dgates, h, c, prev, dweight, dbias, gathered, tmp, dw_tmp) -> None:
    """Gradients of the LSTM's parameters from ``dgates`` (4, rows, H): ``dW += h_prev^T dg``
    (``dweight`` (H, 4H)); ``dbias`` (7H,) gets ``sum dg`` and, past 4H, the peephole terms
    ``sum dg_i c_prev``, ``sum dg_f c_prev``, ``sum dg_o c`` (when it is 7H). ``prev`` =
    :func:`previous_rows`; ``gathered``, ``tmp``, ``dw_tmp``: (len(prev), H), flat (rows H) and
    (4, H, H) scratch."""
    hs = h.shape[1]
    first = int(plan.step_starts[1]) if plan.num_steps else 0
    if dweight is not None and prev.size:
        gather_rows(h, prev, gathered)
        with small_gemms(gathered.size * hs):  # four (H, m) x (m, H) products
            np.matmul(gathered.T, dgates[:, first:], out=dw_tmp)
        dweight.reshape(hs, 4, hs)[...] += dw_tmp.transpose(1, 0, 2)
    if dbias is None:
        return
    if is_gpu_array(dbias) and dbias.flags.c_contiguous and dgates.flags.c_contiguous \
            and c.flags.c_contiguous:
        rows = cached_like(prev, c) if prev.size else c[:0, 0].astype(np.int64)
        cuda.lstm_bias_grads(dgates, c, rows, first, dbias)
        return
    dbias[:4 * hs] += dgates.sum(axis=1).reshape(-1)
    if dbias.size == 4 * hs:
        return
    prod = tmp[:c.size].reshape(c.shape)
    np.multiply(dgates[3], c, out=prod)
    dbias[6 * hs:] += prod.sum(axis=0)
    if prev.size:
        gather_rows(c, prev, gathered)
        prod = tmp[:gathered.size].reshape(gathered.shape)
        for k in (1, 2):
            np.multiply(dgates[k, first:], gathered, out=prod)
            dbias[(3 + k) * hs:(4 + k) * hs] += prod.sum(axis=0)


def gru_forward(plan, gates, w_gate, w_cand, reset_h, h, acts, tmp) -> None:
    """GRU over all steps: ``gates`` (3, rows, H) gate-major time-major input + bias in,
    activated ``[z | r | c~]`` out; fills ``h`` and ``reset_h`` (rows, H) (``r h_prev``; rows
    of step 0 untouched). ``tmp``: flat scratch of ``2 * batch_sizes[0] * H + 3 H^2``. On the
    GPU up to ``SEQUENCE_KERNEL_MAX_HIDDEN`` hidden units, one launch
    (:func:`sculler.math.cuda_sequences.gru_forward_sequences`)."""
    if _whole_on_gpu(h, h.shape[1]) and w_gate.ndim == 2:
        _contiguous_or_fail(gates, w_gate, w_cand, reset_h, h)
        cuda_sequences.gru_forward_sequences(gates, w_gate, w_cand, reset_h, h, acts,
                                             plan.step_starts, plan.batch_sizes)
        return
    w_blocks = _contiguous_blocks(w_gate, 2, tmp)
    tmp = tmp[w_blocks.size:]
    with small_gemms(_step_gemm(plan, w_gate)):
        for _, rows, prev in _steps(plan):
            gru_step_forward(gates[:, rows], None if prev is None else h[prev], w_blocks,
                             w_cand, reset_h[rows], h[rows], acts, tmp)


def _contiguous_blocks(weight, count: int, tmp):
    """(H, count H) ``W`` -> contiguous (count, H, H) blocks ``W[:, kH:(k+1)H]`` in ``tmp``."""
    blocks = tmp[:weight.size].reshape(count, weight.shape[0], -1)
    np.copyto(blocks, gate_weight_blocks(weight, count))
    return blocks


def gru_backward(plan, gates, h, w_gate, w_cand, dh, dgates, acts, tmp) -> None:
    """Backward of :func:`gru_forward` through time: ``dh`` (rows, H) holds dL/dh from the
    output and receives the recurrent terms; writes ``dgates`` (3, rows, H). On the GPU up
    to ``SEQUENCE_KERNEL_MAX_HIDDEN`` hidden units, one launch after transposed copies of the
    weights into ``tmp`` (:func:`sculler.math.cuda_sequences.gru_backward_sequences`)."""
    hs = dh.shape[1]
    if _whole_on_gpu(dh, hs) and w_gate.ndim == 2:
        _contiguous_or_fail(gates, h, dh, dgates)
        w_gate_t = _gpu_scratch(tmp, 3 * hs * hs)
        w_cand_t = w_gate_t[2 * hs * hs:].reshape(hs, hs)
        w_gate_t = w_gate_t[:2 * hs * hs].reshape(2 * hs, hs)
        w_gate_t[...] = w_gate.T
        w_cand_t[...] = w_cand.T
        cuda_sequences.gru_backward_sequences(gates, h, w_gate_t, w_cand_t, dh, dgates, acts,
                                              plan.step_starts, plan.batch_sizes)
        return
    w_blocks = _contiguous_blocks(w_gate, 2, tmp)
    tmp = tmp[w_blocks.size:]
    with small_gemms(_step_gemm(plan, w_gate)):
        for _, rows, prev in _steps(plan, backward=True):
            first = prev is None
            gru_step_backward(gates[:, rows], None if first else h[prev], w_blocks, w_cand,
                              dh[rows], dgates[:, rows], None if first else dh[prev], acts, tmp)


def rnn_forward(plan, y, weight, act, tmp) -> None:
    """Plain RNN over all steps: ``y`` (rows, H) time-major ``x + b`` in,
    ``y_t = act(x_t + b + y_{t-1} W)`` out, in place; ``tmp`` flat scratch of
    ``batch_sizes[0] * H``. On the GPU up to ``SEQUENCE_KERNEL_MAX_HIDDEN`` units, one launch
    (:func:`sculler.math.cuda_sequences.rnn_forward_sequences`)."""
    hs = y.shape[1]
    if _whole_on_gpu(y, hs):
        _contiguous_or_fail(y, weight)
        cuda_sequences.rnn_forward_sequences(y, weight, act.name, plan.step_starts,
                                             plan.batch_sizes)
        return
    with small_gemms(_step_gemm(plan, weight)):
        for n, rows, prev in _steps(plan):
            if prev is not None:
                prod = tmp[:n * hs].reshape(n, hs)
                np.matmul(y[prev], weight, out=prod)
                y[rows] += prod
            act.forward(y[rows])


def rnn_backward(plan, y, weight, dy, act, tmp) -> None:
    """Backward of :func:`rnn_forward`: ``dy`` (rows, H) dL/dy in, dL/d(pre-activation) out
    (recurrent terms included); ``tmp`` flat scratch of ``batch_sizes[0] * H``, and on the
    GPU (one launch, :func:`sculler.math.cuda_sequences.rnn_backward_sequences`) of ``H^2`` for the
    transposed weight."""
    hs = y.shape[1]
    if _whole_on_gpu(dy, hs):
        _contiguous_or_fail(y, dy, weight)
        weight_t = _gpu_scratch(tmp, hs * hs).reshape(hs, hs)
        weight_t[...] = weight.T
        cuda_sequences.rnn_backward_sequences(y, weight_t, dy, act.name, plan.step_starts,
                                              plan.batch_sizes)
        return
    with small_gemms(_step_gemm(plan, weight)):
        for n, rows, prev in _steps(plan, backward=True):
            prod = tmp[:n * hs].reshape(n, hs)
            act.backward(y[rows], dy[rows], prod)
            if prev is not None:
                np.matmul(dy[rows], weight.T, out=prod)
                dy[prev] += prod
