"""The ``mixed`` layer: ``y = f(sum of projections and operators of its inputs + b)``.

PaddlePaddle's MixedLayer. Each input's ``InputConfig.attrs["proj"]`` names what is applied
to it; a projection maps one input (with an optional per-input weight), an operator combines
input i (``proj`` = the operator) with input i+1 (``proj`` = ``"operand"``):

=================== ============================================== ===============
proj                contribution to ``y``                           weight shape
=================== ============================================== ===============
full_matrix         ``x W``                                         (D, size)
trans_full_matrix   ``x W^T``                                       (size, D)
table               ``W[ids]``                                      (dict, size)
identity            ``x`` (attr ``offset``: a window, see below)    none
dotmul              ``x * w`` elementwise                           (1, D)
scaling             ``w * x`` with one scalar                       (1, 1)
context             concatenated neighbours in each sequence        (pads, D)
conv                ``conv(x, W)`` (see mixed_conv.py)              (F, C/g*fy*fx)
dotmul_operator     ``scale * a * b`` (attr ``scale``)              none
conv_operator       ``conv(image_n, filters_n)`` per sample         none
slice               column ranges of ``x``, side by side            none
=================== ============================================== ===============

``slice`` (PaddlePaddle's SliceProjection; attr ``slices``: ``[start, end)`` column ranges,
ascending and disjoint) writes ``[x[:, s_0:e_0], x[:, s_1:e_1], ...]`` into the first columns
of ``y``; ``slice_projection`` makes the ranges from channel ranges of an image input.

``identity`` with ``offset`` adds ``x[:, offset:offset+size]`` when the input is wider than
the output, else ``x`` into ``y[:, offset:offset+D]`` (Paddle's ``addAtOffset``).
``context`` (attrs ``context_len`` L, ``context_start`` s, ``trainable_padding``) writes, for
step t, ``[x_{t+s}, ..., x_{t+s+L-1}]``; steps outside the sequence read zero or, when the
padding is trainable, row ``max(0,-s) + (t' - begin)`` (before) / ``max(0,-s) + (t' - end)``
(after) of a (max(0,-s) + max(0,s+L-1)) x D weight.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from sculler.attr import ParameterAttribute
from sculler.backend import get_array_module, is_gpu_array
from sculler.core.expression import (
    LayerOutput,
    Projection,
    auto_name,
    make_layer,
    no_support,
)
from sculler.core.faces import announce, layer_function, onnx_converter
from sculler.core.layer import Layer, register_layer
from sculler.core.model_config import LayerConfig
from sculler.layers.mixed_conv import ConvTerms, conv_geometry, operand_width
from sculler.math import cuda
from sculler.math.blas import gemm
from sculler.math.segment import add_to_rows, shifted_add
from sculler.math.sparse import add_rows, csr_matmul, csr_t_matmul_rows


def _proj_width(kind: str, attrs: dict, in_size: int) -> int:
    """Output width a projection implies by itself (0 when it takes the layer's size)."""
    if kind in ("dotmul", "scaling", "dotmul_operator"):
        return in_size
    if kind == "identity":
        if "offset" not in attrs:
            return in_size
        return int(attrs.get("size") or 0)
    if kind == "context":
        return in_size * int(attrs["context_len"])
    if kind == "slice":
        return sum(int(end) - int(start) for start, end in attrs["slices"])
    return 0


def _check_slices(config: LayerConfig, i: int, slices: Any, in_size: int) -> None:
    """ValueError unless ``slices`` are ascending, disjoint, non-empty ``[start, end)`` column
    ranges inside the input."""
    ok = isinstance(slices, (list, tuple)) and len(slices) > 0
    previous = 0
    for r in slices if ok else ():
        ok = ok and len(r) == 2 and previous <= int(r[0]) < int(r[1]) <= in_size
        previous = int(r[1]) if ok else previous
    if not ok:
        raise ValueError(f"layer {config.name!r} (mixed): slice projection input {i} needs "
                         "ascending, disjoint, non-empty [start, end) column ranges inside "
                         f"its width {in_size}, got {slices!r}")


def _context_pads(attrs: dict) -> tuple[int, int]:
    start, length = int(attrs.get("context_start", 0)), int(attrs["context_len"])
    return max(0, -start), max(0, start + length - 1)


def _weight_shape(kind: str, attrs: dict, in_size: int, size: int) -> tuple | None:
    if kind == "full_matrix" or kind == "table":
        return (in_size, size)
    if kind == "trans_full_matrix":
        return (size, in_size)
    if kind == "dotmul":
        return (1, in_size)
    if kind == "scaling":
        return (1, 1)
    if kind == "context" and attrs.get("trainable_padding"):
        begin, end = _context_pads(attrs)
        return (begin + end, in_size) if begin + end else None
    return None


KINDS = ("full_matrix", "trans_full_matrix", "table", "identity", "dotmul", "scaling",
         "context", "conv", "dotmul_operator", "conv_operator", "operand", "slice")
OPERATORS = ("dotmul_operator", "conv_operator")
# the kinds whose output row reads only the same rows of dense inputs (see Layer.row_wise)
ROW_WISE_KINDS = frozenset(("full_matrix", "trans_full_matrix", "identity", "dotmul", "scaling",
                            "dotmul_operator", "operand", "slice"))


def _padding_rows(attrs: dict, seq_starts, batch: int, xp):
    """Per column block k, the trainable padding row each step reads (-1: it reads its own
    sequence). Shape (L, batch)."""
    start, length = int(attrs.get("context_start", 0)), int(attrs["context_len"])
    begin_pad, _ = _context_pads(attrs)
    starts = xp.asarray(seq_starts)
    seq_of = xp.searchsorted(starts, xp.arange(batch), side="right") - 1
    lo, hi = starts[seq_of], starts[seq_of + 1]
    src = xp.arange(batch)[None, :] + (start + xp.arange(length))[:, None]
    inside = (src >= lo) & (src < hi)
    return xp.where(inside, -1, xp.where(src < lo, begin_pad + src - lo, begin_pad + src - hi))


@register_layer("mixed")
class MixedLayer(ConvTerms, Layer):
    """Sum of projections/operators of its inputs plus an optional bias (see module doc)."""

    @classmethod
    def is_row_wise(cls, config) -> bool:
        """Row-wise when every projection and operator is (not a table of ids, a context
        window, a convolution)."""
        return all(ic.attrs.get("proj") in ROW_WISE_KINDS for ic in config.inputs)

    @classmethod
    def _kinds(cls, config) -> list[str]:
        kinds = [ic.attrs.get("proj") for ic in config.inputs]
        for i, k in enumerate(kinds):
            if k not in KINDS:
                raise ValueError(f"layer {config.name!r} (mixed): input {i} has proj {k!r}; "
                                 f"expected one of {KINDS}")
            is_op = k in OPERATORS
            nxt = kinds[i + 1] if i + 1 < len(kinds) else None
            if is_op != (nxt == "operand") or (k == "operand" and i == 0):
                raise ValueError(f"layer {config.name!r} (mixed): an operator input must be "
                                 "followed by exactly one 'operand' input")
        return kinds

    @classmethod
    def infer_size(cls, config, inputs):
        size = config.size
        for i, (k, ic, inp) in enumerate(zip(cls._kinds(config), config.inputs, inputs)):
            if k == "slice":
                _check_slices(config, i, ic.attrs.get("slices"), inp.size)
            if k in ("conv", "conv_operator"):
                geo = conv_geometry(config, inputs, i)
                if k == "conv_operator" and inputs[i + 1].size != operand_width(geo):
                    raise ValueError(
                        f"layer {config.name!r} (mixed): conv_operator filter input "
                        f"{inputs[i + 1].name!r} has width {inputs[i + 1].size}, expected "
                        f"num_filters*channels*fy*fx = {operand_width(geo)}")
                width = geo["width"]
            else:
                width = _proj_width(k, ic.attrs, inp.size)
            if width and size and width != size:
                raise ValueError(f"layer {config.name!r} (mixed): projection {i} ({k}) of "
                                 f"{inp.name!r} gives width {width}, layer size is {size}")
            size = size or width
        if size <= 0:
            raise ValueError(f"layer {config.name!r} (mixed): give size; no projection "
                             "implies the output width")
        return size

    @classmethod
    def weight_dims(cls, config, inputs):
        dims = {}
        for i, (k, ic, inp) in enumerate(zip(cls._kinds(config), config.inputs, inputs)):
            if k == "conv":
                f, cg, fy, fx = conv_geometry(config, inputs, i)["w_shape"]
                dims[i] = (f, cg * fy * fx)
                continue
            shape = _weight_shape(k, ic.attrs, inp.size, config.size)
            if shape is not None:
                dims[i] = shape
        return dims

    def init(self, layer_map, parameter_map) -> None:
        super().init(layer_map, parameter_map)
        self.kinds = self._kinds(self.config)
        self._conv_cache: dict[int, dict] = {}

    def forward(self, pass_type: str) -> None:
        super().forward(pass_type)
        batch = self.check_same_batch()
        out = self.reserve_output(batch, self.size)
        if self._sum_in_one_kernel():
            cuda.sum_and_activate(self._in(0)[:, self._window(0)[1]],
                                  self._in(1)[:, self._window(1)[1]], out, self.activation.name,
                                  None if self.bias is None else self.bias.w.reshape(1, -1))
            self.forward_activation(applied=True)
            return
        first = self._write_first_terms(out)
        for i, kind in enumerate(self.kinds[first:], first):
            getattr(self, "_fwd_" + kind)(i, out[:, self._columns(i)])
        self.add_bias_and_activate()

    def _sum_in_one_kernel(self) -> bool:
        """Whether the layer is two dense identity projections of all its columns under an
        elementwise activation (an attention's ``tanh(W s + e)``), which the GPU forms in one
        kernel forward, ``f(x_0 + x_1 + b)``, and one backward, the activation's gradient
        added into both inputs' gradients."""
        act = self.activation
        return (self.kinds == ["identity", "identity"] and is_gpu_array(self.output.value)
                and self.inputs[0] is not self.inputs[1]
                and self._whole_term(0) and self._whole_term(1)
                and act.name in cuda.ACTIVATIONS and act.name in cuda.ACTIVATION_GRADS
                and not act.needs_input and not self.keep_preact)

    def _write_first_terms(self, out) -> int:
        """Write the first terms into ``out`` instead of clearing it and adding them (a pass
        fewer; on the GPU a launch fewer): a dense full-matrix projection as one GEMM, an
        identity as a copy, two identities as one sum. Returns how many terms it wrote (0:
        ``out`` was cleared)."""
        if self._whole_term(0) and self.kinds[0] == "full_matrix":
            gemm(self._in(0), self.weights[0].w, out)
            return 1
        if not (self._whole_term(0) and self.kinds[0] == "identity"):
            out[...] = 0
            return 0
        x = self._in(0)[:, self._window(0)[1]]
        if len(self.kinds) > 1 and self._whole_term(1) and self.kinds[1] == "identity":
            get_array_module(out).add(x, self._in(1)[:, self._window(1)[1]], out=out)
            return 2
        out[...] = x
        return 1

    def _whole_term(self, i: int) -> bool:
        """Whether term ``i`` covers every output column from a dense input (an identity: with
        its whole window)."""
        if i >= len(self.kinds) or self._columns(i) != slice(None) or self.get_input(i).is_sparse:
            return False
        return self.kinds[i] != "identity" or self._window(i)[0] == slice(None)

    def backward(self, callback=None) -> None:
        dy = self.output.grad
        if (self._sum_in_one_kernel() and not self.grad_is_preact
                and self.output_grad_unchanged()):
            grads = [(self.get_input_grad(i), self._window(i)[1]) for i in (0, 1)]
            cuda.activation_grad(self.activation.name, self.output.value, dy,
                                 tuple(g[:, cols] for g, cols in grads if g is not None))
            self.backward_activation(applied=True)
            self.backward_bias(callback)
            return
        self.backward_activation_and_bias(callback)
        for i, kind in enumerate(self.kinds):
            getattr(self, "_bwd_" + kind)(i, dy[:, self._columns(i)])
            w = self.weights[i]
            if w is not None and w.w_grad is not None:
                w.parameter.inc_update(callback)

    def _columns(self, i: int) -> slice:
        """The output columns input i's term adds to: all of them (``concat2`` overrides)."""
        return slice(None)

    # ---- projections: _fwd_<kind>(i, out) adds to out; _bwd_<kind>(i, dy) accumulates ----
    def _in(self, i: int):
        return self.get_input_value(i)

    def _add_in_grad(self, i: int, value) -> None:
        g = self.get_input_grad(i)
        if g is not None:
            g += value

    def _fwd_full_matrix(self, i, out):
        self._add_product(i, out, self.weights[i].w)

    def _bwd_full_matrix(self, i, dy):
        self._product_grads(i, dy, transposed=False)

    def _fwd_trans_full_matrix(self, i, out):
        self._add_product(i, out, self.weights[i].w.T)

    def _bwd_trans_full_matrix(self, i, dy):
        self._product_grads(i, dy, transposed=True)

    def _add_product(self, i: int, out, w) -> None:
        """``out += x_i w``; a sparse ``x_i`` through its CSR product (as the fc layer)."""
        if self.get_input(i).is_sparse:
            csr_matmul(self._in(i), w, out, 1.0)
        else:
            gemm(self._in(i), w, out, 1.0)

    def _product_grads(self, i: int, dy, transposed: bool) -> None:
        """Gradients of ``out += x_i W`` (``W^T`` when ``transposed``): ``dW += x^T dy`` (its
        transpose) and ``dx += dy W^T`` (``dy W``). A sparse ``x`` (data, no gradient) touches
        only the rows of ``W`` its columns name (of ``W^T`` when transposed), which a
        non-transposed weight records for a sparse row update."""
        w = self.weights[i]
        x = self._in(i)
        if w.w_grad is not None:
            if self.get_input(i).is_sparse:
                rows, grad_rows = csr_t_matmul_rows(x, dy)
                if transposed:
                    w.w_grad[:, rows] += grad_rows.T
                else:
                    add_to_rows(w.w_grad, rows, grad_rows)
                    w.parameter.touched_rows.append(rows)
            elif transposed:
                gemm(dy.T, x, w.w_grad, 1.0)
            else:
                gemm(x.T, dy, w.w_grad, 1.0)
        g = self.get_input_grad(i)
        if g is not None:
            gemm(dy, w.w if transposed else w.w.T, g, 1.0)

    def _fwd_table(self, i, out):
        ids = self.get_input(i).ids
        if ids is None:
            raise ValueError(f"layer {self.name!r} (mixed): table projection input {i} "
                             f"({self.inputs[i].name!r}) must carry integer ids, got "
                             f"{self.get_input(i).describe()}")
        out += self.weights[i].w[ids]

    def _bwd_table(self, i, dy):
        w = self.weights[i]
        if w.w_grad is not None:
            arg = self.get_input(i)
            ids = arg.ids
            add_rows(w.w_grad, ids, dy, arg.host_ids())
            w.parameter.touched_rows.append(ids)

    def _window(self, i):
        """(output slice, input slice) of an identity projection."""
        attrs = self.config.inputs[i].attrs
        off, width = int(attrs.get("offset", 0)), self.inputs[i].size
        if width >= self.size:
            return slice(None), slice(off, off + self.size)
        return slice(off, off + width), slice(None)

    def _fwd_identity(self, i, out):
        o, s = self._window(i)
        out[:, o] += self._in(i)[:, s]

    def _bwd_identity(self, i, dy):
        g = self.get_input_grad(i)
        if g is not None:
            o, s = self._window(i)
            g[:, s] += dy[:, o]

    def _fwd_dotmul(self, i, out):
        out += self._in(i) * self.weights[i].w

    def _bwd_dotmul(self, i, dy):
        w = self.weights[i]
        if w.w_grad is not None:
            w.w_grad += (self._in(i) * dy).sum(axis=0, keepdims=True)
        self._add_in_grad(i, dy * w.w)

    def _fwd_scaling(self, i, out):
        out += self.weights[i].w[0, 0] * self._in(i)

    def _bwd_scaling(self, i, dy):
        w = self.weights[i]
        if w.w_grad is not None:
            w.w_grad += (self._in(i) * dy).sum()
        self._add_in_grad(i, w.w[0, 0] * dy)

    def _taps(self, i) -> tuple[int, int, np.ndarray]:
        """``(context_start, context_len, seq_starts)`` of context projection input i."""
        attrs, arg = self.config.inputs[i].attrs, self.get_input(i)
        if arg.seq_starts is None:
            raise ValueError(f"layer {self.name!r} (mixed): context projection input {i} "
                             f"({self.inputs[i].name!r}) must be a sequence, got "
                             f"{arg.describe()}")
        return int(attrs.get("context_start", 0)), int(attrs["context_len"]), arg.seq_starts

    def _fwd_context(self, i, out):
        start, length, starts = self._taps(i)
        x, d, w = self._in(i), self.inputs[i].size, self.weights[i]
        for k in range(length):  # each tap a shift: distinct rows, one slice add is exact
            shifted_add(out[:, k * d : (k + 1) * d], x, start + k, starts)
        if w is None:
            return
        pad = _padding_rows(self.config.inputs[i].attrs, starts, x.shape[0], get_array_module(x))
        for k in range(length):
            block = out[:, k * d : (k + 1) * d]
            use = pad[k] >= 0
            block[use] += w.w[pad[k][use]]

    def _bwd_context(self, i, dy):
        start, length, starts = self._taps(i)
        d, w, g = self.inputs[i].size, self.weights[i], self.get_input_grad(i)
        if g is not None:
            for k in range(length):
                shifted_add(g, dy[:, k * d : (k + 1) * d], start + k, starts, transpose=True)
        if w is None or w.w_grad is None:
            return
        xp = get_array_module(dy)
        pad = _padding_rows(self.config.inputs[i].attrs, starts, dy.shape[0], xp)
        for k in range(length):  # sequences share the padding rows: a scatter-add
            use = pad[k] >= 0
            xp.add.at(w.w_grad, pad[k][use], dy[:, k * d : (k + 1) * d][use])

    def _slices(self, i):
        """(output columns, input columns) of each range of a slice projection."""
        offset = 0
        for start, end in self.config.inputs[i].attrs["slices"]:
            yield slice(offset, offset + end - start), slice(start, end)
            offset += end - start

    def _fwd_slice(self, i, out):
        x = self._in(i)
        for o, s in self._slices(i):
            out[:, o] += x[:, s]

    def _bwd_slice(self, i, dy):
        g = self.get_input_grad(i)
        if g is not None:
            for o, s in self._slices(i):
                g[:, s] += dy[:, o]

    def _fwd_dotmul_operator(self, i, out):
        scale = self.config.inputs[i].attrs.get("scale", 1.0)
        out += scale * self._in(i) * self._in(i + 1)

    def _bwd_dotmul_operator(self, i, dy):
        scale = self.config.inputs[i].attrs.get("scale", 1.0)
        self._add_in_grad(i, scale * dy * self._in(i + 1))
        self._add_in_grad(i + 1, scale * dy * self._in(i))

    def _fwd_operand(self, i, out):
        """The second operand of the operator at input i-1; it adds nothing by itself."""

    def _bwd_operand(self, i, dy):
        """Handled by the operator at input i-1."""

    def prefetch(self) -> dict[str, np.ndarray]:
        """Rows of remotely updated tables the batch reads: a table projection's ids, and the
        columns a sparse input of a full-matrix projection names (as the fc layer)."""
        rows = {}
        for i, kind in enumerate(self.kinds):
            w = self.weights[i]
            if w is None or not w.parameter.config.sparse_remote_update:
                continue
            if kind == "table" or (kind == "full_matrix" and self.get_input(i).is_sparse):
                rows[w.parameter.name] = self.get_input(i).table_rows()
        return rows




@layer_function(v1="full_matrix_projection", kind="plain")
def full_matrix_projection(input: LayerOutput, size: int = 0,  # noqa: A002
                           param_attr: Any = None) -> Projection:
    """``x W`` with W of shape (input width, size)."""
    return Projection("full_matrix", [input], param_attr=param_attr, size=size)


@layer_function(v1="trans_full_matrix_projection", kind="plain")
def trans_full_matrix_projection(input: LayerOutput, size: int = 0,  # noqa: A002
                                 param_attr: Any = None) -> Projection:
    """``x W^T`` with W of shape (size, input width) (e.g. to share an fc's weight)."""
    return Projection("trans_full_matrix", [input], param_attr=param_attr, size=size)


@layer_function(v1="table_projection", kind="plain")
def table_projection(input: LayerOutput, size: int = 0,  # noqa: A002
                     param_attr: Any = None) -> Projection:
    """Row ``id`` of a (dictionary x size) table for each integer id."""
    return Projection("table", [input], param_attr=param_attr, size=size)


@layer_function(v1="identity_projection", kind="plain")
def identity_projection(input: LayerOutput, offset: int | None = None,  # noqa: A002
                        size: int | None = None) -> Projection:
    """``x`` itself; with ``offset`` the window ``x[:, offset:offset+size]`` (size default
    ``input width - offset``), or ``x`` placed at ``offset`` of a wider output."""
    if offset is None:
        no_support("identity_projection", size=size)
        return Projection("identity", [input], size=input.size)
    if size is None:
        size = input.size - int(offset)
    if offset < 0 or size <= 0:
        raise ValueError(f"identity_projection: offset {offset} and size {size} must give a "
                         f"non-empty window of the input ({input.size} wide)")
    return Projection("identity", [input], {"offset": int(offset), "size": int(size)},
                      size=size)


@layer_function(v1="dotmul_projection", kind="plain")
def dotmul_projection(input: LayerOutput, param_attr: Any = None) -> Projection:  # noqa: A002
    """``x * w`` elementwise with a learned (1 x width) ``w``."""
    return Projection("dotmul", [input], param_attr=param_attr, size=input.size)


@layer_function(v1="slice_projection", kind="plain")
def slice_projection(input: LayerOutput, slices: Any) -> Projection:  # noqa: A002
    """Channel ranges ``[start, end)`` of an image input (a convolution's output), side by
    side: ``[x[c_0:e_0], x[c_1:e_1], ...]``, each channel ``H*W`` values. The ranges must be
    ascending and disjoint. No parameter."""
    fn = "slice_projection"
    channels = input.config.attrs.get("out_channels") if isinstance(input, LayerOutput) else None
    if channels is None:
        raise ValueError(f"{fn}: input must be an image layer with channels (a convolution's "
                         f"output), got {input!r}")
    if not isinstance(slices, (list, tuple)) or not slices or not all(
            isinstance(r, (list, tuple)) and len(r) == 2 for r in slices):
        raise ValueError(f"{fn}: slices must be a non-empty list of [start, end) channel "
                         f"ranges, got {slices!r}")
    pixels = input.size // int(channels)
    if slices[-1][1] > channels:
        raise ValueError(f"{fn}: slice {list(slices[-1])} reaches past the {channels} channels "
                         f"of {input.name!r}")
    columns = [[int(start) * pixels, int(end) * pixels] for start, end in slices]
    return Projection("slice", [input], {"slices": columns})


@layer_function(v1="scaling_projection", kind="plain")
def scaling_projection(input: LayerOutput, param_attr: Any = None) -> Projection:  # noqa: A002
    """``w * x`` with one learned scalar ``w``."""
    return Projection("scaling", [input], param_attr=param_attr, size=input.size)


@layer_function(v1="context_projection", kind="plain")
def context_projection(input: LayerOutput, context_len: int,  # noqa: A002
                       context_start: int | None = None, padding_attr: Any = False) -> Projection:
    """Steps ``t+s .. t+s+L-1`` of each sequence side by side (width ``L * input width``);
    ``context_start`` defaults to ``-(L-1)//2``; out-of-sequence steps are zero
    (``padding_attr=False``, the default), or learned rows: ``padding_attr`` None or True
    gives zero-initialised trainable padding (PaddlePaddle's bias-default rule), an
    ``attr.Param`` trainable padding with those settings."""
    if int(context_len) <= 0:
        raise ValueError(f"context_projection: context_len must be positive, got {context_len}")
    start = -(int(context_len) - 1) // 2 if context_start is None else int(context_start)
    attrs = {"context_len": int(context_len), "context_start": start}
    if padding_attr is not False:
        attrs["trainable_padding"] = True
    if padding_attr is None or padding_attr is True:
        param = ParameterAttribute(initial_std=0.0, initial_mean=0.0)
    elif padding_attr is False or isinstance(padding_attr, (ParameterAttribute, dict)):
        param = padding_attr or None
    else:
        raise TypeError(f"context_projection: padding_attr must be False, True, None or an "
                        f"attr.Param, got {padding_attr!r}")
    return Projection("context", [input], attrs, param_attr=param,
                      size=input.size * int(context_len))


@layer_function(v1="dotmul_operator", kind="plain")
def dotmul_operator(a: LayerOutput | None = None, b: LayerOutput | None = None,
                    scale: float = 1, **kwargs: Any) -> Projection:
    """``scale * a * b`` elementwise; ``a`` and ``b`` have one width."""
    if "x" in kwargs or "y" in kwargs:
        a, b = kwargs.pop("x", a), kwargs.pop("y", b)
    no_support("dotmul_operator", **kwargs)
    if a is None or b is None or a.size != b.size:
        raise ValueError("dotmul_operator: needs layers a and b of one width, got "
                         f"{getattr(a, 'size', None)} and {getattr(b, 'size', None)}")
    return Projection("dotmul_operator", [a, b], {"scale": float(scale)}, size=a.size)


class MixedLayerType(LayerOutput):
    """The mixed layer under construction: ``+=`` adds projections; leaving the ``with``
    block (or giving ``input=``) builds it, after which it is an ordinary layer."""

    def __init__(self, name: str | None, size: int, act: Any, bias_attr: Any,
                 layer_attr: Any):
        name = name or auto_name("mixed")
        super().__init__(LayerConfig(name=name, type="mixed", size=int(size or 0)), [])
        self._settings = (size, act, bias_attr, layer_attr)
        self._projections: list[Projection] = []
        self.finalized = False

    def __iadd__(self, other: Projection | list) -> MixedLayerType:
        if self.finalized:
            raise ValueError(f"mixed layer {self.name!r} is already built; add projections "
                             "before leaving the with block")
        for p in other if isinstance(other, (list, tuple)) else [other]:
            if not isinstance(p, Projection):
                raise TypeError(f"mixed layer {self.name!r}: += takes a projection or operator "
                                f"(e.g. full_matrix_projection(x)), got {type(p).__name__}")
            self._projections.append(p)
        return self

    def __enter__(self) -> MixedLayerType:
        return self

    def __exit__(self, exc_type, *exc) -> None:
        if exc_type is None:
            self.finalize()

    def finalize(self) -> None:
        if not self._projections:
            raise ValueError(f"mixed layer {self.name!r} has no projection")
        size, act, bias_attr, layer_attr = self._settings
        size = size or next((p.size for p in self._projections if p.size), 0)
        inputs, in_attrs, params = [], [], []
        for p in self._projections:
            inputs += p.inputs
            in_attrs += p.input_attrs()
            params += [p.param_attr] + [None] * (len(p.inputs) - 1)
        built = make_layer("mixed", inputs, name=self.name, size=size, act=act,
                           param_attr=params, bias_attr=bias_attr, layer_attr=layer_attr,
                           input_attrs=in_attrs)
        order = self.order
        self.__dict__.update(built.__dict__)
        self.order = order
        self.finalized = True
        announce(self)


@layer_function(v1="mixed_layer", types=("mixed",), prefix="mixed")
def mixed(size: int = 0, input: Any = None, name: str | None = None,  # noqa: A002
          act: Any = None, bias_attr: Any = False, layer_attr: Any = None) -> MixedLayerType:
    """``y = act(sum of projections + b)``; default act Linear, no bias. Give ``input`` (a
    projection or a list) or use the ``with mixed(...) as m: m += proj`` form."""
    m = MixedLayerType(name, size, act, bias_attr, layer_attr)
    if input is not None:
        m += input
        m.finalize()
    return m


@onnx_converter("mixed")
def mixed_to_onnx(g: Any, lc: LayerConfig, ins: list[str], ctx: Any) -> str:
    """Sum of the projections (see sculler.layers.mixed) plus bias."""
    parts = []
    for i, (ic, x) in enumerate(zip(lc.inputs, ins)):
        kind, hint = ic.attrs.get("proj"), f"{lc.name}/{i}"
        if kind != "table":
            ctx.require_dense(lc, i, x)
        w = ctx.weight(ic.input_parameter_name) if ic.input_parameter_name else None
        if kind == "full_matrix":
            parts.append(g.op("MatMul", [x, g.const(hint, w)], hint))
        elif kind == "trans_full_matrix":
            parts.append(g.op("MatMul", [x, g.const(hint, w.T)], hint))
        elif kind == "table":
            if ctx.kind.get(x) != "ids":
                raise NotImplementedError(f"layer {lc.name!r} (mixed): table projection input "
                                          f"{i} is not integer ids")
            parts.append(g.op("Gather", [g.const(hint, w), x], hint, axis=0))
        elif kind == "identity":
            parts.append(_identity_to_onnx(g, lc, i, x, ctx, hint))
        elif kind == "dotmul":
            parts.append(g.op("Mul", [x, g.const(hint, w.reshape(1, -1))], hint))
        elif kind == "scaling":
            parts.append(g.op("Mul", [x, g.const(hint, w.reshape(()))], hint))
        elif kind == "dotmul_operator":
            prod = g.op("Mul", [x, ins[i + 1]], hint)
            scale = float(ic.attrs.get("scale", 1.0))
            parts.append(g.op("Mul", [prod, g.const(hint, scale)], hint))
        elif kind == "slice":
            pieces = [g.op("Slice", [x, g.const(f"{hint}/s{k}", [start], np.int64),
                                     g.const(f"{hint}/e{k}", [end], np.int64),
                                     g.const(f"{hint}/a{k}", [1], np.int64)], hint)
                      for k, (start, end) in enumerate(ic.attrs["slices"])]
            parts.append(pieces[0] if len(pieces) == 1 else
                         g.op("Concat", pieces, hint, axis=1))
        elif kind != "operand":
            raise NotImplementedError(f"layer {lc.name!r} (mixed): projection {kind!r} "
                                      f"(input {i})")
    y = parts[0] if len(parts) == 1 else g.op("Sum", parts, lc.name)
    return ctx.bias(g, lc, y)


def _identity_to_onnx(g: Any, lc: LayerConfig, i: int, x: str, ctx: Any,
              hint: str) -> str:
    """An identity projection with ``offset``: a column window of a wider input, or the
    input placed at ``offset`` in the (wider) output."""
    width = ctx.layers[lc.inputs[i].input_layer_name].size
    off = int(lc.inputs[i].attrs.get("offset", 0))
    if width == lc.size and off == 0:
        return x
    if width >= lc.size:
        return g.op("Slice", [x, g.const(f"{hint}/s", [off], np.int64),
                              g.const(f"{hint}/e", [off + lc.size], np.int64),
                              g.const(f"{hint}/a", [1], np.int64)], hint)
    pads = g.const(f"{hint}/pads", [0, off, 0, lc.size - off - width], np.int64)
    return g.op("Pad", [x, pads], hint)
