"""``check_layer_grad``: PaddlePaddle's testLayerGrad for Sculler layers, built-in or your own.

The layer under test gets one data layer per declared input, random inputs of each kind and
random parameters, all in float64. The objective is ``J = sum(w * y)`` over its output ``y``
(``w`` random with ``use_weight``, since e.g. softmax rows always sum to one; ones otherwise).
Backward's gradient of ``J`` w.r.t. every differentiable input and every parameter is compared
with central differences ``(J(v + eps) - J(v - eps)) / (2 eps)`` element by element. The check
also asserts that forward is deterministic, that buffers reused across a smaller then a larger
batch give the same results as a fresh network, and that the config survives a JSON round trip.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from sculler import backend
from sculler.backend import get_array_module, to_numpy
from sculler.core.argument import Argument
from sculler.core.builder import ModelBuilder
from sculler.core.layer import PASS_GC
from sculler.core.model_config import InputConfig, LayerConfig, ModelConfig
from sculler.core.network import Network
from sculler.core.parameter import ParameterSet
from sculler.math.sparse import CsrMatrix
from sculler.testing.numeric import numeric_grad

DENSE_KINDS = ("data", "sequence_data", "hassub_sequence_data")


@dataclass
class InputDef:
    """One input of the layer under test: its kind, width (or number of classes) and extras.

    ``low``/``high`` bound dense values (keep them away from kinks and poles); ``nnz`` is the
    number of nonzeros per row of sparse inputs; ``attrs`` become the input's config attrs;
    ``param`` are attributes of the input's weight (e.g. ``{"sparse_update": True}``).
    ``seq_lengths`` fixes the sequence lengths of a sequence input (the batch then has
    ``sum(seq_lengths)`` rows; the smaller batch of the buffer-reuse check takes a prefix).
    """

    kind: str
    size: int
    name: str | None = None
    low: float = -1.0
    high: float = 1.0
    nnz: int = 3
    attrs: dict[str, Any] = field(default_factory=dict)
    param: dict[str, Any] | None = None
    seq_lengths: tuple[int, ...] | None = None

    @property
    def differentiable(self) -> bool:
        return self.kind in DENSE_KINDS


def _kind(kind: str):
    def make(size: int, **kw: Any) -> InputDef:
        return InputDef(kind, size, **kw)

    make.__name__ = "INPUT_" + kind.upper()
    make.__doc__ = f"An input of kind {kind!r} and width (or class count) ``size``."
    return make


INPUT_DATA = _kind("data")
INPUT_LABEL = _kind("label")
INPUT_DATA_TARGET = _kind("data_target")
INPUT_SEQUENCE_DATA = _kind("sequence_data")
INPUT_HASSUB_SEQUENCE_DATA = _kind("hassub_sequence_data")
INPUT_SEQUENCE_LABEL = _kind("sequence_label")
INPUT_SPARSE_NON_VALUE_DATA = _kind("sparse_non_value_data")
INPUT_SPARSE_FLOAT_VALUE_DATA = _kind("sparse_float_value_data")


@dataclass
class TestConfig:
    """The layer's settings (``size``, ``active_type``, ``drop_rate``, and any other key goes
    to ``attrs``), its inputs, and whether it has a bias (None = the layer type's default).

    ``make_inputs(batch, rng) -> [Argument, ...]`` replaces the random inputs when the inputs
    must agree with each other (e.g. one row per sequence of another input); ``inputs`` still
    declare the data layers' kinds and widths."""

    layer: dict[str, Any] = field(default_factory=dict)
    inputs: list[InputDef] = field(default_factory=list)
    bias: bool | dict | None = None
    make_inputs: Callable[[int, np.random.RandomState], list[Argument]] | None = None

    __test__ = False  # not a pytest test class


class GradientCheckError(AssertionError):
    """Backward disagrees with finite differences (or forward is not reproducible)."""


@dataclass
class GradCheckReport:
    """Worst relative error per checked tensor (``"input 0"``, ``"parameter _x.w0"``)."""

    layer_type: str
    errors: dict[str, float]

    @property
    def max_error(self) -> float:
        return max(self.errors.values(), default=0.0)


def _seq_starts(rng, total: int, max_len: int = 4) -> np.ndarray:
    starts = [0]
    while starts[-1] < total:
        starts.append(min(total, starts[-1] + int(rng.randint(1, max_len + 1))))
    return np.asarray(starts, dtype=np.int64)


def _sub_starts(rng, seq_starts: np.ndarray) -> np.ndarray:
    subs = [0]
    for s, e in zip(seq_starts[:-1], seq_starts[1:]):
        inner = _seq_starts(rng, int(e - s), 2)[1:] + s
        subs.extend(int(v) for v in inner)
    return np.asarray(subs, dtype=np.int64)


def _fixed_starts(lengths, batch: int) -> np.ndarray | None:
    """Offsets of the longest prefix of ``lengths`` (at least one) that fits ``batch`` rows."""
    if lengths is None:
        return None
    starts = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    keep = max(2, int(np.searchsorted(starts, batch, side="right")))
    return starts[:keep]


def make_input(d: InputDef, batch: int, rng: np.random.RandomState, trans: bool) -> Argument:
    """A random argument of kind ``d.kind`` with ``batch`` rows (time steps for sequences)."""
    dtype = backend.get_default_dtype()
    fixed = _fixed_starts(d.seq_lengths, batch)
    if fixed is not None:
        batch = int(fixed[-1])
    arg = Argument()
    if d.kind in ("label", "sequence_label"):
        arg.ids = rng.randint(0, d.size, size=batch).astype(np.int64)
    elif d.kind.startswith("sparse"):
        rows = [np.sort(rng.choice(d.size, size=min(d.nnz, d.size), replace=False))
                for _ in range(batch)]
        if d.kind == "sparse_float_value_data":
            rows = [[(int(c), float(rng.uniform(d.low, d.high))) for c in r] for r in rows]
        arg.value = CsrMatrix.from_rows(
            rows, d.size, d.kind == "sparse_float_value_data", dtype=dtype
        )
    else:
        shape = (d.size, batch) if trans else (batch, d.size)
        value = rng.uniform(d.low, d.high, size=shape).astype(dtype)
        arg.value = value.T if trans else value
    if d.kind.startswith("sequence") or d.kind == "hassub_sequence_data":
        arg.seq_starts = fixed if fixed is not None else _seq_starts(rng, batch)
    if d.kind == "hassub_sequence_data":
        arg.sub_seq_starts = _sub_starts(rng, arg.seq_starts)
    return arg


def build_test_model(config: TestConfig, layer_type: str) -> ModelConfig:
    """The model: one data layer per input feeding a layer named ``test_layer``."""
    b = ModelBuilder()
    names = []
    for i, d in enumerate(config.inputs):
        name = d.name or f"layer_{i}"
        names.append(name)
        b.add_layer(LayerConfig(name, "data", size=d.size, attrs={"kind": d.kind}))
    settings = dict(config.layer)
    lc = LayerConfig(
        name="test_layer",
        type=layer_type,
        size=int(settings.pop("size", 0)),
        active_type=settings.pop("active_type", "linear"),
        drop_rate=float(settings.pop("drop_rate", 0.0)),
        inputs=[InputConfig(n, attrs=dict(d.attrs)) for n, d in zip(names, config.inputs)],
        attrs=settings,
    )
    b.add_layer(lc, weight_attrs=[d.param for d in config.inputs], bias_attr=config.bias)
    return b.build(["test_layer"], input_layer_names=names)


class _Harness:
    def __init__(self, model: ModelConfig, config: TestConfig, trans: bool, seed: int):
        self.model, self.config, self.trans = model, config, trans
        self.rng = np.random.RandomState(seed)
        self.params = ParameterSet(seed=seed)
        self.net = Network(model, self.params, data_gradients=True)
        self.layer = self.net.get_layer("test_layer")

    def inputs(self, batch: int) -> list[Argument]:
        """Random inputs made on the host, then copied to the current device (as the data
        feeder does: dense values and ids; sequence offsets stay on the host)."""
        if self.config.make_inputs is not None:
            args = self.config.make_inputs(batch, self.rng)
        else:
            args = [make_input(d, batch, self.rng, self.trans) for d in self.config.inputs]
        return [_on_device(a) for a in args]

    def run(self, net: Network, args: list[Argument], weight) -> tuple[np.ndarray, dict]:
        """Forward + backward with dJ/dy = weight; returns (output, gradients)."""
        net.zero_grad()
        out = net.forward(args, PASS_GC)[0].value.copy()
        net.backward(output_grads={"test_layer": weight})
        grads = {}
        for i, (d, dl) in enumerate(zip(self.config.inputs, net.data_layers)):
            if d.differentiable:
                grads[f"input {i} ({dl.name})"] = dl.output.grad.copy()
        for p in net.used_parameters:
            grads[f"parameter {p.name}"] = p.grad.copy()
        return out, grads


def check_layer_grad(
    config: TestConfig | dict,
    layer_type: str,
    batch_size: int = 10,
    trans: bool = False,
    use_weight: bool = False,
    *,
    eps: float = 1e-5,
    rtol: float = 1e-6,
    max_elements: int = 300,
    seed: int = 1,
    use_gpu: bool = False,
) -> GradCheckReport:
    """Check a layer's backward against finite differences, in float64.

    Args:
        config: a :class:`TestConfig` or a dict ``{"size": 4, "inputs": [INPUT_DATA(5)], ...}``.
        layer_type: the registered type name.
        batch_size: rows (time steps for sequence inputs).
        trans: feed dense inputs as transposed (non-contiguous) views.
        use_weight: weight the output sum randomly (needed when outputs sum to a constant).
        eps, rtol: finite-difference step and the largest allowed relative error.
        max_elements: check at most this many (random) elements of each tensor.
        use_gpu: run with the parameters and inputs on a CUDA GPU (CuPy); without one this
            raises RuntimeError saying what is missing.

    Returns a :class:`GradCheckReport`; raises :class:`GradientCheckError` naming the layer,
    the input or parameter, the worst element and both values when ``rtol`` is exceeded.

    Example::

        check_layer_grad(TestConfig({"size": 4, "active_type": "tanh"}, [INPUT_DATA(5)]), "fc")
    """
    config = _test_config(config, layer_type, "check_layer_grad")
    if use_gpu:
        backend.require_gpu(f"check_layer_grad({layer_type!r}, use_gpu=True)")
    with backend.default_dtype(np.float64), backend.device(use_gpu):
        model = build_test_model(config, layer_type)
        if ModelConfig.from_json(model.to_json()) != model:
            raise GradientCheckError(f"{layer_type}: config does not survive a JSON round trip")
        h = _Harness(model, config, trans, seed)
        small_args = h.inputs(max(1, batch_size // 2))
        args = h.inputs(batch_size)
        _check_reuse(h, small_args, args, use_weight)
        out = h.net.forward(args, PASS_GC)[0].value
        weight = _weights(h.rng, out.shape, use_weight)
        out, analytic = h.run(h.net, args, weight)
        out, again = to_numpy(out), to_numpy(h.net.forward(args, PASS_GC)[0].value)
        if not np.array_equal(out, again):
            raise GradientCheckError(
                f"layer test_layer ({layer_type}): forward is not deterministic "
                f"(max change {np.abs(out - again).max():.3g} between two identical calls)"
            )
        errors = {}
        for key, grad in analytic.items():
            value = _value_of(h, key)
            errors[key] = _compare(h, key, value, grad, args, weight, eps, rtol, max_elements,
                                   layer_type)
    return GradCheckReport(layer_type, errors)


def _test_config(config: TestConfig | dict, layer_type: str, caller: str) -> TestConfig:
    if isinstance(config, TestConfig):
        return config
    if not isinstance(config, dict):
        raise TypeError(f"{caller}({layer_type!r}): config must be a TestConfig or a dict, "
                        f"got {type(config).__name__}")
    if "inputs" not in config:
        raise ValueError(f"{caller}({layer_type!r}): the config dict needs 'inputs', e.g. "
                         "{'size': 4, 'inputs': [INPUT_DATA(5)]}")
    settings = dict(config)
    return TestConfig(
        layer=settings, inputs=settings.pop("inputs"), bias=settings.pop("bias", None),
        make_inputs=settings.pop("make_inputs", None),
    )


def _on_device(arg: Argument) -> Argument:
    """``arg`` with its dense value and its ids on the current device (no copy on the CPU)."""
    if isinstance(arg.value, np.ndarray):
        arg.value = backend.to_device(arg.value)
    if isinstance(arg.ids, np.ndarray):
        arg.ids = backend.to_device(arg.ids)
    return arg


def _weights(rng, shape, use_weight: bool):
    """dJ/dy, drawn on the host (the same numbers on every device) then put on the device."""
    host = rng.uniform(0.1, 1.0, size=shape) if use_weight else np.ones(shape)
    return backend.to_device(host)


def _value_of(h: _Harness, key: str):
    if key.startswith("parameter "):
        return h.params[key.split(" ", 1)[1]].value
    i = int(key.split()[1])
    return h.net.data_layers[i].output.value


def _objective(h: _Harness, args, weight) -> float:
    out = h.net.forward(args, PASS_GC)[0].value
    return float(get_array_module(out).sum(out * weight))


def _compare(h, key, value, grad, args, weight, eps, rtol, max_elements, layer_type) -> float:
    n = value.size
    picks = np.arange(n) if n <= max_elements else h.rng.choice(n, max_elements, replace=False)
    numeric = numeric_grad(lambda: _objective(h, args, weight), value, eps, picks)
    analytic = to_numpy(grad).reshape(-1)[picks]
    errs = np.abs(analytic - numeric) / np.maximum(
        np.maximum(np.abs(analytic), np.abs(numeric)), 1e-3)
    k = int(errs.argmax())
    err, a, numeric = float(errs[k]), float(analytic[k]), float(numeric[k])
    idx = np.unravel_index(int(picks[k]), value.shape)
    if err > rtol:
        raise GradientCheckError(
            f"layer test_layer ({layer_type}): gradient of {key} is wrong at index "
            f"{tuple(int(i) for i in idx)}: backward gives {a:.10g}, finite differences give "
            f"{numeric:.10g} (relative error {err:.3g} > {rtol:g})"
        )
    return err


def _check_reuse(h: _Harness, small_args, args, use_weight: bool) -> None:
    """Run a smaller batch first, then the full one: results must equal a fresh network's."""
    fresh = Network(h.model, _copy_params(h.params), data_gradients=True)
    h.run(h.net, small_args, _output_weight(h, small_args, use_weight))
    weight = _output_weight(h, args, use_weight)
    out_full, grads_full = _host(h.run(h.net, args, weight))
    ref_out, ref_grads = _host(h.run(fresh, args, weight))
    if out_full.shape != ref_out.shape or not np.allclose(out_full, ref_out, rtol=1e-12,
                                                          atol=1e-12):
        raise GradientCheckError(
            f"layer test_layer ({h.layer.type_name}): output after a smaller batch differs from "
            "a fresh network's; reserve_output/buffer reuse is broken"
        )
    for key, g in ref_grads.items():
        if not np.allclose(grads_full[key], g, rtol=1e-12, atol=1e-12):
            raise GradientCheckError(
                f"layer test_layer ({h.layer.type_name}): gradient of {key} after a smaller "
                "batch differs from a fresh network's; buffers are not reset between batches"
            )


def _host(result: tuple) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """A :meth:`_Harness.run` result with every array copied to the host."""
    out, grads = result
    return to_numpy(out), {k: to_numpy(g) for k, g in grads.items()}


def _output_weight(h: _Harness, args, use_weight: bool):
    """dJ/dy for ``args``: shaped like the layer's output for that batch."""
    out = h.net.forward(args, PASS_GC)[0].value
    return _weights(np.random.RandomState(7), out.shape, use_weight)


def _copy_params(params: ParameterSet) -> ParameterSet:
    fresh = ParameterSet()
    for name in params:
        p = params[name]
        q = fresh.create(p.config, owner=params.owner(name), dtype=p.value.dtype)
        q.value[...] = p.value
    return fresh


DEVICE_RTOL = {np.dtype(np.float64): 1e-10, np.dtype(np.float32): 1e-5}


def compare_devices(
    config: TestConfig | dict,
    layer_type: str,
    batch_size: int = 10,
    trans: bool = False,
    use_weight: bool = False,
    *,
    dtype: Any = np.float64,
    rtol: float | None = None,
    seed: int = 1,
) -> GradCheckReport:
    """Run a layer's forward and backward on the CPU and on the GPU and compare them.

    Both runs get the same parameters (the CPU's, copied), the same inputs and the same
    ``dJ/dy``; the output and every input and parameter gradient must agree to ``rtol``
    (default 1e-10 in float64, 1e-5 in float32), element-wise as
    ``|gpu - cpu| / max(|gpu|, |cpu|, 1)``. PaddlePaddle checks every layer on both
    devices the same way. Needs CuPy and a CUDA device (RuntimeError otherwise).

    Returns a :class:`GradCheckReport` of the worst relative difference per tensor
    (``"output"``, ``"input 0 (...)"``, ``"parameter ..."``); raises
    :class:`GradientCheckError` naming the layer and the tensor when one differs.
    """
    config = _test_config(config, layer_type, "compare_devices")
    dt = np.dtype(dtype)
    if dt not in DEVICE_RTOL:
        raise TypeError(f"compare_devices({layer_type!r}): dtype must be float32 or float64, "
                        f"got {dt}")
    rtol = DEVICE_RTOL[dt] if rtol is None else float(rtol)
    backend.require_gpu(f"compare_devices({layer_type!r})")
    with backend.default_dtype(dt):
        model = build_test_model(config, layer_type)
        with backend.device(False):
            cpu = _Harness(model, config, trans, seed)
            args = cpu.inputs(batch_size)
            weight = _output_weight(cpu, args, use_weight)
            cpu_out, cpu_grads = _host(cpu.run(cpu.net, args, weight))
        with backend.device(True):
            gpu = _Harness(model, config, trans, seed)
            for name in cpu.params:
                gpu.params[name].value[...] = backend.to_device(cpu.params[name].value)
            gpu_out, gpu_grads = _host(gpu.run(gpu.net, [_on_device(_host_copy(a))
                                                         for a in args],
                                               backend.to_device(to_numpy(weight))))
    errors = {"output": _relative_difference(gpu_out, cpu_out)}
    errors.update({key: _relative_difference(gpu_grads[key], g) for key, g in cpu_grads.items()})
    for key, err in errors.items():
        if not err <= rtol:
            raise GradientCheckError(
                f"layer test_layer ({layer_type}): {key} differs between the GPU and the CPU "
                f"in {dt}: relative difference {err:.3g} > {rtol:g}")
    return GradCheckReport(layer_type, errors)


def _host_copy(arg: Argument) -> Argument:
    """A copy of a host ``arg`` to be moved to another device (the original stays put)."""
    return Argument(value=arg.value, ids=arg.ids, seq_starts=arg.seq_starts,
                    sub_seq_starts=arg.sub_seq_starts)


def _relative_difference(a: np.ndarray, b: np.ndarray) -> float:
    """Worst ``|a - b| / max(|a|, |b|, 1)``: PaddlePaddle's rule for comparing devices (an
    absolute difference below 1, a relative one above), since two devices sum in different
    orders and a float32 sum that cancels keeps its absolute, not its relative, error. A shape
    mismatch is infinitely different."""
    if a.shape != b.shape:
        return float("inf")
    if a.size == 0:
        return 0.0
    return float((np.abs(a - b) / np.maximum(np.maximum(np.abs(a), np.abs(b)), 1.0)).max())
