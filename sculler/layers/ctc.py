"""CTC costs: ``ctc`` (on probabilities, blank = the last class) and ``warp_ctc`` (on
unnormalised activations with a softmax inside, configurable blank).

Both output one ``-log p(label_n | x_n)`` per sequence (N x 1); the label is an id sequence
with as many sequences as the input. ``norm_by_times`` divides only the gradient by the
sequence's length T_n (as PaddlePaddle does). A sequence shorter than its label needs
(``T_n < |l_n| + adjacent repeats``) costs 0 and gets no gradient. The recursions are in
:mod:`sculler.math.ctc`, and on the GPU in one kernel
(:func:`sculler.math.cuda_sequences.ctc_loss`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from sculler.backend import cached_like, get_array_module, is_gpu_array, to_device_of, to_numpy
from sculler.core.expression import (
    LayerOutput,
    as_inputs,
    make_layer,
)
from sculler.core.faces import layer_function
from sculler.core.layer import Layer, register_layer
from sculler.layers.crf import check_label_classes
from sculler.math import cuda_sequences
from sculler.math.ctc import ctc_feasible, ctc_loss, label_repeats
from sculler.math.segment import segment_of_rows

FLT_MIN = float(np.finfo(np.float32).tiny)


class _CTCBase(Layer):
    is_cost = True
    min_inputs = 2
    max_inputs = 2

    @classmethod
    def infer_size(cls, config, inputs):
        """The config's size is the number of classes, as PaddlePaddle writes it (attr
        ``num_classes``, else the input width); the output is one cost column."""
        return int(config.attrs.get("num_classes") or inputs[0].size)

    def blank(self, num_classes: int) -> int:
        raise NotImplementedError

    def num_classes(self, width: int) -> int:
        """The number of classes (labels + the blank) given the input width."""
        raise NotImplementedError

    def log_probs(self, x):
        """(T, C) log-probabilities of the input rows."""
        raise NotImplementedError

    def input_grad(self, x, gamma, scale_row, dx, rows) -> None:
        """Add ``scale_row * d cost / d x`` into ``dx`` given ``d cost / d log p = -gamma``
        (on the device ``x`` is on); ``rows`` gives each row's sequence."""
        raise NotImplementedError

    def _inputs(self):
        arg, lab = self.get_input(0), self.get_input(1)
        if arg.seq_starts is None or arg.value is None or arg.is_sparse:
            raise ValueError(f"layer {self.name!r} ({self.type_name}): input 0 "
                             f"({self.inputs[0].name!r}) must be a dense sequence, got "
                             f"{arg.describe()}")
        x = arg.value
        c = self.num_classes(x.shape[1])
        if lab.ids is None or lab.seq_starts is None:
            raise ValueError(f"layer {self.name!r} ({self.type_name}): label input "
                             f"({self.inputs[1].name!r}) must be an integer id sequence, got "
                             f"{lab.describe()}")
        if lab.num_sequences != arg.num_sequences:
            raise ValueError(f"layer {self.name!r} ({self.type_name}): {arg.num_sequences} input "
                             f"sequences but {lab.num_sequences} label sequences")
        blank = self.blank(c)
        ids = lab.host_ids().astype(np.int64, copy=False)  # checked there: nothing read back
        if ids.size and (ids.min() < 0 or ids.max() >= c or (ids == blank).any()):
            raise ValueError(f"layer {self.name!r} ({self.type_name}): label ids must lie in "
                             f"[0, {c}) and differ from the blank {blank}; got min "
                             f"{int(ids.min())} max {int(ids.max())}")
        return x, to_numpy(arg.seq_starts), ids, to_numpy(lab.seq_starts), blank

    def forward(self, pass_type: str) -> None:
        super().forward(pass_type)
        x, starts, ids, label_starts, blank = self._inputs()
        n = starts.size - 1
        out = self.reserve_output(n, 1)
        self.output.seq_starts = self.output.sub_seq_starts = None
        lengths = np.diff(label_starts)
        states = 2 * int(lengths.max(initial=0)) + 1  # of the longest extended label
        # on the GPU (a thread a state) one launch: both recursions and the occupations
        if is_gpu_array(x) and states <= cuda_sequences.CTC_MAX_STATES:
            feasible = ctc_feasible(lengths, label_repeats(ids, label_starts), np.diff(starts))
            cost, self._scored = self.scratch("cost", (n,)), self.scratch("scored", (n,))
            self._gamma = self.scratch("gamma", x.shape) if self.need_gradient else None
            labels = self.get_input(1).ids.astype(np.int64, copy=False)
            cuda_sequences.ctc_loss(self.log_probs(x), starts, labels, label_starts, feasible,
                                    blank, self.scratch("alpha", (x.shape[0], states)), cost,
                                    self._scored, self._gamma)
        else:
            cost, self._gamma, self._scored = ctc_loss(
                to_numpy(self.log_probs(to_numpy(x))), starts, ids, label_starts, blank,
                want_grad=self.need_gradient, alloc=self.host_scratch)
        out[:, 0] = to_device_of(cost, out)

    def backward(self, callback=None) -> None:
        dx = self.get_input_grad(0)
        if dx is None:
            return
        starts = to_numpy(self.get_input(0).seq_starts)
        lengths = np.diff(starts)
        scale = self.output.grad[:, 0].astype(dx.dtype)
        if self.attr("norm_by_times", False):
            scale = scale / cached_like(np.maximum(lengths, 1).astype(dx.dtype), scale)
        x = self.get_input_value(0)
        if is_gpu_array(self._gamma):  # the occupations are on the GPU: so is the gradient
            rows = cached_like(segment_of_rows(starts), x)
            self.input_grad(x, self._gamma, scale[rows][:, None], dx, rows)
            return
        scale = to_numpy(scale)
        part = self.host_part("dx", dx)
        self.input_grad(to_numpy(x), self._gamma, np.repeat(scale, lengths)[:, None], part,
                        np.repeat(np.arange(lengths.size), lengths))
        self.add_host_part(dx, part)


