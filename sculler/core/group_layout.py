"""Recurrent groups in PaddlePaddle's ModelConfig layout, and back to the engine's group layers.

The v2 and v1 front ends describe a group as one engine layer (``recurrent_layer_group`` or
``beam_search``) that carries its step sub-network in ``attrs`` (see
:mod:`sculler.layers.recurrent_group`); outer layers read its out-links through
``get_output`` layers. PaddlePaddle's ModelConfig lays the same group out flat, and that is
what Sculler's ModelConfig holds (so names, parameters and tars match PaddlePaddle's):

- ``layers``: where the group stands, a ``recurrent_layer_group`` layer named after the group
  (no inputs, size 0), then the group's layers: a ``scatter_agent`` ``X@G`` per in-link X, an
  ``agent`` per memory (``N+delay1@G``, or the memory's own name) and per static input
  (``__memory_k__@G``), the step layers ``name@G``; after them, in the outer model, a
  ``gather_agent`` named O per out-link O (a ``data`` layer for a generator);
- ``sub_models``: ``root`` (the outer layers) and one :class:`SubModelConfig` per group with
  its ``layer_names``, ``in_links`` (X -> ``X@G``), ``out_links`` (``O@G`` -> O),
  ``memories`` (a static input is a memory that reads itself, booted from the outer layer)
  and, for beam search, a ``generator`` whose step ends in ``maxid``
  ``__beam_search_predict__@G`` (read by the memory ``__beam_search_predict__+delay1@G``) and
  ``eos_id`` ``__G_eos_layer__@G``.

:func:`flatten_groups` writes that layout from the front ends' models; :func:`nest_groups`
reads it (also from a model PaddlePaddle wrote) back into engine group layers, which
:class:`~sculler.core.network.Network` does before building layers.
"""

from __future__ import annotations

import copy

from sculler.core.model_config import (
    GeneratorConfig,
    InputConfig,
    LayerConfig,
    LinkConfig,
    MemoryConfig,
    ModelConfig,
    ParameterConfig,
    SubModelConfig,
)

GROUP = "recurrent_layer_group"
BEAM = "beam_search"
PREDICT = "__beam_search_predict__"


def generated_agent_name(group: str) -> str:
    """The memory agent holding the ids generated at the previous step (PaddlePaddle's)."""
    return f"{PREDICT}+delay1@{group}"


def eos_layer_name(group: str) -> str:
    """The generator's eos check: ``__<name>_eos_layer__@<group>``, where a group made inside
    another group's step is ``<name>@<outer>``."""
    return f"__{group.split('@', 1)[0]}_eos_layer__@{group}"


def has_groups(model: ModelConfig) -> bool:
    return any(sm.is_recurrent_layer_group for sm in model.sub_models)


def _is_engine_group(lc: LayerConfig) -> bool:
    return lc.type in (GROUP, BEAM) and "step_model" in lc.attrs


# ---------------------------------------------------------------- engine -> PaddlePaddle


def flatten_groups(model: ModelConfig) -> ModelConfig:
    """``model`` in PaddlePaddle's layout: every engine group layer laid out flat (see the
    module doc) and ``sub_models`` = ``root`` (always, as PaddlePaddle writes it) and one
    sub-model per group."""
    if model.sub_models:
        return model
    flat = copy.copy(model)
    if any(_is_engine_group(lc) for lc in model.layers):
        flat.layers, root_names, subs = _flatten_scope(model.layers)
        flat.type = "recurrent_nn"
    else:
        root_names, subs = [lc.name for lc in model.layers], []
    root = SubModelConfig(name="root", layer_names=root_names,
                          input_layer_names=list(model.input_layer_names),
                          output_layer_names=list(model.output_layer_names),
                          evaluator_names=[e.name for e in model.evaluators])
    flat.sub_models = [root, *subs]
    return flat


