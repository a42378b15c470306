"""Linear-chain CRF layers: the ``crf`` cost and ``crf_decoding`` (Viterbi).

Both read packed emission sequences ``x`` (T x C) and share one (C + 2) x C parameter on input 0
(PaddlePaddle's layout: start scores, end scores, then the C x C transitions; share it between
the two layers by giving both the same ``ParamAttr(name=...)``). The maths is in
:mod:`sculler.math.crf`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from sculler.backend import is_gpu_array, to_device_of, to_numpy
from sculler.core.expression import (
    LayerOutput,
    as_inputs,
    make_layer,
)
from sculler.core.faces import layer_function
from sculler.core.layer import Layer, register_layer
from sculler.math import cuda_sequences
from sculler.math.crf import crf_nll, crf_nll_backward, crf_viterbi


class _CRFBase(Layer):
    """One output column (costs) or ids, and the (C + 2) x C parameter on input 0. The
    config's size is the number of classes C, as PaddlePaddle writes it (the output is still
    one column: a cost, or ids)."""

    @classmethod
    def infer_size(cls, config, inputs):
        return inputs[0].size

    @classmethod
    def weight_dims(cls, config, inputs):
        c = inputs[0].size
        return {0: (c + 2, c)}


def _sequence_input(layer: Layer):
    arg = layer.get_input(0)
    if arg.seq_starts is None or arg.value is None or arg.is_sparse:
        raise ValueError(f"layer {layer.name!r} ({layer.type_name}): input 0 "
                         f"({layer.inputs[0].name!r}) must be a dense sequence of emission "
                         f"scores, got {arg.describe()}")
    return arg.value, to_numpy(arg.seq_starts)


def _label_ids(layer: Layer, index: int, rows: int, num_classes: int, on_device: bool = False):
    """The label ids of input ``index``, checked to lie in ``[0, num_classes)``: as int64 on
    the host, or ``on_device`` as the (int64) device array they are (checked on their host
    copy where the feeder has not checked them already, so nothing is read back)."""
    arg = layer.get_input(index)
    ids = arg.ids
    if ids is None or ids.shape != (rows,):
        raise ValueError(f"layer {layer.name!r} ({layer.type_name}): label input "
                         f"({layer.inputs[index].name!r}) must carry {rows} integer ids (one per "
                         f"token of input 0), got {arg.describe()}")
    host = None if arg.ids_known_below(num_classes) else arg.host_ids()
    if host is not None and host.size and (host.min() < 0 or host.max() >= num_classes):
        raise ValueError(f"layer {layer.name!r} ({layer.type_name}): label ids must lie in "
                         f"[0, {num_classes}), got min {int(host.min())} max {int(host.max())}")
    if on_device:
        return ids if ids.dtype == np.int64 else ids.astype(np.int64)
    return (arg.host_ids() if host is None else host).astype(np.int64, copy=False)


def _on_device(x, num_classes: int) -> bool:
    """Whether the CRF maths runs on the GPU: device emissions and at most
    ``cuda_sequences.CRF_MAX_CLASSES`` classes (a thread a class)."""
    return is_gpu_array(x) and num_classes <= cuda_sequences.CRF_MAX_CLASSES


@register_layer("crf")
class CRFLayer(_CRFBase):
    """Negative log-likelihood of a linear-chain CRF, one cost per sequence.

    ``cost_n = weight_n * (log Z_n - score_n(labels))`` with
    ``score(s) = a[s_0] + b[s_{L-1}] + sum_t x_t[s_t] + sum_t w[s_{t-1}, s_t]``.

    Inputs: emissions (T x C sequence), labels (T ids), optionally a per-sequence weight
    (N x 1). Output: (N, 1). As in PaddlePaddle, ``coeff`` (attr, default 1) scales only the
    gradients, not the reported cost. Empty sequences (decided here; PaddlePaddle does not guard
    them) cost 0 and get no gradient.
    """

    is_cost = True
    min_inputs = 2
    max_inputs = 3

    def _weight_column(self, n: int):
        arg = self.get_input(2)
        w = arg.value
        if w is None or arg.is_sparse or w.shape != (n, 1):
            raise ValueError(f"layer {self.name!r} (crf): weight input ({self.inputs[2].name!r}) "
                             f"must be a dense ({n}, 1) column, one row per sequence; got "
                             f"{arg.describe()}")
        return w[:, 0]

    def forward(self, pass_type: str) -> None:
        super().forward(pass_type)
        x, starts = _sequence_input(self)
        device = _on_device(x, x.shape[1])
        labels = _label_ids(self, 1, x.shape[0], x.shape[1], device)
        n = starts.size - 1
        out = self.reserve_output(n, 1)
        self.output.seq_starts = self.output.sub_seq_starts = None
        if device:  # one launch: the recursion, log Z and the labels' score on the GPU
            alpha, log_z = self.scratch("alpha", x.shape), self.scratch("log_z", (n,))
            self._nll = self.scratch("nll", (n,))
            cuda_sequences.crf_nll_forward(x, labels, starts, self.weights[0].w, alpha, log_z,
                                           self._nll)
            self._saved = (x, labels, starts, alpha, log_z)
        else:
            nll, self._saved = crf_nll(to_numpy(x), labels, starts,
                                       to_numpy(self.weights[0].w), alloc=self.host_scratch)
            self._nll = to_device_of(nll, out)
        out[:, 0] = self._nll
        if len(self.inputs) == 3:
            out[:, 0] *= self._weight_column(n)
        self.forward_activation()

    def backward(self, callback=None) -> None:
        self.backward_activation()
        n = self.output.grad.shape[0]
        dcost = self.output.grad[:, 0] * self.attr("coeff", 1.0)
        if len(self.inputs) == 3:
            dw_in = self.get_input_grad(2)
            if dw_in is not None:
                dw_in[:, 0] += dcost * self._nll
            dcost = dcost * self._weight_column(n)
        weight = self.weights[0]
        dx, dw = self.get_input_grad(0), weight.w_grad
        if isinstance(self._saved, tuple):  # the forward ran on the GPU
            x, labels, starts, alpha, log_z = self._saved
            parts = self.scratch("dw_parts", (n,) + tuple(weight.w.shape))
            cuda_sequences.crf_nll_backward(x, labels, starts, weight.w, alpha, log_z, dcost, dx,
                                            parts)
            if dw is not None:
                dw += parts.sum(axis=0).reshape(dw.shape)
            weight.parameter.inc_update(callback)
            return
        labels = self.get_input(1).host_ids().astype(np.int64, copy=False)
        dx_part, dw_part = self.host_part("dx", dx), self.host_part("dw", dw)
        crf_nll_backward(self._saved, labels, to_numpy(weight.w), to_numpy(dcost), dx_part,
                         dw_part, alloc=self.host_scratch)
        self.add_host_part(dx, dx_part)
        self.add_host_part(dw, dw_part)
        weight.parameter.inc_update(callback)


@register_layer("crf_decoding")
class CRFDecodingLayer(_CRFBase):
    """Viterbi decoding of a linear-chain CRF: the best tag of every token.

    ``delta_t[j] = max_i(delta_{t-1}[i] + w[i, j]) + x_t[j]`` from ``delta_0 = a + x_0``; the
    last tag maximises ``delta_{L-1} + b``; ties go to the lowest index.

    Inputs: emissions (T x C sequence), optionally labels (T ids). Output: ``ids`` (T,); with a
    label also ``value`` (T, 1) = 1 where the decoded tag differs from the label. The output
    keeps input 0's sequence layout (decided here, PaddlePaddle's effect is unverified) so the
    ``chunk`` evaluator can read it without a label. No gradient flows.
    """

    min_inputs = 1
    max_inputs = 2

    def forward(self, pass_type: str) -> None:
        super().forward(pass_type)
        x, starts = _sequence_input(self)
        device = _on_device(x, x.shape[1])
        if device:  # one launch: the recursion and the backtracking on the GPU
            tags = self.scratch("tags", (x.shape[0],), np.int64)
            cuda_sequences.crf_viterbi(x, starts, self.weights[0].w,
                                       self.scratch("back", x.shape, np.int64), tags)
        else:
            tags = crf_viterbi(to_numpy(x), starts, to_numpy(self.weights[0].w),
                               alloc=self.host_scratch)
        if len(self.inputs) == 2:
            labels = _label_ids(self, 1, x.shape[0], x.shape[1], device)
            out = self.reserve_output(x.shape[0], 1)
            out[:, 0] = to_device_of(tags != labels, out)
        else:
            self.output.value = self.output.grad = None
            self.output.seq_starts = starts
            self.output.sub_seq_starts = self.get_input(0).sub_seq_starts
        self.output.ids = to_device_of(tags, x)

    def backward(self, callback=None) -> None:
        self.weights[0].parameter.inc_update(callback)


def check_label_classes(fn: str, size: int | None, expected: int, what: str) -> int:
    if size is None:
        return expected
    if isinstance(size, bool) or not isinstance(size, int) or size != expected:
        raise ValueError(f"{fn}: size={size!r} must equal {what} ({expected})")
    return size


@layer_function(v1="crf_layer", types=("crf",))
def crf(input: LayerOutput, label: LayerOutput, size: int | None = None,  # noqa: A002
        weight: LayerOutput | None = None, param_attr: Any = None, name: str | None = None,
        coeff: float = 1.0, layer_attr: Any = None) -> LayerOutput:
    """Linear-chain CRF negative log-likelihood, one cost per sequence:
    ``weight_n * (log Z_n - score_n(label))``; ``coeff`` scales only the gradient (as in
    PaddlePaddle). ``input``: emission scores of width C = ``size``; ``label``: an id sequence
    over C classes; ``weight``: optional per-sequence column. Parameter (C + 2) x C."""
    inputs = as_inputs([input, label] + ([weight] if weight is not None else []), "crf")
    if label.size != input.size:
        raise ValueError(f"crf: input width {input.size} must equal the label's number of "
                         f"classes {label.size}")
    check_label_classes("crf", size, input.size, "the input width")
    return make_layer("crf", inputs, name=name, name_prefix="crf_layer", param_attr=param_attr,
                      bias_attr=False, layer_attr=layer_attr, attrs={"coeff": float(coeff)})


@layer_function(v1="crf_decoding_layer", types=("crf_decoding",))
def crf_decoding(input: LayerOutput, size: int, label: LayerOutput | None = None,  # noqa: A002
                 param_attr: Any = None, name: str | None = None,
                 layer_attr: Any = None) -> LayerOutput:
    """Viterbi decoding with the CRF parameter: the best tag ids of each sequence (``ids``);
    with ``label``, ``value`` is 1 per token where the decoded tag is wrong, else 0."""
    inputs = as_inputs([input] + ([label] if label is not None else []), "crf_decoding")
    check_label_classes("crf_decoding", size, input.size, "the input width")
    return make_layer("crf_decoding", inputs, name=name, name_prefix="crf_decoding_layer",
                      param_attr=param_attr, bias_attr=False, layer_attr=layer_attr)
