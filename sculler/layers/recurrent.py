"""Recurrent layers over whole sequences: ``lstmemory``, ``gated_recurrent`` (grumemory) and
``recurrent``, with PaddlePaddle's parameter shapes and layouts.

Each layer reorders its packed input into time-major steps with
:class:`~sculler.math.seq2batch.SequenceBatch` (longest sequence first), runs one GEMM per step
over the sequences still active at that step (nothing for finished ones, no padding) and
scatters the result back, so output row ``r`` belongs to input row ``r`` also with ``reverse``.
The cell math is in :mod:`sculler.math.rnn`. Every sequence starts from a zero state.

The configured activation (``active_type``) is the cell's ``act``; the layer applies no other
activation afterwards (PaddlePaddle replaces the layer's own activation by identity), but
``drop_rate`` still drops output units.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from sculler import activation as A
from sculler import backend
from sculler.core.activation import get_activation
from sculler.core.expression import (
    LayerOutput,
    as_inputs,
    make_layer,
)
from sculler.core.faces import layer_function
from sculler.core.layer import Layer, register_layer
from sculler.core.parameter import Weight
from sculler.math import rnn
from sculler.math.blas import small_gemms
from sculler.math.segment import gather_rows
from sculler.math.seq2batch import SequenceBatch


class _SequenceRecurrent(Layer):
    """Shared plumbing: size from the input width, cell activations, the time-major plan and
    the reorder of values and gradients."""

    default_bias = True
    min_inputs = max_inputs = 1
    gates: ClassVar[int] = 1
    activation_attrs: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def infer_size(cls, config, inputs):
        width = inputs[0].size
        size, rest = divmod(width, cls.gates)
        if rest or size <= 0:
            raise ValueError(f"layer {config.name!r} ({config.type}): input {inputs[0].name!r} "
                             f"has width {width}, expected a positive multiple of {cls.gates} "
                             f"(the pre-projected gates, {cls.gates} x size)")
        if config.size and config.size != size:
            raise ValueError(f"layer {config.name!r} ({config.type}): size {config.size} does "
                             f"not match input {inputs[0].name!r} of width {width} "
                             f"(= {cls.gates} x {size}); leave size unset")
        for key in ("active_type",) + cls.activation_attrs:
            value = config.active_type if key == "active_type" else config.attrs.get(key)
            rnn.cell_activation(value, f"layer {config.name!r} ({config.type}) {key}")
        return size

    def __init__(self, config):
        super().__init__(config)
        self.act = rnn.cell_activation(config.active_type)
        self.activation = get_activation("linear")  # act runs inside the cell
        self.reverse = bool(self.attr("reversed", False))
        self.plan: SequenceBatch | None = None
        # the batch's gather rows (on the input's device): time-major rows ("batch"), packed
        # rows ("seq"), each row's previous step ("prev"), and the gate-major orders
        self.rows: dict[str, Any] = {}

    def _plan(self, width: int) -> tuple[np.ndarray, SequenceBatch]:
        arg = self.get_input(0)
        if arg.seq_starts is None or arg.value is None or arg.is_sparse:
            raise ValueError(f"layer {self.name!r} ({self.type_name}): input 0 "
                             f"({self.inputs[0].name!r}) must be a dense sequence, got "
                             f"{arg.describe()}")
        self.check_input_width(0, width)
        plan = SequenceBatch(arg.seq_starts, reverse=self.reverse)
        self.plan = plan
        seq_rows = np.empty_like(plan.batch_rows)
        seq_rows[plan.batch_rows] = np.arange(plan.batch_rows.size)
        count, rows = width // self.size, plan.batch_rows.size
        index = [plan.batch_rows, seq_rows, rnn.previous_rows(plan),
                 (plan.batch_rows[None, :] * count + np.arange(count)[:, None]).reshape(-1),
                 (np.arange(count)[None, :] * rows + seq_rows[:, None]).reshape(-1)]
        if backend.is_gpu_array(arg.value):  # the batch's gathers index on the device: one copy
            steps = [np.asarray(plan.step_starts, np.int64), np.asarray(plan.batch_sizes, np.int64)]
            *index, starts, sizes = backend.to_gpu_together(index + steps)
            for host, device in zip(steps, (starts, sizes)):  # what the recurrence kernels read
                backend.remember_on_gpu(host, device)
        self.rows = dict(zip(("batch", "seq", "prev", "gate_major", "packed"), index))
        return arg.value, plan

    def _to_batch(self, key: str, x):
        """Packed (rows, w) -> a time-major scratch copy."""
        return gather_rows(x, self.rows["batch"], self.scratch(key, x.shape))

    def _emit(self, y) -> None:
        """Time-major output (rows, H) -> this layer's packed output, then dropout."""
        out = self.reserve_output(y.shape[0], self.size)
        gather_rows(y, self.rows["seq"], out)
        self.forward_activation()

    def _output_grad(self):
        """dL/dy in time-major order (after dropout's mask)."""
        self.backward_activation()
        return self._to_batch("dh", self.output.grad)

    def _gate_major(self, x, count: int):
        """Packed (rows, count * H) gates -> gate-major time-major scratch (count, rows, H), so
        that every per-step gate block is contiguous (strided column slices make each
        elementwise op several times slower)."""
        rows, hs = x.shape[0], self.size
        gates = self.scratch("gates", (count, rows, hs))
        gather_rows(x.reshape(-1, hs), self.rows["gate_major"], gates.reshape(-1, hs))
        return gates

    def _gate_input_grad(self, dgates) -> None:
        """``dx += dgates`` from gate-major time-major (count, rows, H) back to packed rows."""
        in_grad = self.get_input_grad(0)
        if in_grad is None:
            return
        count, rows, hs = dgates.shape
        in_grad += gather_rows(dgates.reshape(-1, hs), self.rows["packed"],
                               self.scratch("dx", (count * rows, hs))).reshape(rows, -1)

    def _tmp(self, width: int, extra: int = 0):
        """Flat step scratch: ``width`` values per row of the largest step, plus ``extra``."""
        n = int(self.plan.batch_sizes[0]) if self.plan.num_steps else 0
        return self.scratch("tmp", (max(n * width, 1) + extra,))

    def _prev_scratch(self):
        return self.scratch("gathered", (self.rows["prev"].size, self.size))