@register_layer("ctc")
class CTCLayer(_CTCBase):
    """CTC cost on probabilities ``p`` (a softmax output, width C = labels + 1); blank = C - 1.

    ``cost_n = -log sum over alignments of prod_t p_t[pi_t]``, computed on
    ``log max(p, FLT_MIN)``; ``dp_t[k] = -gamma_t[k] / p_t[k]``.
    """

    def blank(self, num_classes: int) -> int:
        return num_classes - 1

    def num_classes(self, width: int) -> int:
        """The input width, as PaddlePaddle's CTCLayer reads it (the config's ``size`` is not
        used by the layer, so PaddlePaddle accepts a ``size`` that differs from it)."""
        return width

    def log_probs(self, x):
        xp = get_array_module(x)
        out = self.scratch("log_probs", x.shape, host=xp is np)
        xp.maximum(x, FLT_MIN, out=out)
        return xp.log(out, out=out)

    def input_grad(self, x, gamma, scale_row, dx, rows) -> None:
        xp = get_array_module(x)
        dx -= scale_row * xp.where(x > FLT_MIN, gamma / xp.maximum(x, FLT_MIN), 0.0)


@register_layer("warp_ctc")
class WarpCTCLayer(_CTCBase):
    """CTC cost on unnormalised activations ``u`` (softmax inside), blank = attr ``blank``
    (default 0): ``cost_n = -log p(l_n | softmax(u))``; ``du_t = softmax(u_t) - gamma_t``.
    Infeasible sequences cost 0 (chosen to match ``ctc``; warp-ctc's own behaviour there is
    unverified)."""

    def num_classes(self, width: int) -> int:
        """The config's ``size``; PaddlePaddle's WarpCTCLayer requires the input width to
        equal it when the network is created, and so does this layer when it runs."""
        classes = int(self.attr("num_classes", width))
        if width != classes:
            raise ValueError(f"layer {self.name!r} (warp_ctc): input 0 ({self.inputs[0].name!r}) "
                             f"has width {width}, expected size {classes} (number of labels + 1 "
                             "for the blank); PaddlePaddle's WarpCTCLayer refuses this too, "
                             "when the network is created")
        return classes

    def blank(self, num_classes: int) -> int:
        blank = int(self.attr("blank", 0))
        if not 0 <= blank < num_classes:
            raise ValueError(f"layer {self.name!r} (warp_ctc): blank {blank} must lie in "
                             f"[0, {num_classes})")
        return blank

    def log_probs(self, x):
        xp = get_array_module(x)
        out = self.scratch("log_probs", x.shape, host=xp is np)
        xp.subtract(x, x.max(axis=1, keepdims=True), out=out)
        out -= xp.log(xp.exp(out).sum(axis=1, keepdims=True))
        return out

    def input_grad(self, x, gamma, scale_row, dx, rows) -> None:
        xp = get_array_module(x)
        feasible = self._scored[rows][:, None] > 0
        soft = xp.exp(self.log_probs(x))
        dx += scale_row * xp.where(feasible, soft - gamma, 0.0)


