"""Gradient-check table for the mixed layer (every projection and operator) and the dense
layers: one row per configuration and input kind."""

import pytest

from sculler.testing import (
    INPUT_DATA,
    INPUT_HASSUB_SEQUENCE_DATA,
    INPUT_LABEL,
    INPUT_SEQUENCE_DATA,
    INPUT_SEQUENCE_LABEL,
    INPUT_SPARSE_NON_VALUE_DATA,
    check_layer_grad,
)

POSITIVE = dict(low=0.5, high=2.0)
AWAY_FROM_ZERO = dict(low=0.2, high=1.0)


def proj(kind, **attrs):
    return {"proj": kind, **attrs}


# (layer type, layer settings, inputs, use_weight)
MIXED = [
    ("mixed", dict(), [INPUT_DATA(40, attrs=proj("conv", num_filters=3, filter_size=3,
                                                  channels=2, height=5, width=4, padding=1))],
     False),
    ("mixed", dict(bias=True), [INPUT_DATA(40, attrs=proj(
        "conv", num_filters=4, filter_size=2, filter_size_y=3, stride=2, channels=2, height=5,
        width=4, groups=2))], False),
    ("mixed", dict(), [INPUT_DATA(40, attrs=proj("conv_operator", num_filters=2, filter_size=3,
                                                  channels=2, height=5, width=4)),
                       INPUT_DATA(36, attrs=proj("operand"))], False),
    ("mixed", dict(size=4), [INPUT_DATA(5, attrs=proj("full_matrix"))], False),
    ("mixed", dict(size=4, bias=True, active_type="tanh"),
     [INPUT_DATA(5, attrs=proj("full_matrix")), INPUT_DATA(3, attrs=proj("trans_full_matrix"))],
     False),
    ("mixed", dict(size=3), [INPUT_SEQUENCE_DATA(5, attrs=proj("trans_full_matrix"))], False),
    ("mixed", dict(size=4), [INPUT_LABEL(12, attrs=proj("table"))], False),
    ("mixed", dict(size=4, bias=True),
     [INPUT_SEQUENCE_LABEL(12, attrs=proj("table"), param={"sparse_update": True}),
      INPUT_SEQUENCE_DATA(4, attrs=proj("identity"))], False),
    ("mixed", dict(), [INPUT_DATA(4, attrs=proj("identity"))], False),
    ("mixed", dict(size=3), [INPUT_DATA(6, attrs=proj("identity", offset=2))], False),
    ("mixed", dict(size=6), [INPUT_DATA(6, attrs=proj("full_matrix")),
                             INPUT_DATA(3, attrs=proj("identity", offset=2))], False),
    ("mixed", dict(bias=True), [INPUT_DATA(5, attrs=proj("dotmul"))], False),
    ("mixed", dict(), [INPUT_HASSUB_SEQUENCE_DATA(5, attrs=proj("scaling"))], False),
    ("mixed", dict(), [INPUT_SEQUENCE_DATA(3, attrs=proj("context", context_len=3,
                                                             context_start=-1))], False),
    ("mixed", dict(), [INPUT_SEQUENCE_DATA(3, attrs=proj("context", context_len=4,
                                                             context_start=-2,
                                                             trainable_padding=True))], False),
    ("mixed", dict(), [INPUT_SEQUENCE_DATA(2, attrs=proj("context", context_len=2,
                                                             context_start=1,
                                                             trainable_padding=True))], False),
    ("mixed", dict(active_type="sigmoid"),
     [INPUT_DATA(4, attrs=proj("dotmul_operator", scale=0.5)), INPUT_DATA(4, attrs=proj("operand")),
      INPUT_DATA(4, attrs=proj("dotmul"))], False),
]