@register_layer("lstmemory")
class LstmLayer(_SequenceRecurrent):
    """LSTM over sequences whose rows are the pre-projected gates ``W_x x_t`` (width 4H).

    ``g = x_t + b[:4H] + h_{t-1} W``, split ``[c~ | i | f | o]``;
    ``i = gate_act(g_i + c_{t-1} p_i)``, ``f = gate_act(g_f + c_{t-1} p_f)``,
    ``c_t = act(g_c) i + c_{t-1} f``, ``o = gate_act(g_o + c_t p_o)``,
    ``h_t = o state_act(c_t)``.

    Parameters (PaddlePaddle's): weight ``_name.w0`` of dims (H, H, 4), read as the row-major
    (H, 4H) ``W``; bias ``_name.wbias`` (1, 7H) = ``[b_c, b_i, b_f, b_o, p_i, p_f, p_o]``.
    Attrs: ``active_gate_type`` (default sigmoid), ``active_state_type`` (default tanh),
    ``reversed``. Without a bias (PaddlePaddle crashes there; Sculler's choice) there is no gate
    bias and no peephole.

    Shapes: input (T, 4H) sequence -> output (T, H) sequence with the input's positions.
    """

    gates = 4
    activation_attrs = ("active_gate_type", "active_state_type")

    @classmethod
    def weight_dims(cls, config, inputs):
        return {0: (config.size, config.size, 4)}

    @classmethod
    def bias_dims(cls, config, inputs):
        return (1, 7 * config.size)

    def __init__(self, config):
        super().__init__(config)
        self.acts = (self.act, rnn.cell_activation(self.attr("active_gate_type", "sigmoid")),
                     rnn.cell_activation(self.attr("active_state_type", "tanh")))

    def init(self, layer_map, parameter_map) -> None:
        super().init(layer_map, parameter_map)
        hs = self.size
        self.weights[0] = Weight(self.weights[0].parameter, (hs, 4 * hs))
        if self.bias is not None:
            self.bias = Weight(self.bias.parameter, (7 * hs,))

    def forward(self, pass_type: str) -> None:
        super().forward(pass_type)
        hs = self.size
        x, plan = self._plan(4 * hs)
        rows = x.shape[0]
        gates = self._gate_major(x, 4)
        peepholes = None
        if self.bias is not None:
            gates += self.bias.w[:4 * hs].reshape(4, 1, hs)
            peepholes = self.bias.w[4 * hs:].reshape(3, hs)
        c, state, h = (self.scratch(k, (rows, hs)) for k in ("c", "state", "h"))
        rnn.lstm_forward(plan, gates, self.weights[0].w, peepholes, c, state, h, self.acts,
                         self._tmp(4 * hs, 4 * hs * hs))
        self._emit(h)

    def backward(self, callback=None) -> None:
        hs = self.size
        dh = self._output_grad()
        rows = dh.shape[0]
        gates = self._bufs["gates"][:4 * rows * hs].reshape(4, rows, hs)
        c, state, h = (self._bufs[k][:rows * hs].reshape(rows, hs) for k in ("c", "state", "h"))
        peepholes = None if self.bias is None else self.bias.w[4 * hs:].reshape(3, hs)
        dgates = self.scratch("dgates", (4, rows, hs))
        rnn.lstm_backward(self.plan, gates, self.weights[0].w, peepholes, c, state, dh,
                          self.scratch("dc", (rows, hs)), dgates, self.acts,
                          self._tmp(4 * hs, 4 * hs * hs))
        self._gate_input_grad(dgates)
        weight = self.weights[0]
        dbias = None if self.bias is None else self.bias.w_grad
        rnn.lstm_param_grads(self.plan, dgates, h, c, self.rows["prev"], weight.w_grad, dbias,
                             self._prev_scratch(), self.scratch("ptmp", (max(rows, 1) * hs,)),
                             self.scratch("dw", (4, hs, hs)))
        for w in (weight, self.bias):
            if w is not None and w.w_grad is not None:
                w.parameter.inc_update(callback)


