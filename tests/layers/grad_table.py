"""The gradient-check table: every configuration of every layer type, one row each.

A row says which layer to build (type, settings, input kinds) and how to check it (batch size,
``use_weight``, other ``check_layer_grad`` arguments, inputs that must agree with each other).
``tests/layers/test_layer_grad.py`` runs every row through :func:`run_row` and checks that every
registered layer type has a row; ``bench/grad_check_report.py`` prints the worst error per type
from the same rows. Adding a layer costs one row in ``CASES`` here; a type that cannot be
checked as one layer fed by data layers goes in ``NOT_CHECKED_AS_ONE_LAYER`` with the reason.

Every row passes when backward agrees with central differences in float64 within ``RTOL``
relative error, element by element (``check_layer_grad`` raises past it).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import numpy as np

from sculler.core.argument import Argument
from sculler.eager.layer_bridge import py_layer_path
from sculler.testing import (
    INPUT_DATA,
    INPUT_DATA_TARGET,
    INPUT_HASSUB_SEQUENCE_DATA,
    INPUT_LABEL,
    INPUT_SEQUENCE_DATA,
    INPUT_SEQUENCE_LABEL,
    INPUT_SPARSE_FLOAT_VALUE_DATA,
    INPUT_SPARSE_NON_VALUE_DATA,
    GradCheckReport,
    InputDef,
    check_layer_grad,
    compare_devices,
)
from sculler.testing.pylayer_check import TanhPyLayer
from sculler.testing.sequences import dense, lengths, seq_arg

RTOL = 1e-6  # the largest relative error between backward and finite differences


@dataclass
class Row:
    """One gradient check: ``layer_type`` built with ``settings`` (``size``, ``active_type``,
    ``drop_rate``, ``bias`` (bool or the bias parameter's attrs); any other key is a layer
    attr) over one data layer per entry of ``inputs``.

    ``make_inputs(batch, rng)`` replaces the random inputs when they must agree with each other;
    ``check`` holds other ``check_layer_grad`` arguments (``trans``, ``seed``); ``compared`` is
    the number of inputs and parameters the check must compare (None: at least one)."""

    layer_type: str
    settings: dict[str, Any]
    inputs: list[InputDef]
    use_weight: bool = False
    batch_size: int = 10
    make_inputs: Callable[[int, np.random.RandomState], list[Argument]] | None = None
    check: dict[str, Any] = field(default_factory=dict)
    compared: int | None = None

    @property
    def id(self) -> str:
        """``type[settings|inputs|batch=N]``, readable in pytest's output."""
        settings = ",".join(f"{k}={v}" for k, v in self.settings.items())
        inputs = "+".join(_describe(i) for i in self.inputs)
        if self.make_inputs is not None:
            inputs += f"<{self.make_inputs.__name__}>"
        extras = "".join(f",{k}={v}" for k, v in self.check.items())
        return f"{self.layer_type}[{settings}|{inputs}|batch={self.batch_size}{extras}]"


def _describe(d: InputDef) -> str:
    """``kind width``, then the projection and other input attrs, then fixed lengths."""
    text = f"{d.kind}{d.size}"
    attrs = dict(d.attrs)
    if "proj" in attrs:
        text += f":{attrs.pop('proj')}"
    if attrs:
        text += "(" + ",".join(f"{k}={v}" for k, v in attrs.items()) + ")"
    if d.seq_lengths is not None:
        text += f"(lens={'/'.join(map(str, d.seq_lengths))})"
    return text


def _config(row: Row) -> dict[str, Any]:
    return {**row.settings, "inputs": row.inputs, "make_inputs": row.make_inputs}


def run_row(row: Row, use_gpu: bool = False) -> GradCheckReport:
    """``check_layer_grad`` on one row (raises ``GradientCheckError`` past ``RTOL``), on the
    GPU with ``use_gpu``."""
    return check_layer_grad(_config(row), row.layer_type, row.batch_size,
                            use_weight=row.use_weight, rtol=RTOL, use_gpu=use_gpu, **row.check)


def compare_row(row: Row, dtype: Any) -> GradCheckReport:
    """``compare_devices`` on one row: its output and gradients on the GPU equal the CPU's."""
    placement = {k: v for k, v in row.check.items() if k in ("trans", "seed")}
    return compare_devices(_config(row), row.layer_type, row.batch_size,
                           use_weight=row.use_weight, dtype=dtype, **placement)


def proj(kind: str, **attrs: Any) -> dict[str, Any]:
    """A mixed / concat2 input's projection or operator attrs."""
    return {"proj": kind, **attrs}


POSITIVE = dict(low=0.5, high=2.0)
PROB = dict(low=0.05, high=0.95)
AWAY_FROM_ZERO = dict(low=0.2, high=1.0)
WEIGHT = INPUT_DATA(1, low=0.1, high=1.0)  # a cost's per-sample weight input
SEQ, NESTED = INPUT_SEQUENCE_DATA, INPUT_HASSUB_SEQUENCE_DATA
INDEX = INPUT_DATA_TARGET  # dense but not differentiated: index matrices

# ---- fc, embedding, concat, addto, the basic costs -------------------------------------------
basic = partial(Row, batch_size=12)
BASIC = [
    basic("fc", dict(size=4), [INPUT_DATA(5)]),
    basic("fc", dict(size=4, bias=False), [INPUT_DATA(5)]),
    basic("fc", dict(size=4, active_type="tanh"), [INPUT_DATA(5), INPUT_DATA(3)]),
    basic("fc", dict(size=4, active_type="softmax"), [INPUT_DATA(6)], use_weight=True),
    basic("fc", dict(size=3), [INPUT_SEQUENCE_DATA(5)]),
    basic("fc", dict(size=3), [INPUT_HASSUB_SEQUENCE_DATA(5)]),
    basic("fc", dict(size=4), [INPUT_SPARSE_NON_VALUE_DATA(30)]),
    basic("fc", dict(size=4, bias=False), [INPUT_SPARSE_FLOAT_VALUE_DATA(30)]),
    basic("fc", dict(size=4), [INPUT_SPARSE_FLOAT_VALUE_DATA(30, param={"sparse_update": True})]),
    basic("fc", dict(size=4, drop_rate=0.3, active_type="sigmoid"), [INPUT_DATA(5)]),
    Row("fc", dict(size=3), [INPUT_DATA(4)], batch_size=7),
    Row("fc", dict(size=3), [INPUT_DATA(4)], batch_size=7, check=dict(trans=True)),
    basic("embedding", dict(size=4), [INPUT_LABEL(20)]),
    basic("embedding", dict(size=4), [INPUT_SEQUENCE_LABEL(20, param={"sparse_update": True})]),
    basic("table", dict(size=3), [INPUT_SEQUENCE_LABEL(9)]),
    basic("concat", dict(), [INPUT_DATA(3), INPUT_DATA(4)]),
    basic("concat", dict(bias=True, active_type="tanh"), [INPUT_DATA(3), INPUT_DATA(2)]),
    basic("concat", dict(), [INPUT_SEQUENCE_DATA(3), INPUT_SEQUENCE_DATA(2)]),
    basic("addto", dict(), [INPUT_DATA(4), INPUT_DATA(4)]),
    basic("addto", dict(bias=True, active_type="relu"), [INPUT_DATA(4), INPUT_DATA(4)]),
    # two inputs, a relu and no bias: one compiled pass each way (where numba is installed)
    basic("addto", dict(active_type="relu"), [INPUT_DATA(6), INPUT_DATA(6)]),
    basic("addto", dict(drop_rate=0.5), [INPUT_DATA(6)]),
    basic("addto", dict(active_type="sequence_softmax"), [INPUT_SEQUENCE_DATA(1)],
          use_weight=True),
    basic("addto", dict(), [INPUT_HASSUB_SEQUENCE_DATA(3)]),
    basic("multi-class-cross-entropy", dict(), [INPUT_DATA(5, low=0.05, high=1.0), INPUT_LABEL(5)]),
    basic("multi-class-cross-entropy", dict(coeff=0.5),
          [INPUT_DATA(5, low=0.05, high=1.0), INPUT_LABEL(5), INPUT_DATA(1, low=0.05, high=1.0)]),
    basic("multi-class-cross-entropy", dict(),
          [INPUT_SEQUENCE_DATA(4, low=0.05, high=1.0), INPUT_SEQUENCE_LABEL(4)]),
    basic("multi_class_cross_entropy", dict(), [INPUT_DATA(4, **PROB), INPUT_LABEL(4)]),
    basic("square_error", dict(), [INPUT_DATA(3), INPUT_DATA_TARGET(3)]),
    basic("square_error", dict(),
          [INPUT_DATA(3), INPUT_DATA_TARGET(3), INPUT_DATA(1, low=0.05, high=1.0)]),
]

# ---- every activation: behind fc, and behind addto for those defined only for x > 0 ----------
ACTIVATIONS = [
    Row("fc", dict(size=4, active_type=act), [INPUT_DATA(5)], use_weight=True)
    for act in ["linear", "sigmoid", "tanh", "relu", "brelu", "softrelu", "stanh", "softmax",
                "exp", "abs", "square", "softsign"]
] + [
    Row("addto", dict(active_type=act), [INPUT_DATA(5, **POSITIVE)], use_weight=True)
    for act in ["log", "sqrt", "reciprocal"]
]

# ---- the extra cost layers (cost_extra.py, cost_sampled.py) ---------------------------------
SELFNORM_INPUT = dict(low=0.2, high=2.0)
cost = partial(Row, use_weight=True, batch_size=12)
COSTS = [
    cost("multi_class_cross_entropy_with_selfnorm", dict(),
         [INPUT_DATA(5, **SELFNORM_INPUT), INPUT_LABEL(5)]),
    cost("multi_class_cross_entropy_with_selfnorm", dict(softmax_selfnorm_alpha=0.5, coeff=2.0),
         [INPUT_DATA(5, **SELFNORM_INPUT), INPUT_LABEL(5), WEIGHT]),
    cost("multi_class_cross_entropy_with_selfnorm", dict(),
         [INPUT_SEQUENCE_DATA(4, **SELFNORM_INPUT), INPUT_SEQUENCE_LABEL(4)]),
    cost("multi_binary_label_cross_entropy", dict(),
         [INPUT_DATA(6, **PROB), INPUT_SPARSE_NON_VALUE_DATA(6, nnz=2)]),
    cost("multi_binary_label_cross_entropy", dict(), [INPUT_DATA(6, **PROB), INPUT_LABEL(6)]),
    cost("multi_binary_label_cross_entropy", dict(coeff=0.5),
         [INPUT_DATA(6, **PROB), INPUT_DATA_TARGET(6, low=0, high=1), WEIGHT]),
    cost("soft_binary_class_cross_entropy", dict(),
         [INPUT_DATA(4, **PROB), INPUT_DATA_TARGET(4, low=0, high=1)]),
    cost("soft_binary_class_cross_entropy", dict(),
         [INPUT_DATA(4, **PROB), INPUT_DATA_TARGET(4, low=0, high=1), WEIGHT]),
    cost("huber_regression", dict(), [INPUT_DATA(3, low=-3, high=3), INPUT_DATA_TARGET(3)]),
    cost("huber_regression", dict(delta=0.5, coeff=1.5),
         [INPUT_DATA(3, low=-3, high=3), INPUT_DATA_TARGET(3), WEIGHT]),
    cost("huber_classification", dict(), [INPUT_DATA(1, low=-2.5, high=2.5), INPUT_LABEL(2)]),
    cost("huber_classification", dict(),
         [INPUT_DATA(1, low=-2.5, high=2.5), INPUT_LABEL(2), WEIGHT]),
    cost("smooth_l1", dict(), [INPUT_DATA(4, low=-3, high=3), INPUT_DATA_TARGET(4)]),
    cost("smooth_l1", dict(coeff=0.5),
         [INPUT_DATA(4, low=-3, high=3), INPUT_DATA_TARGET(4), WEIGHT]),
    cost("smooth_l1", dict(), [INPUT_SEQUENCE_DATA(2, low=-3, high=3), INPUT_DATA_TARGET(2)]),
    cost("sum_cost", dict(), [INPUT_DATA(5)]),
    cost("sum_cost", dict(), [INPUT_SEQUENCE_DATA(3)]),
    cost("hsigmoid", dict(num_classes=6), [INPUT_DATA(4), INPUT_LABEL(6)]),
    cost("hsigmoid", dict(num_classes=8, bias=False), [INPUT_DATA(4), INPUT_LABEL(8)]),
    cost("hsigmoid", dict(num_classes=5), [INPUT_DATA(3), INPUT_DATA(2), INPUT_LABEL(5)]),
    cost("hsigmoid", dict(num_classes=7), [INPUT_SEQUENCE_DATA(3), INPUT_SEQUENCE_LABEL(7)]),
    cost("nce", dict(num_classes=7, num_neg_samples=3), [INPUT_DATA(4), INPUT_LABEL(7)]),
    cost("nce", dict(num_classes=7, num_neg_samples=2, bias=False),
         [INPUT_DATA(4), INPUT_DATA(2), INPUT_LABEL(7)]),
    cost("nce", dict(num_classes=6, num_neg_samples=4, with_weight=True,
                     neg_distribution=[0.3, 0.1, 0.1, 0.2, 0.2, 0.1]),
         [INPUT_DATA(3), INPUT_LABEL(6), WEIGHT]),
    cost("nce", dict(num_classes=9, num_neg_samples=2),
         [INPUT_DATA(3), INPUT_SPARSE_NON_VALUE_DATA(9, nnz=2)]),
    cost("nce", dict(num_classes=5, num_neg_samples=3),
         [INPUT_SEQUENCE_DATA(3), INPUT_SEQUENCE_LABEL(5)]),
]

# ---- the mixed layer: every projection and operator -----------------------------------------
MIXED = [
    Row("mixed", dict(), [INPUT_DATA(40, attrs=proj("conv", num_filters=3, filter_size=3,
                                                     channels=2, height=5, width=4, padding=1))]),
    Row("mixed", dict(bias=True), [INPUT_DATA(40, attrs=proj(
        "conv", num_filters=4, filter_size=2, filter_size_y=3, stride=2, channels=2, height=5,
        width=4, groups=2))]),
    Row("mixed", dict(), [INPUT_DATA(40, attrs=proj("conv_operator", num_filters=2, filter_size=3,
                                                     channels=2, height=5, width=4)),
                          INPUT_DATA(36, attrs=proj("operand"))]),
    Row("mixed", dict(bias=True), [INPUT_DATA(40, attrs=proj(
        "conv", num_filters=4, filter_size=3, filter_size_y=2, stride=2, padding=1, channels=2,
        height=5, width=4, groups=2, trans=True))]),
    Row("mixed", dict(), [INPUT_DATA(40, attrs=proj("conv_operator", num_filters=3, filter_size=2,
                                                     stride=2, channels=2, height=5, width=4,
                                                     trans=True)),
                          INPUT_DATA(24, attrs=proj("operand"))]),
    Row("mixed", dict(), [INPUT_DATA(10, attrs=proj("slice", slices=[[0, 3], [5, 9]]))]),
    Row("mixed", dict(size=9, active_type="tanh"),
        [INPUT_SEQUENCE_DATA(10, attrs=proj("slice", slices=[[1, 4], [4, 10]])),
         INPUT_SEQUENCE_DATA(9, attrs=proj("identity"))]),
    Row("mixed", dict(size=4), [INPUT_DATA(5, attrs=proj("full_matrix"))]),
    Row("mixed", dict(size=4, bias=True, active_type="tanh"),
        [INPUT_DATA(5, attrs=proj("full_matrix")),
         INPUT_DATA(3, attrs=proj("trans_full_matrix"))]),
    Row("mixed", dict(size=3), [INPUT_SEQUENCE_DATA(5, attrs=proj("trans_full_matrix"))]),
    Row("mixed", dict(size=4), [INPUT_LABEL(12, attrs=proj("table"))]),
    Row("mixed", dict(size=4, bias=True),
        [INPUT_SEQUENCE_LABEL(12, attrs=proj("table"), param={"sparse_update": True}),
         INPUT_SEQUENCE_DATA(4, attrs=proj("identity"))]),
    Row("mixed", dict(), [INPUT_DATA(4, attrs=proj("identity"))]),
    Row("mixed", dict(size=3), [INPUT_DATA(6, attrs=proj("identity", offset=2))]),
    Row("mixed", dict(size=6), [INPUT_DATA(6, attrs=proj("full_matrix")),
                                INPUT_DATA(3, attrs=proj("identity", offset=2))]),
    Row("mixed", dict(size=4, active_type="tanh"),  # two identities first: written as one sum
        [INPUT_DATA(4, attrs=proj("identity")), INPUT_DATA(4, attrs=proj("identity")),
         INPUT_DATA(5, attrs=proj("full_matrix"))]),
    Row("mixed", dict(size=3), [INPUT_DATA(6, attrs=proj("identity", offset=2)),
                                INPUT_DATA(2, attrs=proj("full_matrix"))]),
    Row("mixed", dict(size=4, active_type="tanh"),  # two identities alone: one kernel each way
        [INPUT_SEQUENCE_DATA(4, attrs=proj("identity")),
         INPUT_SEQUENCE_DATA(4, attrs=proj("identity"))]),
    Row("mixed", dict(size=3, bias=True, active_type="sigmoid"),
        [INPUT_DATA(6, attrs=proj("identity", offset=2)), INPUT_DATA(3, attrs=proj("identity"))]),
    Row("mixed", dict(size=4, bias=True),  # sparse inputs through their CSR products
        [INPUT_SPARSE_NON_VALUE_DATA(30, attrs=proj("full_matrix")),
         INPUT_SPARSE_FLOAT_VALUE_DATA(20, attrs=proj("trans_full_matrix")),
         INPUT_DATA(3, attrs=proj("full_matrix"))]),
    Row("mixed", dict(size=4),
        [INPUT_SPARSE_FLOAT_VALUE_DATA(30, attrs=proj("full_matrix"),
                                       param={"sparse_update": True})]),
    Row("mixed", dict(bias=True), [INPUT_DATA(5, attrs=proj("dotmul"))]),
    Row("mixed", dict(), [INPUT_HASSUB_SEQUENCE_DATA(5, attrs=proj("scaling"))]),
    Row("mixed", dict(), [INPUT_SEQUENCE_DATA(3, attrs=proj("context", context_len=3,
                                                                context_start=-1))]),
    Row("mixed", dict(), [INPUT_SEQUENCE_DATA(3, attrs=proj("context", context_len=4,
                                                                context_start=-2,
                                                                trainable_padding=True))]),
    Row("mixed", dict(), [INPUT_SEQUENCE_DATA(2, attrs=proj("context", context_len=2,
                                                                context_start=1,
                                                                trainable_padding=True))]),
    Row("mixed", dict(active_type="sigmoid"),
        [INPUT_DATA(4, attrs=proj("dotmul_operator", scale=0.5)),
         INPUT_DATA(4, attrs=proj("operand")), INPUT_DATA(4, attrs=proj("dotmul"))]),
]

# data_norm's static statistics, drawn away from zero so the scale rows matter
STATS = {"is_static": True, "initial_mean": 0.8, "initial_std": 0.3}


def beam_search_steps(batch: int, rng: np.random.RandomState) -> list[Argument]:
    """cross_entropy_over_beam's triples for three search steps of two samples, beam 2, random
    scores: sample 0's gold path falls off the beam at step 2, sample 1's stays in it."""
    layout = [
        (dict(seq_starts=np.array([0, 3, 5])), [[2, 0], [1, 0]], [0, 1]),
        (dict(seq_starts=np.array([0, 5, 9]), sub_seq_starts=np.array([0, 2, 5, 8, 9])),
         [[1, 0], [2, -1], [0, 1], [0, -1]], [2, 1]),
        (dict(seq_starts=np.array([0, 5, 10]),
              sub_seq_starts=np.array([0, 2, 3, 5, 6, 8, 10])),
         [[0, 1], [0, -1], [1, -1], [0, -1], [1, 0], [0, 1]], [0, 0]),
    ]
    args = []
    for starts, kept, gold in layout:
        rows = int(starts["seq_starts"][-1])
        args += [Argument(value=dense(rng, rows, 1), **starts),
                 Argument(value=np.array(kept, dtype=np.float64)),
                 Argument(ids=np.array(gold))]
    return args


# ---- the dense layers -----------------------------------------------------------------------
DENSE = [
    Row("slope_intercept", dict(slope=2.0, intercept=-0.5), [INPUT_DATA(4)]),
    Row("slope_intercept", dict(slope=-1.5), [INPUT_SEQUENCE_DATA(3)]),
    Row("scale_shift", dict(), [INPUT_DATA(4)]),
    Row("scale_shift", dict(bias=False), [INPUT_SEQUENCE_DATA(3)]),
    Row("prelu", dict(), [INPUT_DATA(6, **AWAY_FROM_ZERO)]),
    Row("prelu", dict(partial_sum=3), [INPUT_DATA(6, low=-1.0, high=-0.2)]),
    Row("prelu", dict(partial_sum=2), [INPUT_SEQUENCE_DATA(4, low=-1.0, high=-0.2)]),
    Row("clip", dict(min=-0.5, max=0.5), [INPUT_DATA(5, low=-0.4, high=0.4)]),
    Row("clip", dict(min=-2.0, max=-1.0), [INPUT_DATA(5)]),
    Row("sum_to_one_norm", dict(), [INPUT_DATA(5, **POSITIVE)], use_weight=True),
    Row("sum_to_one_norm", dict(), [INPUT_SEQUENCE_DATA(3, **POSITIVE)], use_weight=True),
    Row("row_l2_norm", dict(), [INPUT_DATA(5)], use_weight=True),
    Row("row_l2_norm", dict(), [INPUT_SEQUENCE_DATA(3)], use_weight=True),
    Row("trans", dict(), [INPUT_DATA(5)], use_weight=True),
    Row("resize", dict(size=5), [INPUT_DATA(4)], use_weight=True),
    Row("featmap_expand", dict(num_filters=3), [INPUT_DATA(4)], use_weight=True),
    Row("featmap_expand", dict(num_filters=2, as_row_vector=False), [INPUT_SEQUENCE_DATA(3)],
        use_weight=True),
    Row("scaling", dict(), [INPUT_DATA(1), INPUT_DATA(4)], use_weight=True),
    Row("scaling", dict(), [INPUT_SEQUENCE_DATA(1), INPUT_SEQUENCE_DATA(4)], use_weight=True),
    Row("power", dict(), [INPUT_DATA(1), INPUT_DATA(4, **POSITIVE)], use_weight=True),
    Row("interpolation", dict(), [INPUT_DATA(1), INPUT_DATA(4), INPUT_DATA(4)], use_weight=True),
    Row("interpolation", dict(),
        [INPUT_SEQUENCE_DATA(1), INPUT_SEQUENCE_DATA(3), INPUT_SEQUENCE_DATA(3)],
        use_weight=True),
    Row("dot_prod", dict(), [INPUT_DATA(4), INPUT_DATA(4)]),
    Row("dot_prod", dict(), [INPUT_SEQUENCE_DATA(3), INPUT_SEQUENCE_DATA(3)]),
    Row("l2_distance", dict(), [INPUT_DATA(4), INPUT_DATA(4)]),
    Row("out_prod", dict(), [INPUT_DATA(3), INPUT_DATA(4)], use_weight=True),
    Row("convex_comb", dict(size=3), [INPUT_DATA(2), INPUT_DATA(6)], use_weight=True),
    Row("convex_comb", dict(), [INPUT_SEQUENCE_DATA(2), INPUT_SEQUENCE_DATA(8)], use_weight=True),
    Row("tensor", dict(size=3), [INPUT_DATA(4), INPUT_DATA(2)], use_weight=True),
    Row("tensor", dict(size=2, bias=False, active_type="tanh"),
        [INPUT_SEQUENCE_DATA(3), INPUT_SEQUENCE_DATA(3)], use_weight=True),
    Row("multiplex", dict(), [INPUT_LABEL(2), INPUT_DATA(3), INPUT_DATA(3)], use_weight=True),
    Row("multiplex", dict(), [INPUT_SEQUENCE_LABEL(3), INPUT_SEQUENCE_DATA(2),
                              INPUT_SEQUENCE_DATA(2), INPUT_SEQUENCE_DATA(2)], use_weight=True),
    Row("selective_fc", dict(size=4), [INPUT_DATA(5)], use_weight=True),
    Row("selective_fc", dict(size=4, bias=False, active_type="tanh"),
        [INPUT_DATA(3), INPUT_SEQUENCE_DATA(2)], use_weight=True),
    Row("selective_fc", dict(size=6, has_select=True, active_type="sigmoid"),
        [INPUT_DATA(5), INPUT_SPARSE_NON_VALUE_DATA(6, nnz=2)], use_weight=True),
    Row("cross_entropy_over_beam", dict(),
        [INPUT_SEQUENCE_DATA(1), INPUT_DATA_TARGET(2), INPUT_LABEL(4),
         INPUT_HASSUB_SEQUENCE_DATA(1), INPUT_DATA_TARGET(2), INPUT_LABEL(4),
         INPUT_HASSUB_SEQUENCE_DATA(1), INPUT_DATA_TARGET(2), INPUT_LABEL(4)],
        batch_size=2, make_inputs=beam_search_steps, compared=3),
    Row("data_norm", dict(data_norm_strategy="z-score"), [INPUT_DATA(4, param=STATS)]),
    Row("data_norm", dict(data_norm_strategy="min-max"), [INPUT_SEQUENCE_DATA(4, param=STATS)]),
    Row("data_norm", dict(data_norm_strategy="decimal-scaling", active_type="tanh"),
        [INPUT_DATA(4, param=STATS)]),
    Row("conv_shift", dict(), [INPUT_DATA(7), INPUT_DATA(3)]),
    Row("conv_shift", dict(active_type="tanh"), [INPUT_SEQUENCE_DATA(4), INPUT_SEQUENCE_DATA(5)]),
    Row("factorization_machine", dict(factor_size=3), [INPUT_DATA(6)]),
    Row("factorization_machine", dict(factor_size=2), [INPUT_SPARSE_FLOAT_VALUE_DATA(20)]),
    Row("factorization_machine", dict(factor_size=3), [INPUT_SPARSE_NON_VALUE_DATA(20)]),
]

# ---- similarity layers (cos, rank-cost) and a PyLayer run as an engine layer ----------------
SIMILARITY = [
    Row("cos", dict(size=1), [INPUT_DATA(5), INPUT_DATA(5)]),
    Row("cos", dict(size=1, scale=2.5), [INPUT_DATA(4), INPUT_DATA(4)]),
    Row("cos", dict(size=1), [INPUT_SEQUENCE_DATA(3), INPUT_SEQUENCE_DATA(3)]),
    Row("cos_vm", dict(size=3, scale=2.0), [INPUT_DATA(4), INPUT_DATA(12)]),
    Row("cos_vm", dict(size=2), [INPUT_SEQUENCE_DATA(3), INPUT_SEQUENCE_DATA(6)]),
    Row("rank-cost", dict(), [INPUT_DATA(1), INPUT_DATA(1), INPUT_DATA_TARGET(1, **PROB)]),
    Row("rank-cost", dict(coeff=0.7),
        [INPUT_DATA(1), INPUT_DATA(1), INPUT_DATA_TARGET(1, **PROB), INPUT_DATA(1, **POSITIVE)]),
    Row("py_layer", dict(size=4, py_layer=py_layer_path(TanhPyLayer), kwargs={}),
        [INPUT_DATA(4)], batch_size=9),
]

# ---- the image layers: 2 channels of 5 x 4 unless said ---------------------------------------
STATIC = {"is_static": True, "initial_mean": 0.0, "initial_std": 0.0}
IMG = dict(channels=2, height=5, width=4)  # 40 values per sample
CONV = dict(IMG, num_filters=3, filter_size=3, filter_size_y=2)
VOL = dict(channels=2, depth=3, height=3, width=4)  # 72 values per sample
CONV3D = dict(VOL, num_filters=2, filter_size=2, filter_size_z=3)


def bn_inputs(size: int) -> list[InputDef]:
    """batch_norm's input, then its moving mean and variance (static parameters)."""
    return [INPUT_DATA(size), INPUT_DATA(1, param=STATIC), INPUT_DATA(1, param=STATIC)]


image = partial(Row, batch_size=4)


def regions(rng: np.random.RandomState, batch: int) -> np.ndarray:
    """roi_pool's regions ``[image, x1, y1, x2, y2]`` (input coordinates, twice the 5 x 4
    map's at spatial_scale 0.5), one per sample, on its own image."""
    x1, y1 = rng.randint(0, 4, size=batch), rng.randint(0, 5, size=batch)
    x2, y2 = x1 + rng.randint(2, 5, size=batch), y1 + rng.randint(2, 6, size=batch)
    return np.stack([np.arange(batch), x1, y1, x2, y2], axis=1).astype(np.float64)


def sub_region_boxes(rng: np.random.RandomState, batch: int) -> np.ndarray:
    """scale_sub_region's boxes ``[c0, c1, h0, h1, w0, w1]`` (1-based, ends included) inside
    a 2 x 5 x 4 image, one per sample."""
    starts = rng.randint(1, [3, 6, 5], size=(batch, 3))
    ends = np.minimum(starts + rng.randint(0, 3, size=(batch, 3)), [2, 5, 4])
    return np.stack([starts[:, 0], ends[:, 0], starts[:, 1], ends[:, 1], starts[:, 2],
                     ends[:, 2]], axis=1).astype(np.float64)
transposed = partial(Row, batch_size=3, use_weight=True, check=dict(trans=True))
IMAGE = [
    image("exconv", dict(CONV), [INPUT_DATA(40)]),
    image("exconv", dict(CONV, bias=False, active_type="tanh"), [INPUT_DATA(40)]),
    image("exconv", dict(CONV, stride=2, stride_y=1, padding=1, padding_y=2, dilation_y=2),
          [INPUT_DATA(40)]),
    image("exconv", dict(IMG, num_filters=4, filter_size=2, groups=2, shared_biases=False),
          [INPUT_DATA(40)]),
    image("exconv", dict(CONV), [INPUT_DATA(40), INPUT_DATA(40)]),
    # a 17x16 output (> 256 positions): per-sample GEMMs, the bias added inside the GEMM
    image("exconv", dict(channels=1, height=18, width=17, num_filters=2, filter_size=2),
          [INPUT_DATA(306)]),
    transposed("exconv", dict(CONV), [INPUT_DATA(40)]),
    # "same" padding: the direct kernels (sculler/math/conv_direct.py) where numba is installed
    image("exconv", dict(IMG, num_filters=5, filter_size=3, padding=1), [INPUT_DATA(40)]),
    image("exconv", dict(IMG, num_filters=3, filter_size=3, padding=1, stride=2),
          [INPUT_DATA(40)]),
    image("exconv", dict(IMG, num_filters=6, filter_size=3, filter_size_y=5, padding=1,
                         padding_y=2, bias=False), [INPUT_DATA(40), INPUT_DATA(40)]),
    image("conv", dict(channels=3, height=3, width=3, num_filters=2, filter_size=1),
          [INPUT_DATA(27)]),
    image("cudnn_conv", dict(CONV, stride=2), [INPUT_DATA(40)]),
    image("exconvt", dict(CONV), [INPUT_DATA(40)]),
    image("exconvt", dict(CONV, bias=False, stride=2, padding=1), [INPUT_DATA(40)]),
    image("exconvt", dict(IMG, num_filters=4, filter_size=3, stride=2, groups=2, caffe_mode=False,
                          shared_biases=False), [INPUT_DATA(40)]),
    image("convt", dict(IMG, num_filters=2, filter_size=2, stride=2), [INPUT_DATA(40)]),
    image("cudnn_convt", dict(CONV, padding=1), [INPUT_DATA(40)]),
    image("pool", dict(IMG, pool_size=2, stride=2), [INPUT_DATA(40)]),
    image("pool", dict(IMG, pool_size=3, pool_size_y=2, stride=2, padding=1, padding_y=0,
                       bias=True), [INPUT_DATA(40)]),
    image("pool", dict(IMG, pool_type="avg-projection", pool_size=3, stride=2, padding=1),
          [INPUT_DATA(40)]),
    image("pool", dict(IMG, pool_type="avg-projection", pool_size=2, stride=1, exclude_mode=False,
                       ceil_mode=False, bias=True), [INPUT_DATA(40)]),
    transposed("pool", dict(IMG, pool_size=2), [INPUT_DATA(40)]),
    image("batch_norm", dict(IMG), bn_inputs(40), use_weight=True),
    image("batch_norm", dict(IMG, bias=False, active_type="tanh"), bn_inputs(40),
          use_weight=True),
    image("batch_norm", dict(), bn_inputs(6), use_weight=True),
    # relu applied inside the compiled kernels' passes (where numba is installed)
    image("batch_norm", dict(IMG, active_type="relu"), bn_inputs(40), use_weight=True),
    transposed("batch_norm", dict(IMG), bn_inputs(40)),
    image("cudnn_batch_norm", dict(IMG), bn_inputs(40), use_weight=True),
    image("batch_norm", dict(VOL, img3D=True), bn_inputs(72), use_weight=True),
    image("conv3d", dict(CONV3D), [INPUT_DATA(72)]),
    image("conv3d", dict(CONV3D, stride=2, stride_z=1, padding=1, padding_y=0, groups=2,
                         num_filters=4, shared_biases=False), [INPUT_DATA(72)]),
    image("conv3d", dict(CONV3D, bias=False), [INPUT_DATA(72), INPUT_DATA(72)]),
    transposed("conv3d", dict(CONV3D), [INPUT_DATA(72)]),
    image("deconv3d", dict(CONV3D, stride=2, padding=1, padding_z=0), [INPUT_DATA(72)]),
    image("deconv3d", dict(CONV3D, num_filters=4, groups=2, shared_biases=False),
          [INPUT_DATA(72)]),
    transposed("deconv3d", dict(CONV3D), [INPUT_DATA(72)]),
    image("pool3d", dict(VOL, pool_size=2, stride=2), [INPUT_DATA(72)]),
    image("pool3d", dict(VOL, pool_size=2, stride=1), [INPUT_SEQUENCE_DATA(72)]),
    image("conv3d", dict(CONV3D, padding=1), [INPUT_SEQUENCE_DATA(72)]),
    image("pool3d", dict(VOL, pool_size=3, pool_size_z=2, stride=2, padding=1, padding_z=0),
          [INPUT_DATA(72)]),
    image("pool3d", dict(VOL, pool_type="avg-projection", pool_size=3, stride=2, padding=1),
          [INPUT_DATA(72)]),
    image("norm", dict(channels=5, height=2, width=2, norm_size=3, scale=0.5, power=0.75),
          [INPUT_DATA(20)]),
    image("norm", dict(channels=4, height=3, width=1, norm_size=4, scale=1.0, power=0.5,
                       bias=True), [INPUT_DATA(12)]),
    image("maxout", dict(channels=6, height=2, width=2, groups=3), [INPUT_DATA(24)]),
    image("maxout", dict(channels=4, height=3, width=1, groups=2, bias=True), [INPUT_DATA(12)]),
    image("spp", dict(channels=2, height=4, width=6, pyramid_height=3), [INPUT_DATA(48)]),
    image("spp", dict(channels=2, height=3, width=5, pyramid_height=2,
                      pool_type="avg-projection", bias=True), [INPUT_DATA(30)]),
    image("bilinear_interp", dict(IMG, out_size_x=7, out_size_y=3), [INPUT_DATA(40)]),
    image("bilinear_interp", dict(IMG, out_size_x=3, out_size_y=1, bias=True), [INPUT_DATA(40)]),
    image("blockexpand", dict(IMG, block_x=2, block_y=3, stride_x=2, stride_y=2),
          [INPUT_DATA(40)]),
    image("blockexpand", dict(IMG, block_x=3, block_y=2, stride_x=2, padding_x=1, padding_y=1),
          [INPUT_DATA(40)]),
    image("pad", dict(IMG, pad_c=[1, 0], pad_h=[0, 2], pad_w=[1, 1]), [INPUT_DATA(40)]),
    image("crop", dict(IMG, axis=2, offset=[1, 1], shape=[3, 2]), [INPUT_DATA(40)]),
    image("crop", dict(channels=3, height=5, width=4, axis=1, offset=[1, 2, 1]),
          [INPUT_DATA(60), INPUT_DATA(8, attrs=dict(channels=2, height=2, width=2))]),
    image("norm", dict(IMG, norm_type="cross-channel-norm"), [INPUT_DATA(40)]),
    image("norm", dict(channels=3, height=2, width=2, norm_type="cross-channel-norm",
                       active_type="tanh"), [INPUT_DATA(12)]),
    image("rotate", dict(IMG), [INPUT_DATA(40)]),
    image("switch_order", dict(IMG, reshape_axis=3), [INPUT_DATA(40)]),
    image("roi_pool", dict(IMG, pooled_height=2, pooled_width=2, spatial_scale=0.5),
          [INPUT_DATA(40), INPUT_DATA_TARGET(5)],
          make_inputs=lambda batch, rng: [Argument(value=dense(rng, batch, 40)),
                                          Argument(value=regions(rng, batch))]),
    image("scale_sub_region", dict(IMG, value=2.5), [INPUT_DATA(40), INPUT_DATA_TARGET(6)],
          make_inputs=lambda batch, rng: [Argument(value=dense(rng, batch, 40)),
                                          Argument(value=sub_region_boxes(rng, batch))]),
]

# ---- recurrent layers over sequence layouts and activations, both directions -----------------
H = 3
GATES = {"lstmemory": 4, "gated_recurrent": 3, "recurrent": 1}
LAYOUTS = {  # None: the harness's random lengths over 12 rows
    "many lengths": (1, 5, 3, 1, 4, 2),
    "one sequence": (6,),
    "length-1 only": (1, 1, 1),
    "one step": (1,),
    "random": None,
}
NONZERO = {"initial_std": 0.5}  # nonzero bias (lstmemory: peepholes and gate biases)


def recurrent(layer_type: str, settings: dict, layout: str, compared: int | None = None,
              **check: Any) -> Row:
    lens = LAYOUTS[layout]
    return Row(layer_type, settings, [SEQ(GATES[layer_type] * H, seq_lengths=lens)],
               use_weight=True, batch_size=sum(lens) if lens else 12, check=check,
               compared=compared)


# (layer type, settings); bias: NONZERO, None (the type's default) or False (none)
CELLS = [
    ("lstmemory", dict(active_type="tanh", bias=NONZERO)),
    ("lstmemory", dict(active_type="sigmoid", active_gate_type="tanh",
                       active_state_type="sigmoid", bias=NONZERO)),
    ("lstmemory", dict(active_type="linear", active_state_type="linear", bias=NONZERO)),
    ("lstmemory", dict(active_type="tanh", active_state_type="relu", bias=NONZERO)),
    ("lstmemory", dict(active_type="tanh", bias=False)),
    ("gated_recurrent", dict(active_type="tanh", bias=NONZERO)),
    ("gated_recurrent", dict(active_type="linear", active_gate_type="tanh")),
    ("gated_recurrent", dict(active_type="relu", bias=NONZERO)),
    ("gated_recurrent", dict(active_type="tanh", bias=False)),
    ("recurrent", dict(active_type="tanh", bias=NONZERO)),
    ("recurrent", dict(active_type="sigmoid")),
    ("recurrent", dict(active_type="linear", bias=False)),
]

RECURRENT = [
    # the input, the weight and the bias all compared
    recurrent(t, dict(active_type="tanh", reversed=reverse, bias=NONZERO), layout, compared=3)
    for t in GATES for layout in LAYOUTS for reverse in (False, True)
] + [
    recurrent(t, {**settings, "reversed": reverse}, "many lengths", seed=3)
    for t, settings in CELLS for reverse in (False, True)
]

# ---- the step layers of recurrent groups -----------------------------------------------------
step = partial(Row, use_weight=True, batch_size=6)
STEP = [
    step("gru_step", dict(size=4), [INPUT_DATA(12), INPUT_DATA(4)]),
    step("gru_step", dict(size=4, active_type="relu", active_gate_type="tanh"),
         [INPUT_DATA(12), INPUT_DATA(4)]),
    step("gru_step", dict(size=3, bias=False), [INPUT_SEQUENCE_DATA(9), INPUT_SEQUENCE_DATA(3)]),
    step("lstm_step", dict(), [INPUT_DATA(16), INPUT_DATA(4)]),
    step("lstm_step", dict(active_type="relu", active_state_type="sigmoid"),
         [INPUT_SEQUENCE_DATA(16), INPUT_SEQUENCE_DATA(4)]),
    step("lstm_step", dict(bias=False), [INPUT_DATA(8), INPUT_DATA(2)]),
]

# ---- structured costs (crf, ctc): one sequence of length 1, one longer, many lengths ---------
CLASSES = 4
CRF_LAYOUTS = {"len1": (1,), "one": (6,), "many": (3, 1, 5, 2, 4, 1)}
# a batch larger than every layout: both batches of the check use the full layouts
structured = partial(Row, use_weight=True, batch_size=64)


def crf(layout: str, weighted: bool = False) -> Row:
    lens = CRF_LAYOUTS[layout]
    inputs = [SEQ(CLASSES, low=-2, high=2, seq_lengths=lens),
              INPUT_LABEL(CLASSES, seq_lengths=lens)]
    if weighted:
        inputs.append(INPUT_DATA(1, low=0.2, high=1.5, seq_lengths=(1,) * len(lens)))
    return structured("crf", {}, inputs)


def ctc(layer_type: str, layout: str, label_lengths: tuple[int, ...], **settings: Any) -> Row:
    low, high = (0.05, 1.0) if layer_type == "ctc" else (-2.0, 2.0)
    return structured(layer_type, settings,
                      [SEQ(CLASSES, low=low, high=high, seq_lengths=CRF_LAYOUTS[layout]),
                       INPUT_SEQUENCE_LABEL(CLASSES - 1, seq_lengths=label_lengths)])


STRUCTURED = [
    crf("len1"), crf("one"), crf("many"), crf("many", weighted=True),
    ctc("ctc", "len1", (1,)), ctc("ctc", "one", (3,)), ctc("ctc", "many", (2, 0, 3, 1, 2, 1)),
    ctc("warp_ctc", "len1", (1,), blank=CLASSES - 1),
    ctc("warp_ctc", "one", (2,), blank=CLASSES - 1),
    ctc("warp_ctc", "many", (2, 0, 3, 1, 2, 1), blank=CLASSES - 1),
]

# ---- sequence layers: every input layout they accept, at batch 1 and 9 -----------------------
# Inputs that must agree with each other (one row per sequence of another input, index
# matrices within the lengths) come from ``make_inputs`` factories; each factory's name says
# the layout and shows in the row's id.


def seq(width: int, mode: str = "many", nested: bool = False):
    """One (nested) sequence input with ``mode`` lengths (see ``sequences.lengths``)."""
    def make(batch, rng):
        return [seq_arg(rng, lengths(batch, rng, mode), width, nested)]
    make.__name__ = f"{'nested' if nested else 'seq'}:{mode}"
    return make


def expand_inputs(width: int, nested_target: bool, from_seq: bool = False):
    """[data, expand_as]: data has one row per (sub-)sequence of expand_as."""
    def make(batch, rng):
        target = seq_arg(rng, lengths(batch, rng, "many"), 2, nested=nested_target)
        if from_seq:
            per_seq = np.searchsorted(target.sub_seq_starts, target.seq_starts)
            data = seq_arg(rng, np.diff(per_seq), width)
        else:
            data = Argument(value=dense(rng, target.num_sequences, width))
        return [data, target]
    make.__name__ = f"expand:{'nested' if nested_target else 'seq'}:{'seq' if from_seq else ''}"
    return make


def concat_inputs(width: int, with_empty: bool):
    """Two sequences per sample, the second possibly empty."""
    def make(batch, rng):
        la = lengths(batch, rng, "many")
        lb = [int(v) for v in rng.randint(0 if with_empty else 1, 4, size=len(la))]
        lb[-1] = max(lb[-1], 1)  # b has rows to check
        return [seq_arg(rng, la, width), seq_arg(rng, lb, width)]
    make.__name__ = f"seqconcat:{'empty' if with_empty else 'full'}"
    return make


def plain_rows(width: int):
    def make(batch, rng):
        return [Argument(value=dense(rng, batch, width))]
    make.__name__ = "rows"
    return make


def even_lengths(width: int):
    def make(batch, rng):
        rows = max(2, batch - batch % 2)
        return [seq_arg(rng, lengths(rows, rng, "even"), width)]
    make.__name__ = "seq:even"
    return make


def subseq_inputs(width: int, mode: str):
    """[sequence, offsets, sizes]: one in-range slice per sequence."""
    def make(batch, rng):
        x = seq_arg(rng, lengths(batch, rng, mode), width)
        lens = np.diff(x.seq_starts)
        off = np.array([rng.randint(0, n) for n in lens])
        size = np.array([rng.randint(1, n - o + 1) for n, o in zip(lens, off)])
        return [x, Argument(ids=off), Argument(ids=size)]
    make.__name__ = f"subseq:{mode}"
    return make


def slice_inputs(width: int, nested: bool, which=("starts", "ends"), k: int = 2):
    """Random inclusive slices, k per (sub-)sequence, the last of some rows cut by -1."""
    def make(batch, rng):
        x = seq_arg(rng, lengths(batch, rng, "many"), width, nested=nested)
        segs = x.sub_seq_starts if nested else x.seq_starts
        lens = np.diff(segs)
        begin = np.array([[rng.randint(0, n) for _ in range(k)] for n in lens], float)
        end = np.array([[rng.randint(b, n) for b in row] for row, n in zip(begin, lens)], float)
        cut = rng.rand(len(lens)) < 0.3
        begin[cut, -1] = end[cut, -1] = -1
        mats = {"starts": begin, "ends": end}
        return [x] + [Argument(value=mats[w]) for w in which]
    make.__name__ = f"seq_slice:{'nested' if nested else 'seq'}:{'+'.join(which)}"
    return make


def nested_select_inputs(width: int):
    """[nested sequence, up to 2 sub-sequence indices per sequence (-1 pads)]."""
    def make(batch, rng):
        x = seq_arg(rng, lengths(batch, rng, "many"), width, nested=True)
        per = np.searchsorted(x.sub_seq_starts, x.seq_starts)
        sel = np.full((x.num_sequences, 2), -1.0)
        for n, count in enumerate(np.diff(per)):
            pick = rng.permutation(count)[:2]
            sel[n, :len(pick)] = pick
        return [x, Argument(value=sel)]
    make.__name__ = "sub_nested_seq"
    return make


def sequence(layer_type: str, settings: dict, inputs: list[InputDef], make_inputs,
             use_weight: bool = False) -> list[Row]:
    """The row at batch 1 and at batch 9."""
    return [Row(layer_type, settings, inputs, use_weight, batch, make_inputs)
            for batch in (1, 9)]


def aggregate(layer_type: str, extra: dict) -> list[Row]:
    """A pooling layer over every layout, both agg_levels, strides, bias and activation."""
    rows = []
    for mode in ("many", "one", "ones"):
        rows += sequence(layer_type, dict(extra), [SEQ(3)], seq(3, mode))
        rows += sequence(layer_type, dict(extra), [NESTED(3)], seq(3, mode, nested=True))
    rows += sequence(layer_type, dict(extra, trans_type="seq"), [NESTED(3)],
                     seq(3, "many", nested=True))
    rows += sequence(layer_type, dict(extra, trans_type="seq"), [NESTED(3)],
                     seq(3, "one", nested=True))
    rows += sequence(layer_type, dict(extra, seq_pool_stride=2), [SEQ(3)], seq(3, "many"))
    rows += sequence(layer_type, dict(extra, seq_pool_stride=3), [SEQ(2)], seq(2, "one"))
    rows += sequence(layer_type, dict(extra, bias=True, active_type="tanh"), [SEQ(3)],
                     seq(3, "many"))
    return rows


SEQUENCE = [
    *sequence("row_conv", dict(context_length=3), [SEQ(4)], seq(4, "many")),
    *sequence("row_conv", dict(context_length=2, active_type="tanh"), [NESTED(3)],
              seq(3, "many", nested=True)),
    *aggregate("seqlastins", {}),
    *aggregate("seqlastins", {"select_first": True}),
    *sequence("seqfirstins", dict(seq_pool_stride=2), [SEQ(2)], seq(2, "many")),
    *aggregate("max", {}),
    *aggregate("average", {}),
    *aggregate("average", {"average_strategy": "sum"}),
    *aggregate("average", {"average_strategy": "squarerootn"}),
    *sequence("expand", dict(), [INPUT_DATA(3), SEQ(2)], expand_inputs(3, False)),
    *sequence("expand", dict(), [INPUT_DATA(3), NESTED(2)], expand_inputs(3, True)),
    *sequence("expand", dict(trans_type="seq", bias=True), [SEQ(3), NESTED(2)],
              expand_inputs(3, True, from_seq=True)),
    *sequence("seqconcat", dict(), [SEQ(3), SEQ(3)], concat_inputs(3, False), True),
    *sequence("seqconcat", dict(active_type="tanh"), [SEQ(2), SEQ(2)], concat_inputs(2, True),
              True),
    *sequence("seqreshape", dict(size=2), [SEQ(4)], seq(4, "many"), True),
    *sequence("seqreshape", dict(size=4, bias=True), [SEQ(2)], even_lengths(2), True),
    *sequence("seqreshape", dict(size=3), [INPUT_DATA(6)], plain_rows(6), True),
    *sequence("seqreshape", dict(size=1), [NESTED(3)], seq(3, "many", nested=True), True),
    *sequence("fc", dict(size=1, active_type="sequence_softmax"), [SEQ(3)], seq(3, "many"), True),
    *sequence("fc", dict(size=1, active_type="sequence_softmax"), [NESTED(3)],
              seq(3, "many", nested=True), True),
    *sequence("fc", dict(size=1, active_type="sequence_softmax"), [SEQ(3)], seq(3, "ones"), True),
    *sequence("subseq", dict(), [SEQ(3), INPUT_LABEL(9), INPUT_LABEL(9)],
              subseq_inputs(3, "many"), True),
    *sequence("subseq", dict(bias=True, active_type="tanh"),
              [SEQ(2), INPUT_LABEL(9), INPUT_LABEL(9)], subseq_inputs(2, "one"), True),
    *sequence("seq_slice", dict(), [SEQ(2), INDEX(2), INDEX(2)], slice_inputs(2, False), True),
    *sequence("seq_slice", dict(), [NESTED(2), INDEX(2), INDEX(2)], slice_inputs(2, True), True),
    *sequence("seq_slice", dict(select_first=True), [SEQ(2), INDEX(2)],
              slice_inputs(2, False, ("starts",)), True),
    *sequence("seq_slice", dict(select_first=False), [NESTED(2), INDEX(2)],
              slice_inputs(2, True, ("ends",)), True),
    *sequence("sub_nested_seq", dict(), [NESTED(3), INDEX(2)], nested_select_inputs(3), True),
    *sequence("kmax_seq_score", dict(beam_size=2), [SEQ(1)], seq(1, "many")),
    *sequence("mixed", dict(), [NESTED(3, attrs=proj("context", context_len=3, context_start=-1,
                                                      trainable_padding=True))],
              seq(3, "many", nested=True)),
    *sequence("mixed", dict(), [SEQ(2, attrs=proj("context", context_len=4, context_start=-2,
                                                   trainable_padding=True))], seq(2, "ones")),
    *sequence("mixed", dict(), [SEQ(2, attrs=proj("context", context_len=5, context_start=-2,
                                                   trainable_padding=True))], seq(2, "one")),
    *sequence("mixed", dict(), [SEQ(2, attrs=proj("context", context_len=3, context_start=0))],
              seq(2, "many")),
    *sequence("concat2", dict(),
              [INPUT_LABEL(7, attrs=proj("table", size=3), param={"name": "_proj"}),
               INPUT_LABEL(7, attrs=proj("table", size=3), param={"name": "_proj"}),
               INPUT_DATA(2, attrs=proj("full_matrix", size=4))], None, True),
    *sequence("concat2", dict(bias=True, active_type="tanh"),
              [SEQ(2, attrs=proj("context", context_len=3, context_start=-1,
                                 trainable_padding=True)),
               SEQ(3, attrs=proj("identity")), SEQ(3, attrs=proj("dotmul"))], None, True),
    # transposed (non-contiguous) input values, the harness's own random sequences
    *[Row(t, settings, [kind(4)], use_weight=True, batch_size=9, check=dict(trans=True))
      for t, settings, kind in [
          ("max", {}, SEQ), ("average", {"average_strategy": "squarerootn"}, SEQ),
          ("seqlastins", {}, SEQ), ("seqreshape", {"size": 2}, SEQ),
          ("seqlastins", {"trans_type": "seq"}, NESTED)]],
]

# ---- SSD's multibox_loss: fixed priors, ground truth near chosen priors (a fixed matching) ---
def ssd_priors(cells: int) -> np.ndarray:
    """Prior rows ``[box, variances]`` of a ``cells x cells`` map, 2 per cell: a square of
    side 0.8 / cells and a wide box; the square and the wide box of a cell overlap 0.37."""
    rows = []
    for i in range(cells):
        for j in range(cells):
            cx, cy, s = (j + 0.5) / cells, (i + 0.5) / cells, 0.4 / cells
            rows.append([cx - s, cy - s, cx + s, cy + s, 0.1, 0.1, 0.2, 0.2])
            rows.append([cx - 1.2 * s, cy - 0.4 * s, cx + 1.2 * s, cy + 0.4 * s,
                         0.1, 0.1, 0.2, 0.2])
    return np.array(rows)


def ssd_truth(rng: np.random.RandomState, priors: np.ndarray, batch: int,
              classes: list[int]) -> Argument:
    """Per image 1 or 2 ground-truth boxes, each a distinct prior moved by at most 0.02:
    it overlaps that prior by > 0.8 and every other by < 0.45 (away from the thresholds)."""
    rows, starts = [], [0]
    for n in range(batch):
        for k in rng.choice(len(priors), size=1 + n % 2, replace=False):
            box = priors[k, :4] + rng.uniform(-0.02, 0.02, size=4)
            rows.append([classes[rng.randint(len(classes))], *box, 0.0])
        starts.append(len(rows))
    return Argument(value=np.array(rows), seq_starts=np.array(starts, dtype=np.int32))


def multibox_inputs(maps: tuple[int, ...], background: int) -> Callable:
    """make_inputs of multibox_loss over one map per entry of ``maps`` (cells per side):
    the priors row (repeated per image), the ground truth (classes other than
    ``background``), then locations and scores."""
    priors = np.concatenate([ssd_priors(c) for c in maps])

    def make(batch: int, rng: np.random.RandomState) -> list[Argument]:
        locs = [Argument(value=dense(rng, batch, 2 * 4 * c * c)) for c in maps]
        confs = [Argument(value=dense(rng, batch, 2 * 3 * c * c, -2.0, 2.0)) for c in maps]
        return [Argument(value=np.tile(priors.reshape(1, -1), (batch, 1))),
                ssd_truth(rng, priors, batch, [c for c in range(3) if c != background]),
                *locs, *confs]

    make.__name__ = f"multibox_inputs_{'_'.join(map(str, maps))}"
    return make


def multibox_row(maps: tuple[int, ...], **settings: Any) -> Row:
    """multibox_loss over 2 priors per cell of each map, 3 classes."""
    priors = sum(2 * c * c for c in maps)
    geometry = [dict(height=c, width=c) for c in maps]
    inputs = [INDEX(8 * priors), INDEX(6),
              *[INPUT_DATA(8 * c * c, attrs=g) for c, g in zip(maps, geometry)],
              *[INPUT_DATA(6 * c * c, attrs=g) for c, g in zip(maps, geometry)]]
    attrs = {"input_num": len(maps), "num_classes": 3, "overlap_threshold": 0.5,
             "neg_pos_ratio": 3.0, "neg_overlap": 0.5, "background_id": 0, **settings}
    return Row("multibox_loss", attrs, inputs, use_weight=True, batch_size=4,
               make_inputs=multibox_inputs(maps, attrs["background_id"]))


DETECTION = [
    multibox_row((2,)),
    multibox_row((2, 1)),
    multibox_row((2,), neg_pos_ratio=1.0, background_id=2),
]


CASES: list[Row] = (BASIC + ACTIVATIONS + COSTS + MIXED + DENSE + SIMILARITY + IMAGE + RECURRENT
                    + STEP + STRUCTURED + SEQUENCE + DETECTION)

# Registered types that cannot be gradient-checked as one layer fed by data layers, and why.
# Each is checked elsewhere as named.
NOT_CHECKED_AS_ONE_LAYER = {
    "data": "the input layer itself: no inputs, nothing to differentiate",
    "agent": "a recurrent group's link to a layer outside the step; exists only inside a "
             "group (check_network_grad over groups: tests/group/test_recurrent_group.py)",
    "recurrent_layer_group": "runs a step sub-network, not one layer "
                             "(check_network_grad: tests/group/test_recurrent_group.py)",
    "get_output": "reads a secondary output (lstm_step's 'state') that a data layer does not "
                  "have (check_network_grad: tests/group/test_group_networks.py)",
    "lambda_cost": "backward is PaddlePaddle's LambdaRank approximation, not the derivative of "
                   "its NDCG output (values: tests/layers/test_costs.py)",
    "maxid": "outputs integer ids; no gradient",
    "sampling_id": "outputs sampled integer ids; no gradient",
    "crf_decoding": "Viterbi decoding outputs integer labels; no gradient",
    "beam_search": "generation only (ids chosen by beam search); no gradient",
    "eos_id": "outputs integer ids (id == eos_id); no gradient",
    "scatter_agent": "a recurrent group's in-link as PaddlePaddle lays groups out; folded into "
                     "the group when the network is built (tests/group/test_paddle_layout.py)",
    "gather_agent": "a recurrent group's out-link as PaddlePaddle lays groups out; folded into "
                    "the group when the network is built (tests/group/test_paddle_layout.py)",
    "priorbox": "outputs fixed default boxes computed from the input geometry; no gradient "
                "(values: tests/layers/test_detection.py)",
    "detection_output": "non-maximum suppression selects boxes; no gradient "
                        "(values: tests/layers/test_detection.py)",
    "print": "logs its inputs; no output, no gradient "
             "(tests/layers/test_gated_unit_and_printer.py)",
}
