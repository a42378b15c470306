"""v2 wrappers (``paddle.v2.layer``) for the recurrent layers over whole sequences:
``lstmemory``, ``grumemory`` and ``recurrent``; re-exported by :mod:`sculler.layer`.

The input already holds the input projection (``W_x x_t``): 4H wide for ``lstmemory``, 3H for
``grumemory``, H for ``recurrent`` (``paddle.networks.simple_lstm`` / ``simple_gru2`` add the
mixed layer that computes it). Auto names are PaddlePaddle's (``__lstmemory_0__``,
``__gru_0__``, ``__recurrent_layer_0__``).

Example:
    >>> import sculler as paddle
    >>> words = paddle.layer.data(name="w", type=paddle.data_type.integer_value_sequence(50))
    >>> emb = paddle.layer.embedding(input=words, size=8)
    >>> proj = paddle.layer.fc(input=emb, size=16, act=paddle.activation.Linear(),
    ...                        bias_attr=False)
    >>> paddle.layer.lstmemory(input=proj).size
    4
"""

from __future__ import annotations

from typing import Any

from sculler import activation as A
from sculler.v2.layer_base import LayerOutput, as_inputs, make_layer

__all__ = ["lstmemory", "grumemory", "recurrent"]


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


def recurrent(input: LayerOutput, act: Any = None, bias_attr: Any = None,  # noqa: A002
              param_attr: Any = None, name: str | None = None, reverse: bool = False,
              layer_attr: Any = None) -> LayerOutput:
    """Plain RNN ``y_t = act(x_t + b + y_{t-1} W)`` over each sequence (engine type
    ``recurrent``); W is (H, H) with H the input width; act defaults to Tanh."""
    return make_layer("recurrent", as_inputs(input, "recurrent"), name=name,
                      name_prefix="recurrent_layer", act=act, default_act=A.Tanh,
                      param_attr=param_attr, bias_attr=bias_attr, layer_attr=layer_attr,
                      attrs={"reversed": bool(reverse)})
