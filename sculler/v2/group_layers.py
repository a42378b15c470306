"""v2 wrappers of recurrent groups (``paddle.v2.layer.recurrent_group``, ``memory``,
``StaticInput``, ``SubsequenceInput``, ``get_output``) and of the step layers (``gru_step``,
``gru_step_naive``, ``lstm_step``); re-exported by :mod:`sculler.layer`.

``recurrent_group(step, input)`` calls ``step`` once with one agent per input (in input
order); the layers it creates form the step sub-model, named ``<name>@<group>`` as in
PaddlePaddle (so their parameters are ``_<name>@<group>.w0``; a ``ParamAttr(name=...)`` shares
one with layers outside). ``memory(name=...)`` inside the step reads layer ``name`` of the
previous step. The group returns one layer per layer ``step`` returns, named like it without
the ``@<group>`` suffix. A group made inside another group's step is named
``<group>@<outer>`` and suffixes its own step layers with that (PaddlePaddle's nesting). The
model lays the group out as PaddlePaddle does (:mod:`sculler.core.group_layout`).

Example:
    >>> import sculler as paddle
    >>> x = paddle.layer.data(name="x", type=paddle.data_type.dense_vector_sequence(3))
    >>> def step(x_t):
    ...     h_prev = paddle.layer.memory(name="h", size=4)
    ...     return paddle.layer.fc(input=[x_t, h_prev], size=4, name="h")
    >>> h = paddle.layer.recurrent_group(step=step, input=x, name="rnn")
    >>> h.name, h.size
    ('h', 4)
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Callable
from typing import Any

from sculler import activation as A
from sculler.attr import ParameterAttribute
from sculler.core.builder import ModelBuilder, make_parameter
from sculler.core.expression import (
    LayerOutput,
    as_inputs,
    auto_name,
    make_layer,
    record_layers,
)
from sculler.core.group_layout import PREDICT
from sculler.core.model_config import InputConfig, LayerConfig

__all__ = [
    "recurrent_group", "memory", "StaticInput", "SubsequenceInput", "get_output", "gru_step",
    "gru_step_naive", "lstm_step", "MemoryOutput", "GeneratedInput", "beam_search",
]

class StaticInput:
    """An input of ``recurrent_group`` that every step sees whole: the sample's row, or its
    whole sequence (e.g. the encoder states for attention). ``is_seq`` and ``size`` are
    deprecated in PaddlePaddle; ``size``, if given, must equal the input's width."""

    def __init__(self, input: LayerOutput, is_seq: bool = False,  # noqa: A002
                 size: int | None = None):
        as_inputs(input, "StaticInput")
        if size is not None and size != input.size:
            raise ValueError(f"StaticInput({input.name!r}): size {size} differs from the "
                             f"input's width {input.size}")
        self.input = input
        self.is_seq = is_seq


def SubsequenceInput(input: LayerOutput) -> LayerOutput:  # noqa: N802,A002
    """PaddlePaddle v0.11's marker for a nested in-link: returns ``input`` unchanged (the
    group sees from the data that the input is nested and steps over its sub-sequences)."""
    return input


class MemoryOutput(LayerOutput):
    """A memory agent: layer ``link``'s output at the previous step (``set_input`` names
    the layer when ``memory`` was given ``memory_name`` instead of ``name``)."""

    boot_layer: LayerOutput | None = None
    boot_bias: Any = None

    def set_input(self, input: LayerOutput) -> None:  # noqa: A002
        as_inputs(input, "memory.set_input")
        if self.config.attrs.get("link"):
            raise ValueError(f"memory {self.name!r} already reads layer "
                             f"{self.config.attrs['link']!r}")
        if input.size != self.size:
            raise ValueError(f"memory {self.name!r} of size {self.size} cannot read layer "
                             f"{input.name!r} of size {input.size}")
        self.config.attrs["link"] = input.name


def _agent(name: str, size: int, role: str, cls: type = LayerOutput) -> LayerOutput:
    return cls(LayerConfig(name=name, type="agent", size=int(size), attrs={"role": role}), [])


