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
activations are limited to sigmoid, tanh, relu and linear, as in PaddlePaddle (the kernels of
:mod:`sculler.math.rnn` that grumemory/lstmemory use, sigmoid clamped as PaddlePaddle's).
Neither layer applies its ``act`` to the output (``act`` is the candidate's activation).

``get_output`` (type ``get_output``, attr ``arg_name``) exposes a secondary output of its
input layer (``layer.extra_outputs[arg_name]``) as an ordinary layer output.
"""

from __future__ import annotations

from sculler.core.argument import Argument
from sculler.core.layer import Layer, register_layer
from sculler.layers.recurrent import GatedRecurrentLayer
from sculler.math import rnn
from sculler.math.blas import col_sum, gemm


def _cell_act(layer_name: str, what: str, name: str | None, default: str):
    """The cell activation ``name`` (``default`` when unset), one of sigmoid, tanh, relu and
    linear."""
    name = default if name in (None, "") else name
    try:
        return rnn.cell_activation(name, what)
    except ValueError as e:
        raise ValueError(f"layer {layer_name!r}: {e}") from None


class _StepLayer(Layer):
    """Common checks of the step cells: two inputs of the given widths."""

    min_inputs = max_inputs = 2
    default_bias = True
    uses_act_inside = True  # act is the candidate's activation, applied inside the cell

    def _check_widths(self, first: int, second: int) -> int:
        self.check_input_width(0, first)
        self.check_input_width(1, second)
        return self.check_same_batch()

    def _prev_grad(self, n: int):
        """dL/d(input 1), or a scratch sink when that input needs no gradient."""
        g = self.get_input_grad(1)
        if g is None:
            g = self.scratch("prev_grad_sink", (n, self.size))
        return g


@register_layer("gru_step")
class GruStepLayer(_StepLayer):
    """One GRU step (see the module doc; kernels of :mod:`sculler.math.rnn`, as grumemory);
    attrs ``active_gate_type`` (default sigmoid)."""

    @classmethod
    def infer_size(cls, config, inputs):
        size = config.size or inputs[0].size // 3
        if inputs[0].size != 3 * size or inputs[1].size != size:
            raise ValueError(f"layer {config.name!r} (gru_step): input {inputs[0].name!r} must "
                             f"be 3*size wide and output_mem {inputs[1].name!r} size wide; got "
                             f"widths {inputs[0].size} and {inputs[1].size} for size {size}")
        return size

    # grumemory's parameter shapes: weight (H, 3H) on input 0, bias (1, 3H)
    weight_dims = GatedRecurrentLayer.weight_dims
    bias_dims = GatedRecurrentLayer.bias_dims

    def init(self, layer_map, parameter_map) -> None:
        super().init(layer_map, parameter_map)
        self.acts = (_cell_act(self.name, "act", self.config.active_type, "tanh"),
                     _cell_act(self.name, "gate_act", self.attr("active_gate_type"), "sigmoid"))

    def _split(self, flat):
        """(W_g (H, 2H), W_c (H, H)) views of the flat (H, 3H) weight or its gradient (taken
        per call: the parameter's arrays may move, e.g. when a trainer packs them)."""
        h = self.size
        flat = flat.reshape(-1)
        return flat[: 2 * h * h].reshape(h, 2 * h), flat[2 * h * h:].reshape(h, h)

    def forward(self, pass_type: str) -> None:
        super().forward(pass_type)
        h = self.size
        n = self._check_widths(3 * h, h)
        gates = self.scratch("gates", (n, 3 * h))  # z | r | c after activation
        out = self.reserve_output(n, h)
        w_gate, w_cand = self._split(self.weights[0].w)
        rnn.gru_step_forward(gates, self.get_input_value(1), w_gate, w_cand,
                             self.scratch("reset_h", (n, h)), out, self.acts,
                             self.scratch("tmp", (2 * n * h,)),
                             source=(self.get_input_value(0),
                                     None if self.bias is None else self.bias.w.reshape(-1)))

    def backward(self, callback=None) -> None:
        self.clip_error()
        h = self.size
        dh = self.output.grad
        h_prev = self.get_input_value(1)
        n = dh.shape[0]
        dg = self.scratch("dgates", (n, 3 * h))
        w = self.weights[0]
        w_gate, w_cand = self._split(w.w)
        rnn.gru_step_backward(self.scratch("gates", (n, 3 * h)), h_prev, w_gate, w_cand, dh,
                              dg, self._prev_grad(n), self.acts,
                              self.scratch("tmp", (2 * n * h,)),
                              add_into=self.get_input_grad(0))
        if w.w_grad is not None:
            dw_gate, dw_cand = self._split(w.w_grad)
            gemm(self.scratch("reset_h", (n, h)).T, dg[:, 2 * h:], dw_cand, 1.0,
                 self.scratch("dw_cand", dw_cand.shape))
            gemm(h_prev.T, dg[:, : 2 * h], dw_gate, 1.0, self.scratch("dw_gate", dw_gate.shape))
        if self.bias is not None and self.bias.w_grad is not None:
            col_sum(dg, self.bias.w_grad)
            self.bias.parameter.inc_update(callback)
        if w.w_grad is not None:
            w.parameter.inc_update(callback)


@register_layer("lstm_step")
class LstmStepLayer(_StepLayer):
    """One LSTM step with peepholes (see the module doc; kernels of :mod:`sculler.math.rnn`,
    as lstmemory); attrs ``active_gate_type`` (default sigmoid) and ``active_state_type``
    (default tanh); secondary output ``state``."""

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
        self.acts = (
            _cell_act(self.name, "act", self.config.active_type, "tanh"),
            _cell_act(self.name, "gate_act", self.attr("active_gate_type"), "sigmoid"),
            _cell_act(self.name, "state_act", self.attr("active_state_type"), "tanh"))
        self.state = Argument()
        self.extra_outputs = {"state": self.state}

    @property
    def peepholes(self):
        """(3, H) ``[p_i; p_f; p_o]`` view of the bias, or None (taken per call)."""
        return None if self.bias is None else self.bias.w.reshape(3, self.size)

    def forward(self, pass_type: str) -> None:
        super().forward(pass_type)
        h = self.size
        n = self._check_widths(4 * h, h)
        gates = self.scratch("gates", (n, 4 * h))  # a | i | f | o after activation
        gates[...] = self.get_input_value(0)
        c = self.scratch("state", (n, h))
        out = self.reserve_output(n, h)
        rnn.lstm_step_forward(gates, self.get_input_value(1), self.peepholes, c,
                              self.scratch("state_act", (n, h)), out, self.acts,
                              self.scratch("tmp", (2 * n * h,)))
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
        dc = self.scratch("dc", (n, h))
        dc[...] = self.state.grad
        dg = self.scratch("dgates", (n, 4 * h))
        rnn.lstm_step_backward(self.scratch("gates", (n, 4 * h)), c_prev, self.peepholes,
                               self.scratch("state_act", (n, h)), dh, dc, dg,
                               self._prev_grad(n), self.acts, self.scratch("tmp", (2 * n * h,)))
        dg_in = self.get_input_grad(0)
        if dg_in is not None:
            dg_in += dg
        if self.bias is not None and self.bias.w_grad is not None:
            db = self.bias.w_grad.reshape(3, h)
            db[0] += (dg[:, h: 2 * h] * c_prev).sum(axis=0)
            db[1] += (dg[:, 2 * h: 3 * h] * c_prev).sum(axis=0)
            db[2] += (dg[:, 3 * h:] * self.state.value).sum(axis=0)
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