@register_layer("gated_recurrent")
class GatedRecurrentLayer(_SequenceRecurrent):
    """GRU over sequences whose rows are the pre-projected ``[x_z | x_r | x_c]`` (width 3H).

    ``[z|r] = gate_act(x_zr + b_zr + h_{t-1} W_g)``,
    ``c~ = act(x_c + b_c + (r h_{t-1}) W_c)``, ``h_t = (1 - z) h_{t-1} + z c~``.

    Parameters (PaddlePaddle's): weight ``_name.w0`` of dims (H, 3H), a flat buffer whose first
    2H^2 values are the row-major (H, 2H) ``W_g = [U_z | U_r]`` and last H^2 the (H, H)
    ``W_c`` (not column slices of one H x 3H matrix); bias (1, 3H) ``[b_z | b_r | b_c]``.
    Attrs: ``active_gate_type`` (default sigmoid), ``reversed``. Without a bias (unverified in
    PaddlePaddle, whose engine assumes one) the gates simply get no bias term.

    Shapes: input (T, 3H) sequence -> output (T, H) sequence with the input's positions.
    """

    gates = 3
    activation_attrs = ("active_gate_type",)

    @classmethod
    def weight_dims(cls, config, inputs):
        return {0: (config.size, 3 * config.size)}

    @classmethod
    def bias_dims(cls, config, inputs):
        return (1, 3 * config.size)

    def __init__(self, config):
        super().__init__(config)
        self.acts = (self.act, rnn.cell_activation(self.attr("active_gate_type", "sigmoid")))

    def init(self, layer_map, parameter_map) -> None:
        super().init(layer_map, parameter_map)
        self._bind_views()

    def _bind_views(self) -> None:
        """The (H, 2H) and (H, H) views of the flat weight and its gradient, taken from the
        parameter's current arrays (a trainer's ParameterSet.pack moves them)."""
        hs, param = self.size, self.weights[0].parameter
        split = 2 * hs * hs
        flat = param.value.reshape(-1)
        self.w_gate, self.w_cand = flat[:split].reshape(hs, 2 * hs), flat[split:].reshape(hs, hs)
        self.dw_gate = self.dw_cand = None
        if param.grad is not None:
            flat = param.grad.reshape(-1)
            self.dw_gate = flat[:split].reshape(hs, 2 * hs)
            self.dw_cand = flat[split:].reshape(hs, hs)

    def forward(self, pass_type: str) -> None:
        super().forward(pass_type)
        hs = self.size
        x, plan = self._plan(3 * hs)
        rows = x.shape[0]
        self._bind_views()
        gates = self._gate_major(x, 3)
        if self.bias is not None:
            gates += self.bias.w.reshape(3, 1, hs)
        h, reset_h = self.scratch("h", (rows, hs)), self.scratch("reset_h", (rows, hs))
        rnn.gru_forward(plan, gates, self.w_gate, self.w_cand, reset_h, h, self.acts,
                        self._tmp(2 * hs, 3 * hs * hs))
        self._emit(h)

    def backward(self, callback=None) -> None:
        hs = self.size
        dh = self._output_grad()
        rows = dh.shape[0]
        gates = self._bufs["gates"][:3 * rows * hs].reshape(3, rows, hs)
        h, reset_h = (self._bufs[k][:rows * hs].reshape(rows, hs) for k in ("h", "reset_h"))
        dgates = self.scratch("dgates", (3, rows, hs))
        rnn.gru_backward(self.plan, gates, h, self.w_gate, self.w_cand, dh, dgates, self.acts,
                         self._tmp(2 * hs, 3 * hs * hs))
        self._gate_input_grad(dgates)
        if self.dw_gate is not None and self.rows["prev"].size:
            first = rows - self.rows["prev"].size
            gathered = self._prev_scratch()
            gather_rows(h, self.rows["prev"], gathered)
            dw = self.scratch("dw", (3, hs, hs))
            with small_gemms(gathered.size * hs):
                np.matmul(gathered.T, dgates[:2, first:], out=dw[:2])
                np.matmul(reset_h[first:].T, dgates[2, first:], out=dw[2])
            self.dw_gate.reshape(hs, 2, hs)[...] += dw[:2].transpose(1, 0, 2)
            self.dw_cand += dw[2]
        if self.dw_gate is not None:
            self.weights[0].parameter.inc_update(callback)
        if self.bias is not None and self.bias.w_grad is not None:
            self.bias.w_grad.reshape(-1)[...] += dgates.sum(axis=1).reshape(-1)
            self.bias.parameter.inc_update(callback)


