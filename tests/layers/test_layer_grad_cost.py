"""Gradient-check rows for the extra cost layers (cost_extra.py, cost_sampled.py)."""

import pytest

from sculler.testing import (
    INPUT_DATA,
    INPUT_DATA_TARGET,
    INPUT_LABEL,
    INPUT_SEQUENCE_DATA,
    INPUT_SEQUENCE_LABEL,
    INPUT_SPARSE_NON_VALUE_DATA,
    check_layer_grad,
)

PROB = dict(low=0.05, high=0.95)
POSITIVE = dict(low=0.2, high=2.0)
WEIGHT = INPUT_DATA(1, low=0.1, high=1.0)

# (layer type, layer settings, inputs)
CASES = [
    ("multi_class_cross_entropy_with_selfnorm", dict(), [INPUT_DATA(5, **POSITIVE),
                                                         INPUT_LABEL(5)]),
    ("multi_class_cross_entropy_with_selfnorm", dict(softmax_selfnorm_alpha=0.5, coeff=2.0),
     [INPUT_DATA(5, **POSITIVE), INPUT_LABEL(5), WEIGHT]),
    ("multi_class_cross_entropy_with_selfnorm", dict(),
     [INPUT_SEQUENCE_DATA(4, **POSITIVE), INPUT_SEQUENCE_LABEL(4)]),
    ("multi_binary_label_cross_entropy", dict(),
     [INPUT_DATA(6, **PROB), INPUT_SPARSE_NON_VALUE_DATA(6, nnz=2)]),
    ("multi_binary_label_cross_entropy", dict(), [INPUT_DATA(6, **PROB), INPUT_LABEL(6)]),
    ("multi_binary_label_cross_entropy", dict(coeff=0.5),
     [INPUT_DATA(6, **PROB), INPUT_DATA_TARGET(6, low=0, high=1), WEIGHT]),
    ("soft_binary_class_cross_entropy", dict(),
     [INPUT_DATA(4, **PROB), INPUT_DATA_TARGET(4, low=0, high=1)]),
    ("soft_binary_class_cross_entropy", dict(),
     [INPUT_DATA(4, **PROB), INPUT_DATA_TARGET(4, low=0, high=1), WEIGHT]),
    ("huber_regression", dict(), [INPUT_DATA(3, low=-3, high=3), INPUT_DATA_TARGET(3)]),
    ("huber_regression", dict(delta=0.5, coeff=1.5),
     [INPUT_DATA(3, low=-3, high=3), INPUT_DATA_TARGET(3), WEIGHT]),
    ("huber_classification", dict(), [INPUT_DATA(1, low=-2.5, high=2.5), INPUT_LABEL(2)]),
    ("huber_classification", dict(),
     [INPUT_DATA(1, low=-2.5, high=2.5), INPUT_LABEL(2), WEIGHT]),
    ("smooth_l1", dict(), [INPUT_DATA(4, low=-3, high=3), INPUT_DATA_TARGET(4)]),
    ("smooth_l1", dict(coeff=0.5), [INPUT_DATA(4, low=-3, high=3), INPUT_DATA_TARGET(4), WEIGHT]),
    ("smooth_l1", dict(), [INPUT_SEQUENCE_DATA(2, low=-3, high=3), INPUT_DATA_TARGET(2)]),
    ("sum_cost", dict(), [INPUT_DATA(5)]),
    ("sum_cost", dict(), [INPUT_SEQUENCE_DATA(3)]),
    ("hsigmoid", dict(num_classes=6), [INPUT_DATA(4), INPUT_LABEL(6)]),
    ("hsigmoid", dict(num_classes=8, bias=False), [INPUT_DATA(4), INPUT_LABEL(8)]),
    ("hsigmoid", dict(num_classes=5), [INPUT_DATA(3), INPUT_DATA(2), INPUT_LABEL(5)]),
    ("hsigmoid", dict(num_classes=7), [INPUT_SEQUENCE_DATA(3), INPUT_SEQUENCE_LABEL(7)]),
    ("nce", dict(num_classes=7, num_neg_samples=3), [INPUT_DATA(4), INPUT_LABEL(7)]),
    ("nce", dict(num_classes=7, num_neg_samples=2, bias=False),
     [INPUT_DATA(4), INPUT_DATA(2), INPUT_LABEL(7)]),
    ("nce", dict(num_classes=6, num_neg_samples=4, with_weight=True,
                 neg_distribution=[0.3, 0.1, 0.1, 0.2, 0.2, 0.1]),
     [INPUT_DATA(3), INPUT_LABEL(6), WEIGHT]),
    ("nce", dict(num_classes=9, num_neg_samples=2),
     [INPUT_DATA(3), INPUT_SPARSE_NON_VALUE_DATA(9, nnz=2)]),
    ("nce", dict(num_classes=5, num_neg_samples=3),
     [INPUT_SEQUENCE_DATA(3), INPUT_SEQUENCE_LABEL(5)]),
]


def _id(case):
    layer_type, settings, inputs = case
    extras = ",".join(f"{k}={v}" for k, v in settings.items())
    return f"{layer_type}[{extras}|{'+'.join(i.kind for i in inputs)}]"


@pytest.mark.parametrize("case", CASES, ids=[_id(c) for c in CASES])
def test_cost_gradient(case):
    layer_type, settings, inputs = case
    report = check_layer_grad({**settings, "inputs": inputs}, layer_type, 12, use_weight=True)
    assert report.errors, "the check compared no gradient"
    assert report.max_error < 1e-6
