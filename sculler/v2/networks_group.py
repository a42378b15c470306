"""Recurrent-group networks of the v2 API (``paddle.v2.networks``): LSTM/GRU units and groups
built from step layers, ``simple_gru`` and the attention blocks, with PaddlePaddle's names
and defaults (``trainer_config_helpers/networks.py``).

- ``lstmemory_unit`` (for use inside a group): ``<name>_input_recurrent`` = mixed(input +
  full_matrix(out_mem), no bias by default) -> ``lstm_step`` named ``name`` -> the cell
  ``get_output(name, 'state')`` named ``<name>_state`` closes the cell memory. Unlike
  ``lstmemory`` it has no gate bias unless ``input_proj_bias_attr`` asks for one.
- ``lstmemory_group``/``gru_group``: a ``recurrent_group`` named ``<name>_recurrent_group``
  over that unit; ``gru_unit``: ``memory(name, boot_layer=memory_boot)`` -> ``gru_step``.
- ``simple_gru``: mixed ``<name>_transform`` (3H, full_matrix(input)) -> ``gru_group``.
- ``simple_attention``: softmax over the source tokens of ``v . act(W s + encoded_proj)``,
  then the weighted sum of ``encoded_sequence``; ``dot_product_attention`` scores with the dot
  product of the expanded state and the encoded sequence.
"""

from __future__ import annotations

from typing import Any

from sculler import activation as A
from sculler import pooling as P
from sculler.core.expression import LayerOutput, auto_name, make_layer
from sculler.layers.dense_pair import scaling
from sculler.layers.mixed import full_matrix_projection, identity_projection, mixed
from sculler.layers.sequence import pooling
from sculler.layers.sequence_shape import expand
from sculler.v2.group_layers import get_output, gru_step, gru_step_naive, lstm_step, memory
from sculler.v2.group_layers import recurrent_group as _recurrent_group

__all__ = ["lstmemory_unit", "lstmemory_group", "gru_unit", "gru_group", "simple_gru",
           "simple_attention", "dot_product_attention"]


def lstmemory_unit(input: LayerOutput, out_memory: LayerOutput | None = None,  # noqa: A002
                   name: str | None = None, size: int | None = None, param_attr: Any = None,
                   act: Any = None, gate_act: Any = None, state_act: Any = None,
                   input_proj_bias_attr: Any = None, input_proj_layer_attr: Any = None,
                   lstm_bias_attr: Any = None, lstm_layer_attr: Any = None) -> LayerOutput:
    """One LSTM step inside a recurrent group; ``input`` is 4H wide (already ``x W_x``)."""
    name = name or auto_name("lstm_unit")
    if size is None:
        if input.size % 4:
            raise ValueError(f"lstmemory_unit {name!r}: input width {input.size} is not 4*size")
        size = input.size // 4
    out_mem = out_memory if out_memory is not None else memory(name=name, size=size)
    state_mem = memory(name=f"{name}_state", size=size)
    proj = mixed(name=f"{name}_input_recurrent", size=4 * size, act=A.Identity(),
                 bias_attr=input_proj_bias_attr if input_proj_bias_attr is not None else False,
                 layer_attr=input_proj_layer_attr,
                 input=[identity_projection(input),
                        full_matrix_projection(out_mem, param_attr=param_attr)])
    out = lstm_step(name=name, input=proj, state=state_mem, size=size, bias_attr=lstm_bias_attr,
                    act=act, gate_act=gate_act, state_act=state_act, layer_attr=lstm_layer_attr)
    get_output(name=f"{name}_state", input=out, arg_name="state")
    return out


def lstmemory_group(input: LayerOutput, size: int | None = None,  # noqa: A002
                    name: str | None = None, out_memory: LayerOutput | None = None,
                    reverse: bool = False, param_attr: Any = None, act: Any = None,
                    gate_act: Any = None, state_act: Any = None,
                    input_proj_bias_attr: Any = None, input_proj_layer_attr: Any = None,
                    lstm_bias_attr: Any = None, lstm_layer_attr: Any = None) -> LayerOutput:
    """``lstmemory`` as a recurrent group of :func:`lstmemory_unit` (named
    ``<name>_recurrent_group``); same maths except that the gate bias is off by default."""
    name = name or auto_name("lstm_group")

    def step(ipt: LayerOutput) -> LayerOutput:
        return lstmemory_unit(input=ipt, name=name, size=size, act=act, gate_act=gate_act,
                              state_act=state_act, out_memory=out_memory,
                              input_proj_bias_attr=input_proj_bias_attr,
                              input_proj_layer_attr=input_proj_layer_attr,
                              param_attr=param_attr, lstm_layer_attr=lstm_layer_attr,
                              lstm_bias_attr=lstm_bias_attr)

    return _recurrent_group(name=f"{name}_recurrent_group", step=step, reverse=reverse,
                            input=input)


def gru_unit(input: LayerOutput, memory_boot: LayerOutput | None = None,  # noqa: A002
             size: int | None = None, name: str | None = None, gru_bias_attr: Any = None,
             gru_param_attr: Any = None, act: Any = None, gate_act: Any = None,
             gru_layer_attr: Any = None, naive: bool = False) -> LayerOutput:
    """One GRU step inside a recurrent group: ``memory(name, boot_layer=memory_boot)`` ->
    ``gru_step`` (or ``gru_step_naive``) named ``name``; ``input`` is 3H wide."""
    if input.size % 3:
        raise ValueError(f"gru_unit: input width {input.size} is not 3*size")
    name = name or auto_name("gru_unit")
    size = size or input.size // 3
    out_mem = memory(name=name, size=size, boot_layer=memory_boot)
    step = gru_step_naive if naive else gru_step
    return step(name=name, input=input, output_mem=out_mem, size=size, bias_attr=gru_bias_attr,
                param_attr=gru_param_attr, act=act, gate_act=gate_act,
                layer_attr=gru_layer_attr)


