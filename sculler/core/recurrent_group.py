"""Machinery of the recurrent group (PaddlePaddle's RecurrentGradientMachine).

A recurrent group runs a step sub-network once per time step. The step is an ordinary
:class:`ModelConfig` whose inputs are *agents* (layers of type ``agent`` whose output the group
sets before each step): in-links (row t of each sequence, or its t-th sub-sequence), static
inputs (the same value every step) and memories (a step layer's output at step t-1).

- :class:`GroupPlan` is the time-major layout of one batch: samples sorted longest first (via
  :class:`~sculler.math.seq2batch.SequenceBatch`), so the samples active at step t are the first
  ``batch_sizes[t]`` of those active at t-1, and a memory at t is a prefix of a step output at
  t-1 (a view, no copy).
- :class:`StepNetwork` is the compiled step: one is built per step index ("frame") and kept
  across batches, so each frame's activations stay in its own layers' buffers for backward.
- :func:`split_tail` finds the step layers that can run once over every step's rows after
  the frames (an output projection that no memory reads), for the group to hoist out of the
  step loop.
- :func:`shared_parameters` gives the frames :class:`SharedParameter` handles on the outer
  parameters (same value and gradient arrays): gradients of all steps add up in place, while
  the group reports each parameter's ``inc_update`` once, after the last step's backward.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from sculler.core.argument import Argument
from sculler.core.layer import Layer, register_layer
from sculler.core.model_config import LayerConfig, ModelConfig, ParameterConfig
from sculler.core.network import Network
from sculler.core.parameter import Parameter, ParameterSet
from sculler.math.seq2batch import SequenceBatch

AGENT = "agent"


@register_layer(AGENT)
class AgentLayer(Layer):
    """A step input whose output (value or ids, gradient buffer) the recurrent group sets
    before each step; attrs ``role`` ("in_link", "static", "memory", or "frontier": a step
    layer's rows of every step, read by a :class:`TailSplit`'s model)."""

    min_inputs = max_inputs = 0

    def forward(self, pass_type: str) -> None:
        super().forward(pass_type)


class LayoutAgent(Layer):
    """A ``scatter_agent`` or ``gather_agent`` of PaddlePaddle's group layout (see
    :mod:`sculler.core.group_layout`): it declares a name and a size so that a model in that
    layout builds; :class:`~sculler.core.network.Network` folds it into the engine's group
    layer before any layer runs, so it never runs itself."""

    min_inputs = max_inputs = 0

    def forward(self, pass_type: str) -> None:
        raise RuntimeError(f"layer {self.name!r} ({self.type_name}) is part of a recurrent "
                           "group's layout; build the model with Network, which runs the group")


@register_layer("scatter_agent")
class ScatterAgentLayer(LayoutAgent):
    """In PaddlePaddle's layout, an in-link ``X`` seen inside group G (``X@G``)."""


@register_layer("gather_agent")
class GatherAgentLayer(LayoutAgent):
    """In PaddlePaddle's layout, a step output ``O@G`` seen outside the group (``O``)."""


