"""Gradient-check rows for the structured costs (crf.py, ctc.py): one sequence of length 1,
one longer sequence, many lengths, with and without the crf weight input."""

import pytest

from sculler.testing import (
    INPUT_DATA,
    INPUT_LABEL,
    INPUT_SEQUENCE_DATA,
    INPUT_SEQUENCE_LABEL,
    check_layer_grad,
)

LAYOUTS = {"len1": (1,), "one": (6,), "many": (3, 1, 5, 2, 4, 1)}
C = 4


def _crf(lengths, weighted=False, **settings):
    inputs = [INPUT_SEQUENCE_DATA(C, low=-2, high=2, seq_lengths=lengths),
              INPUT_LABEL(C, seq_lengths=lengths)]
    if weighted:
        inputs.append(INPUT_DATA(1, low=0.2, high=1.5, seq_lengths=(1,) * len(lengths)))
    return ("crf", settings, inputs)


def _ctc(layer_type, lengths, label_lengths, **settings):
    low, high = (0.05, 1.0) if layer_type == "ctc" else (-2.0, 2.0)
    return (layer_type, settings,
            [INPUT_SEQUENCE_DATA(C, low=low, high=high, seq_lengths=lengths),
             INPUT_SEQUENCE_LABEL(C - 1, seq_lengths=label_lengths)])


# (layer type, layer settings, inputs)
CASES = [
    _crf(LAYOUTS["len1"]),
    _crf(LAYOUTS["one"]),
    _crf(LAYOUTS["many"]),
    _crf(LAYOUTS["many"], weighted=True),
    _ctc("ctc", LAYOUTS["len1"], (1,)),
    _ctc("ctc", LAYOUTS["one"], (3,)),
    _ctc("ctc", LAYOUTS["many"], (2, 0, 3, 1, 2, 1)),
    _ctc("warp_ctc", LAYOUTS["len1"], (1,), blank=C - 1),
    _ctc("warp_ctc", LAYOUTS["one"], (2,), blank=C - 1),
    _ctc("warp_ctc", LAYOUTS["many"], (2, 0, 3, 1, 2, 1), blank=C - 1),
]


def _id(case):
    layer_type, settings, inputs = case
    extras = ",".join(f"{k}={v}" for k, v in settings.items())
    layout = "/".join(str(len(i.seq_lengths)) + "seq" for i in inputs[:1])
    return f"{layer_type}[{extras}|{layout}|{'+'.join(i.kind for i in inputs)}]"


@pytest.mark.parametrize("case", CASES, ids=[_id(c) for c in CASES])
def test_structured_cost_gradient(case):
    layer_type, settings, inputs = case
    # a batch larger than every layout: both batches of the check use the full layouts
    report = check_layer_grad({**settings, "inputs": inputs}, layer_type, 64, use_weight=True)
    assert report.errors, "the check compared no gradient"
    assert report.max_error < 1e-6, report.errors
    print(layer_type, {k: f"{v:.2e}" for k, v in report.errors.items()})