def memory(name: str | None, size: int, memory_name: str | None = None,
           is_seq: bool = False, boot_layer: LayerOutput | None = None,
           boot_bias: Any = None, boot_bias_active_type: Any = None,
           boot_with_const_id: int | None = None) -> MemoryOutput:
    """The output of the step layer called ``name`` at the previous step (width ``size``).

    At the first step it is ``boot_layer``'s row for the sample (its whole sequence when
    the boot layer is a sequence: a sequence-valued memory), ``act(b)`` for a learned
    ``boot_bias`` b (``attr.Param`` or True; ``boot_bias_active_type`` default Linear), all
    ids ``boot_with_const_id``, or zeros. ``is_seq`` is ignored, as in PaddlePaddle v0.11.

    The agent is named ``<name>+delay1`` (``<name>+delay1@<group>`` in the model), as in
    PaddlePaddle; with ``name=None`` it is ``memory_name`` (default ``__memory_<k>__``, a
    counter every call without ``memory_name`` advances) and ``set_input`` names the layer.
    """
    boots = [boot_layer is not None, boot_bias not in (None, False),
             boot_with_const_id is not None]
    if sum(boots) > 1:
        raise ValueError(f"memory {name or memory_name!r}: give at most one of boot_layer, "
                         "boot_bias and boot_with_const_id")
    if boot_layer is not None:
        as_inputs(boot_layer, "memory boot_layer")
        if boot_layer.size != size:
            raise ValueError(f"memory {name!r}: boot_layer {boot_layer.name!r} has width "
                             f"{boot_layer.size}, expected {size}")
    act = boot_bias_active_type or A.Linear()
    if not isinstance(act, A.BaseActivation):
        raise TypeError(f"memory {name!r}: boot_bias_active_type must be an activation "
                        f"instance, got {act!r}")
    auto = memory_name if memory_name is not None else auto_name("memory")
    mem = _agent(auto if name is None else f"{name}+delay1", size, "memory", MemoryOutput)
    mem.config.attrs.update(link=name, boot_bias_act=act.name,
                            boot_const_id=None if boot_with_const_id is None
                            else int(boot_with_const_id))
    mem.boot_layer = boot_layer
    mem.boot_bias = boot_bias if boot_bias not in (None, False) else None
    return mem


_building: list[str] = []  # full names of the groups whose step function is running


@contextlib.contextmanager
def _step_scope(group: str):
    """Inside a step function, layers are named ``<name>@<group>``; a group made inside
    another group's step is ``<group>@<outer>`` (PaddlePaddle's nested naming), and so is
    the suffix of its own step layers."""
    _building.append(group)
    try:
        yield
    finally:
        _building.pop()


def _scoped(group: str) -> str:
    return _suffix(group, _building[-1]) if _building else group


def _suffix(name: str, group: str) -> str:
    return f"{name}@{group}"


def _base(name: str) -> str:
    return name.split("@", 1)[0]


def _reachable(roots: list[LayerOutput], inner: dict[int, LayerOutput],
               group: str) -> list[LayerOutput]:
    """Inner layers reachable from ``roots``, parents first; an outer parent is an error."""
    seen: set[int] = set()
    order: list[LayerOutput] = []
    stack: list[tuple[LayerOutput, int]] = [(r, 0) for r in reversed(roots)]
    while stack:
        node, k = stack.pop()
        if k == 0:
            if id(node) in seen:
                continue
            if id(node) not in inner:
                raise ValueError(
                    f"recurrent group {group!r}: the step reads layer {node.name!r}, which was "
                    "made outside the step; pass it in `input` (as StaticInput for a value "
                    "that is the same at every step)")
            seen.add(id(node))
        if k < len(node.parents):
            stack.append((node, k + 1))
            stack.append((node.parents[k], 0))
        else:
            order.append(node)
    return order