def _flatten_scope(scope: list[LayerConfig]):
    """(flat layers, names of this scope's own layers, sub-models) of the layers ``scope``."""
    groups = {lc.name for lc in scope if _is_engine_group(lc) and lc.type == GROUP}
    gathers: dict[str, list[LayerConfig]] = {}
    for lc in scope:
        if lc.type == "get_output" and lc.inputs and lc.inputs[0].input_layer_name in groups:
            gathers.setdefault(lc.inputs[0].input_layer_name, []).append(lc)
    layers: list[LayerConfig] = []
    own: list[str] = []
    subs: list[SubModelConfig] = []
    for lc in scope:
        if lc.type == "get_output" and lc.inputs and lc.inputs[0].input_layer_name in groups:
            continue
        if not _is_engine_group(lc):
            layers.append(lc)
            own.append(lc.name)
            continue
        names = {g.attrs["arg_name"]: g.name for g in gathers.get(lc.name, [])}
        group_layers, sub, inner_subs = _flatten_group(lc, names)
        layers.extend(group_layers)
        own.append(sub.name if lc.type == BEAM else lc.name)
        subs.append(sub)
        subs.extend(inner_subs)
        if lc.type == BEAM:
            outs = [LayerConfig(name=lc.name, type="data", size=lc.attrs["vocab_size"])]
        else:
            sizes = {x.name: x.size for x in group_layers}
            outs = [LayerConfig(name=link.link_name, type="gather_agent",
                                size=sizes[link.layer_name]) for link in sub.out_links]
        layers.extend(outs)
        own.extend(o.name for o in outs)
    return layers, own, subs


def _flatten_group(lc: LayerConfig, gather_names: dict[str, str]):
    """(the group's flat layers, its sub-model, the sub-models of groups inside its step);
    ``gather_names`` maps an out-link to the name of the outer layer that reads it."""
    a = lc.attrs
    step = ModelConfig.from_dict(a["step_model"])
    beam = lc.type == BEAM
    group = a["group"] if beam else lc.name  # inside a step: <group>@<outer>
    outer = [ic.input_layer_name for ic in lc.inputs]
    inner_layers, inner_own, inner_subs = _flatten_scope(step.layers)
    by_name = {x.name: x for x in inner_layers}
    scatter = [link["agent"] for link in a.get("in_links", [])]
    head = [LayerConfig(name=group, type=GROUP, size=0)]
    for name in scatter:
        head.append(LayerConfig(name=name, type="scatter_agent", size=by_name[name].size))
    body = []
    for x in inner_layers:
        if x.name in scatter:
            continue
        if x.type == "agent":
            x = LayerConfig(name=x.name, type="agent", size=x.size)
        body.append(x)
    memories = [MemoryConfig(layer_name=s["agent"], link_name=s["agent"],
                             boot_layer_name=outer[s["input"]]) for s in a.get("statics", [])]
    generator = None
    if beam:
        g = a["generator"]
        probs = g["prob_layer"]
        predict = f"{PREDICT}@{group}"
        body.append(LayerConfig(name=predict, type="maxid", size=by_name[probs].size,
                                inputs=[InputConfig(probs)],
                                attrs={"beam_size": int(g["beam_size"])}))
        body.append(LayerConfig(name=eos_layer_name(group), type="eos_id", size=2,
                                inputs=[InputConfig(predict)], attrs={"eos_id": int(g["eos_id"])}))
        memories.append(MemoryConfig(layer_name=predict, link_name=g["agent"],
                                     boot_with_const_id=int(g["bos_id"])))
        generator = GeneratorConfig(max_num_frames=int(g["max_length"]),
                                    eos_layer_name=eos_layer_name(group),
                                    num_results_per_sample=int(g["num_results"]),
                                    beam_size=int(g["beam_size"]))
        out_links = [LinkConfig(layer_name=predict, link_name=lc.name)]
    else:
        out_links = [LinkConfig(layer_name=o["layer"],
                                link_name=gather_names.get(o["name"], o["name"]))
                     for o in a["out_links"]]
    for m in a.get("memories", []):
        mc = MemoryConfig(layer_name=m["link"], link_name=m["agent"])
        if m.get("boot") is not None:
            mc.boot_layer_name = outer[m["boot"]]
        elif m.get("boot_bias"):
            mc.boot_bias_parameter_name = m["boot_bias"]
            mc.boot_bias_active_type = m.get("boot_bias_act") or "linear"
        elif m.get("boot_const_id") is not None:
            mc.boot_with_const_id = int(m["boot_const_id"])
        memories.append(mc)
    sub = SubModelConfig(
        name=group, layer_names=[x.name for x in head[1:]] + [n for n in inner_own
                                                               if n not in scatter],
        is_recurrent_layer_group=True, reversed=bool(a.get("reverse", False)),
        memories=memories,
        in_links=[LinkConfig(layer_name=outer[link["input"]], link_name=link["agent"])
                  for link in a.get("in_links", [])],
        out_links=out_links, generator=generator, target_inlinkid=a.get("target_inlink"))
    if beam:
        sub.layer_names += [f"{PREDICT}@{group}", eos_layer_name(group)]
    return head + body, sub, inner_subs