def gru_group(input: LayerOutput, memory_boot: LayerOutput | None = None,  # noqa: A002
              size: int | None = None, name: str | None = None, reverse: bool = False,
              gru_bias_attr: Any = None, gru_param_attr: Any = None, act: Any = None,
              gate_act: Any = None, gru_layer_attr: Any = None,
              naive: bool = False) -> LayerOutput:
    """``grumemory`` as a recurrent group of :func:`gru_unit` (``<name>_recurrent_group``)."""
    name = name or auto_name("gru_group")

    def step(ipt: LayerOutput) -> LayerOutput:
        return gru_unit(input=ipt, memory_boot=memory_boot, name=name, size=size,
                        gru_bias_attr=gru_bias_attr, gru_param_attr=gru_param_attr, act=act,
                        gate_act=gate_act, gru_layer_attr=gru_layer_attr, naive=naive)

    return _recurrent_group(name=f"{name}_recurrent_group", step=step, reverse=reverse,
                            input=input)


def simple_gru(input: LayerOutput, size: int, name: str | None = None,  # noqa: A002
               reverse: bool = False, mixed_param_attr: Any = None,
               mixed_bias_param_attr: Any = None, mixed_layer_attr: Any = None,
               gru_bias_attr: Any = None, gru_param_attr: Any = None, act: Any = None,
               gate_act: Any = None, gru_layer_attr: Any = None,
               naive: bool = False) -> LayerOutput:
    """GRU over a sequence: mixed ``<name>_transform`` (3*size, full_matrix(input)) then
    :func:`gru_group`; the result is a width-``size`` sequence."""
    name = name or auto_name("simple_gru")
    transform = mixed(name=f"{name}_transform", size=3 * size,
                      bias_attr=mixed_bias_param_attr if mixed_bias_param_attr is not None
                      else False, layer_attr=mixed_layer_attr,
                      input=full_matrix_projection(input, param_attr=mixed_param_attr))
    return gru_group(name=name, size=size, input=transform, reverse=reverse,
                     gru_bias_attr=gru_bias_attr, gru_param_attr=gru_param_attr, act=act,
                     gate_act=gate_act, gru_layer_attr=gru_layer_attr, naive=naive)


def _attend(name: str, scores: LayerOutput, attended: LayerOutput,
            softmax_param_attr: Any) -> LayerOutput:
    weight = make_layer("fc", [scores], name=f"{name}_softmax", size=1,
                        act=A.SequenceSoftmax(), param_attr=softmax_param_attr, bias_attr=False)
    scaled = scaling(weight=weight, input=attended, name=f"{name}_scaling")
    return pooling(input=scaled, pooling_type=P.Sum(), name=f"{name}_pooling")


def simple_attention(encoded_sequence: LayerOutput, encoded_proj: LayerOutput,
                     decoder_state: LayerOutput, transform_param_attr: Any = None,
                     softmax_param_attr: Any = None, weight_act: Any = None,
                     name: str | None = None) -> LayerOutput:
    """Bahdanau attention: ``e_j = v . act(W s + p_j)`` over the source tokens j,
    ``a = sequence_softmax(e)``, context ``sum_j a_j h_j`` (``h`` = encoded_sequence, ``p`` =
    encoded_proj, ``s`` = decoder_state; act default Tanh). One row per sample."""
    if encoded_proj.size != decoder_state.size:
        raise ValueError(f"simple_attention: encoded_proj width {encoded_proj.size} must equal "
                         f"decoder_state width {decoder_state.size}")
    name = name or auto_name("simple_attention")
    size = encoded_proj.size
    transform = mixed(name=f"{name}_transform", size=size,
                      input=full_matrix_projection(decoder_state,
                                                   param_attr=transform_param_attr))
    expanded = expand(input=transform, expand_as=encoded_sequence, name=f"{name}_expand")
    combine = mixed(name=f"{name}_combine", size=size, act=weight_act or A.Tanh(),
                    input=[identity_projection(expanded), identity_projection(encoded_proj)])
    return _attend(name, combine, encoded_sequence, softmax_param_attr)


def dot_product_attention(encoded_sequence: LayerOutput, attended_sequence: LayerOutput,
                          transformed_state: LayerOutput, softmax_param_attr: Any = None,
                          name: str | None = None) -> LayerOutput:
    """``e_j = w * (s . h_j)`` (a learned 1x1 ``w``), ``a = sequence_softmax(e)``, context
    ``sum_j a_j g_j`` (``h`` = encoded_sequence, ``g`` = attended_sequence, ``s`` =
    transformed_state, as wide as ``h``)."""
    if transformed_state.size != encoded_sequence.size:
        raise ValueError(f"dot_product_attention: transformed_state width "
                         f"{transformed_state.size} must equal encoded_sequence width "
                         f"{encoded_sequence.size}")
    name = name or auto_name("dot_product_attention")
    expanded = expand(input=transformed_state, expand_as=encoded_sequence,
                      name=f"{name}_expand")
    scores = make_layer("dot_prod", [expanded, encoded_sequence], name=f"{name}_dot-product",
                        size=1)
    return _attend(name, scores, attended_sequence, softmax_param_attr)
