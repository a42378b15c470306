"""The gradient-check table: one row per layer configuration and input kind."""

import pytest

from sculler.testing import (
    INPUT_DATA,
    INPUT_DATA_TARGET,
    INPUT_HASSUB_SEQUENCE_DATA,
    INPUT_LABEL,
    INPUT_SEQUENCE_DATA,
    INPUT_SEQUENCE_LABEL,
    INPUT_SPARSE_FLOAT_VALUE_DATA,
    INPUT_SPARSE_NON_VALUE_DATA,
    check_layer_grad,
)

PROB = dict(low=0.05, high=1.0)
POSITIVE = dict(low=0.5, high=2.0)

# (layer type, layer settings, inputs, use_weight)
CASES = [
    ("fc", dict(size=4), [INPUT_DATA(5)], False),
    ("fc", dict(size=4, bias=False), [INPUT_DATA(5)], False),
    ("fc", dict(size=4, active_type="tanh"), [INPUT_DATA(5), INPUT_DATA(3)], False),
    ("fc", dict(size=4, active_type="softmax"), [INPUT_DATA(6)], True),
    ("fc", dict(size=3), [INPUT_SEQUENCE_DATA(5)], False),
    ("fc", dict(size=3), [INPUT_HASSUB_SEQUENCE_DATA(5)], False),
    ("fc", dict(size=4), [INPUT_SPARSE_NON_VALUE_DATA(30)], False),
    ("fc", dict(size=4, bias=False), [INPUT_SPARSE_FLOAT_VALUE_DATA(30)], False),
    ("fc", dict(size=4), [INPUT_SPARSE_FLOAT_VALUE_DATA(30, param={"sparse_update": True})],
     False),
    ("fc", dict(size=4, drop_rate=0.3, active_type="sigmoid"), [INPUT_DATA(5)], False),
    ("embedding", dict(size=4), [INPUT_LABEL(20)], False),
    ("embedding", dict(size=4), [INPUT_SEQUENCE_LABEL(20, param={"sparse_update": True})],
     False),
    ("concat", dict(), [INPUT_DATA(3), INPUT_DATA(4)], False),
    ("concat", dict(bias=True, active_type="tanh"), [INPUT_DATA(3), INPUT_DATA(2)], False),
    ("concat", dict(), [INPUT_SEQUENCE_DATA(3), INPUT_SEQUENCE_DATA(2)], False),
    ("addto", dict(), [INPUT_DATA(4), INPUT_DATA(4)], False),
    ("addto", dict(bias=True, active_type="relu"), [INPUT_DATA(4), INPUT_DATA(4)], False),
    ("addto", dict(drop_rate=0.5), [INPUT_DATA(6)], False),
    ("addto", dict(active_type="sequence_softmax"), [INPUT_SEQUENCE_DATA(1)], True),
    ("addto", dict(), [INPUT_HASSUB_SEQUENCE_DATA(3)], False),
    ("multi-class-cross-entropy", dict(), [INPUT_DATA(5, **PROB), INPUT_LABEL(5)], False),
    ("multi-class-cross-entropy", dict(coeff=0.5),
     [INPUT_DATA(5, **PROB), INPUT_LABEL(5), INPUT_DATA(1, **PROB)], False),
    ("multi-class-cross-entropy", dict(),
     [INPUT_SEQUENCE_DATA(4, **PROB), INPUT_SEQUENCE_LABEL(4)], False),
    ("square_error", dict(), [INPUT_DATA(3), INPUT_DATA_TARGET(3)], False),
    ("square_error", dict(), [INPUT_DATA(3), INPUT_DATA_TARGET(3), INPUT_DATA(1, **PROB)],
     False),
]

ACTIVATIONS = ["linear", "sigmoid", "tanh", "relu", "brelu", "softrelu", "stanh", "softmax",
               "exp", "abs", "square", "softsign"]
POSITIVE_ACTIVATIONS = ["log", "sqrt", "reciprocal"]


def _id(case):
    layer_type, settings, inputs, _ = case
    extras = ",".join(f"{k}={v}" for k, v in settings.items())
    return f"{layer_type}[{extras}|{'+'.join(i.kind for i in inputs)}]"


@pytest.mark.parametrize("case", CASES, ids=[_id(c) for c in CASES])
def test_layer_gradient(case):
    layer_type, settings, inputs, use_weight = case
    report = check_layer_grad({**settings, "inputs": inputs}, layer_type, 12,
                              use_weight=use_weight)
    assert report.errors, "the check compared no gradient"
    assert report.max_error < 1e-6


@pytest.mark.parametrize("trans", [False, True])
def test_fc_transposed_inputs(trans):
    report = check_layer_grad({"size": 3, "inputs": [INPUT_DATA(4)]}, "fc", 7, trans=trans)
    assert report.max_error < 1e-6


@pytest.mark.parametrize("act", ACTIVATIONS)
def test_activation_gradient(act):
    report = check_layer_grad({"size": 4, "active_type": act, "inputs": [INPUT_DATA(5)]}, "fc",
                              10, use_weight=True)
    assert report.max_error < 1e-6


@pytest.mark.parametrize("act", POSITIVE_ACTIVATIONS)
def test_positive_domain_activation_gradient(act):
    report = check_layer_grad({"active_type": act, "inputs": [INPUT_DATA(5, **POSITIVE)]},
                              "addto", 10, use_weight=True)
    assert report.max_error < 1e-6
