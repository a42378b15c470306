"""The ``recurrent_layer_group`` layer: a step sub-network run once per time step.

Inputs are the outer layers the group reads (in-link sources, static inputs, boot layers), in
the order the attrs refer to them. attrs:

- ``step_model``: the step's ModelConfig (as a dict); its layers include the agents;
- ``in_links``: ``[{"input": i, "agent": name}]`` sequences (one row per step) or nested
  sequences (one sub-sequence per step); all must have the same top-level lengths;
- ``statics``: ``[{"input": i, "agent": name}]`` the same per-sample row (or sequence) every
  step;
- ``memories``: ``[{"agent", "link", "size", "boot": input index | None, "boot_bias": parameter
  name | None, "boot_bias_act", "boot_const_id": int | None}]``: the agent holds layer
  ``link``'s output of the previous step; at step 0 the boot layer's row, ``act(boot_bias)``,
  the constant id, or zeros; a boot layer that is a sequence makes a sequence-valued memory
  (each step sees the sample's whole sequence of the previous step);
- ``out_links``: ``[{"layer": inner name, "name": outer name}]``: each step's output of
  ``layer`` assembled into a sequence aligned with the in-link (a nested sequence when each
  step's output is a sequence), exposed as ``extra_outputs[name]`` (read with ``get_output``);
  the group's own output is the first; a step output whose value rows are not its id rows (a
  ``beam_search`` in the step: scores per sample, a path of ids per sample) is gathered as
  ids alone;
- ``reverse``: run each sequence from its last step; ``target_inlink``: index of the in-link
  whose layout the out-links take (default: the first in-link that is a sequence; an in-link
  that is not a sequence acts as a static input).

Step t runs one frame (a :class:`~sculler.core.recurrent_group.StepNetwork` kept across
batches) over the samples still active at t, sorted longest first; backward runs the frames
in reverse, carrying the memories' gradients into the previous frame, and sums every
parameter's gradient over the steps before its one ``inc_update``. A group whose step is
exactly ``gru_group``'s or ``lstmemory_group``'s cell runs instead as the whole-sequence layer
(:mod:`sculler.layers.group_fusion`) when its in-link is a plain dense sequence.
"""

from __future__ import annotations

import numpy as np

from sculler.backend import cached_like, is_gpu_array, remember_on_gpu, to_gpu_together
from sculler.core.activation import get_activation
from sculler.core.argument import Argument
from sculler.core.layer import Layer, get_layer_class, register_layer
from sculler.core.model_config import ModelConfig, ParameterConfig
from sculler.core.parameter import Weight
from sculler.core.recurrent_group import (
    GroupPlan,
    StepNetwork,
    add_to_grad,
    sequence_rows,
    shared_parameters,
    split_tail,
    writable_grad,
)
from sculler.layers.group_fusion import fused_cell
from sculler.math.blas import col_sum
from sculler.math.segment import add_to_rows, gather_rows, segment_of_rows
from sculler.math.workspace import clear_together


def _step_model(config) -> ModelConfig:
    return ModelConfig.from_dict(config.attrs["step_model"])


