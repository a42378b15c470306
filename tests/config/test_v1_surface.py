"""The v1 surface beyond single layers: layer_math and operators on layers, network helpers,
v1 evaluator helpers, and the data-layer order outputs() gives (PaddlePaddle's rule)."""

import numpy as np
import pytest

import sculler as paddle
from sculler.config.config_parser import parse_config


def _parse(tmp_path, text, name="conf.py"):
    path = tmp_path / name
    path.write_text("from sculler.config.helpers import *\n" + text)
    return parse_config(path).model_config


def test_layer_math_and_operators_build_paddles_layers_in_creation_order(tmp_path):
    mc = _parse(tmp_path, """
x = data_layer(name='data', size=4)
x = layer_math.exp(x)
y = 1 + x
y = x + y
y = y - 2
y = 2 * y
z = data_layer(name='data_2', size=1)
y = y * z
y = z + y
outputs(y)
""")
    assert [(lc.name, lc.type) for lc in mc.layers] == [
        ("data", "data"), ("__exp_0__", "mixed"),
        ("__slope_intercept_layer_0__", "slope_intercept"), ("__mixed_0__", "mixed"),
        ("__slope_intercept_layer_1__", "slope_intercept"),
        ("__slope_intercept_layer_2__", "slope_intercept"), ("data_2", "data"),
        ("__scaling_layer_0__", "scaling"), ("__repeat_layer_0__", "featmap_expand"),
        ("__mixed_1__", "mixed")]
    assert mc.layer("__exp_0__").active_type == "exponential"
    assert mc.layer("__mixed_1__").input_layer_names == ["__scaling_layer_0__",
                                                         "__repeat_layer_0__"]
    # Paddle's depth-first order over the outputs' parents: data_2 is reached first
    assert mc.input_layer_names == ["data_2", "data"]


def test_operators_compute_what_they_say():
    x = paddle.layer.data(name="x", type=paddle.data_type.dense_vector(3))
    s = paddle.layer.data(name="s", type=paddle.data_type.dense_vector(1))
    outs = [x - 2, 5 - x, x * 3, x + x, x * s, s + x, paddle.op.sqrt(x)]
    params = paddle.parameters.create(outs)
    xv = np.array([[1.0, 4.0, 9.0]], dtype=np.float32)
    sv = np.array([[2.0]], dtype=np.float32)
    got = paddle.infer(output_layer=outs, parameters=params, input=[(xv[0], sv[0])],
                       feeding={"x": 0, "s": 1})
    want = [xv - 2, 5 - xv, xv * 3, xv + xv, xv * 2, xv + 2, np.sqrt(xv)]
    np.testing.assert_allclose(np.hstack(got), np.hstack(want), rtol=1e-6)


@pytest.mark.parametrize("bad, message", [
    (lambda x, y: x + y, "widths 3 and 2 differ"),
    (lambda x, y: x * y, "one side must have width 1"),
    (lambda x, y: x + "a", "expected a layer"),
])
def test_operator_misuse_is_named(bad, message):
    x = paddle.layer.data(name="x", type=paddle.data_type.dense_vector(3))
    y = paddle.layer.data(name="y", type=paddle.data_type.dense_vector(2))
    with pytest.raises((ValueError, TypeError), match=message):
        bad(x, y)


def test_network_and_evaluator_helpers_join_the_config(tmp_path):
    mc = _parse(tmp_path, """
img = data_layer(name='img', size=3 * 8 * 8, height=8, width=8)
lbl = data_layer(name='lbl', size=4)
seq = data_layer(name='seq', size=6)
conv = simple_img_conv_pool(input=img, filter_size=3, num_filters=2, pool_size=2,
                            num_channel=3, name='cp')
bi = bidirectional_gru(input=seq, size=3, name='bi')
prob = fc_layer(input=[conv, bi], size=4, act=SoftmaxActivation())
cost = classification_cost(input=prob, label=lbl)
auc_evaluator(input=prob, label=lbl)
precision_recall_evaluator(input=prob, label=lbl)
outputs(cost)
""")
    names = [lc.name for lc in mc.layers]
    assert {"cp_conv", "cp_pool", "bi_fw", "bi_bw"} <= set(names)
    assert {e.name for e in mc.evaluators} == {
        "classification_error_evaluator", "__auc_evaluator_0__",
        "__precision_recall_evaluator_0__"}
    assert mc.input_layer_names == ["img", "seq", "lbl"]


def test_inputs_fixes_the_data_layer_order(tmp_path):
    mc = _parse(tmp_path, """
a = data_layer(name='a', size=2)
b = data_layer(name='b', size=2)
inputs(b, a)
outputs(fc_layer(input=[a, b], size=1))
""")
    assert mc.input_layer_names == ["b", "a"]