def _ctc(layer_type: str, input: LayerOutput, label: LayerOutput,  # noqa: A002
         size: int | None, name: str | None, layer_attr: Any, **attrs: Any) -> LayerOutput:
    if not (layer_type == "warp_ctc" and size is not None and size == label.size):
        size = check_label_classes(layer_type, size, label.size + 1,
                           "the label's number of classes + 1")
    return make_layer(layer_type, as_inputs([input, label], layer_type), name=name,
                      name_prefix=f"{layer_type}_layer", layer_attr=layer_attr,
                      attrs={"num_classes": size, **attrs})


@layer_function(v1="ctc_layer", types=("ctc",))
def ctc(input: LayerOutput, label: LayerOutput, size: int | None = None,  # noqa: A002
        name: str | None = None, norm_by_times: bool = False,
        layer_attr: Any = None) -> LayerOutput:
    """CTC cost ``-log p(label | input)`` per sequence, on probabilities (a softmax output)
    of width ``size`` = label classes + 1; the blank is the LAST class. ``norm_by_times``
    divides the gradient by the sequence length."""
    return _ctc("ctc", input, label, size, name, layer_attr, norm_by_times=bool(norm_by_times))


@layer_function(v1="warp_ctc_layer", types=("warp_ctc",))
def warp_ctc(input: LayerOutput, label: LayerOutput, size: int | None = None,  # noqa: A002
             name: str | None = None, blank: int = 0, norm_by_times: bool = False,
             layer_attr: Any = None) -> LayerOutput:
    """CTC cost on unnormalised activations (linear act; the softmax is inside) of width
    ``size`` = label classes + 1; the blank is class ``blank`` (default 0). As Sculler's data
    layers check id ranges, a label whose ids reach ``size - 1`` (any blank but the last) may
    be declared with ``size`` ids and an explicit ``size`` (a Sculler extension)."""
    if input.activation not in ("", "linear"):
        raise ValueError(f"warp_ctc: input {input.name!r} must have a linear activation (the "
                         f"softmax is inside warp_ctc), got {input.activation!r}")
    if isinstance(blank, bool) or not isinstance(blank, int):
        raise TypeError(f"warp_ctc: blank must be an int, got {blank!r}")
    width = label.size + 1 if size is None else size
    if not 0 <= blank < width:
        raise ValueError(f"warp_ctc: blank {blank} must lie in [0, {width})")
    return _ctc("warp_ctc", input, label, size, name, layer_attr, blank=blank,
                norm_by_times=bool(norm_by_times))
