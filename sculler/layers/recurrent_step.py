"""One-step recurrent cells for use inside a recurrent group, and ``get_output``.

``gru_step`` (PaddlePaddle's GruStepLayer), with inputs ``x`` (N, 3H) = ``[x_z | x_r | x_c]``
and ``h_prev`` (N, H), the weight (3H^2 values, dims [H, 3H]) attached to input 0 and split
flat as ``Wg`` (H, 2H) then ``Wc`` (H, H), bias ``b`` (1, 3H)::

    [z | r] = gate([x_z | x_r] + b_zr + h_prev Wg)
    c = act(x_c + b_c + (r * h_prev) Wc)
    h = h_prev + z * (c - h_prev)

``lstm_step`` (LstmStepLayer), with inputs ``g`` (N, 4H) = the full gate pre-activations
``[g_a | g_i | g_f | g_o]`` (already holding ``x W_x + h_prev W_h`` and any gate bias) and the
previous cell ``c_prev`` (N, H), bias = peepholes ``[p_i | p_f | p_o]`` (1, 3H)::

    a = act(g_a); i = gate(g_i + c_prev p_i); f = gate(g_f + c_prev p_f)
    c = a i + c_prev f; o = gate(g_o + c p_o); h = o state_act(c)

Output ``h``; the secondary output ``'state'`` holds ``c``, read with ``get_output``. The cell
activations are limited to sigmoid, tanh, relu and linear, as in PaddlePaddle. Neither layer
applies its ``act`` to the output (``act`` is the candidate's activation).

``get_output`` (type ``get_output``, attr ``arg_name``) exposes a secondary output of its
input layer (``layer.extra_outputs[arg_name]``) as an ordinary layer output.
"""

from __future__ import annotations

import numpy as np

from sculler.core.argument import Argument
from sculler.core.layer import Layer, register_layer
from sculler.math import activation as K
from sculler.math.blas import col_sum

CELL_ACTS = ("sigmoid", "tanh", "relu", "linear")


def _cell_act(layer_name: str, what: str, name: str | None, default: str):
    """(forward, gradient) kernels of a cell activation, one of ``CELL_ACTS``."""
    name = {"": default, None: default, "identity": "linear"}.get(name, name)
    if name not in CELL_ACTS:
        raise ValueError(f"layer {layer_name!r}: {what} must be one of {CELL_ACTS}, got "
                         f"{name!r}")
    return getattr(K, name), getattr(K, name + "_grad")


class _StepLayer(Layer):
    """Common checks of the step cells: two inputs of the given widths."""

    min_inputs = max_inputs = 2
    default_bias = True

    def _check_widths(self, first: int, second: int) -> int:
        self.check_input_width(0, first)
        self.check_input_width(1, second)
        return self.check_same_batch()


