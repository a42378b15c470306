"""Recurrent network blocks of the v2 API (``paddle.v2.networks``): ``simple_lstm``,
``bidirectional_lstm``, ``simple_gru2``, ``bidirectional_gru``.

Each helper strings layers together as PaddlePaddle's ``trainer_config_helpers/networks.py``
does, with the same arguments and layer names: ``simple_lstm(name="l")`` builds the mixed
layer ``lstm_transform_l`` (4H, identity, no bias) and the lstmemory ``l``; unnamed ones are
``__lstm_<n>__``, ``__simple_gru2_<n>__``, ``__bidirectional_lstm_<n>__``, ...

Example:
    >>> import sculler as paddle
    >>> words = paddle.layer.data(name="w", type=paddle.data_type.integer_value_sequence(50))
    >>> emb = paddle.layer.embedding(input=words, size=8)
    >>> bi = paddle.networks.bidirectional_lstm(input=emb, size=6)
    >>> bi.name, bi.size
    ('__bidirectional_lstm_0__', 12)
"""

from __future__ import annotations

from typing import Any

from sculler import activation as A
from sculler import layer as L
from sculler.core.expression import LayerOutput, auto_name

__all__ = ["simple_lstm", "bidirectional_lstm", "simple_gru2", "bidirectional_gru"]


def simple_lstm(input: LayerOutput, size: int, name: str | None = None,  # noqa: A002
                reverse: bool = False, mat_param_attr: Any = None, bias_param_attr: Any = None,
                inner_param_attr: Any = None, act: Any = None, gate_act: Any = None,
                state_act: Any = None, mixed_layer_attr: Any = None,
                lstm_cell_attr: Any = None) -> LayerOutput:
    """``lstmemory(mixed(full_matrix_projection(input)))``: the 4H input projection (mixed
    ``lstm_transform_<name>``, identity, no bias) then an LSTM of ``size`` named ``name``.

    Args:
        mat_param_attr: the projection's weight; bias_param_attr: the LSTM's 7H bias;
        inner_param_attr: the LSTM's recurrent weight; act/gate_act/state_act: the cell's.
    Returns a width-``size`` sequence.
    """
    name = name or auto_name("lstm")
    proj = L.mixed(size=size * 4, name=f"lstm_transform_{name}", act=A.Identity(),
                   bias_attr=False, layer_attr=mixed_layer_attr,
                   input=[L.full_matrix_projection(input, param_attr=mat_param_attr)])
    return L.lstmemory(input=proj, name=name, reverse=reverse, bias_attr=bias_param_attr,
                       param_attr=inner_param_attr, act=act, gate_act=gate_act,
                       state_act=state_act, layer_attr=lstm_cell_attr)


def simple_gru2(input: LayerOutput, size: int, name: str | None = None,  # noqa: A002
                reverse: bool = False, mixed_param_attr: Any = None,
                mixed_bias_attr: Any = None, gru_param_attr: Any = None,
                gru_bias_attr: Any = None, act: Any = None, gate_act: Any = None,
                mixed_layer_attr: Any = None, gru_cell_attr: Any = None) -> LayerOutput:
    """``grumemory(mixed(full_matrix_projection(input)))``: the 3H input projection (mixed
    ``<name>_transform``, linear, bias only if ``mixed_bias_attr`` asks) then a GRU of
    ``size`` named ``name``. Returns a width-``size`` sequence."""
    name = name or auto_name("simple_gru2")
    bias = False if mixed_bias_attr is None else mixed_bias_attr
    proj = L.mixed(size=size * 3, name=f"{name}_transform", bias_attr=bias,
                   layer_attr=mixed_layer_attr,
                   input=[L.full_matrix_projection(input, param_attr=mixed_param_attr)])
    return L.grumemory(input=proj, name=name, reverse=reverse, bias_attr=gru_bias_attr,
                       param_attr=gru_param_attr, act=act, gate_act=gate_act,
                       layer_attr=gru_cell_attr)


