"""ONNX conversions of the sequence layers over ONE sequence: the value of a sequence is its
rows ``(T, width)`` (T dynamic, at least 1), and a whole-sequence aggregation gives ``(1, D)``.

- ``lstmemory`` -> ``LSTM`` with peepholes: Paddle's gates ``[c~ | i | f | o]`` are reordered
  to ONNX's ``[i | o | f | c]``; the input is the already-projected 4H sequence, so ``W`` is the
  (4H, 4H) permutation matrix (the preceding projection is not folded in), ``R`` the permuted
  transpose of Paddle's (H, 4H) recurrent weight, ``B`` = the permuted gate bias then zeros,
  ``P`` = ``[p_i, p_o, p_f]``.
- ``gated_recurrent`` (grumemory) -> ``GRU`` with ``linear_before_reset=0`` (ONNX's default,
  where the reset gate multiplies ``h_{t-1}`` before ``R_h``, as in Paddle). ONNX mixes
  ``H = (1 - z) h~ + z h_{t-1}``, Paddle ``(1 - z) h_{t-1} + z c~``, so the update gate's
  weights and bias are negated (``1 - sigmoid(a) = sigmoid(-a)``); only a sigmoid gate can be
  exported.
- ``recurrent`` -> ``RNN`` (``W`` the identity, ``R`` the transposed recurrent weight).
- ``seqlastins``/``seqfirstins`` -> ``Slice`` of the last/first row; ``max`` -> ``ReduceMax``;
  ``average`` -> ``ReduceMean`` / ``ReduceSum`` / ``ReduceSum`` divided by ``sqrt(T)``.
"""

from __future__ import annotations

import numpy as np

from sculler.core.model_config import LayerConfig
from sculler.onnx.graph import GraphBuilder

# ONNX names of the cell activations it can express (Paddle's linear has no exact match).
CELL_ACTIVATIONS = {"sigmoid": "Sigmoid", "tanh": "Tanh", "relu": "Relu"}
# Paddle's LSTM gate blocks are [c~, i, f, o]; ONNX's are [i, o, f, c].
LSTM_ORDER = (1, 3, 2, 0)
RECURRENT_TYPES = ("lstmemory", "gated_recurrent", "recurrent")
AGGREGATE_TYPES = ("seqlastins", "seqfirstins", "max", "average")


def _cell_activation_names(lc: LayerConfig) -> list[tuple[str, str]]:
    """``(attribute, activation name)`` of the cell's activations in ONNX's order."""
    gate = ("active_gate_type", lc.attrs.get("active_gate_type") or "sigmoid")
    cand = ("act", lc.active_type or "linear")
    if lc.type == "recurrent":
        return [cand]
    if lc.type == "lstmemory":
        return [gate, cand, ("active_state_type", lc.attrs.get("active_state_type") or "tanh")]
    return [gate, cand]


def sequence_refusal(lc: LayerConfig) -> str | None:
    """Why the recurrent or aggregating layer ``lc`` cannot be exported (None when it can)."""
    who = f"{lc.name!r} (type {lc.type})"
    if lc.type in RECURRENT_TYPES:
        for attr, name in _cell_activation_names(lc):
            if name not in CELL_ACTIVATIONS:
                return (f"{who}: cell activation {attr}={name!r} (ONNX's {lc.type} export "
                        f"takes {sorted(CELL_ACTIVATIONS)})")
        gate = lc.attrs.get("active_gate_type") or "sigmoid"
        if lc.type == "gated_recurrent" and gate != "sigmoid":
            return (f"{who}: active_gate_type={gate!r}; ONNX's GRU uses z where Paddle uses "
                    "1 - z, which only a sigmoid gate can turn into a negated argument")
        return None
    if lc.attrs.get("trans_type", "non-seq") != "non-seq":
        return f"{who}: agg_level=TO_SEQUENCE (nested sequences are not exported)"
    if int(lc.attrs.get("seq_pool_stride", -1)) > 0:
        return f"{who}: stride pooling (seq_pool_stride={lc.attrs['seq_pool_stride']})"
    if lc.type == "max" and lc.attrs.get("output_max_index"):
        return f"{who}: output_max_index=True (row indices of a batch)"
    return None