@register_layer("recurrent")
class RecurrentLayer(_SequenceRecurrent):
    """Plain RNN: ``y_t = act(x_t + b + y_{t-1} W)`` (``y_{t+1}`` with ``reversed``).

    Parameters: weight ``_name.w0`` (H, H); bias (1, H). Shapes: (T, H) sequence -> (T, H).
    """

    @classmethod
    def weight_dims(cls, config, inputs):
        return {0: (config.size, config.size)}

    def forward(self, pass_type: str) -> None:
        super().forward(pass_type)
        x, plan = self._plan(self.size)
        y = self._to_batch("y", x)
        if self.bias is not None:
            y += self.bias.w.reshape(1, -1)
        rnn.rnn_forward(plan, y, self.weights[0].w, self.act, self._tmp(self.size, self.size ** 2))
        self._emit(y)

    def backward(self, callback=None) -> None:
        dy = self._output_grad()
        y = self._bufs["y"][:dy.size].reshape(dy.shape)
        weight = self.weights[0]
        rnn.rnn_backward(self.plan, y, weight.w, dy, self.act,
                         self._tmp(self.size, self.size ** 2))
        self._gate_input_grad(dy[None])
        if weight.w_grad is not None:
            rnn.accumulate_prev_product(y, self.rows["prev"], dy, weight.w_grad,
                                        self._prev_scratch(),
                                        self.scratch("dw", weight.w.shape))
            weight.parameter.inc_update(callback)
        if self.bias is not None and self.bias.w_grad is not None:
            self.bias.w_grad.reshape(-1)[...] += dy.sum(axis=0)
            self.bias.parameter.inc_update(callback)


def _act_name(fn: str, key: str, act: Any, default: type[A.BaseActivation]) -> str:
    act = default() if act is None else act
    if not isinstance(act, A.BaseActivation):
        raise TypeError(f"{fn}: {key} must be an activation instance such as "
                        f"paddle.activation.Sigmoid(), got {act!r}")
    return act.name


def _deprecated_size(fn: str, size: int | None, input: LayerOutput, gates: int) -> int:  # noqa: A002
    if size is not None and int(size) * gates != input.size:
        raise ValueError(f"{fn}: size={size} does not match input {input.name!r} of width "
                         f"{input.size} (size is deprecated: it is always input width / {gates})")
    return 0