@register_layer("recurrent_layer_group")
class RecurrentGroupLayer(Layer):
    """A recurrent group (see the module doc)."""

    min_inputs = 1
    fuse_cells = True  # tests set it False to compare with the step-by-step path
    hoist_tail = True  # likewise for the tail run once over all steps (core.recurrent_group)

    @classmethod
    def check_config(cls, config, inputs) -> None:
        if "step_model" in config.attrs:
            super().check_config(config, inputs)
        elif inputs:  # PaddlePaddle's layout: the group's sub-model says what it reads
            raise ValueError(f"layer {config.name!r} (recurrent_layer_group) of PaddlePaddle's "
                             f"layout takes no inputs, got {[i.name for i in inputs]}")

    @classmethod
    def infer_size(cls, config, inputs):
        if "step_model" not in config.attrs:
            return 0
        outs = config.attrs.get("out_links") or []
        if not outs:
            raise ValueError(f"recurrent group {config.name!r} has no out-link")
        model = _step_model(config)
        return model.layer(outs[0]["layer"]).size

    @classmethod
    def extra_parameters(cls, config, inputs) -> list[ParameterConfig]:
        return _step_model(config).parameters if "step_model" in config.attrs else []

    def init(self, layer_map, parameter_map) -> None:
        super().init(layer_map, parameter_map)
        a = self.config.attrs
        self.group = a.get("group", self.name)  # a beam search is named after its output
        self.model = _step_model(self.config)
        self.inner_params, self.outer_params = shared_parameters(
            parameter_map, self.model.parameters, owner=self.name, dtype=self.dtype)
        self.in_links = a.get("in_links", [])
        self.statics = a.get("statics", [])
        self.memories = a.get("memories", [])
        self.out_links = a["out_links"]
        self.reverse = bool(a.get("reverse", False))
        target = a.get("target_inlink")
        self.target = None if target is None else int(target)
        if not self.in_links and not a.get("generator"):
            raise ValueError(f"recurrent group {self.group!r}: at least one input needs to be a "
                             "sequence or a nested sequence")
        self.boot_bias = {m["agent"]: Weight(parameter_map[m["boot_bias"]])
                          for m in self.memories if m.get("boot_bias")}
        remote = [pc.name for pc in self.model.parameters if pc.sparse_remote_update]
        if remote:
            raise NotImplementedError(f"recurrent group {self.group!r}: sparse remote update of "
                                      f"parameters {remote} inside a group is not supported")
        self.frames: list[StepNetwork] = []
        self.extra_outputs = {o["name"]: Argument() for o in self.out_links}
        self.output = self.extra_outputs[self.out_links[0]["name"]]
        self.fused = fused_cell(self.config, self.model, self.inputs, self.inner_params,
                                self.dtype) if self.fuse_cells else None
        self.fused_batch = False
        self.tail = split_tail(self.model, [m["link"] for m in self.memories],
                               _row_wise) if self.hoist_tail else None
        self.tail_net = None if self.tail is None else StepNetwork(self.tail.model,
                                                                   self.inner_params)
        self.hoisted = False  # whether this batch ran the tail once over every step

    @property
    def parameters(self):
        return [p for p in self.outer_params]

    def frame(self, t: int) -> StepNetwork:
        """The step network of step ``t`` (built once, kept across batches)."""
        skip = self.tail.layers if self.tail is not None else frozenset()
        while len(self.frames) <= t:
            frame = StepNetwork(self.model, self.inner_params, skip)
            for layer in frame.order:  # its device gradients cleared with the network's
                layer.zero_sink = self.zero_sink
            self.frames.append(frame)
        return self.frames[t]

    # ---- forward ----
    def _plan(self) -> GroupPlan:
        """The layout of this batch; an in-link that is not a sequence acts as a static input
        (each step gets the sample's row), as in PaddlePaddle."""
        self.links = [link for link in self.in_links
                      if self.get_input(link["input"]).seq_starts is not None]
        self.batch_statics = self.statics + [link for link in self.in_links
                                             if link not in self.links]
        if not self.links:
            raise ValueError(f"recurrent group {self.group!r}: at least one input needs to be a "
                             "sequence or a nested sequence")
        target_link = self.links[0] if self.target is None else self.in_links[self.target]
        if target_link not in self.links:
            raise ValueError(f"recurrent group {self.group!r}: the target in-link "
                             f"{target_link['agent']!r} is not a sequence")
        plans = []
        for link in self.links:
            arg = self.get_input(link["input"])
            plans.append(GroupPlan(arg, self.reverse,
                                   f"recurrent group {self.group!r} in-link {link['agent']!r}"))
        target = plans[self.links.index(target_link)]
        for link, plan in zip(self.links, plans):
            if not np.array_equal(plan.lengths, target.lengths):
                raise ValueError(
                    f"recurrent group {self.group!r}: in-link {link['agent']!r} has sequence "
                    f"lengths {plan.lengths.tolist()[:8]}, the target in-link has "
                    f"{target.lengths.tolist()[:8]} (mismatched sequence length)")
        self.plans = plans
        return target

    def _sorted_static(self, k: int, arg: Argument, plan: GroupPlan):
        """(sorted rows of a static input, sorted seq_starts or None)."""
        key = f"static{k}"
        if arg.seq_starts is None:
            if arg.batch_size != plan.num_samples:
                raise ValueError(
                    f"recurrent group {self.group!r}: static input "
                    f"{self.batch_statics[k]['agent']!r} "
                    f"has {arg.batch_size} rows, expected one per sample ({plan.num_samples})")
            rows = plan.order
            starts = None
        else:
            if arg.sub_seq_starts is not None:
                raise NotImplementedError(f"recurrent group {self.group!r}: a nested static "
                                          "input is not supported")
            seq = np.asarray(arg.seq_starts)
            if seq.size - 1 != plan.num_samples:
                raise ValueError(
                    f"recurrent group {self.group!r}: static input "
                    f"{self.batch_statics[k]['agent']!r} "
                    f"has {seq.size - 1} sequences, expected {plan.num_samples}")
            rows, starts = sequence_rows(seq, plan.order)
        self._bufs[key + "_rows"] = rows
        if arg.value is None:
            return arg.ids[rows], starts
        out = self.scratch(key, (rows.size, arg.value.shape[1]))
        gather_rows(arg.value, rows, out)
        return out, starts

    def forward(self, pass_type: str) -> None:
        super().forward(pass_type)
        link = self.get_input(self.in_links[0]["input"]) if self.fused else None
        self.fused_batch = (link is not None and link.value is not None and not link.is_sparse
                            and link.seq_starts is not None and link.sub_seq_starts is None)
        if self.fused_batch:
            self._forward_fused(pass_type)
            return
        plan = self._plan()
        self.plan = plan
        links = []
        for k, link in enumerate(self.links):
            arg, p = self.get_input(link["input"]), self.plans[k]
            if arg.value is not None:
                buf = self.scratch(f"in{k}", (p.rows.size, arg.value.shape[1]))
                gather_rows(arg.value, p.rows, buf)
                links.append((buf, None))
            else:
                links.append((None, arg.ids[p.rows]))
        statics = [self._sorted_static(k, self.get_input(s["input"]), plan)
                   for k, s in enumerate(self.batch_statics)]
        sent = set()  # statics of one layout (a sequence and its projection) send it once
        for value, starts in statics:
            layout = None if starts is None or not is_gpu_array(value) else starts.tobytes()
            if layout is not None and layout not in sent:
                sent.add(layout)
                _send_prefixes(starts, plan)
        n0 = plan.frames[0][0] if plan.num_steps else 0
        hoist = self.tail is not None
        boots = [self._boot(m, plan.order[:n0], plan.num_samples) for m in self.memories]
        bound_grads = self._bind_frontier(plan) if hoist else []
        for t in range(plan.num_steps):
            net = self.frame(t)
            n = plan.frames[t][0]
            for k, link in enumerate(self.links):
                _, lo, hi, inner = self.plans[k].frames[t]
                value, ids = links[k]
                _set(net.layers[link["agent"]].output,
                     value[lo:hi] if value is not None else None,
                     ids[lo:hi] if ids is not None else None, inner)
            for k, s in enumerate(self.batch_statics):
                value, starts = statics[k]
                rows = n if starts is None else int(starts[n])
                arg = net.layers[s["agent"]].output
                if value.dtype.kind in "iu":
                    _set(arg, None, value[:rows], None if starts is None else starts[: n + 1])
                else:
                    _set(arg, value[:rows], None, None if starts is None else starts[: n + 1])
            for k, m in enumerate(self.memories):
                arg = net.layers[m["agent"]].output
                if t == 0:
                    _set(arg, *boots[k])
                    continue
                src = self.frames[t - 1].layers[m["link"]].output
                rows, starts = n, None
                if src.seq_starts is not None:  # a sequence-valued memory: the first n
                    starts = src.seq_starts[: n + 1]
                    rows = int(starts[-1])
                _set(arg, None if src.value is None else src.value[:rows],
                     None if src.ids is None else src.ids[:rows], starts)
            net.run_forward(pass_type)
            hoist = hoist and all(_one_row_each(net.layers[f].output, n)
                                  for f in self.tail.frontier)
        self.hoisted = hoist
        if hoist:
            self._forward_tail(plan, pass_type)
        elif self.tail is not None:  # a frontier of sequences: the tail runs in the frames
            clear_together(bound_grads)  # the frames' gradients may be views of these
            for t in range(plan.num_steps):
                self.frames[t].run_forward(pass_type, tail=True)
        self._gather_out_links(plan)

    def _bind_frontier(self, plan: GroupPlan) -> list:
        """Have each frame's frontier layer write its output (and take its gradient) in its
        step's rows of the time-major buffers the tail reads (``Layer.output_rows``), so that
        neither the tail's input nor the frames' gradients are copied a step at a time.
        Returns those gradient buffers (uncleared)."""
        steps = plan.batch.step_starts
        bound_grads = []
        for f in self.tail.frontier:
            shape = (int(steps[-1]), self.model.layer(f).size)
            values = self.scratch("frontier_" + f, shape)
            needs = self.frame(0).layers[f].need_gradient
            grads = self.scratch("frontiergrad_" + f, shape) if needs else None
            if grads is not None:
                bound_grads.append(grads)
            for t in range(plan.num_steps):
                rows = slice(int(steps[t]), int(steps[t + 1]))
                self.frame(t).layers[f].output_rows = (
                    values[rows], None if grads is None else grads[rows])
        return bound_grads

    def _forward_tail(self, plan: GroupPlan, pass_type: str) -> None:
        """The tail layers once over every step's rows: each frontier layer's rows of all
        frames time-major (step t's at ``plan.batch.step_starts[t]``), which the frames
        wrote there themselves where :meth:`_bind_frontier` could bind them, else copied."""
        steps = plan.batch.step_starts
        for f in self.tail.frontier:
            rows = self.scratch("frontier_" + f, (int(steps[-1]), self.model.layer(f).size))
            for t in range(plan.num_steps):
                if not _bound(self.frames[t].layers[f]):
                    rows[steps[t]:steps[t + 1]] = self.frames[t].layers[f].output.value
            _set(self.tail_net.layers[f].output, rows, None, None)
        self.tail_net.run_forward(pass_type)

    def _forward_fused(self, pass_type: str) -> None:
        """The whole sequence batch through the cell layer (a plain dense sequence in-link)."""
        fused = self.fused
        fused.need_gradient = self.need_gradient
        fused.forward(pass_type)
        _set(self.output, fused.output.value, None, fused.output.seq_starts)
        self.output.grad = fused.output.grad

    def _boot(self, m: dict, samples, num_samples: int):
        """(value, ids, seq_starts) of memory ``m`` at step 0 for the samples ``samples`` (of
        ``num_samples``), in that order; a boot layer that is a sequence makes the memory a
        sequence (each sample's whole boot sequence)."""
        n0 = len(samples)
        size = int(m["size"])
        if m.get("boot") is not None:
            arg = self.get_input(m["boot"])
            count = arg.batch_size if arg.seq_starts is None else arg.num_sequences
            if arg.sub_seq_starts is not None:
                raise ValueError(f"recurrent group {self.group!r}: memory {m['agent']!r} cannot "
                                 "boot from a nested sequence")
            if count != num_samples:
                raise ValueError(
                    f"recurrent group {self.group!r}: boot layer of memory {m['agent']!r} has "
                    f"{count} rows or sequences, expected one per sample ({num_samples})")
            rows, starts = (samples, None) if arg.seq_starts is None else sequence_rows(
                arg.seq_starts, samples)
            self._bufs["bootrows_" + m["agent"]] = rows
            if arg.value is None:
                return None, arg.ids[rows], starts
            buf = self.scratch("boot_" + m["agent"], (rows.size, size))
            gather_rows(arg.value, rows, buf)
            return buf, None, starts
        if m.get("boot_const_id") is not None:
            return None, np.full(n0, int(m["boot_const_id"]), dtype=np.int64), None
        buf = self.scratch("boot_" + m["agent"], (n0, size))
        if m.get("boot_bias"):
            buf[...] = self.boot_bias[m["agent"]].w.reshape(1, -1)
            get_activation(m.get("boot_bias_act")).forward(buf)
        else:
            buf[...] = 0
        return buf, None, None

    def _out_layout(self, o: dict, plan: GroupPlan):
        """(time-major row -> packed row, per-step (first, end) time-major rows, seq_starts,
        sub_seq_starts) of out-link ``o``: a sequence over the steps when each step gives one
        row per sample, else a nested sequence with one sub-sequence per step."""
        steps = plan.batch.step_starts
        if self._in_tail(o):  # one row per active sample and step
            outs = []
        else:
            outs = [self.frames[t].layers[o["layer"]].output for t in range(plan.num_steps)]
        if not outs or outs[0].seq_starts is None:
            bounds = [(int(steps[t]), int(steps[t + 1])) for t in range(plan.num_steps)]
            return plan.units, bounds, plan.unit_seq_starts, None
        lens, bounds, off = [], [], 0
        for t, src in enumerate(outs):
            ss = np.asarray(src.seq_starts, dtype=np.int64)
            if ss.size - 1 != plan.frames[t][0]:
                raise ValueError(f"recurrent group {self.group!r}: out-link {o['layer']!r} has "
                                 f"{ss.size - 1} sequences at step {t}, expected one per active "
                                 f"sample ({plan.frames[t][0]})")
            lens.append(np.diff(ss))
            bounds.append((off, off + int(ss[-1])))
            off += int(ss[-1])
        lens_tm = np.concatenate(lens)
        packed_lens = np.empty_like(lens_tm)
        packed_lens[plan.units] = lens_tm
        sub = np.zeros(lens_tm.size + 1, dtype=np.int64)
        np.cumsum(packed_lens, out=sub[1:])
        tm = np.zeros(lens_tm.size + 1, dtype=np.int64)
        np.cumsum(lens_tm, out=tm[1:])
        rows = np.repeat(sub[plan.units] - tm[:-1], lens_tm) + np.arange(off)
        return rows, bounds, sub[plan.unit_seq_starts], sub

    def _gather_out_links(self, plan: GroupPlan) -> None:
        self.layouts = []
        for o in self.out_links:
            arg = self.extra_outputs[o["name"]]
            rows, bounds, seq_starts, sub_seq_starts = self._out_layout(o, plan)
            self.layouts.append((rows, bounds))
            width = self.model.layer(o["layer"]).size
            packed = self.scratch("packed_" + o["name"], (rows.size, width))
            ids, ids_only = None, False
            if self._in_tail(o):  # the tail's rows are time-major already
                packed[cached_like(rows, packed)] = self.tail_net.layers[o["layer"]].output.value
            else:
                ids, ids_only = self._gather_frames(o, rows, bounds, packed)
            arg.value = packed
            arg.ids = None
            if ids is not None:
                arg.ids = np.empty_like(ids)
                arg.ids[rows] = ids
            arg.seq_starts, arg.sub_seq_starts = seq_starts, sub_seq_starts
            arg.grad = None
            if ids_only:
                arg.value = None
            elif self.need_gradient:
                grad = self.scratch("grad_" + o["name"], (rows.size, width))
                grad[...] = 0
                arg.grad = grad

    def _gather_frames(self, o: dict, rows, bounds, packed):
        """(ids or None, whether ids alone are gathered) of out-link ``o``, its frames' value
        rows written to ``packed`` (time-major row ``i`` to ``packed[rows[i]]``)."""
        value = self.scratch("out_" + o["name"], packed.shape)
        ids = None
        ids_only = bool(bounds) and _ids_only(self.frames[0].layers[o["layer"]].output)
        for t, (a, b) in enumerate(bounds):
            src = self.frames[t].layers[o["layer"]].output
            if src.value is not None and not ids_only:
                _check_rows(self.name, o["layer"], src.value.shape[0], b - a, t)
                value[a:b] = src.value
            if src.ids is not None:
                if ids is None:
                    ids = np.empty(rows.size, dtype=np.int64)
                ids[a:b] = src.ids
        packed[rows] = value
        return ids, ids_only

    def _in_tail(self, o: dict) -> bool:
        """Whether out-link ``o`` came from the tail run once over every step this batch."""
        return self.hoisted and o["layer"] in self.tail.layers

    # ---- backward ----
    def backward(self, callback=None) -> None:
        if self.fused_batch:
            self.fused.output.grad = self.output.grad
            self.fused.backward(callback)
        else:
            self._backward_frames(callback)
        for p in self.outer_params:
            q = self.inner_params[p.name]
            if q.touched_rows:
                p.touched_rows.extend(q.touched_rows)
                q.touched_rows = []
            if p.grad is not None:
                p.inc_update(callback)

    def _backward_frames(self, callback) -> None:
        plan = self.plan
        out_grads = []
        for o, (rows, bounds) in zip(self.out_links, self.layouts):
            arg = self.extra_outputs[o["name"]]
            if arg.grad is None or self._in_tail(o):  # ids only; or the tail's, taken there
                out_grads.append((None, bounds))
                continue
            g = self.scratch("outgrad_" + o["name"], arg.grad.shape)
            gather_rows(arg.grad, rows, g)
            out_grads.append((g, bounds))
        link_grads = []
        for k, link in enumerate(self.links):
            arg = self.get_input(link["input"])
            if arg.value is None:
                link_grads.append(None)
                continue
            g = self.scratch(f"ingrad{k}", (self.plans[k].rows.size, arg.value.shape[1]))
            link_grads.append(g)
        static_acc = []
        for k, s in enumerate(self.batch_statics):
            arg = self.get_input(s["input"])
            if arg.value is None:
                static_acc.append(None)
                continue
            acc = self.scratch(f"staticgrad{k}", (self._bufs[f"static{k}_rows"].size,
                                                   arg.value.shape[1]))
            static_acc.append(acc)
        clear_together([g for g in link_grads + static_acc if g is not None])
        frontier_grads = self._backward_tail() if self.hoisted else []
        steps = plan.batch.step_starts
        for t in reversed(range(plan.num_steps)):
            net = self.frames[t]
            n, lo, hi, _ = plan.frames[t]
            for o, (g, bounds) in zip(self.out_links, out_grads):
                if g is None or self._in_tail(o):
                    continue
                a, b = bounds[t]
                add_to_grad(net.layers[o["layer"]], g[a:b])
            for f, g in frontier_grads:
                if not _bound(net.layers[f]):  # else its gradient is these rows already
                    add_to_grad(net.layers[f], g[steps[t]:steps[t + 1]])
            for k, link in enumerate(self.links):
                if link_grads[k] is not None:
                    _, a, b, _ = self.plans[k].frames[t]
                    net.layers[link["agent"]].output.grad = link_grads[k][a:b]
            # a static input's frame value is the first rows of its sorted buffer, a memory's
            # the first rows of the previous frame's link: the step adds its gradient straight
            # into those rows (of static_acc, of that link's gradient)
            for k, s in enumerate(self.batch_statics):
                agent = net.layers[s["agent"]]
                if static_acc[k] is not None:
                    agent.output.grad = static_acc[k][: agent.output.value.shape[0]]
                    agent.grad_unwritten = False
            boots = []  # (memory, its own cleared gradient): the first frame's, for the boot
            for m in self.memories:
                agent = net.layers[m["agent"]]
                arg = agent.output
                agent.grad_unwritten = False
                if arg.value is None:
                    arg.grad = None
                    continue
                dst = writable_grad(self.frames[t - 1].layers[m["link"]]) if t > 0 else None
                if dst is not None:
                    arg.grad = dst[: arg.value.shape[0]]
                    continue
                arg.grad = self.scratch("memgrad_" + m["agent"], arg.value.shape)
                boots.append((m, arg.grad))
            clear_together([g for _, g in boots])
            net.run_backward(whole=not self.hoisted)
            if t == 0:
                for m, g in boots:
                    self._boot_backward(m, g, plan, callback)
        for k, link in enumerate(self.links):
            dst = self.get_input_grad(link["input"])
            if dst is not None and link_grads[k] is not None:
                add_to_rows(dst, self.plans[k].rows, link_grads[k])
        for k, s in enumerate(self.batch_statics):
            dst = self.get_input_grad(s["input"])
            if dst is not None and static_acc[k] is not None:
                add_to_rows(dst, self._bufs[f"static{k}_rows"], static_acc[k])

    def _backward_tail(self) -> list:
        """Backward through the tail run once over every step (:meth:`_forward_tail`): the
        out-links' time-major gradients in; each frontier layer's (name, time-major rows of
        gradient) out, for the frames."""
        net = self.tail_net
        for o, (rows, _) in zip(self.out_links, self.layouts):
            arg, layer = self.extra_outputs[o["name"]], net.layers.get(o["layer"])
            if not self._in_tail(o) or arg.grad is None or layer.output.grad is None:
                continue
            if layer.grad_unwritten:  # taken time-major straight into the layer's gradient
                gather_rows(arg.grad, rows, layer.output.grad)
                layer.grad_unwritten = False
            else:
                layer.output.grad += arg.grad[rows]
        grads = []
        for f in self.tail.frontier:
            arg = net.layers[f].output
            g = self.scratch("frontiergrad_" + f, arg.value.shape)
            g[...] = 0
            arg.grad = g
            grads.append((f, g))
        net.run_backward()
        return grads

    def _boot_backward(self, m: dict, g, plan: GroupPlan, callback) -> None:
        if m.get("boot") is not None:
            dst = self.get_input_grad(m["boot"])
            if dst is not None:
                add_to_rows(dst, self._bufs["bootrows_" + m["agent"]], g)
        elif m.get("boot_bias"):
            w = self.boot_bias[m["agent"]]
            if w.w_grad is not None:
                value = self._bufs["boot_" + m["agent"]][: g.size].reshape(g.shape)
                get_activation(m.get("boot_bias_act")).backward(None, value, g)
                col_sum(g, w.w_grad)