class _StepBuilder:
    """Turns the layers a step function created into the group's ``step_model``."""

    def __init__(self, group: str):
        self.group = group
        self.outer: list[LayerOutput] = []

    def outer_index(self, layer: LayerOutput) -> int:
        for i, o in enumerate(self.outer):
            if o is layer:
                return i
        self.outer.append(layer)
        return len(self.outer) - 1

    def build(self, created: list[LayerOutput], outs: list[LayerOutput],
              agents: list[LayerOutput]):
        group = self.group
        inner: dict[int, LayerOutput] = {}
        by_name: dict[str, LayerOutput] = {}
        for node in created:
            if node.name not in by_name:  # a finished `with mixed()` block records twice
                by_name[node.name] = node
                inner[id(node)] = node
        memories = [n for n in by_name.values() if isinstance(n, MemoryOutput)
                    and not n.config.attrs.get("generated")]
        roots = list(outs) + list(agents)
        for m in memories:
            link = m.config.attrs.get("link")
            if not link or link not in by_name:
                raise ValueError(f"recurrent group {group!r}: memory {m.name!r} reads layer "
                                 f"{link!r}, which the step does not define")
            if by_name[link].size != m.size:
                raise ValueError(f"recurrent group {group!r}: memory {m.name!r} has size "
                                 f"{m.size}, layer {link!r} has size {by_name[link].size}")
            roots.append(by_name[link])
        nodes = _reachable(roots, inner, group)
        kept = {id(n) for n in nodes}  # a print probe reads kept layers and nothing reads it
        nodes += [n for n in by_name.values() if n.layer_type == "print" and id(n) not in kept
                  and all(id(p) in kept for p in n.parents)]
        nodes.sort(key=lambda n: n.order)  # creation order, as PaddlePaddle lists them
        b = ModelBuilder()
        for node in nodes:
            if node.initializers or node.evaluators:
                raise NotImplementedError(f"recurrent group {group!r}: layer {node.name!r} "
                                          "inside a step has an initializer or evaluator")
            lc = copy.deepcopy(node.config)
            lc.name = _suffix(lc.name, group)
            for ic in lc.inputs:
                ic.input_layer_name = _suffix(ic.input_layer_name, group)
            if lc.type == "agent" and lc.attrs.get("link"):
                lc.attrs["link"] = _suffix(lc.attrs["link"], group)
            b.add_layer(lc, node.weight_attrs, node.bias_attr)
        link_names = [_suffix(m.config.attrs["link"], group) for m in memories]
        model = b.build([_suffix(o.name, group) for o in outs] + link_names,
                        input_layer_names=[])
        used = {n.name for n in nodes}
        mem_specs = []
        for m in memories:
            if m.name not in used:
                continue
            spec = {"agent": _suffix(m.name, group), "link": _suffix(m.config.attrs["link"], group),
                    "size": m.size, "boot": None, "boot_bias": None,
                    "boot_bias_act": m.config.attrs["boot_bias_act"],
                    "boot_const_id": m.config.attrs["boot_const_id"]}
            if m.boot_layer is not None:
                spec["boot"] = self.outer_index(m.boot_layer)
            if m.boot_bias is not None:
                attrs = (m.boot_bias.to_weight_attrs() if isinstance(m.boot_bias,
                                                                     ParameterAttribute)
                         else {})
                pname = attrs.pop("name", None) or f"_{spec['agent']}.wbias"
                model.parameters.append(make_parameter(
                    pname, (1, m.size), {"initial_std": 0.0, **attrs}))
                spec["boot_bias"] = pname
            mem_specs.append(spec)
        return model, mem_specs