@register_layer("gru_step")
class GruStepLayer(_StepLayer):
    """One GRU step (see the module doc); attrs ``active_gate_type`` (default sigmoid)."""

    @classmethod
    def infer_size(cls, config, inputs):
        size = config.size or inputs[0].size // 3
        if inputs[0].size != 3 * size or inputs[1].size != size:
            raise ValueError(f"layer {config.name!r} (gru_step): input {inputs[0].name!r} must "
                             f"be 3*size wide and output_mem {inputs[1].name!r} size wide; got "
                             f"widths {inputs[0].size} and {inputs[1].size} for size {size}")
        return size

    @classmethod
    def weight_dims(cls, config, inputs):
        return {0: (config.size, 3 * config.size)}

    @classmethod
    def bias_dims(cls, config, inputs):
        return (1, 3 * config.size)

    def init(self, layer_map, parameter_map) -> None:
        super().init(layer_map, parameter_map)
        h = self.size
        self.act, self.act_grad = _cell_act(self.name, "act", self.config.active_type, "tanh")
        self.gate, self.gate_grad = _cell_act(self.name, "gate_act",
                                              self.attr("active_gate_type"), "sigmoid")
        w = self.weights[0]
        self.w_gate = w.w.reshape(-1)[: 2 * h * h].reshape(h, 2 * h)
        self.w_cand = w.w.reshape(-1)[2 * h * h:].reshape(h, h)
        if w.w_grad is not None:
            self.dw_gate = w.w_grad.reshape(-1)[: 2 * h * h].reshape(h, 2 * h)
            self.dw_cand = w.w_grad.reshape(-1)[2 * h * h:].reshape(h, h)

    def forward(self, pass_type: str) -> None:
        super().forward(pass_type)
        h = self.size
        n = self._check_widths(3 * h, h)
        x, h_prev = self.get_input_value(0), self.get_input_value(1)
        gates = self.scratch("gates", (n, 3 * h))  # z | r | c after activation
        gates[...] = x
        if self.bias is not None:
            gates += self.bias.w.reshape(1, -1)
        gates[:, : 2 * h] += h_prev @ self.w_gate
        self.gate(gates[:, : 2 * h], out=gates[:, : 2 * h])
        reset = self.scratch("reset_h", (n, h))
        np.multiply(gates[:, h: 2 * h], h_prev, out=reset)
        cand = gates[:, 2 * h:]
        cand += reset @ self.w_cand
        self.act(cand, out=cand)
        out = self.reserve_output(n, h)
        np.subtract(cand, h_prev, out=out)
        out *= gates[:, :h]
        out += h_prev

    def backward(self, callback=None) -> None:
        self.clip_error()
        h = self.size
        dh = self.output.grad
        h_prev = self.get_input_value(1)
        n = dh.shape[0]
        gates = self.scratch("gates", (n, 3 * h))
        z, r, cand = gates[:, :h], gates[:, h: 2 * h], gates[:, 2 * h:]
        dg = self.scratch("dgates", (n, 3 * h))
        dg[:, :h] = self.gate_grad(None, z, dh * (cand - h_prev))
        dg[:, 2 * h:] = self.act_grad(None, cand, dh * z)
        d_reset = dg[:, 2 * h:] @ self.w_cand.T
        dg[:, h: 2 * h] = self.gate_grad(None, r, d_reset * h_prev)
        w = self.weights[0]
        if w.w_grad is not None:
            self.dw_cand += self.scratch("reset_h", (n, h)).T @ dg[:, 2 * h:]
            self.dw_gate += h_prev.T @ dg[:, : 2 * h]
        dh_prev = self.get_input_grad(1)
        if dh_prev is not None:
            dh_prev += dh * (1.0 - z)
            dh_prev += d_reset * r
            dh_prev += dg[:, : 2 * h] @ self.w_gate.T
        dx = self.get_input_grad(0)
        if dx is not None:
            dx += dg
        if self.bias is not None and self.bias.w_grad is not None:
            col_sum(dg, self.bias.w_grad)
            self.bias.parameter.inc_update(callback)
        if w.w_grad is not None:
            w.parameter.inc_update(callback)


