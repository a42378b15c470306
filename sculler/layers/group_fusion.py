"""Recurrent groups whose step is exactly a known cell, run as the whole-sequence layer.

``gru_group``/``simple_gru`` build a group whose step network is one ``gru_step`` reading the
in-link and the memory of its own output (booted with zeros): the maths of ``grumemory``
(``gated_recurrent``) over the in-link, with the same parameters (weight ``(H, 3H)`` split
flat as ``W_g`` then ``W_c``, bias ``(1, 3H)``). ``lstmemory_group`` builds ``mixed``
``<name>_input_recurrent`` = identity(in-link) + full_matrix(output memory) (gate bias
optional), ``lstm_step`` over it and the cell memory (peepholes as its bias) and
``get_output`` of the cell: the maths of ``lstmemory``, whose weight ``(H, 4H)`` is the
full_matrix's and whose 7H bias is ``[gate bias | peepholes]``, composed here from the two
parameters (a missing one is zeros and gets no gradient).

The whole-sequence layers run the batch step by step inside one kernel instead of one step
network (a dozen Python layers' calls) per time step. :func:`fused_cell` recognises those
step networks exactly from the group's config and builds the equivalent layer on the group's
own parameter proxies; anything else (another step layer, a boot layer, dropout, error
clipping, statics, a second out-link, a projection of the in-link inside the step) keeps the
general path.
"""

from __future__ import annotations

from sculler.backend import get_array_module
from sculler.core.layer import Layer
from sculler.core.model_config import InputConfig, LayerConfig, ModelConfig
from sculler.core.parameter import ParameterSet, Weight
from sculler.layers.recurrent import GatedRecurrentLayer, LstmLayer

_GRU_STEP_ATTRS = {"active_gate_type"}
_LSTM_STEP_ATTRS = {"active_gate_type", "active_state_type"}


def fused_cell(config: LayerConfig, model: ModelConfig, inputs: list[Layer],
               parameters: ParameterSet, dtype) -> Layer | None:
    """A ``gated_recurrent``/``lstmemory`` layer equal to the group ``config`` (step network
    ``model``, outer ``inputs``), bound to ``parameters`` (the group's proxies), or None when
    the step is not exactly one of the cells of the module doc."""
    a = config.attrs
    links, outs = a.get("in_links") or [], a["out_links"]
    memories = {m["link"]: m for m in a.get("memories") or []}
    if a.get("generator") or a.get("statics") or len(links) != 1 or len(outs) != 1:
        return None
    if any(m.get("boot") is not None or m.get("boot_bias") or m.get("boot_const_id") is not None
           for m in memories.values()):
        return None
    layers = {lc.name: lc for lc in model.layers}
    step = layers.get(outs[0]["layer"])
    if step is None or not _plain(step):
        return None
    source = inputs[links[0]["input"]]
    agent = links[0]["agent"]
    reverse = bool(a.get("reverse", False))
    if step.type == "gru_step" and len(layers) == 3 and len(memories) == 1:
        fused = _gru(config.name, step, memories, agent, source.name, reverse)
    elif step.type == "lstm_step" and len(layers) == 6 and len(memories) == 2:
        fused = _lstm(config.name, step, layers, memories, agent, source.name, reverse)
    else:
        return None
    if fused is None:
        return None
    fused.dtype = dtype
    fused.init({source.name: source}, parameters)
    return fused


def _plain(lc: LayerConfig, attrs: set[str] = frozenset()) -> bool:
    """No dropout, error clipping or other attr beyond ``attrs`` and the cells' own."""
    return (not lc.drop_rate and not set(lc.attrs) - attrs - _LSTM_STEP_ATTRS
            and not any(i.attrs and set(i.attrs) != {"proj"} for i in lc.inputs))


def _memory_of(memories: dict, link: str, size: int) -> str | None:
    m = memories.get(link)
    return m["agent"] if m is not None and int(m["size"]) == size else None


