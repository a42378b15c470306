"""Recurrent groups whose step is exactly a known cell, run as the whole-sequence layer.

``gru_group``/``simple_gru`` build a group whose step network is one ``gru_step`` reading the
in-link and the memory of its own output (booted with zeros): the same maths as
``grumemory`` (``gated_recurrent``) over the in-link, with the same parameters (weight
``(H, 3H)`` split flat as ``W_g`` then ``W_c``, bias ``(1, 3H)``), which runs the sequence
batch step by step inside one kernel instead of one step network (a dozen Python layers'
calls) per time step. :func:`fused_cell` recognises that step network from the group's
config and builds the equivalent layer on the group's own parameter proxies; anything else
(an extra step layer, a boot layer, dropout, statics, a second out-link) keeps the general
path. ``lstmemory_group`` is not recognised: its step (a mixed projection with a recurrent
``full_matrix`` term, ``lstm_step`` and a ``get_output`` state memory) keeps its gate bias
and peepholes in two parameters where ``lstmemory`` has one.
"""

from __future__ import annotations

from sculler.core.layer import Layer
from sculler.core.model_config import InputConfig, LayerConfig, ModelConfig
from sculler.core.parameter import ParameterSet
from sculler.layers.recurrent import GatedRecurrentLayer

_GRU_STEP_ATTRS = {"active_gate_type"}


def fused_cell(config: LayerConfig, model: ModelConfig, inputs: list[Layer],
               parameters: ParameterSet, dtype) -> Layer | None:
    """A ``gated_recurrent`` layer equal to the group ``config`` (step network ``model``,
    outer ``inputs``), bound to ``parameters`` (the group's proxies), or None when the step
    is not exactly a ``gru_step`` over the in-link and its own zero-booted memory."""
    a = config.attrs
    links, memories, outs = a.get("in_links") or [], a.get("memories") or [], a["out_links"]
    if (a.get("generator") or a.get("statics") or len(links) != 1 or len(memories) != 1
            or len(outs) != 1 or len(model.layers) != 3):
        return None
    link, mem, out = links[0], memories[0], outs[0]
    if (mem.get("boot") is not None or mem.get("boot_bias") or mem.get("boot_const_id")
            is not None or mem["link"] != out["layer"]):
        return None
    step = model.layer(out["layer"])
    if (step.type != "gru_step" or step.drop_rate or set(step.attrs) - _GRU_STEP_ATTRS
            or int(mem["size"]) != step.size
            or [i.input_layer_name for i in step.inputs] != [link["agent"], mem["agent"]]
            or step.inputs[1].input_parameter_name or any(i.attrs for i in step.inputs)):
        return None
    source = inputs[link["input"]]
    fused = GatedRecurrentLayer(LayerConfig(
        name=f"{config.name}@fused", type="gated_recurrent", size=step.size,
        active_type=step.active_type or "tanh",
        inputs=[InputConfig(source.name, step.inputs[0].input_parameter_name)],
        bias_parameter_name=step.bias_parameter_name,
        attrs={"active_gate_type": step.attrs.get("active_gate_type") or "sigmoid",
               "reversed": bool(a.get("reverse", False))}))
    fused.dtype = dtype
    fused.init({source.name: source}, parameters)
    return fused