def recurrent_group(step: Callable[..., Any], input: Any, reverse: bool = False,  # noqa: A002
                    name: str | None = None, targetInlink: Any = None) -> Any:  # noqa: N803
    """Run ``step`` once per time step of the sequence inputs (see the module doc).

    ``input``: layers (sequences: one row per step; nested sequences: one sub-sequence per
    step) and :class:`StaticInput` s, passed to ``step`` in this order; any other value (a
    size, a flag) is passed to ``step`` unchanged, as in PaddlePaddle. ``reverse`` runs each
    sequence from its end (outputs stay aligned with the inputs). ``targetInlink``: the
    in-link (a layer of ``input``) whose sequence layout the outputs take (default the first).
    Returns the layer (or list of layers) ``step`` returns, assembled over the steps.
    """
    group = name or auto_name("recurrent_group")
    items = list(input) if isinstance(input, (list, tuple)) else [input]
    if not items:
        raise ValueError(f"recurrent group {group!r}: needs at least one input")
    scope = _scoped(group)
    sb = _StepBuilder(scope)
    args, agents, in_links, statics = [], [], [], []
    with record_layers() as created, _step_scope(scope):
        for item in items:
            if isinstance(item, StaticInput):
                agent = _agent(auto_name("memory"), item.input.size, "static")
                statics.append((item.input, agent))
            elif isinstance(item, LayerOutput):
                agent = _agent(item.name, item.size, "in_link")
                in_links.append((item, agent))
            else:  # passed to the step function unchanged, as PaddlePaddle does
                args.append(item)
                continue
            agents.append(agent)
            args.append(agent)
        result = step(*args)
    outs = as_inputs(result, f"recurrent group {group!r} step result")
    if not in_links:
        raise ValueError(f"recurrent group {group!r}: at least one input needs to be a sequence "
                         "or a nested sequence (a layer, not StaticInput)")
    names = [a.name for _, a in in_links]
    if len(set(names)) != len(names):
        raise ValueError(f"recurrent group {group!r}: in-links {names} must be different layers")
    model, mem_specs = sb.build(created, outs, agents)
    link_specs = [{"input": sb.outer_index(src), "agent": _suffix(a.name, scope)}
                  for src, a in in_links]
    static_specs = [{"input": sb.outer_index(src), "agent": _suffix(a.name, scope)}
                    for src, a in statics]
    target = None
    if targetInlink is not None:
        srcs = [src for src, _ in in_links]
        hits = [k for k, s in enumerate(srcs) if s is targetInlink]
        if not hits:
            raise ValueError(f"recurrent group {group!r}: targetInlink {targetInlink!r} is not "
                             "one of its sequence inputs")
        target = hits[0]
    out_specs = [{"layer": _suffix(o.name, scope), "name": o.name} for o in outs]
    config = LayerConfig(
        name=group, type="recurrent_layer_group",
        inputs=[InputConfig(o.name) for o in sb.outer],
        attrs={"step_model": model.to_dict(), "in_links": link_specs, "statics": static_specs,
               "memories": mem_specs, "out_links": out_specs, "reverse": bool(reverse),
               "target_inlink": target})
    config.size = outs[0].size
    node = LayerOutput(config, list(sb.outer))
    gathered = [LayerOutput(LayerConfig(name=o.name, type="get_output", size=o.size,
                                        inputs=[InputConfig(group)],
                                        attrs={"arg_name": o.name}), [node]) for o in outs]
    return gathered[0] if len(gathered) == 1 else gathered


class GeneratedInput:
    """The previously generated word inside a ``beam_search`` step: the step receives
    ``embedding(<ids generated at t-1, bos at t=0>, size=embedding_size,
    param_attr=Param(name=embedding_name))``, sharing the table with the training-time
    target embedding of that name; ``size`` is the vocabulary size."""

    def __init__(self, size: int, embedding_name: str, embedding_size: int):
        if size <= 0 or embedding_size <= 0:
            raise ValueError(f"GeneratedInput: size {size} and embedding_size {embedding_size} "
                             "must be positive")
        self.size = int(size)
        self.embedding_name = embedding_name
        self.embedding_size = int(embedding_size)


