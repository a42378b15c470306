"""Checks no stricter than PaddlePaddle's: configs of Paddle's own suite that Paddle parses
parse here; a check kept for a certainly wrong setting runs where Paddle's would fail and says
so."""

import numpy as np
import pytest

import sculler as paddle
from sculler.config.parser_utils import parse_network_config


def _cost_layers_config():
    """The ctc and lambda_cost part of Paddle's test_cost_layers.py: input width 200, labels of
    5000 classes (size 5001), a lambda_cost fed a width-100 feature."""
    from sculler.trainer_config_helpers import (
        ctc_layer,
        data_layer,
        lambda_cost,
        outputs,
        warp_ctc_layer,
    )

    seq_in = data_layer(name="input", size=200)
    labels = data_layer(name="labels", size=5000)
    outputs(ctc_layer(input=seq_in, label=labels),
            warp_ctc_layer(input=seq_in, label=labels, blank=0),
            lambda_cost(input=data_layer(name="list_feature", size=100),
                        score=data_layer(name="list_scores", size=1)))


def test_paddles_cost_layer_config_parses():
    model = parse_network_config(_cost_layers_config)
    types = {layer.name: layer.type for layer in model.layers}
    assert types["__ctc_layer_0__"] == "ctc"
    assert types["__warp_ctc_layer_0__"] == "warp_ctc"
    assert types["__lambda_cost_0__"] == "lambda_cost"


def _sequences(width, lengths, rng):
    return [np.abs(rng.normal(size=(n, width))).astype(np.float32) + 0.1 for n in lengths]


def test_ctc_takes_its_classes_from_the_input_width_as_paddle_does():
    """Paddle's CTCLayer reads the number of classes from the input width, not from size."""
    rng = np.random.default_rng(0)
    x = paddle.layer.data(name="x", type=paddle.data_type.dense_vector_sequence(4))
    label = paddle.layer.data(name="y", type=paddle.data_type.integer_value_sequence(9))
    cost = paddle.layer.ctc(input=x, label=label)  # size 10, input width 4: Paddle accepts it
    probs = [p / p.sum(axis=1, keepdims=True) for p in _sequences(4, [5], rng)]
    out = paddle.infer(output_layer=cost, parameters=paddle.parameters.create(cost),
                       input=[(probs[0], [0, 2])], feeding={"x": 0, "y": 1})
    reference = paddle.layer.data(name="x4", type=paddle.data_type.dense_vector_sequence(4))
    same = paddle.layer.ctc(input=reference, label=paddle.layer.data(
        name="y3", type=paddle.data_type.integer_value_sequence(3)))
    expected = paddle.infer(output_layer=same, parameters=paddle.parameters.create(same),
                            input=[(probs[0], [0, 2])], feeding={"x4": 0, "y3": 1})
    np.testing.assert_allclose(out, expected)
    assert np.isfinite(out).all() and out[0, 0] > 0


def test_warp_ctc_width_mismatch_fails_when_run_naming_paddle():
    rng = np.random.default_rng(0)
    x = paddle.layer.data(name="x", type=paddle.data_type.dense_vector_sequence(4))
    label = paddle.layer.data(name="y", type=paddle.data_type.integer_value_sequence(9))
    cost = paddle.layer.warp_ctc(input=x, label=label)
    with pytest.raises(ValueError, match="has width 4, expected size 10.*WarpCTCLayer refuses"):
        paddle.infer(output_layer=cost, parameters=paddle.parameters.create(cost),
                     input=[(_sequences(4, [5], rng)[0], [1, 2])], feeding={"x": 0, "y": 1})


def test_lambda_cost_wide_input_fails_when_run():
    rng = np.random.default_rng(0)
    feature = paddle.layer.data(name="f", type=paddle.data_type.dense_vector_sequence(3))
    score = paddle.layer.data(name="s", type=paddle.data_type.dense_vector_sequence(1))
    cost = paddle.layer.lambda_cost(input=feature, score=score, NDCG_num=2)
    rows = _sequences(3, [4], rng)[0]
    with pytest.raises(ValueError, match="'f' has width 3; scores and relevances need width 1"):
        paddle.infer(output_layer=cost, parameters=paddle.parameters.create(cost),
                     input=[(rows, np.ones((4, 1), np.float32))], feeding={"f": 0, "s": 1})