@register_layer("lstm_step")
class LstmStepLayer(_StepLayer):
    """One LSTM step with peepholes (see the module doc); attrs ``active_gate_type``
    (default sigmoid) and ``active_state_type`` (default tanh); secondary output ``state``."""

    @classmethod
    def infer_size(cls, config, inputs):
        size = inputs[1].size
        if config.size and config.size != size:
            raise ValueError(f"layer {config.name!r} (lstm_step): size {config.size} differs "
                             f"from the state width {size}")
        if inputs[0].size != 4 * size:
            raise ValueError(f"layer {config.name!r} (lstm_step): input {inputs[0].name!r} has "
                             f"width {inputs[0].size}, expected 4 * {size}")
        return size

    @classmethod
    def bias_dims(cls, config, inputs):
        return (1, 3 * config.size)

    def init(self, layer_map, parameter_map) -> None:
        super().init(layer_map, parameter_map)
        self.act, self.act_grad = _cell_act(self.name, "act", self.config.active_type, "tanh")
        self.gate, self.gate_grad = _cell_act(self.name, "gate_act",
                                              self.attr("active_gate_type"), "sigmoid")
        self.state_act, self.state_act_grad = _cell_act(
            self.name, "state_act", self.attr("active_state_type"), "tanh")
        self.state = Argument()
        self.extra_outputs = {"state": self.state}

    def _peepholes(self):
        h = self.size
        if self.bias is None:
            return None, None, None
        p = self.bias.w.reshape(-1)
        return p[:h], p[h: 2 * h], p[2 * h:]

    def forward(self, pass_type: str) -> None:
        super().forward(pass_type)
        h = self.size
        n = self._check_widths(4 * h, h)
        g, c_prev = self.get_input_value(0), self.get_input_value(1)
        p_i, p_f, p_o = self._peepholes()
        gates = self.scratch("gates", (n, 4 * h))  # a | i | f | o after activation
        gates[...] = g
        if p_i is not None:
            gates[:, h: 2 * h] += c_prev * p_i
            gates[:, 2 * h: 3 * h] += c_prev * p_f
        self.act(gates[:, :h], out=gates[:, :h])
        self.gate(gates[:, h: 3 * h], out=gates[:, h: 3 * h])
        a, i, f = gates[:, :h], gates[:, h: 2 * h], gates[:, 2 * h: 3 * h]
        c = self.scratch("state", (n, h))
        np.multiply(a, i, out=c)
        c += c_prev * f
        o = gates[:, 3 * h:]
        if p_o is not None:
            o += c * p_o
        self.gate(o, out=o)
        sc = self.scratch("state_act", (n, h))
        self.state_act(c, out=sc)
        out = self.reserve_output(n, h)
        np.multiply(o, sc, out=out)
        self.state.value = c
        self.state.seq_starts = self.output.seq_starts
        self.state.sub_seq_starts = self.output.sub_seq_starts
        if self.need_gradient:
            dc = self.scratch("state_grad", (n, h))
            dc[...] = 0
            self.state.grad = dc

    def backward(self, callback=None) -> None:
        self.clip_error()
        h = self.size
        dh = self.output.grad
        n = dh.shape[0]
        c_prev = self.get_input_value(1)
        p_i, p_f, p_o = self._peepholes()
        gates = self.scratch("gates", (n, 4 * h))
        a, i, f, o = (gates[:, k * h: (k + 1) * h] for k in range(4))
        c = self.state.value
        sc = self.scratch("state_act", (n, h))
        dg = self.scratch("dgates", (n, 4 * h))
        d_o = dg[:, 3 * h:]
        d_o[...] = self.gate_grad(None, o, dh * sc)
        dc = self.state.grad + self.state_act_grad(None, sc, dh * o)
        if p_o is not None:
            dc += d_o * p_o
        dg[:, :h] = self.act_grad(None, a, dc * i)
        dg[:, h: 2 * h] = self.gate_grad(None, i, dc * a)
        dg[:, 2 * h: 3 * h] = self.gate_grad(None, f, dc * c_prev)
        dc_prev = self.get_input_grad(1)
        if dc_prev is not None:
            dc_prev += dc * f
            if p_i is not None:
                dc_prev += dg[:, h: 2 * h] * p_i
                dc_prev += dg[:, 2 * h: 3 * h] * p_f
        dg_in = self.get_input_grad(0)
        if dg_in is not None:
            dg_in += dg
        if self.bias is not None and self.bias.w_grad is not None:
            db = self.bias.w_grad.reshape(-1)
            db[:h] += (dg[:, h: 2 * h] * c_prev).sum(axis=0)
            db[h: 2 * h] += (dg[:, 2 * h: 3 * h] * c_prev).sum(axis=0)
            db[2 * h:] += (d_o * c).sum(axis=0)
            self.bias.parameter.inc_update(callback)


@register_layer("get_output")
class GetOutputLayer(Layer):
    """``y`` = the secondary output ``arg_name`` of the input layer (e.g. lstm_step's
    ``'state'``); its gradient is added to that output's gradient."""

    min_inputs = max_inputs = 1

    @classmethod
    def infer_size(cls, config, inputs):
        if not config.attrs.get("arg_name"):
            raise ValueError(f"layer {config.name!r} (get_output): attr arg_name is missing")
        return config.size or inputs[0].size

    def _source(self) -> Argument:
        arg_name = self.attr("arg_name")
        extra = getattr(self.inputs[0], "extra_outputs", {})
        if arg_name not in extra:
            raise ValueError(f"layer {self.name!r} (get_output): layer {self.inputs[0].name!r} "
                             f"has no output named {arg_name!r}; it has {sorted(extra)}")
        return extra[arg_name]

    def forward(self, pass_type: str) -> None:
        super().forward(pass_type)
        src = self._source()
        out = self.output
        out.value, out.ids = src.value, src.ids
        out.seq_starts, out.sub_seq_starts = src.seq_starts, src.sub_seq_starts
        if src.value is not None and src.value.shape[1] != self.size:
            raise ValueError(f"layer {self.name!r} (get_output): output {self.attr('arg_name')!r}"
                             f" of {self.inputs[0].name!r} has width {src.value.shape[1]}, "
                             f"expected {self.size}")
        out.grad = None
        if self.need_gradient and src.grad is not None:
            grad = self.scratch("grad", src.value.shape)
            grad[...] = 0
            out.grad = grad

    def backward(self, callback=None) -> None:
        src = self._source()
        if self.output.grad is not None and src.grad is not None:
            src.grad += self.output.grad