# ---------------------------------------------------------------- PaddlePaddle -> engine


def nest_groups(model: ModelConfig) -> ModelConfig:
    """``model`` (PaddlePaddle's layout) with each recurrent group folded back into one engine
    group layer (``beam_search`` for a generator) and each gather agent into a ``get_output``
    of it, ready for :class:`~sculler.core.network.Network`."""
    if not has_groups(model):
        return model
    subs = {sm.name: sm for sm in model.sub_models if sm.is_recurrent_layer_group}
    layers = {lc.name: lc for lc in model.layers}
    params = {pc.name: pc for pc in model.parameters}
    inside = {n for sm in subs.values() for n in sm.layer_names}
    root = [lc.name for lc in model.layers if lc.name not in inside]
    nested = copy.copy(model)
    nested.layers = _nest_scope(root, layers, subs, params)
    nested.sub_models = []
    return nested


def _group_of(lc: LayerConfig, subs: dict[str, SubModelConfig]) -> SubModelConfig | None:
    if lc.type != GROUP or "step_model" in lc.attrs:
        return None
    sm = subs.get(lc.name)
    if sm is None:
        raise ValueError(f"recurrent_layer_group layer {lc.name!r} has no sub-model; the model "
                         f"lists sub-models {sorted(subs)}")
    return sm


def _nest_scope(names: list[str], layers: dict[str, LayerConfig],
                subs: dict[str, SubModelConfig], params: dict[str, ParameterConfig]):
    out_links = {link.link_name: sm for sm in subs.values() for link in sm.out_links}
    result = []
    for name in names:
        lc = layers[name]
        sm = _group_of(lc, subs)
        if sm is not None:
            if sm.generator is None:
                result.append(_nest_group(lc.name, sm, layers, subs, params))
            continue
        if name in out_links and lc.type in ("gather_agent", "data"):
            sm = out_links[name]
            if sm.generator is not None:
                result.append(_nest_generator(name, sm, layers, subs, params))
            else:
                result.append(LayerConfig(name=name, type="get_output", size=lc.size,
                                          inputs=[InputConfig(sm.name)],
                                          attrs={"arg_name": name}))
            continue
        result.append(copy.deepcopy(lc))
    return result


def _step(sm: SubModelConfig, layers, subs, params, outputs: list[str], drop=()):
    """The step ModelConfig of ``sm`` (agents marked with their role)."""
    names = [n for n in sm.layer_names if n not in drop]
    inner = _nest_scope(names, layers, subs, params)
    statics = {m.link_name for m in sm.memories if m.layer_name == m.link_name}
    links = {link.link_name for link in sm.in_links}
    for lc in inner:
        if lc.type in ("scatter_agent", "agent"):
            role = "in_link" if lc.name in links else "static" if lc.name in statics else "memory"
            lc.type, lc.attrs = "agent", {"role": role}
    used: list[str] = []
    for lc in inner:
        used += [ic.input_parameter_name for ic in lc.inputs if ic.input_parameter_name]
        used += [lc.bias_parameter_name] if lc.bias_parameter_name else []
        if "step_model" in lc.attrs:
            used += [p["name"] for p in lc.attrs["step_model"]["parameters"]]
    used += [m.boot_bias_parameter_name for m in sm.memories if m.boot_bias_parameter_name]
    missing = [p for p in used if p not in params]
    if missing:
        raise ValueError(f"recurrent group {sm.name!r}: its layers use parameters {missing}, "
                         "which the model does not define")
    pnames = list(dict.fromkeys(used))
    return ModelConfig(layers=inner, parameters=[copy.deepcopy(params[p]) for p in pnames],
                       output_layer_names=outputs)


def _outer_inputs(sm: SubModelConfig):
    """(outer layer names the group reads, index of each) in link, static, boot order."""
    outer: list[str] = []

    def index(name: str) -> int:
        if name not in outer:
            outer.append(name)
        return outer.index(name)

    return outer, index