class GroupPlan:
    """Time-major layout of a batch for the group, from the in-link that sets it.

    For a plain sequence in-link the unit of a step is one row; for a nested one it is one
    sub-sequence. ``frames`` lists per step ``(active samples, first row, end row, inner
    seq_starts or None)`` of the time-major row order ``rows`` (``rows[i]`` = packed row of
    time-major row i); ``units[i]`` = packed unit (row or sub-sequence) of time-major unit i.
    """

    def __init__(self, arg: Argument, reverse: bool, what: str):
        if arg.seq_starts is None:
            raise ValueError(f"{what} must be a sequence or a nested sequence, got "
                             f"{arg.describe()}")
        seq = np.asarray(arg.seq_starts, dtype=np.int64)
        self.nested = arg.sub_seq_starts is not None
        if self.nested:
            sub = np.asarray(arg.sub_seq_starts, dtype=np.int64)
            if np.any(np.diff(sub) <= 0):
                raise ValueError(f"{what}: a nested in-link with a zero-length sub-sequence "
                                 "is not supported")
            self.unit_seq_starts = np.searchsorted(sub, seq)
        else:
            self.unit_seq_starts = seq
        self.batch = SequenceBatch(self.unit_seq_starts, reverse)
        self.units = self.batch.batch_rows
        steps = [int(s) for s in self.batch.step_starts]
        sizes = [int(n) for n in self.batch.batch_sizes]
        if self.nested:
            lens = sub[self.units + 1] - sub[self.units]
            offs = np.zeros(lens.size + 1, dtype=np.int64)
            np.cumsum(lens, out=offs[1:])
            self.rows = np.repeat(sub[self.units] - offs[:-1], lens) + np.arange(offs[-1])
            self.frames = [
                (sizes[t], int(offs[steps[t]]), int(offs[steps[t + 1]]),
                 offs[steps[t]: steps[t + 1] + 1] - offs[steps[t]]) for t in range(len(sizes))
            ]
        else:
            self.rows = self.units
            self.frames = [(sizes[t], steps[t], steps[t + 1], None) for t in range(len(sizes))]
        self.order = self.batch.order
        self.lengths = self.batch.lengths
        self.num_samples = int(self.lengths.size)

    @property
    def num_steps(self) -> int:
        return len(self.frames)


def writable_grad(layer: Layer):
    """``layer``'s output gradient, ready for ``+=`` from outside the frame: a buffer that
    the first-write protocol left uncleared (nobody has written it yet) is zeroed first."""
    if layer.grad_unwritten:
        layer.output.grad[...] = 0
        layer.grad_unwritten = False
    return layer.output.grad


def add_to_grad(layer: Layer, value) -> None:
    """``layer``'s output gradient ``+= value`` from outside the frame; a buffer the first-write
    protocol left uncleared (nobody has written it yet) takes ``value`` instead, in one pass
    rather than a clearing and an add."""
    grad = layer.output.grad
    if grad is None:
        return
    if layer.grad_unwritten:
        grad[...] = value
        layer.grad_unwritten = False
    else:
        grad += value


def sequence_rows(seq_starts, samples) -> tuple[np.ndarray, np.ndarray]:
    """(packed rows of the sequences ``samples``, in that order; their new seq_starts)."""
    seq = np.asarray(seq_starts, dtype=np.int64)
    lens = np.diff(seq)[samples]
    starts = np.zeros(lens.size + 1, dtype=np.int64)
    np.cumsum(lens, out=starts[1:])
    return np.repeat(seq[samples] - starts[:-1], lens) + np.arange(starts[-1]), starts


class StepNetwork(Network):
    """The compiled step sub-network of one frame: agents count as inputs that need
    gradients (like data layers of a gradient check). The layers named in ``skip`` (a
    :class:`TailSplit`'s) run only when asked for (``tail=True``): the group runs them once
    over every step's rows instead, when the batch allows it."""

    def __init__(self, config: ModelConfig, parameters: ParameterSet | None = None,
                 skip: frozenset[str] = frozenset()) -> None:
        super().__init__(config, parameters)
        self._core = [i for i, layer in enumerate(self.order) if layer.name not in skip]
        self._tail = [i for i, layer in enumerate(self.order) if layer.name in skip]
        self._core_backward = [k for k, layer in enumerate(self._backward_layers)
                               if layer.name not in skip]

    def _mark_need_gradient(self, data_gradients: bool) -> None:
        for layer in self.order:
            if layer.type_name == AGENT:
                layer.need_gradient = True
            else:
                trainable = any(p.grad is not None for p in layer.parameters)
                layer.need_gradient = trainable or any(i.need_gradient for i in layer.inputs)

    def run_forward(self, pass_type: str, tail: bool = False) -> None:
        """Forward through the frame's layers outside ``skip`` (``tail``: those in it)."""
        steps = self._forward_steps  # an entry is replaced after its first call
        for i in self._tail if tail else self._core:
            steps[i](pass_type)
        self.clear_reserved_grads()

    def run_backward(self, whole: bool = True) -> None:
        """Backward through the frame (as ``Network.backward``: a gradient nobody wrote under
        the first-write protocol is zero); without the ``skip`` layers unless ``whole``."""
        self.clear_reserved_grads()
        layers, steps = self._backward_layers, self._backward_steps
        for k in range(len(layers)) if whole else self._core_backward:
            layer = layers[k]
            if layer.grad_unwritten:
                layer.output.grad[...] = 0
                layer.grad_unwritten = False
            steps[k](None)


