"""``Network`` (PaddlePaddle's GradientMachine): layers built from a ModelConfig and run.

The topology is compiled once into a flat list of bound layer calls; a batch walks that list
forward and, in reverse, backward. Parameters come from a :class:`ParameterSet` so several
networks (topologies) can share them by name.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from sculler import backend
from sculler.core.argument import Argument
from sculler.core.builder import topological_order
from sculler.core.evaluator import create_evaluator
from sculler.core.group_layout import nest_groups
from sculler.core.layer import PASS_TEST, Layer, get_layer_class
from sculler.core.model_config import ModelConfig
from sculler.core.parameter import Parameter, ParameterSet, UpdateCallback
from sculler.math import cuda
from sculler.math.workspace import clear_together


class Network:
    """Layers of one topology bound to a parameter set.

    Args:
        config: the model.
        parameters: the set to take (or create) parameters from; a new one if None.
        data_gradients: compute gradients w.r.t. data layers too (gradient checks).
    """

    def __init__(
        self,
        config: ModelConfig,
        parameters: ParameterSet | None = None,
        data_gradients: bool = False,
    ):
        self.config = config
        self.parameters = parameters if parameters is not None else ParameterSet()
        config = nest_groups(config)
        order = topological_order(config.layers)
        pconfigs = {pc.name: pc for pc in config.parameters}
        self.layers: dict[str, Layer] = {}
        for lc in order:
            layer = get_layer_class(lc.type).variant(lc)(lc)
            names = [ic.input_parameter_name for ic in lc.inputs if ic.input_parameter_name]
            names += [lc.bias_parameter_name] if lc.bias_parameter_name else []
            for pname in names:
                if pname not in pconfigs:
                    raise ValueError(
                        f"layer {lc.name!r} uses parameter {pname!r}, which the model does not "
                        "define"
                    )
                self.parameters.create(pconfigs[pname], owner=lc.name)
            self.layers[lc.name] = layer
        for layer in self.layers.values():
            layer.init(self.layers, self.parameters)
        self.order: list[Layer] = list(self.layers.values())
        self._mark_need_gradient(data_gradients)
        self.data_layers = [self.layers[n] for n in config.input_layer_names]
        self.output_layers = [self.layers[n] for n in config.output_layer_names]
        self._used = self._count_users()
        self._forward_steps = [
            layer.forward if layer.activation.is_linear or layer.uses_act_inside
            else self._first_forward(i, layer)
            for i, layer in enumerate(self.order)]
        self._backward_layers = [layer for layer in reversed(self.order) if layer.need_gradient]
        self._backward_steps = [layer.backward for layer in self._backward_layers]
        self._lazy_params = self._plan_first_writes()
        self._grads_to_zero: list = []  # device output gradients reserve_output left to clear
        self._read_back = None  # on the GPU: the costs' and evaluators' sums, read at once
        for layer in self.order:
            layer.zero_sink = self._grads_to_zero
        lazy = set(map(id, self._lazy_params))
        # per-batch work resolved once: what zero_grad clears or marks, what backward seeds
        self._zero_params = [p for p, _ in self._used.values() if id(p) not in lazy]
        self._mark_params = [p for p in self._lazy_params if p.grad is not None]
        self._users = list(self._used.values())
        self._cost_layers = [layer for layer in self.output_layers if layer.is_cost]
        self.evaluators = [create_evaluator(e) for e in config.evaluators]

    def _first_forward(self, step: int, layer: Layer):
        """``layer.forward`` for its first batch, checking that it applied its non-linear
        activation (a custom layer whose forward never calls ``forward_activation()`` would
        silently ignore ``act=``); later batches call ``layer.forward`` directly."""
        def checked(pass_type: str) -> None:
            layer.activation_applied = False
            layer.forward(pass_type)
            if not layer.activation_applied:
                raise ValueError(
                    f"layer {layer.name!r} (type {layer.type_name!r}, class "
                    f"{type(layer).__name__}) was given act={layer.activation.name!r}, but its "
                    "forward() never calls self.forward_activation(): call it after writing "
                    "the output (and self.backward_activation() first in backward()), or "
                    "give the layer no act")
            self._forward_steps[step] = layer.forward
        return checked

    def _mark_need_gradient(self, data_gradients: bool) -> None:
        for layer in self.order:
            if layer.type_name == "data":
                layer.need_gradient = data_gradients
            else:
                trainable = any(p.grad is not None for p in layer.parameters)
                layer.need_gradient = trainable or any(i.need_gradient for i in layer.inputs)

    def _count_users(self) -> dict[str, tuple[Parameter, int]]:
        used: dict[str, tuple[Parameter, int]] = {}
        for layer in self.order:
            if not layer.need_gradient:
                continue
            for p in layer.parameters:
                if p.grad is not None:
                    used[p.name] = (p, used.get(p.name, (p, 0))[1] + 1)
        return used

    def _plan_first_writes(self) -> list[Parameter]:
        """Let reserve_output skip clearing the output gradients whose consumers all opt in to
        first writes (``Layer.first_write``); returns the dense parameters likewise written
        only by such layers, which :meth:`zero_grad` marks instead of clearing."""
        consumers: dict[str, list[Layer]] = {}
        users: dict[str, list[Layer]] = {}
        for layer in self.order:
            for inp in layer.inputs:
                consumers.setdefault(inp.name, []).append(layer)
            if layer.need_gradient:
                for p in layer.parameters:
                    users.setdefault(p.name, []).append(layer)
        for layer in self.order:
            layer.consumers = consumers.get(layer.name, [])
            layer.defer_grad_zero = all(c.first_write for c in layer.consumers)
            layer.grad_unwritten = False
            layer.grad_is_preact = False
        return [p for p, _ in self._used.values()
                if not p.config.sparse_update and all(u.first_write for u in users[p.name])]

    @property
    def used_parameters(self) -> list[Parameter]:
        """Parameters this network computes gradients for."""
        return [p for p, _ in self._used.values()]

    def get_layer(self, name: str) -> Layer:
        try:
            return self.layers[name]
        except KeyError:
            raise KeyError(f"no layer named {name!r}; layers are {list(self.layers)}") from None

    def forward(
        self, in_args: Mapping[str, Argument] | Sequence[Argument], pass_type: str = PASS_TEST
    ) -> list[Argument]:
        """Run the batch through every layer; returns the output layers' arguments."""
        if type(in_args) is dict or isinstance(in_args, Mapping):
            missing = [d.name for d in self.data_layers if d.name not in in_args]
            if missing:
                raise ValueError(f"no input given for data layers {missing}")
            for d in self.data_layers:
                d.set_input(in_args[d.name])
        else:
            if len(in_args) != len(self.data_layers):
                raise ValueError(
                    f"got {len(in_args)} input arguments for "
                    f"{len(self.data_layers)} data layers {[d.name for d in self.data_layers]}"
                )
            for d, arg in zip(self.data_layers, in_args):
                d.set_input(arg)
        for step in self._forward_steps:
            step(pass_type)
        self.clear_reserved_grads()
        return [layer.output for layer in self.output_layers]

    def clear_reserved_grads(self) -> None:
        """Clear the device output gradients the layers reserved in this forward pass: a few
        launches (:func:`sculler.math.workspace.clear_together`), not one a layer."""
        if self._grads_to_zero:
            clear_together(self._grads_to_zero)
            self._grads_to_zero.clear()

    def backward(
        self, callback: UpdateCallback | None = None, output_grads: Mapping | None = None
    ) -> None:
        """Back-propagate from the cost outputs (their gradient is 1 per sample), or from the
        given ``output_grads`` (layer name -> dL/dy); each parameter's ``callback`` fires once
        its last user has added its gradient."""
        self.clear_reserved_grads()  # (a forward pass interrupted before it could)
        for p, n in self._users:
            p.expect_users(n)
        for layer in self._cost_layers:  # (a backward interrupted may have left it set)
            layer.unit_output_grad = False
        if output_grads is None:
            for layer in self._cost_layers:
                if layer.output.grad is not None:
                    layer.unit_output_grad = layer.accepts_unit_output_grad()
                    if not layer.unit_output_grad:
                        layer.output.grad[...] = 1.0
                    layer.grad_unwritten = False
        else:
            for name, grad in output_grads.items():
                layer = self.get_layer(name)
                layer.output.grad[...] = grad
                layer.grad_unwritten = False
        for layer, step in zip(self._backward_layers, self._backward_steps):
            if layer.grad_unwritten:  # no consumer wrote dL/dy: it is zero
                layer.output.grad[...] = 0
                layer.grad_unwritten = False
            step(callback)
        for p in self._lazy_params:
            if p.grad_unwritten:
                p.zero_grad()

    def zero_grad(self) -> None:
        """Clear the gradients of the used parameters; those written only by first-write
        layers are marked instead (their first writer overwrites them). On the GPU a packed
        gradient buffer (:meth:`ParameterSet.pack`) is cleared whole, in one launch: launches,
        not bytes, are what costs there."""
        for p in self._mark_params:
            p.grad_unwritten = True
        packed: dict[int, object] = {}  # on the GPU: the packed gradient buffers, by id
        for p in self._zero_params:
            grad = p.grad
            if p.packed and backend.is_gpu_array(grad) and grad.base is not None:
                packed[id(grad.base)] = grad.base
                p.zero_grad(fill=False)
            else:
                p.zero_grad()
        for buffer in packed.values():  # one launch a buffer instead of one a parameter
            buffer.fill(0)

    def prefetch(self) -> dict[str, np.ndarray]:
        """Rows of sparse parameters the current batch touches, merged over layers."""
        rows: dict[str, list[np.ndarray]] = {}
        for layer in self.order:
            for name, r in layer.prefetch().items():
                rows.setdefault(name, []).append(np.asarray(r))
        return {k: np.unique(np.concatenate(v)) for k, v in rows.items()}

    def cost_layers(self) -> list[Layer]:
        return list(self._cost_layers)

    def total_cost_and(self, device_sums: Sequence) -> tuple[float, list[np.ndarray]]:
        """:meth:`total_cost` and ``device_sums`` (float64 device arrays of any shape:
        evaluators' sums) read back together, each as a host array of its shape. On the GPU
        that is one transfer a batch, the one place the host waits for the device; the costs
        are summed there in float64."""
        values = [layer.output.value for layer in self._cost_layers]
        if not values or not all(backend.is_gpu_array(v) for v in values):
            return self.total_cost(), [backend.to_numpy(n) for n in device_sums]
        size = len(values) + sum(n.size for n in device_sums)
        kept = self._read_back
        if kept is not None and kept.size != size:
            kept = None  # sums_and_parts makes one of the new size
        packed = cuda.sums_and_parts(values, device_sums, kept)  # one launch
        if packed is not None:
            self._read_back = packed  # read back below, before the next batch writes it
        else:
            xp = backend.get_array_module(values[0])
            parts = [v.sum(dtype=np.float64).reshape(1) for v in values]
            parts += [n.reshape(-1) for n in device_sums]
            packed = xp.concatenate(parts) if len(parts) > 1 else parts[0]
        host = backend.to_numpy(packed)
        at, read = len(values), []
        for n in device_sums:
            read.append(host[at:at + n.size].reshape(n.shape))
            at += n.size
        return float(host[:len(values)].sum()), read

    def total_cost(self) -> float:
        """Sum over cost outputs of the per-sample costs (a float64 host number)."""
        total = 0.0
        for layer in self._cost_layers:
            value = layer.output.value
            if type(value) is not np.ndarray:
                value = backend.to_numpy(value)
            total += float(np.add.reduce(value, axis=None, dtype=np.float64))
        return total