def beam_search(step: Callable[..., Any], input: Any, bos_id: int,  # noqa: A002
                eos_id: int, beam_size: int, max_length: int = 500, name: str | None = None,
                num_results_per_sample: int | None = None) -> LayerOutput:
    """Generate sequences with the step network ``step`` by beam search.

    ``input``: StaticInputs and exactly one :class:`GeneratedInput`, passed to ``step`` in
    that order (other values unchanged); ``step`` returns the next-word probabilities (a
    softmax over ``size`` words). As in PaddlePaddle the layer is named
    ``__beam_search_predict__`` and the group ``name`` (default ``__beam_search_<k>__``).
    Each path's score is the sum of ``ln p`` of its words; a path ends at ``eos_id`` or after
    ``max_length`` words. The layer's ``value`` is (samples, num_results) path scores, best
    first; its ``ids`` the paths, as ``infer(field=['prob', 'id'])`` returns them in
    PaddlePaddle (see :mod:`sculler.layers.beam_search`).
    """
    group = name or auto_name("beam_search")
    items = list(input) if isinstance(input, (list, tuple)) else [input]
    gens = [i for i in items if isinstance(i, GeneratedInput)]
    if len(gens) != 1:
        raise ValueError(f"beam_search {group!r}: input needs exactly one GeneratedInput, got "
                         f"{len(gens)}")
    num_results = int(num_results_per_sample or beam_size)
    if not 1 <= num_results <= beam_size:
        raise ValueError(f"beam_search {group!r}: num_results_per_sample {num_results} must be "
                         f"in [1, beam_size={beam_size}]")
    if max_length < 1:
        raise ValueError(f"beam_search {group!r}: max_length must be >= 1, got {max_length}")
    gen = gens[0]
    scope = _scoped(group)
    sb = _StepBuilder(scope)
    args, statics = [], []
    with record_layers() as created, _step_scope(scope):
        for i, item in enumerate(items):
            if isinstance(item, StaticInput):
                agent = _agent(auto_name("memory"), item.input.size, "static")
                statics.append((item.input, agent))
                args.append(agent)
            elif isinstance(item, LayerOutput):
                raise TypeError(f"beam_search {group!r}: input {i} ({item.name!r}) is a layer; "
                                "wrap it in StaticInput (beam_search has no sequence input)")
            else:  # the GeneratedInput (replaced below) or a value passed through
                args.append(item)
        auto_name("memory")  # PaddlePaddle's generated-id memory takes a number too
        predicted = _agent(f"{PREDICT}+delay1", gen.size, "memory", MemoryOutput)
        predicted.config.attrs.update(generated=True)
        embedded = make_layer("embedding", [predicted], size=gen.embedding_size,
                              bias_attr=False,
                              param_attr=ParameterAttribute(name=gen.embedding_name))
        args = [embedded if a is gen else a for a in args]
        result = step(*args)
    outs = as_inputs(result, f"beam_search {group!r} step result")
    if len(outs) > 1:
        raise NotImplementedError(f"beam_search {group!r}: extra step outputs (data "
                                  "out-links) are not supported; return the probabilities only")
    probs = outs[0]
    if probs.size != gen.size:
        raise ValueError(f"beam_search {group!r}: the step's first output {probs.name!r} has "
                         f"width {probs.size}, expected the vocabulary size {gen.size}")
    model, mem_specs = sb.build(created, outs, [a for _, a in statics] + [predicted])
    static_specs = [{"input": sb.outer_index(src), "agent": _suffix(a.name, scope)}
                    for src, a in statics]
    if not sb.outer:
        raise ValueError(f"beam_search {group!r}: needs a StaticInput or a memory with a "
                         "boot_layer (they give the number of samples)")
    config = LayerConfig(
        name=PREDICT, type="beam_search", size=num_results,
        inputs=[InputConfig(o.name) for o in sb.outer],
        attrs={"step_model": model.to_dict(), "in_links": [], "statics": static_specs,
               "memories": mem_specs, "group": scope, "vocab_size": gen.size,
               "out_links": [{"layer": _suffix(probs.name, scope), "name": PREDICT}],
               "generator": {"agent": _suffix(predicted.name, scope),
                             "prob_layer": _suffix(probs.name, scope), "bos_id": int(bos_id),
                             "eos_id": int(eos_id), "beam_size": int(beam_size),
                             "max_length": int(max_length), "num_results": num_results}})
    return LayerOutput(config, list(sb.outer))


def get_output(input: LayerOutput, arg_name: str, name: str | None = None,  # noqa: A002
               layer_attr: Any = None) -> LayerOutput:
    """The secondary output ``arg_name`` of ``input`` (e.g. ``'state'``, the cell of
    ``lstm_step``) as a layer."""
    return make_layer("get_output", as_inputs(input, "get_output"), name=name,
                      name_prefix="get_output_layer", size=input.size, bias_attr=False,
                      layer_attr=layer_attr, attrs={"arg_name": str(arg_name)})


def _act_name(act: Any, default: type[A.BaseActivation], what: str) -> str:
    act = default() if act is None else act
    if not isinstance(act, A.BaseActivation):
        raise TypeError(f"{what} must be an activation instance, got {act!r}")
    return act.name