def _ids_only(arg: Argument) -> bool:
    """An out-link gathered as ids alone: a step output whose ids are its rows and whose
    value is something else (a beam search inside the step: per-sample path scores)."""
    return (arg.ids is not None and arg.value is not None
            and arg.value.shape[0] != arg.ids.shape[0])


def _set(arg: Argument, value, ids, seq_starts) -> None:
    arg.value, arg.ids, arg.seq_starts, arg.sub_seq_starts = value, ids, seq_starts, None
    arg.grad = None


def _check_rows(group: str, layer: str, got: int, want: int, t: int) -> None:
    if got != want:
        raise ValueError(f"recurrent group {group!r}: out-link {layer!r} has {got} rows at step "
                         f"{t}, expected {want} (one per active sample or in-link row)")


def _row_wise(config) -> bool:
    """Whether a step layer may run once over every step's rows (``Layer.is_row_wise``, with
    no per-sequence activation and no dropout, whose masks would be drawn in another
    order)."""
    return (get_layer_class(config.type).variant(config).is_row_wise(config)
            and config.active_type != "sequence_softmax" and not config.drop_rate)


def _bound(layer: Layer) -> bool:
    """Whether ``layer``'s output is the view its owner bound (``Layer.output_rows``)."""
    rows = layer.output_rows
    return rows is not None and layer.output.value is rows[0]


def _one_row_each(arg: Argument, n: int) -> bool:
    """Whether a frontier layer's step output is a plain row per active sample."""
    return (arg.value is not None and arg.ids is None and arg.seq_starts is None
            and arg.value.shape[0] == n)


def _send_prefixes(starts: np.ndarray, plan: GroupPlan) -> None:
    """A static sequence input's frames see the first ``n`` of its sorted sequences (``n``
    the frame's active samples), so their step layers look up the offsets ``starts[:n+1]``
    and the segment of every row (an attention's softmax, expand and pooling). Those are
    prefixes of two arrays: send both in one copy and remember each frame's prefix as a
    view of it (:func:`sculler.backend.remember_on_gpu`), instead of a copy for every
    distinct ``n`` when a layer first asks."""
    starts = np.asarray(starts, dtype=np.int64)
    segments = segment_of_rows(starts)
    d_starts, d_segments = to_gpu_together([starts, segments])
    for n in sorted({int(frame[0]) for frame in plan.frames}):
        rows = int(starts[n])
        remember_on_gpu(starts[: n + 1], d_starts[: n + 1])
        remember_on_gpu(segments[:rows], d_segments[:rows])