def _sequence_input(g: GraphBuilder, x: str, width: int, hint: str) -> str:
    """``(T, width)`` -> ONNX's ``(T, 1, width)`` (one sequence in the batch)."""
    return g.op("Reshape", [x, g.const(f"{hint}/x_shape", [-1, 1, width], np.int64)], hint)


def _rnn_output(g: GraphBuilder, y: str, size: int, hint: str) -> str:
    """ONNX's ``Y`` ``(T, 1, 1, H)`` -> ``(T, H)``."""
    return g.op("Reshape", [y, g.const(f"{hint}/y_shape", [-1, size], np.int64)], hint)


def _rnn_attrs(lc: LayerConfig) -> dict:
    return {"hidden_size": int(lc.size),
            "direction": "reverse" if lc.attrs.get("reversed") else "forward",
            "activations": [CELL_ACTIVATIONS[name] for _, name in _cell_activation_names(lc)]}


def lstm(g: GraphBuilder, lc: LayerConfig, ins: list[str], ctx) -> str:
    """Paddle's peephole LSTM as ONNX ``LSTM`` (see the module docstring for the mapping)."""
    hs = int(lc.size)
    order = np.concatenate([np.arange(k * hs, (k + 1) * hs) for k in LSTM_ORDER])
    w = np.eye(4 * hs, dtype=np.float32)[order]                       # x_t W^T picks x[order]
    rec = ctx.weight(lc.inputs[0].input_parameter_name).reshape(hs, 4 * hs)[:, order].T
    bias = np.zeros(8 * hs, np.float32)
    peep = np.zeros(3 * hs, np.float32)
    if lc.bias_parameter_name:
        b = ctx.weight(lc.bias_parameter_name).reshape(-1)
        bias[:4 * hs] = b[:4 * hs][order]
        p_i, p_f, p_o = b[4 * hs:5 * hs], b[5 * hs:6 * hs], b[6 * hs:]
        peep[...] = np.concatenate([p_i, p_o, p_f])
    name = lc.name
    inputs = [_sequence_input(g, ins[0], 4 * hs, name), g.const(f"{name}/W", w[None]),
              g.const(f"{name}/R", rec[None]), g.const(f"{name}/B", bias[None]), "", "", "",
              g.const(f"{name}/P", peep[None])]
    y = g.op("LSTM", inputs, name, **_rnn_attrs(lc))
    return _rnn_output(g, y, hs, name)


def gru(g: GraphBuilder, lc: LayerConfig, ins: list[str], ctx) -> str:
    """Paddle's GRU as ONNX ``GRU`` (``linear_before_reset=0``, update gate negated)."""
    hs = int(lc.size)
    flat = ctx.weight(lc.inputs[0].input_parameter_name).reshape(-1)
    u_zr = flat[:2 * hs * hs].reshape(hs, 2 * hs)
    w_c = flat[2 * hs * hs:].reshape(hs, hs)
    sign = np.concatenate([-np.ones(hs), np.ones(2 * hs)]).astype(np.float32)
    w = np.diag(sign)                                                 # ONNX order z, r, h
    rec = np.concatenate([-u_zr[:, :hs].T, u_zr[:, hs:].T, w_c.T])
    bias = np.zeros(6 * hs, np.float32)
    if lc.bias_parameter_name:
        bias[:3 * hs] = sign * ctx.weight(lc.bias_parameter_name).reshape(-1)
    name = lc.name
    inputs = [_sequence_input(g, ins[0], 3 * hs, name), g.const(f"{name}/W", w[None]),
              g.const(f"{name}/R", rec[None]), g.const(f"{name}/B", bias[None])]
    y = g.op("GRU", inputs, name, linear_before_reset=0, **_rnn_attrs(lc))
    return _rnn_output(g, y, hs, name)


