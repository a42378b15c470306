"""The ``Layer`` base class and the registry of layer types.

A layer (mirroring PaddlePaddle's C++ ``Layer``) declares its parameter shapes at config time
(``infer_size``, ``weight_dims``, ``bias_dims``), binds them in ``init``, computes ``forward``
into a reused output buffer and ``backward`` into input and parameter gradients, accumulating
(``+=``) so outputs may feed several layers and parameters may be shared. The base class applies
the activation and dropout, and each parameter is told (``inc_update``) when its gradient is in.

First write (opt-in, ``first_write = True``): instead of ``+=`` into buffers a network zeroed,
such a layer asks :meth:`Layer.input_grad_beta` / :meth:`Layer.param_grad_beta` right before it
writes a gradient and gets ``0.0`` when it is the first contribution of this backward pass (the
buffer holds stale data: overwrite it, e.g. GEMM with beta = 0) or ``1.0`` (add). A network
skips zeroing only the buffers all of whose writers opted in; the rest are zeroed as before.

Gradient past the activation (opt-in, for fused cost layers): a consumer that can write dL/dz
of its input layer directly (e.g. cross entropy on a softmax: ``p - onehot``) asks
:meth:`Layer.preact_grad_writable` (it is the only reader, writing first, and no dropout or
error clipping intervenes), writes dL/dz and sets ``grad_is_preact``; the input layer's
``backward_activation`` then skips the activation's backward for that pass. The Network
fills ``consumers``; every ``reserve_output`` clears the flag.
"""

from __future__ import annotations

import importlib
import math
import zlib
from typing import Any, ClassVar

import numpy as np

from sculler import backend
from sculler.core.activation import get_activation
from sculler.core.argument import Argument
from sculler.core.model_config import LayerConfig
from sculler.core.parameter import Parameter, ParameterSet, UpdateCallback, Weight
from sculler.core.suggest import close_matches
from sculler.math import cuda
from sculler.math.blas import col_sum

PASS_TRAIN = "train"
PASS_TEST = "test"
PASS_GC = "gc"  # gradient check: training semantics with a fixed dropout mask

# type name -> class, filled by @register_layer in the families that ``sculler.layers`` imports
# (sculler/__init__.py imports that package first); core never imports the families
_REGISTRY: dict[str, type[Layer]] = {}
# types whose class lives above the engine (a front end): imported by name on first lookup
_DEFERRED = {"py_layer": "sculler.eager.layer_bridge"}


def register_layer(*type_names: str):
    """Class decorator registering a layer under one or more type names (first is canonical)."""

    def deco(cls: type[Layer]) -> type[Layer]:
        for n in type_names:
            built_in = _REGISTRY.get(n)
            if (built_in is not None and built_in.__module__.startswith("sculler.")
                    and not cls.__module__.startswith("sculler.")):
                raise ValueError(
                    f"register_layer: layer type {n!r} is already the built-in "
                    f"{built_in.__module__}.{built_in.__qualname__}; give {cls.__qualname__} "
                    "a name of its own")
            _REGISTRY[n] = cls
        cls.type_name = type_names[0]
        return cls

    return deco


def get_layer_class(type_name: str) -> type[Layer]:
    """The class registered as ``type_name``; an unknown name lists the close matches."""
    cls = _REGISTRY.get(type_name)
    if cls is None and type_name in _DEFERRED:
        importlib.import_module(_DEFERRED[type_name])
        cls = _REGISTRY.get(type_name)
    if cls is None:
        close = close_matches(type_name, _REGISTRY, n=5, cutoff=0.5)
        raise ValueError(
            f"unknown layer type {type_name!r}; close matches: {close or 'none'}. "
            "Register your own with @register_layer(name)."
        )
    return cls


def equal_widths(config: LayerConfig, inputs: list[LayerConfig]) -> int:
    """The common width of ``inputs`` (config time); ValueError naming the layer and both
    inputs when two differ."""
    first = inputs[0]
    for other in inputs[1:]:
        if other.size != first.size:
            raise ValueError(f"layer {config.name!r} ({config.type}): inputs {first.name!r} and "
                             f"{other.name!r} have widths {first.size} and {other.size}; they "
                             "must be equal")
    return first.size