def _bidirectional(fw: LayerOutput, bw: LayerOutput, name: str, return_seq: bool,
                   last_seq_attr: Any, first_seq_attr: Any, concat_attr: Any,
                   concat_act: Any) -> LayerOutput:
    if return_seq:
        return L.concat(input=[fw, bw], name=name, layer_attr=concat_attr, act=concat_act)
    fw_last = L.last_seq(input=fw, name=f"{name}_fw_last", layer_attr=last_seq_attr)
    bw_last = L.first_seq(input=bw, name=f"{name}_bw_last", layer_attr=first_seq_attr)
    return L.concat(input=[fw_last, bw_last], name=name, layer_attr=concat_attr, act=concat_act)


def _split(kwargs: dict[str, Any], prefix: str) -> dict[str, Any]:
    return {k[len(prefix):]: v for k, v in kwargs.items() if k.startswith(prefix)}


def bidirectional_lstm(input: LayerOutput, size: int, name: str | None = None,  # noqa: A002
                       return_seq: bool = False, last_seq_attr: Any = None,
                       first_seq_attr: Any = None, concat_attr: Any = None,
                       concat_act: Any = None, **directional: Any) -> LayerOutput:
    """A forward ``simple_lstm`` ``<name>_fw`` and a reversed one ``<name>_bw`` over ``input``.

    ``return_seq=False``: concat of ``last_seq(fw)`` (``<name>_fw_last``) and ``first_seq(bw)``
    (``<name>_bw_last``), one 2H vector per sequence; True: the two sequences side by side.
    ``fwd_*``/``bwd_*`` keywords (``fwd_mat_param_attr``, ``bwd_act``, ...) go to the simple_lstm
    of that direction, without the prefix.
    """
    name = name or auto_name("bidirectional_lstm")
    fw = simple_lstm(input=input, size=size, name=f"{name}_fw",
                     **_directional("bidirectional_lstm", directional, "fwd_", _LSTM_KEYS))
    bw = simple_lstm(input=input, size=size, name=f"{name}_bw", reverse=True,
                     **_directional("bidirectional_lstm", directional, "bwd_", _LSTM_KEYS))
    return _bidirectional(fw, bw, name, return_seq, last_seq_attr, first_seq_attr, concat_attr,
                          concat_act)


def bidirectional_gru(input: LayerOutput, size: int, name: str | None = None,  # noqa: A002
                      return_seq: bool = False, last_seq_attr: Any = None,
                      first_seq_attr: Any = None, concat_attr: Any = None,
                      concat_act: Any = None, **directional: Any) -> LayerOutput:
    """:func:`bidirectional_lstm` with ``simple_gru2`` (``<name>_fw``, ``<name>_bw``);
    ``fwd_*``/``bwd_*`` keywords (``fwd_mixed_param_attr``, ``bwd_gru_bias_attr``, ...) go to
    the simple_gru2 of that direction."""
    name = name or auto_name("bidirectional_gru")
    fw = simple_gru2(input=input, size=size, name=f"{name}_fw",
                     **_directional("bidirectional_gru", directional, "fwd_", _GRU_KEYS))
    bw = simple_gru2(input=input, size=size, name=f"{name}_bw", reverse=True,
                     **_directional("bidirectional_gru", directional, "bwd_", _GRU_KEYS))
    return _bidirectional(fw, bw, name, return_seq, last_seq_attr, first_seq_attr, concat_attr,
                          concat_act)


_LSTM_KEYS = ("mat_param_attr", "bias_param_attr", "inner_param_attr", "act", "gate_act",
              "state_act", "mixed_layer_attr", "lstm_cell_attr")
_GRU_KEYS = ("mixed_param_attr", "mixed_bias_attr", "gru_param_attr", "gru_bias_attr", "act",
             "gate_act", "mixed_layer_attr", "gru_cell_attr")


def _directional(fn: str, kwargs: dict[str, Any], prefix: str,
                 keys: tuple[str, ...]) -> dict[str, Any]:
    """The ``fwd_*``/``bwd_*`` keywords of one direction; TypeError for unknown keywords."""
    unknown = [k for k in kwargs if not (k[:4] in ("fwd_", "bwd_") and k[4:] in keys)]
    if unknown:
        raise TypeError(f"{fn}() got unexpected keyword arguments {unknown}; per-direction "
                        f"arguments are fwd_/bwd_ + one of {list(keys)}")
    return _split(kwargs, prefix)