def rnn(g: GraphBuilder, lc: LayerConfig, ins: list[str], ctx) -> str:
    """Paddle's ``y_t = act(x_t + b + y_{t-1} W)`` as ONNX ``RNN``: ``W`` the identity,
    ``R = W^T``, ``B = [b, 0]``."""
    hs = int(lc.size)
    bias = np.zeros(2 * hs, np.float32)
    if lc.bias_parameter_name:
        bias[:hs] = ctx.weight(lc.bias_parameter_name).reshape(-1)
    rec = ctx.weight(lc.inputs[0].input_parameter_name).reshape(hs, hs).T
    name = lc.name
    inputs = [_sequence_input(g, ins[0], hs, name),
              g.const(f"{name}/W", np.eye(hs, dtype=np.float32)[None]),
              g.const(f"{name}/R", rec[None]), g.const(f"{name}/B", bias[None])]
    y = g.op("RNN", inputs, name, **_rnn_attrs(lc))
    return _rnn_output(g, y, hs, name)


def _with_bias(g: GraphBuilder, lc: LayerConfig, y: str, ctx) -> str:
    if not lc.bias_parameter_name:
        return y
    b = ctx.weight(lc.bias_parameter_name).reshape(1, -1)
    return g.op("Add", [y, g.const(f"{lc.name}/bias", b)], lc.name)


def instance(g: GraphBuilder, lc: LayerConfig, ins: list[str], ctx) -> str:
    """last_seq / first_seq: the row ``T - 1`` / ``0`` as ``(1, D)``."""
    first = bool(lc.attrs.get("select_first", lc.type == "seqfirstins"))
    start, end = (0, 1) if first else (-1, np.iinfo(np.int64).max)
    y = g.op("Slice", [ins[0], g.const(f"{lc.name}/start", [start], np.int64),
                       g.const(f"{lc.name}/end", [end], np.int64),
                       g.const(f"{lc.name}/axis", [0], np.int64)], lc.name)
    return _with_bias(g, lc, y, ctx)


def _reduce(g: GraphBuilder, op: str, x: str, hint: str, opset: int) -> str:
    """``op`` over axis 0 keeping it: ``(T, D)`` -> ``(1, D)`` (axes an input from opset 18,
    13 for ReduceSum)."""
    if op == "ReduceSum" or opset >= 18:
        return g.op(op, [x, g.const(f"{hint}/axes", [0], np.int64)], hint, keepdims=1)
    return g.op(op, [x], hint, axes=[0], keepdims=1)


def max_pool(g: GraphBuilder, lc: LayerConfig, ins: list[str], ctx) -> str:
    """``y_j = max_t x_tj``."""
    return _with_bias(g, lc, _reduce(g, "ReduceMax", ins[0], lc.name, ctx.opset), ctx)


def average_pool(g: GraphBuilder, lc: LayerConfig, ins: list[str], ctx) -> str:
    """``y = s * sum_t x_t``, ``s`` = 1/T (average), 1 (sum) or 1/sqrt(T) (squarerootn)."""
    strategy = lc.attrs.get("average_strategy", "average")
    if strategy == "average":
        y = _reduce(g, "ReduceMean", ins[0], lc.name, ctx.opset)
    else:
        y = _reduce(g, "ReduceSum", ins[0], lc.name, ctx.opset)
        if strategy == "squarerootn":
            shape = g.op("Shape", [ins[0]], lc.name)
            rows = g.op("Gather", [shape, g.const(f"{lc.name}/t", [0], np.int64)], lc.name)
            count = g.op("Cast", [rows], lc.name, to=g.onnx.TensorProto.FLOAT)
            y = g.op("Div", [y, g.op("Sqrt", [count], lc.name)], lc.name)
    return _with_bias(g, lc, y, ctx)


SEQUENCE_CONVERTERS = {"lstmemory": lstm, "gated_recurrent": gru, "recurrent": rnn,
                       "seqlastins": instance,
                       "seqfirstins": instance, "max": max_pool, "average": average_pool}