class SharedParameter(Parameter):
    """The frames' handle on an outer parameter: value and gradient are always the outer
    parameter's current arrays (also after ``ParameterSet.pack`` moves them, which re-binds
    the frames' weights too: they register with the outer parameter), while the update count
    and the first-write flag are the frames' own, so the steps' ``inc_update`` calls do not
    count as the outer users'."""

    def __init__(self, outer: Parameter):  # noqa: D107 - no Parameter.__init__: no arrays
        self.outer = outer
        self.config, self.name = outer.config, outer.name
        self.touched_rows: list = []
        self.users = 0
        self._pending = 0
        self.grad_unwritten = False  # the outer network clears the shared gradient
        self._views = outer._views

    value = property(lambda self: self.outer.value)
    grad = property(lambda self: self.outer.grad)
    packed = property(lambda self: self.outer.packed)


def shared_parameters(outer: ParameterSet, configs: list[ParameterConfig], owner: str,
                      dtype=None) -> tuple[ParameterSet, list[Parameter]]:
    """(a set of proxies for the step frames, the outer parameters) of ``configs``, created
    in ``outer`` when new."""
    inner = ParameterSet()
    params = []
    for pc in configs:
        p = outer.create(pc, owner=owner, dtype=dtype)
        params.append(p)
        inner._params[pc.name] = SharedParameter(p)
        inner._owners[pc.name] = owner
    return inner, params


class TailSplit(NamedTuple):
    """The tail of a step model (see :func:`split_tail`)."""

    layers: frozenset[str]  # the step layers that run once over every step's rows
    frontier: tuple[str, ...]  # the step layers outside the tail that it reads
    model: ModelConfig  # an agent per frontier layer, then the tail layers


def split_tail(model: ModelConfig, memory_links: list[str],
               row_wise: Callable[[LayerConfig], bool]) -> TailSplit | None:
    """The tail of ``model``: the step layers that no memory depends on (no ancestor of a
    layer in ``memory_links``), that are ``row_wise`` (each output row a function of the same
    input rows only), that read no agent, and whose consumers are all in the tail too. The
    step loop then needs none of them: the group can run them once after the frames, over
    every step's rows of the frontier gathered, one large GEMM where the frames ran one
    small GEMM a step (a decoder's output projection over the vocabulary is most of its
    arithmetic). None when the tail is empty."""
    by_name = {lc.name: lc for lc in model.layers}
    needed: set[str] = set()
    stack = list(memory_links)
    while stack:
        name = stack.pop()
        if name not in needed:
            needed.add(name)
            stack.extend(by_name[name].input_layer_names)
    tail = {lc.name for lc in model.layers
            if lc.type != AGENT and lc.name not in needed and row_wise(lc)
            and all(by_name[i].type != AGENT for i in lc.input_layer_names)}
    consumers: dict[str, list[str]] = {}
    for lc in model.layers:
        for name in lc.input_layer_names:
            consumers.setdefault(name, []).append(lc.name)
    while True:  # a layer that a layer of the frames reads must run in the frames too
        inside = {n for n in tail if all(c in tail for c in consumers.get(n, []))}
        if inside == tail:
            break
        tail = inside
    if not tail:
        return None
    frontier = tuple(lc.name for lc in model.layers if lc.name not in tail and any(
        lc.name in by_name[n].input_layer_names for n in tail))
    layers = [LayerConfig(name=name, type=AGENT, size=by_name[name].size,
                          attrs={"role": "frontier"}) for name in frontier]
    layers += [lc for lc in model.layers if lc.name in tail]
    used = {ic.input_parameter_name for lc in layers for ic in lc.inputs}
    used |= {lc.bias_parameter_name for lc in layers}
    outputs = [lc.name for lc in layers if lc.name in tail and not consumers.get(lc.name)]
    return TailSplit(frozenset(tail), frontier, ModelConfig(
        layers=layers, parameters=[pc for pc in model.parameters if pc.name in used],
        output_layer_names=outputs))