def _memory_specs(sm: SubModelConfig, layers, index, skip=()):
    statics, memories = [], []
    for m in sm.memories:
        if m.link_name in skip:
            continue
        if m.layer_name == m.link_name:
            if not m.boot_layer_name:
                raise ValueError(f"recurrent group {sm.name!r}: memory {m.link_name!r} reads "
                                 "itself but has no boot layer")
            statics.append({"input": index(m.boot_layer_name), "agent": m.link_name})
            continue
        if m.layer_name not in layers:
            raise ValueError(f"recurrent group {sm.name!r}: memory {m.link_name!r} reads layer "
                             f"{m.layer_name!r}, which the model does not define")
        memories.append({
            "agent": m.link_name, "link": m.layer_name, "size": layers[m.link_name].size,
            "boot": index(m.boot_layer_name) if m.boot_layer_name else None,
            "boot_bias": m.boot_bias_parameter_name,
            "boot_bias_act": m.boot_bias_active_type or "linear",
            "boot_const_id": m.boot_with_const_id})
    return statics, memories


def _nest_group(name: str, sm: SubModelConfig, layers, subs, params) -> LayerConfig:
    outer, index = _outer_inputs(sm)
    in_links = [{"input": index(link.layer_name), "agent": link.link_name}
                for link in sm.in_links]
    statics, memories = _memory_specs(sm, layers, index)
    outs = [link.layer_name for link in sm.out_links]
    step = _step(sm, layers, subs, params, outs + [m["link"] for m in memories])
    return LayerConfig(
        name=name, type=GROUP, inputs=[InputConfig(n) for n in outer],
        size=layers[outs[0]].size if outs else 0,
        attrs={"step_model": step.to_dict(), "in_links": in_links, "statics": statics,
               "memories": memories,
               "out_links": [{"layer": link.layer_name, "name": link.link_name}
                             for link in sm.out_links],
               "reverse": bool(sm.reversed), "target_inlink": sm.target_inlinkid})


def _nest_generator(name: str, sm: SubModelConfig, layers, subs, params) -> LayerConfig:
    """A generator group: out-link 0 is the ``maxid`` of the next-word probabilities, a
    memory booted with the bos id reads it, the generator names the ``eos_id`` layer."""
    gen = sm.generator
    predict = layers[sm.out_links[0].layer_name]
    if predict.type != "maxid" or len(predict.inputs) != 1:
        raise ValueError(f"generator group {sm.name!r}: out-link 0 {predict.name!r} must be a "
                         f"maxid layer over the next-word probabilities, got {predict.type!r}")
    if len(sm.out_links) > 1:
        raise NotImplementedError(f"generator group {sm.name!r}: out-links besides the "
                                  "generated ids are not supported")
    reads = [m for m in sm.memories if m.layer_name == predict.name]
    if len(reads) != 1 or reads[0].boot_with_const_id is None:
        raise ValueError(f"generator group {sm.name!r}: needs one memory of {predict.name!r} "
                         "booted with the bos id (boot_with_const_id)")
    eos = layers.get(gen.eos_layer_name)
    if eos is None or "eos_id" not in eos.attrs:
        raise ValueError(f"generator group {sm.name!r}: eos layer {gen.eos_layer_name!r} is "
                         "missing or has no eos_id")
    outer, index = _outer_inputs(sm)
    statics, memories = _memory_specs(sm, layers, index, skip={reads[0].link_name})
    probs = predict.inputs[0].input_layer_name
    step = _step(sm, layers, subs, params, [probs] + [m["link"] for m in memories],
                 drop={predict.name, eos.name})
    return LayerConfig(
        name=name, type=BEAM, size=int(gen.num_results_per_sample),
        inputs=[InputConfig(n) for n in outer],
        attrs={"step_model": step.to_dict(), "in_links": [], "statics": statics,
               "memories": memories, "group": sm.name, "vocab_size": predict.size,
               "out_links": [{"layer": probs, "name": name}],
               "generator": {"agent": reads[0].link_name, "prob_layer": probs,
                             "bos_id": int(reads[0].boot_with_const_id),
                             "eos_id": int(eos.attrs["eos_id"]),
                             "beam_size": int(gen.beam_size),
                             "max_length": int(gen.max_num_frames),
                             "num_results": int(gen.num_results_per_sample)}})