def ids_out_of_range(ids, bound: int) -> bool:
    """Whether any integer id lies outside ``[0, bound)``. For int64 numpy ids this is one
    reduction: read as uint64, a negative id is above any bound."""
    if not ids.size:
        return False
    if type(ids) is np.ndarray and ids.dtype == np.int64:
        return int(np.maximum.reduce(ids.view(np.uint64), axis=None)) >= bound
    return bool(ids.min() < 0 or ids.max() >= bound)


def first_id_out_of_range(ids, bound: int) -> int | None:
    """The first id outside ``[0, bound)`` (for an error message), None when every id lies
    inside: the common case costs :func:`ids_out_of_range`'s one reduction."""
    if not ids_out_of_range(ids, bound):
        return None
    return int(ids[(ids < 0) | (ids >= bound)][0])


def layer_types() -> list[str]:
    """Every registered layer type name, sorted."""
    return sorted(_REGISTRY)


def _reserve(buf, n: int, dtype, host: bool = False):
    """Grow-only flat buffer (on the host with ``host``, else on the current device):
    reallocate only when more than its capacity is asked for."""
    if buf is None or buf.size < n or buf.dtype != dtype:
        return (np if host else backend.xp()).empty(max(n, 1), dtype=dtype)
    return buf


class Layer:
    """Base class of every layer. Subclasses override ``forward``/``backward`` and, where they
    have parameters, ``weight_dims`` (and ``default_bias``)."""

    type_name: ClassVar[str] = ""
    default_bias: ClassVar[bool] = False
    is_cost: ClassVar[bool] = False
    min_inputs: ClassVar[int] = 1
    max_inputs: ClassVar[int | None] = None
    # opt-in: backward writes every input/parameter gradient it touches with the beta from
    # input_grad_beta / param_grad_beta (see the module docstring)
    first_write: ClassVar[bool] = False
    # a layer that uses its act inside (a cell's candidate activation), not on its output:
    # the Network then does not require its forward to call forward_activation()
    uses_act_inside: ClassVar[bool] = False
    # each output row depends only on the same row of the inputs (an fc): a recurrent
    # group may then run the layer once over every step's rows (core/recurrent_group.py);
    # a layer for which it depends on the config overrides is_row_wise
    row_wise: ClassVar[bool] = False

    # ---- config time: sizes and parameter shapes, shared by every front end ----
    @classmethod
    def infer_size(cls, config: LayerConfig, inputs: list[LayerConfig]) -> int:
        """Output width; by default the configured ``size``, which must be positive."""
        if config.size <= 0:
            raise ValueError(
                f"layer {config.name!r} (type {config.type!r}) needs a positive size, "
                f"got {config.size}"
            )
        return config.size

    @classmethod
    def resolve_size(cls, config: LayerConfig, inputs: list[LayerConfig]) -> int:
        """:meth:`infer_size`, checked against the size the user declared (if any): a layer
        whose inputs give another width is an error, as in PaddlePaddle, never overridden."""
        size = int(cls.infer_size(config, inputs))
        if config.size and size != config.size:
            raise ValueError(
                f"layer {config.name!r} ({config.type}) declares size {config.size}, but its "
                f"inputs {[i.name for i in inputs]} of widths {[i.size for i in inputs]} give "
                f"{size}; drop size or fix it"
            )
        return size

    @classmethod
    def is_row_wise(cls, config: LayerConfig) -> bool:
        """Whether each output row of ``config`` depends only on the same rows of its inputs
        (``row_wise``, unless the kind of computation depends on the config)."""
        return cls.row_wise

    @classmethod
    def variant(cls, config: LayerConfig) -> type[Layer]:
        """The class that runs ``config``: this one, unless one engine type covers several
        kinds told apart by an attr (``norm`` with its ``norm_type``, as in PaddlePaddle)."""
        return cls

    @classmethod
    def weight_dims(cls, config: LayerConfig, inputs: list[LayerConfig]) -> dict[int, tuple]:
        """Shape of the weight of each input that has one (``{input_index: dims}``)."""
        return {}

    @classmethod
    def bias_dims(cls, config: LayerConfig, inputs: list[LayerConfig]) -> tuple:
        return (1, config.size)

    @classmethod
    def paddle_dims(cls, config: LayerConfig, inputs: list[LayerConfig]) -> dict[int | str, tuple]:
        """The dims PaddlePaddle's config writes for a parameter (an input index, or
        ``"bias"``) where they differ from its array shape (``()``: none written); only the
        protobuf form of the ModelConfig reads them."""
        return {}

    @classmethod
    def weight_defaults(cls, config: LayerConfig, inputs: list[LayerConfig]) -> dict[int, dict]:
        """Default ParameterConfig settings per weight (the user's settings override them),
        e.g. batch norm's static moving statistics."""
        return {}

    @classmethod
    def extra_parameters(cls, config: LayerConfig, inputs: list[LayerConfig]) -> list:
        """ParameterConfigs the layer uses besides its weights and bias (a recurrent group's
        step parameters); the builder adds them to the model."""
        return []

    @classmethod
    def check_config(cls, config: LayerConfig, inputs: list[LayerConfig]) -> None:
        n = len(inputs)
        if n < cls.min_inputs or (cls.max_inputs is not None and n > cls.max_inputs):
            want = (
                f"{cls.min_inputs}" if cls.max_inputs == cls.min_inputs
                else f"{cls.min_inputs}..{cls.max_inputs if cls.max_inputs else 'any'}"
            )
            raise ValueError(
                f"layer {config.name!r} (type {config.type!r}) takes {want} inputs, got {n}"
            )

    # ---- run time ----
    def __init__(self, config: LayerConfig):
        self.config = config
        self.name = config.name
        self.size = config.size
        self.activation = get_activation(config.active_type)
        self.output = Argument()
        self.inputs: list[Layer] = []
        self.weights: list[Weight | None] = []
        self.bias: Weight | None = None
        self.need_gradient = True
        self.pass_type = PASS_TEST
        self.dtype = backend.get_default_dtype()
        self._bufs: dict[str, Any] = {}
        # attr.Extra(error_clipping_threshold=t): dL/dy clipped to [-t, t] before backward
        self.error_clipping_threshold = float(config.attrs.get("error_clipping_threshold") or 0)
        self._views: dict[str, Any] = {}  # the last view handed out per scratch key
        # first-write state, managed by the Network: whether reserve_output may leave the
        # output gradient uncleared, and whether it still is (nobody has written it)
        self.defer_grad_zero = False
        self.grad_unwritten = False
        # set by the Network: where reserve_output leaves a device gradient to clear, so that
        # the network clears them all in a few launches once its forward pass is done
        self.zero_sink: list | None = None
        # set by the Network: the layers that read this one's output
        self.consumers: list[Layer] = []
        # set by the Network's backward for a cost output: its gradient is 1 but was not
        # written (see accepts_unit_output_grad)
        self.unit_output_grad = False
        # set for one backward pass by a sole consumer that wrote dL/dz (the gradient before
        # this layer's activation) instead of dL/dy: backward_activation then has nothing to do
        self.grad_is_preact = False
        # set by a consumer that reads this layer's pre-activation values (the logits under a
        # softmax, for a cross-entropy whose probabilities underflow): forward_activation
        # keeps a copy of them in the "preact" scratch even when the activation needs none
        self.keep_preact = False
        # set by every forward_activation: lets the Network refuse a layer given a
        # non-linear act whose forward never applies it
        self.activation_applied = False
        # set by an owner that wants the output in rows of its own buffers (a recurrent
        # group's time-major frontier): (value, gradient) views that reserve_output uses when
        # they have the batch's shape; the owner clears that gradient
        self.output_rows: tuple | None = None
        # per-layer stream (dropout masks), reproducible across processes
        self._rng = np.random.RandomState(zlib.crc32(config.name.encode()))

    def attr(self, key: str, default: Any = None) -> Any:
        return self.config.attrs.get(key, default)

    def init(self, layer_map: dict[str, Layer], parameter_map: ParameterSet) -> None:
        """Bind input layers and the weights of this layer's parameters."""
        self.inputs = [layer_map[n] for n in self.config.input_layer_names]
        self.weights = [
            Weight(parameter_map[ic.input_parameter_name]) if ic.input_parameter_name else None
            for ic in self.config.inputs
        ]
        if self.config.bias_parameter_name:
            self.bias = Weight(parameter_map[self.config.bias_parameter_name])

    @property
    def parameters(self) -> list[Parameter]:
        ws = [w for w in self.weights if w is not None]
        if self.bias is not None:
            ws.append(self.bias)
        return [w.parameter for w in ws]

    def get_input(self, i: int) -> Argument:
        return self.inputs[i].output

    def get_input_value(self, i: int):
        return self.inputs[i].output.value

    def get_input_grad(self, i: int):
        """Gradient buffer of input ``i``, or None where that input needs no gradient."""
        return self.inputs[i].output.grad

    def input_grad_beta(self, i: int) -> float:
        """For a ``first_write`` layer about to write input ``i``'s gradient: ``0.0`` when
        this is its first contribution in this backward pass (overwrite the buffer), else
        ``1.0`` (add). Ask right before writing, once per write."""
        src = self.inputs[i]
        if src.grad_unwritten:
            src.grad_unwritten = False
            return 0.0
        return 1.0

    def param_grad_beta(self, weight: Weight) -> float:
        """As :meth:`input_grad_beta`, for the gradient of ``weight``'s parameter."""
        p = weight.parameter
        if p.grad_unwritten:
            p.grad_unwritten = False
            return 0.0
        return 1.0

    def get_output_value(self):
        return self.output.value

    def get_output_grad(self):
        return self.output.grad

    def scratch(self, key: str, shape: tuple, dtype=None, host: bool = False):
        """A named grow-only work buffer of ``shape`` (contents undefined), on the current
        device, or on the host with ``host`` (for maths that runs there on either device)."""
        if host:
            key = "host:" + key
        view = self._views.get(key)
        if view is not None and view.shape == shape and view.dtype == (dtype or self.dtype):
            return view  # the same request as last time: the same view
        dtype = np.dtype(dtype or self.dtype)
        n = math.prod(shape)
        buf = self._bufs[key] = _reserve(self._bufs.get(key), n, dtype, host)
        view = self._views[key] = buf[:n].reshape(shape)
        return view

    def host_scratch(self, key: str, shape: tuple, dtype=None):
        """:meth:`scratch` on the host whatever the device."""
        return self.scratch(key, shape, dtype, host=True)

    def host_part(self, key: str, grad):
        """Where maths that runs on the host can ADD its share of ``grad``: ``grad`` itself
        when it is a host array (or None), else a zeroed host buffer that
        :meth:`add_host_part` then adds into ``grad`` on its device."""
        if grad is None or not backend.is_gpu_array(grad):
            return grad
        part = self.host_scratch(key, grad.shape, grad.dtype)
        part[...] = 0
        return part

    @staticmethod
    def add_host_part(grad, part) -> None:
        """``grad += part`` for a buffer from :meth:`host_part` (nothing when it is ``grad``)."""
        if part is not None and part is not grad:
            grad += backend.to_device_of(part, grad)

    def reserve_output(self, batch_size: int, size: int):
        """Size the output (and its zeroed gradient) for this batch, reusing memory: buffers
        grow when a batch is larger and are reused as views when it is smaller. Sequence
        layout is inherited from input 0. With ``output_rows`` of that shape the output and
        its gradient are those views (their owner clears the gradient)."""
        self.grad_is_preact = False
        bound = self.output_rows
        if bound is not None and bound[0].shape == (batch_size, size):
            self.output.value = bound[0]
            if self.need_gradient:
                self.output.grad = bound[1]
                self.grad_unwritten = False
        else:
            self._reserve_own_output(batch_size, size)
        if self.inputs:
            src = self.inputs[0].output
            self.output.seq_starts = src.seq_starts
            self.output.sub_seq_starts = src.sub_seq_starts
        return self.output.value

    def _reserve_own_output(self, batch_size: int, size: int) -> None:
        self.output.value = self.scratch("value", (batch_size, size))
        if self.need_gradient:
            grad = self.scratch("grad", (batch_size, size))
            if self.defer_grad_zero:
                self.grad_unwritten = True
            elif self.zero_sink is not None and backend.is_gpu_array(grad):
                self.zero_sink.append(grad)
            else:
                grad[...] = 0
            self.output.grad = grad

    def check_input_width(self, i: int, expected: int) -> None:
        """ValueError naming this layer, the input and both widths when they differ."""
        arg = self.get_input(i)
        width = arg.value.shape[1] if arg.value is not None else None
        if width != expected:
            raise ValueError(
                f"layer {self.name!r} ({self.type_name}): input {i} ({self.inputs[i].name!r}) "
                f"has width {width}, expected {expected}"
            )

    def check_same_batch(self) -> int:
        inputs = self.inputs
        if len(inputs) == 1:
            return inputs[0].output.batch_size
        sizes = [inp.output.batch_size for inp in inputs]
        if len(set(sizes)) > 1:
            names = [inp.name for inp in self.inputs]
            raise ValueError(
                f"layer {self.name!r} ({self.type_name}): inputs {names} have different batch "
                f"sizes {sizes}"
            )
        return sizes[0]

    def forward(self, pass_type: str) -> None:
        """Subclasses call this first, then compute and call ``forward_activation()``."""
        self.pass_type = pass_type

    def backward(self, callback: UpdateCallback | None = None) -> None:
        """Subclasses call ``backward_activation()`` first, then accumulate gradients."""

    def prefetch(self) -> dict[str, np.ndarray]:
        """Rows of sparse parameters this batch needs, by parameter name (default: none)."""
        return {}

    def add_bias(self) -> None:
        """``y += b`` for the common (1, size) bias (no-op without a bias)."""
        if self.bias is not None:
            self.output.value += self.bias.w.reshape(1, -1)

    def add_bias_and_activate(self) -> None:
        """:meth:`add_bias` then :meth:`forward_activation`: on the GPU one kernel when the
        activation is elementwise (``cuda.ACTIVATIONS``) and nothing needs the values before
        it, or a narrow row softmax (which writes those values itself where a cost keeps
        them)."""
        value, act = self.output.value, self.activation
        on_gpu = not act.needs_input and backend.is_gpu_array(value) and value.ndim == 2
        fused = on_gpu and self.bias is not None and not self.keep_preact
        if fused and act.name in cuda.ACTIVATIONS:
            cuda.activate(value, act.name, self.bias.w.reshape(1, -1))
        elif on_gpu and act.name == "softmax" and value.shape[1] <= cuda.ROW_SOFTMAX_MAX_WIDTH \
                and (self.bias is not None or self.keep_preact):
            # the logits a cost keeps (keep_preact) written by the softmax's own launch
            logits = self.scratch("preact", value.shape) if self.keep_preact else None
            cuda.softmax_rows(value, value, None if self.bias is None else self.bias.w, logits)
            self.forward_activation(applied=True, preact_kept=self.keep_preact)
            return
        else:
            self.add_bias()
            fused = False
        self.forward_activation(applied=fused)

    def backward_bias(self, callback: UpdateCallback | None) -> None:
        """``db += sum over the batch of dy`` for that bias, then its ``inc_update``."""
        if self.bias is not None and self.bias.w_grad is not None:
            col_sum(self.output.grad, self.bias.w_grad, self.param_grad_beta(self.bias))
            self.bias.parameter.inc_update(callback)

    def accepts_unit_output_grad(self) -> bool:
        """Whether this cost output takes the seed dL/dy = 1 of the Network's backward without
        it being written into its gradient buffer (``unit_output_grad``): on the GPU a write
        is a launch. A layer that says yes writes the 1s itself where it needs them."""
        return False

    def backward_activation_and_bias(self, callback: UpdateCallback | None) -> None:
        """:meth:`backward_activation` then :meth:`backward_bias`: on the GPU one kernel
        (``cuda.activation_and_bias_grad``) where the base class would apply an elementwise
        activation's gradient with nothing before it (no fused consumer, dropout or error
        clipping) and the bias has a gradient of one entry a column."""
        grad, bias = self.output.grad, self.bias
        db = None if bias is None else bias.w_grad
        if (db is not None and backend.is_gpu_array(grad) and db.flags.c_contiguous
                and not self.grad_is_preact and self.output_grad_unchanged()
                and cuda.activation_and_bias_grad(
                    self.activation.name, self.output.value, grad, db.reshape(-1),
                    0.0 if bias.parameter.grad_unwritten else 1.0)):
            self.param_grad_beta(bias)  # (now written: a later writer adds)
            bias.parameter.inc_update(callback)
            return
        self.backward_activation()
        self.backward_bias(callback)

    def activation_starts(self):
        """The positions sequence_softmax normalises over: the sub-sequences of a nested
        output (as PaddlePaddle's later engine does, so attention works per sub-sequence),
        else its sequences."""
        out = self.output
        return out.sub_seq_starts if out.sub_seq_starts is not None else out.seq_starts

    def forward_activation(self, applied: bool = False, preact_kept: bool = False) -> None:
        """The activation (and dropout) on the output, in place; ``applied`` when the
        layer's own kernel already applied it (see :meth:`fusable_activation`), and
        ``preact_kept`` when that kernel also wrote the values before it (``preact``)."""
        value = self.output.value
        act = self.activation
        self.activation_applied = True
        if (act.needs_input or self.keep_preact) and not preact_kept:
            pre = self.scratch("preact", value.shape)
            pre[...] = value
        if not (act.is_linear or applied):
            act.forward(value, self.activation_starts() if act.needs_seq else None)
        if self.config.drop_rate > 0:
            self._forward_dropout(value)

    def preact_value(self):
        """The values before the activation of the last forward (``keep_preact`` or an
        activation that needs its input), shaped as the output."""
        value = self.output.value
        return self._bufs["preact"][: value.size].reshape(value.shape)

    def clip_error(self) -> None:
        """Clip the output gradient elementwise to [-t, t] when the layer has an
        ``error_clipping_threshold`` t > 0 (PaddlePaddle clips before the activation's
        backward); every ``backward_activation`` starts with it."""
        t = self.error_clipping_threshold
        if t > 0 and self.output.grad is not None:
            backend.get_array_module(self.output.grad).clip(
                self.output.grad, -t, t, out=self.output.grad)

    def preact_grad_writable(self, consumer: Layer) -> bool:
        """Whether ``consumer`` may write dL/dz (past this layer's activation) straight into
        this layer's output gradient, for a fused cost + activation backward: it must be the
        only consumer, about to write first (the buffer holds nothing yet), and no dropout or
        error clipping may sit between dL/dy and the activation. The consumer then sets
        ``grad_is_preact``."""
        consumers = self.consumers
        return (len(consumers) == 1 and consumers[0] is consumer and self.grad_unwritten
                and self.output_grad_unchanged())

    def output_grad_unchanged(self) -> bool:
        """Whether dL/dy reaches the activation's gradient as its consumers wrote it: no
        dropout mask and no error clipping sit between. A kernel that takes the activation's
        gradient itself, or a consumer that writes dL/dz past it, needs this."""
        return self.config.drop_rate == 0 and self.error_clipping_threshold <= 0

    def fusable_activation(self, name: str) -> bool:
        """Whether the layer's kernel may apply its activation ``name`` itself: it is that
        activation, with no dropout, error clipping or kept pre-activation values that the
        base class would have to see (then ``forward_activation(applied=True)``, and the
        kernel also takes the activation's gradient: ``backward_activation(applied=True)``)."""
        return (self.activation.name == name and self.output_grad_unchanged()
                and not self.keep_preact)

    def backward_activation(self, applied: bool = False) -> None:
        """The activation's gradient on the output gradient, in place (nothing when
        ``applied``: the layer's kernel takes it, see :meth:`fusable_activation`)."""
        if applied:
            self.grad_is_preact = False
            return
        if self.grad_is_preact:  # a fused consumer already wrote dL/dz
            self.grad_is_preact = False
            return
        if self.error_clipping_threshold > 0:
            self.clip_error()
        grad = self.output.grad
        if self.config.drop_rate > 0 and self.pass_type != PASS_TEST:
            grad *= self._bufs["mask"][: grad.size].reshape(grad.shape)
        act = self.activation
        if act.is_linear:
            return
        pre = self.preact_value() if act.needs_input else None
        act.backward(pre, self.output.value, grad,
                     self.activation_starts() if act.needs_seq else None)

    def _forward_dropout(self, value) -> None:
        """Training: zero each unit with probability ``drop_rate``; test: scale by
        ``1 - drop_rate`` (PaddlePaddle's non-inverted dropout)."""
        rate = self.config.drop_rate
        if self.pass_type == PASS_TEST:
            value *= 1.0 - rate
            return
        if self.pass_type == PASS_GC:
            self._rng.seed(12345)
        mask = self.scratch("mask", value.shape)
        mask[...] = backend.to_device_of(self._rng.random_sample(value.shape) >= rate, mask)
        value *= mask

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r} size={self.size}>"