DENSE = [
    ("slope_intercept", dict(slope=2.0, intercept=-0.5), [INPUT_DATA(4)], False),
    ("slope_intercept", dict(slope=-1.5), [INPUT_SEQUENCE_DATA(3)], False),
    ("scale_shift", dict(), [INPUT_DATA(4)], False),
    ("scale_shift", dict(bias=False), [INPUT_SEQUENCE_DATA(3)], False),
    ("prelu", dict(), [INPUT_DATA(6, **AWAY_FROM_ZERO)], False),
    ("prelu", dict(partial_sum=3), [INPUT_DATA(6, low=-1.0, high=-0.2)], False),
    ("prelu", dict(partial_sum=2), [INPUT_SEQUENCE_DATA(4, low=-1.0, high=-0.2)], False),
    ("clip", dict(min=-0.5, max=0.5), [INPUT_DATA(5, low=-0.4, high=0.4)], False),
    ("clip", dict(min=-2.0, max=-1.0), [INPUT_DATA(5)], False),
    ("sum_to_one_norm", dict(), [INPUT_DATA(5, **POSITIVE)], True),
    ("sum_to_one_norm", dict(), [INPUT_SEQUENCE_DATA(3, **POSITIVE)], True),
    ("row_l2_norm", dict(), [INPUT_DATA(5)], True),
    ("row_l2_norm", dict(), [INPUT_SEQUENCE_DATA(3)], True),
    ("trans", dict(), [INPUT_DATA(5)], True),
    ("resize", dict(size=5), [INPUT_DATA(4)], True),
    ("featmap_expand", dict(num_filters=3), [INPUT_DATA(4)], True),
    ("featmap_expand", dict(num_filters=2, as_row_vector=False), [INPUT_SEQUENCE_DATA(3)],
     True),
    ("scaling", dict(), [INPUT_DATA(1), INPUT_DATA(4)], True),
    ("scaling", dict(), [INPUT_SEQUENCE_DATA(1), INPUT_SEQUENCE_DATA(4)], True),
    ("power", dict(), [INPUT_DATA(1), INPUT_DATA(4, **POSITIVE)], True),
    ("interpolation", dict(), [INPUT_DATA(1), INPUT_DATA(4), INPUT_DATA(4)], True),
    ("interpolation", dict(),
     [INPUT_SEQUENCE_DATA(1), INPUT_SEQUENCE_DATA(3), INPUT_SEQUENCE_DATA(3)], True),
    ("dot_prod", dict(), [INPUT_DATA(4), INPUT_DATA(4)], False),
    ("dot_prod", dict(), [INPUT_SEQUENCE_DATA(3), INPUT_SEQUENCE_DATA(3)], False),
    ("l2_distance", dict(), [INPUT_DATA(4), INPUT_DATA(4)], False),
    ("out_prod", dict(), [INPUT_DATA(3), INPUT_DATA(4)], True),
    ("convex_comb", dict(size=3), [INPUT_DATA(2), INPUT_DATA(6)], True),
    ("convex_comb", dict(), [INPUT_SEQUENCE_DATA(2), INPUT_SEQUENCE_DATA(8)], True),
    ("tensor", dict(size=3), [INPUT_DATA(4), INPUT_DATA(2)], True),
    ("tensor", dict(size=2, bias=False, active_type="tanh"),
     [INPUT_SEQUENCE_DATA(3), INPUT_SEQUENCE_DATA(3)], True),
    ("multiplex", dict(), [INPUT_LABEL(2), INPUT_DATA(3), INPUT_DATA(3)], True),
    ("multiplex", dict(), [INPUT_SEQUENCE_LABEL(3), INPUT_SEQUENCE_DATA(2),
                           INPUT_SEQUENCE_DATA(2), INPUT_SEQUENCE_DATA(2)], True),
    ("selective_fc", dict(size=4), [INPUT_DATA(5)], True),
    ("selective_fc", dict(size=4, bias=False, active_type="tanh"),
     [INPUT_DATA(3), INPUT_SEQUENCE_DATA(2)], True),
    ("selective_fc", dict(size=6, has_select=True, active_type="sigmoid"),
     [INPUT_DATA(5), INPUT_SPARSE_NON_VALUE_DATA(6, nnz=2)], True),
]


def _id(case):
    layer_type, settings, inputs, _ = case
    extras = ",".join(f"{k}={v}" for k, v in settings.items())
    kinds = "+".join(f"{i.kind}:{i.attrs.get('proj')}" if i.attrs else i.kind for i in inputs)
    return f"{layer_type}[{extras}|{kinds}]"


@pytest.mark.parametrize("case", MIXED + DENSE, ids=[_id(c) for c in MIXED + DENSE])
def test_layer_gradient(case):
    layer_type, settings, inputs, use_weight = case
    report = check_layer_grad({**settings, "inputs": inputs}, layer_type, 10,
                              use_weight=use_weight)
    assert report.errors, "the check compared no gradient"
    assert report.max_error < 1e-6
