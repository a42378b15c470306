"""Gradient-check table for the step layers of recurrent groups (gru_step, lstm_step)."""

import pytest

from sculler.testing import INPUT_DATA, INPUT_SEQUENCE_DATA, check_layer_grad

# (layer type, layer settings, inputs)
STEP = [
    ("gru_step", dict(size=4), [INPUT_DATA(12), INPUT_DATA(4)]),
    ("gru_step", dict(size=4, active_type="relu", active_gate_type="tanh"),
     [INPUT_DATA(12), INPUT_DATA(4)]),
    ("gru_step", dict(size=3, bias=False), [INPUT_SEQUENCE_DATA(9), INPUT_SEQUENCE_DATA(3)]),
    ("lstm_step", dict(), [INPUT_DATA(16), INPUT_DATA(4)]),
    ("lstm_step", dict(active_type="relu", active_state_type="sigmoid"),
     [INPUT_SEQUENCE_DATA(16), INPUT_SEQUENCE_DATA(4)]),
    ("lstm_step", dict(bias=False), [INPUT_DATA(8), INPUT_DATA(2)]),
]


@pytest.mark.parametrize("layer_type,settings,inputs", STEP)
def test_step_layer_grad(layer_type, settings, inputs):
    report = check_layer_grad(dict(settings, inputs=inputs), layer_type, batch_size=6,
                              use_weight=True)
    assert report.max_error < 1e-5


def test_step_layer_rejects_bad_activation():
    with pytest.raises(ValueError, match="gate_act .softmax. is not supported"):
        check_layer_grad(dict(size=2, active_gate_type="softmax",
                              inputs=[INPUT_DATA(6), INPUT_DATA(2)]), "gru_step")


def test_step_layer_rejects_bad_width():
    with pytest.raises(ValueError, match="3\\*size wide"):
        check_layer_grad(dict(size=2, inputs=[INPUT_DATA(5), INPUT_DATA(2)]), "gru_step")
