"""gated_unit (PaddlePaddle's structure and the GLU formula), the print layer (it logs its
inputs, has no output and no gradient) and the layer_support decorator."""

import logging

import numpy as np
import pytest

import sculler as paddle
from sculler.core.expression import DROPOUT


def test_gated_unit_is_built_as_paddle_builds_it_and_computes_the_glu():
    paddle.layer.reset_names()
    x = paddle.layer.data(name="input", type=paddle.data_type.dense_vector(5))
    glu = paddle.layer.gated_unit(input=x, size=3, act=paddle.activation.Tanh())
    assert glu.name == "__gated_unit_layer_0___gated_act" and glu.layer_type == "mixed"
    params = paddle.parameters.create(glu)
    assert params.names() == ["___gated_unit_layer_0___input_proj.w0",
                              "___gated_unit_layer_0___input_proj.wbias",
                              "___gated_unit_layer_0___gate.w0",
                              "___gated_unit_layer_0___gate.wbias"]
    xs = np.random.default_rng(0).normal(size=(4, 5)).astype(np.float32)
    out = paddle.infer(output_layer=glu, parameters=params, input=[(r,) for r in xs])
    p = {n: params.get(n) for n in params.names()}
    proj = np.tanh(xs @ p["___gated_unit_layer_0___input_proj.w0"]
                   + p["___gated_unit_layer_0___input_proj.wbias"])
    gate = 1 / (1 + np.exp(-(xs @ p["___gated_unit_layer_0___gate.w0"]
                             + p["___gated_unit_layer_0___gate.wbias"])))
    np.testing.assert_allclose(out, proj * gate, rtol=1e-5, atol=1e-6)


def test_the_print_layer_logs_its_inputs_every_batch(caplog):
    paddle.layer.reset_names()
    x = paddle.layer.data(name="x", type=paddle.data_type.dense_vector(2))
    y = paddle.layer.fc(input=x, size=2, name="y")
    probe = paddle.layer.printer(input=[x, y])
    assert (probe.name, probe.size) == ("__print_0__", 0)
    cost = paddle.layer.sum_cost(input=y)
    trainer = paddle.trainer.SGD(cost=cost, parameters=paddle.parameters.create(cost),
                                 update_equation=paddle.optimizer.Momentum(learning_rate=0.1),
                                 extra_layers=[probe])
    with caplog.at_level(logging.INFO, logger="sculler.layers.printer"):
        trainer.train(paddle.batch(lambda: iter([(np.full(2, 7.0, np.float32),)] * 3), 3),
                      num_passes=1, event_handler=lambda e: None)
    lines = [r.getMessage() for r in caplog.records if r.name == "sculler.layers.printer"]
    assert lines[0].startswith("layer=x [[7. 7.]") and any(ln.startswith("layer=y") for ln in lines)
    with pytest.raises(ValueError, match="one %s per input"):
        paddle.layer.printer(input=[x, y], format="only %s")


def test_layer_support_refuses_extra_attributes_the_layer_ignores():
    @paddle.layer.layer_support(DROPOUT)
    def my_layer(input, layer_attr=None):  # noqa: A002
        return input

    assert my_layer(1, layer_attr=paddle.attr.Extra(drop_rate=0.5)) == 1
    with pytest.raises(NotImplementedError, match="error_clipping_threshold"):
        my_layer(1, layer_attr=paddle.attr.Extra(error_clipping_threshold=3.0))