def gru_step(input: LayerOutput, output_mem: LayerOutput, size: int | None = None,  # noqa: A002
             act: Any = None, name: str | None = None, gate_act: Any = None,
             bias_attr: Any = None, param_attr: Any = None, layer_attr: Any = None) -> LayerOutput:
    """One GRU step: ``input`` is the projected ``[x_z|x_r|x_c]`` (3H), ``output_mem`` the
    previous output (H); weight (H x 3H, PaddlePaddle's flat layout) on input 0, bias 3H."""
    return make_layer("gru_step", as_inputs([input, output_mem], "gru_step"), name=name,
                      name_prefix="gru_step", size=size or input.size // 3, act=act,
                      default_act=A.Tanh, param_attr=[param_attr, None], bias_attr=bias_attr,
                      layer_attr=layer_attr,
                      attrs={"active_gate_type": _act_name(gate_act, A.Sigmoid, "gate_act")})


def lstm_step(input: LayerOutput, state: LayerOutput, size: int | None = None,  # noqa: A002
              act: Any = None, name: str | None = None, gate_act: Any = None,
              state_act: Any = None, bias_attr: Any = None,
              layer_attr: Any = None) -> LayerOutput:
    """One LSTM step: ``input`` holds the gate pre-activations (4H), ``state`` the previous
    cell (H); bias = 3H peepholes; the new cell is ``get_output(this, 'state')``."""
    if size is not None and size != state.size:
        raise ValueError(f"lstm_step: size {size} differs from the state's width {state.size}")
    return make_layer("lstm_step", as_inputs([input, state], "lstm_step"), name=name,
                      name_prefix="lstm_step", size=state.size, act=act, default_act=A.Tanh,
                      bias_attr=bias_attr, layer_attr=layer_attr,
                      attrs={"active_gate_type": _act_name(gate_act, A.Sigmoid, "gate_act"),
                             "active_state_type": _act_name(state_act, A.Tanh, "state_act")})


def gru_step_naive(input: LayerOutput, output_mem: LayerOutput,  # noqa: A002
                   size: int | None = None, name: str | None = None, act: Any = None,
                   gate_act: Any = None, bias_attr: Any = None, param_attr: Any = None,
                   layer_attr: Any = None) -> LayerOutput:
    """The GRU step built from mixed layers (PaddlePaddle's gru_step_naive): gates
    ``<name>_update``/``<name>_reset``, ``<name>_reset_output`` = mem * r, candidate
    ``<name>_output_candidate``, output = mem - mem * z + cand * z. Separate H x H weights."""
    from sculler.layers.mixed import (
        dotmul_operator,
        full_matrix_projection,
        identity_projection,
        mixed,
    )

    if input.size % 3:
        raise ValueError(f"gru_step_naive: input {input.name!r} width {input.size} is not a "
                         "multiple of 3")
    if isinstance(bias_attr, ParameterAttribute) and bias_attr.name is not None:
        raise ValueError("gru_step_naive: bias_attr must not name a parameter (three layers "
                         "use it)")
    size = size or input.size // 3
    name = name or auto_name("gru_step_naive")
    gate_act = gate_act or A.Sigmoid()
    act = act or A.Tanh()

    def gate(kind: str, offset: int) -> LayerOutput:
        return mixed(name=f"{name}_{kind}", size=size, act=gate_act, bias_attr=bias_attr,
                     layer_attr=layer_attr,
                     input=[identity_projection(input, offset=offset, size=size),
                            full_matrix_projection(output_mem, param_attr=param_attr)])

    update, reset = gate("update", 0), gate("reset", size)
    reset_out = mixed(name=f"{name}_reset_output", size=size, bias_attr=False,
                      input=dotmul_operator(a=output_mem, b=reset))
    cand = mixed(name=f"{name}_output_candidate", size=size, act=act, bias_attr=bias_attr,
                 layer_attr=layer_attr,
                 input=[identity_projection(input, offset=2 * size, size=size),
                        full_matrix_projection(reset_out, param_attr=param_attr)])
    return mixed(name=name, size=size, bias_attr=False,
                 input=[identity_projection(output_mem),
                        dotmul_operator(a=output_mem, b=update, scale=-1.0),
                        dotmul_operator(a=cand, b=update)])