@layer_function(v1="lstmemory", types=("lstmemory",))
def lstmemory(input: LayerOutput, name: str | None = None, size: int | None = None,  # noqa: A002
              reverse: bool = False, act: Any = None, gate_act: Any = None,
              state_act: Any = None, bias_attr: Any = None, param_attr: Any = None,
              layer_attr: Any = None) -> LayerOutput:
    """LSTM over each sequence of a 4H-wide pre-projected input (engine type ``lstmemory``).

    ``c_t = act(g_c) i + c_{t-1} f``, ``h_t = o state_act(c_t)`` with peephole gates
    ``i, f, o`` (see :class:`sculler.layers.recurrent.LstmLayer`). Weight (H, H, 4) read as
    (H, 4H); bias (1, 7H) = 4H gate biases + 3H peepholes.

    Args:
        input: a sequence of width 4H (gates ``[c~ | i | f | o]``).
        size: deprecated; must equal input width / 4 when given.
        reverse: run each sequence from its last step to its first.
        act, gate_act, state_act: defaults Tanh, Sigmoid, Tanh (Sigmoid, Tanh, Relu, Linear
            only).
        bias_attr: ``attr.Param`` of the 7H bias; False drops the gate biases and peepholes.
    """
    inputs = as_inputs(input, "lstmemory")
    _deprecated_size("lstmemory", size, inputs[0], 4)
    attrs = {"active_gate_type": _act_name("lstmemory", "gate_act", gate_act, A.Sigmoid),
             "active_state_type": _act_name("lstmemory", "state_act", state_act, A.Tanh),
             "reversed": bool(reverse)}
    return make_layer("lstmemory", inputs, name=name, name_prefix="lstmemory", act=act,
                      default_act=A.Tanh, param_attr=param_attr, bias_attr=bias_attr,
                      layer_attr=layer_attr, attrs=attrs)


@layer_function(v1="grumemory", types=("gated_recurrent",), prefix="gru")
def grumemory(input: LayerOutput, size: int | None = None, name: str | None = None,  # noqa: A002
              reverse: bool = False, act: Any = None, gate_act: Any = None,
              bias_attr: Any = None, param_attr: Any = None,
              layer_attr: Any = None) -> LayerOutput:
    """GRU over each sequence of a 3H-wide pre-projected input (engine type
    ``gated_recurrent``).

    ``h_t = (1 - z) h_{t-1} + z act(x_c + (r h_{t-1}) W_c)`` (see
    :class:`sculler.layers.recurrent.GatedRecurrentLayer`). Weight (H, 3H): a flat buffer of
    the (H, 2H) gate matrix then the (H, H) candidate matrix; bias (1, 3H).

    Args:
        input: a sequence of width 3H (``[x_z | x_r | x_c]``).
        size: deprecated; must equal input width / 3 when given.
        act, gate_act: defaults Tanh (candidate) and Sigmoid (z, r).
    """
    inputs = as_inputs(input, "grumemory")
    _deprecated_size("grumemory", size, inputs[0], 3)
    attrs = {"active_gate_type": _act_name("grumemory", "gate_act", gate_act, A.Sigmoid),
             "reversed": bool(reverse)}
    return make_layer("gated_recurrent", inputs, name=name, name_prefix="gru", act=act,
                      default_act=A.Tanh, param_attr=param_attr, bias_attr=bias_attr,
                      layer_attr=layer_attr, attrs=attrs)


@layer_function(v1="recurrent_layer", types=("recurrent",))
def recurrent(input: LayerOutput, act: Any = None, bias_attr: Any = None,  # noqa: A002
              param_attr: Any = None, name: str | None = None, reverse: bool = False,
              layer_attr: Any = None) -> LayerOutput:
    """Plain RNN ``y_t = act(x_t + b + y_{t-1} W)`` over each sequence (engine type
    ``recurrent``); W is (H, H) with H the input width; act defaults to Tanh."""
    return make_layer("recurrent", as_inputs(input, "recurrent"), name=name,
                      name_prefix="recurrent_layer", act=act, default_act=A.Tanh,
                      param_attr=param_attr, bias_attr=bias_attr, layer_attr=layer_attr,
                      attrs={"reversed": bool(reverse)})