def _gru(name: str, step: LayerConfig, memories: dict, agent: str, source: str,
         reverse: bool) -> Layer | None:
    mem = _memory_of(memories, step.name, step.size)
    if (set(step.attrs) - _GRU_STEP_ATTRS or mem is None
            or [(i.input_layer_name, bool(i.input_parameter_name), i.attrs)
                for i in step.inputs] != [(agent, True, {}), (mem, False, {})]):
        return None
    return GatedRecurrentLayer(LayerConfig(
        name=f"{name}@fused", type="gated_recurrent", size=step.size,
        active_type=step.active_type or "tanh",
        inputs=[InputConfig(source, step.inputs[0].input_parameter_name)],
        bias_parameter_name=step.bias_parameter_name,
        attrs={"active_gate_type": step.attrs.get("active_gate_type") or "sigmoid",
               "reversed": reverse}))


def _lstm(name: str, step: LayerConfig, layers: dict, memories: dict, agent: str, source: str,
          reverse: bool) -> Layer | None:
    hs = step.size
    if len(step.inputs) != 2 or step.inputs[0].input_parameter_name or step.inputs[0].attrs:
        return None
    proj = layers.get(step.inputs[0].input_layer_name)
    states = [lc for lc in layers.values() if lc.type == "get_output"]
    if (proj is None or proj.type != "mixed" or not _plain(proj) or proj.attrs
            or proj.active_type not in ("", "linear") or proj.size != 4 * hs
            or len(states) != 1 or not _plain(states[0], {"arg_name"})):
        return None
    state = states[0]
    out_mem = _memory_of(memories, step.name, hs)
    state_mem = _memory_of(memories, state.name, hs)
    if (out_mem is None or state_mem is None or state.attrs.get("arg_name") != "state"
            or [i.input_layer_name for i in state.inputs] != [step.name]
            or state.active_type not in ("", "linear")
            or [(i.input_layer_name, i.input_parameter_name, i.attrs) for i in step.inputs[1:]]
            != [(state_mem, None, {})]
            or [(i.input_layer_name, bool(i.input_parameter_name), i.attrs) for i in proj.inputs]
            != [(agent, False, {"proj": "identity"}), (out_mem, True, {"proj": "full_matrix"})]):
        return None
    return _GroupLstm(LayerConfig(
        name=f"{name}@fused", type="lstmemory", size=hs, active_type=step.active_type or "tanh",
        inputs=[InputConfig(source, proj.inputs[1].input_parameter_name)],
        attrs={"active_gate_type": step.attrs.get("active_gate_type") or "sigmoid",
               "active_state_type": step.attrs.get("active_state_type") or "tanh",
               "reversed": reverse}), proj.bias_parameter_name, step.bias_parameter_name)


class _GroupLstm(LstmLayer):
    """``lstmemory`` whose 7H bias ``[gate bias | peepholes]`` lives in two parameters (either
    may be absent): composed before each forward, its gradient split back after backward."""

    def __init__(self, config: LayerConfig, gate_bias: str | None, peepholes: str | None):
        super().__init__(config)
        self.bias_parts = [(p, k) for p, k in ((gate_bias, 0), (peepholes, 4)) if p]

    def init(self, layer_map, parameter_map) -> None:
        super().init(layer_map, parameter_map)
        self.parts = [(Weight(parameter_map[p]), k) for p, k in self.bias_parts]
        if self.parts:
            self.bias = _ComposedBias(7 * self.size, self.parts[0][0].w)

    def forward(self, pass_type: str) -> None:
        if self.parts:
            self.bias.w[...] = 0
            for w, k in self.parts:
                self.bias.w[k * self.size:k * self.size + w.w.size] = w.w.reshape(-1)
        super().forward(pass_type)

    def backward(self, callback=None) -> None:
        if self.bias is not None:
            self.bias.w_grad[...] = 0
        super().backward(callback)
        for w, k in self.parts:
            if w.w_grad is not None:
                n = w.w_grad.size
                w.w_grad.reshape(-1)[...] += self.bias.w_grad[k * self.size:k * self.size + n]
                w.parameter.inc_update(callback)


class _ComposedBias:
    """The composed 7H bias of :class:`_GroupLstm`, shaped as the ``Weight`` that
    ``LstmLayer`` reads; its own ``inc_update`` does nothing (the parts are updated)."""

    def __init__(self, size: int, like):
        """``size`` values and gradients of ``like``'s dtype on its device."""
        xp = get_array_module(like)
        self.w = xp.zeros(size, dtype=like.dtype)
        self.w_grad = xp.zeros(size, dtype=like.dtype)
        self.parameter = self

    def inc_update(self, callback=None) -> None:
        """Nothing: :meth:`_GroupLstm.backward` updates the two parameters."""
