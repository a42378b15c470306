"""The large-margin softmax example: its gradient check, in one call per configuration."""

import pytest

from sculler.testing import INPUT_DATA, INPUT_LABEL, check_layer_grad


@pytest.mark.parametrize("act, use_weight", [("linear", False), ("softmax", True)])
def test_lsoftmax_gradient(example, act, use_weight):
    example("lsoftmax/lsoftmax_layer.py")
    config = {"size": 5, "k": 0.3, "active_type": act, "inputs": [INPUT_DATA(6), INPUT_LABEL(5)]}
    report = check_layer_grad(config, "lsoftmax", 16, use_weight=use_weight)
    assert report.max_error < 1e-6


@pytest.mark.slow
def test_lsoftmax_trains_no_worse_than_plain_softmax(example):
    train = example("lsoftmax/train.py")
    plain = train.train("softmax")
    margin = train.train("lsoftmax")
    assert plain > 0.95
    assert margin >= plain, f"large-margin {margin:.3f} < plain {plain:.3f}"
