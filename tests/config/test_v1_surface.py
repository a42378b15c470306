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
                       feeding={"x": 0, "s": 1}, flatten_result=False)
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


PROVIDER = """
from sculler.config.data_provider import *

def hook(settings, file_list, is_train, dim, **kw):
    settings.input_types = {"x": dense_vector(dim), "y": integer_value(2)}

@provider(init_hook=hook, pool_size=50)
def process(settings, file_name):
    for line in open(file_name):
        *x, y = line.split()
        yield {"x": [float(v) for v in x], "y": int(y)}
"""


def test_define_py_data_sources2_trains_from_a_pydataprovider2_module(tmp_path, monkeypatch):
    from sculler.cli import load_program

    rng = np.random.default_rng(0)
    x = rng.normal(size=(120, 4))
    y = (x[:, 0] + x[:, 1] > 0).astype(int)
    (tmp_path / "part0.txt").write_text(
        "".join(" ".join(f"{v:.4f}" for v in row) + f" {c}\n" for row, c in zip(x, y)))
    (tmp_path / "train.list").write_text("part0.txt\n")
    (tmp_path / "my_provider.py").write_text(PROVIDER)
    (tmp_path / "conf.py").write_text("""
from sculler.trainer_config_helpers import *
settings(batch_size=20, learning_rate=0.1, learning_method=MomentumOptimizer(0.9))
define_py_data_sources2(train_list="train.list", test_list=None, module="my_provider",
                        obj="process", args={"dim": 4})
x = data_layer(name="x", size=4)
y = data_layer(name="y", size=2)
outputs(classification_cost(input=fc_layer(input=x, size=2, act=SoftmaxActivation()),
                            label=y))
""")
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    program = load_program("conf.py", "")
    samples = list(program["train_reader"]())
    assert len(samples) == 120 and sorted(s[1] for s in samples) == sorted(y.tolist())
    assert [s[0] for s in samples] != [list(np.round(r, 4)) for r in x]  # shuffled
    assert program["topology"].proto().layer("y").attrs["kind"] == "ids"
    trainer = paddle.trainer.SGD(cost=program["topology"], parameters=paddle.parameters.create(
        program["topology"]), update_equation=program["optimizer"])
    costs = []
    trainer.train(paddle.batch(program["train_reader"], 20), num_passes=4,
                  event_handler=lambda e: costs.append(e.cost)
                  if isinstance(e, paddle.event.EndIteration) else None)
    assert np.mean(costs[-6:]) < 0.5 * np.mean(costs[:6])


def test_a_provider_without_input_types_is_named(tmp_path, monkeypatch):
    from sculler.config.data_provider import ProviderSource, provider

    @provider()
    def process(settings, file_name):
        yield [1.0], 0

    import types
    module = types.ModuleType("bare_provider")
    module.process = process
    monkeypatch.setitem(__import__("sys").modules, "bare_provider", module)
    source = ProviderSource(["f"], "bare_provider", "process", None, True, str(tmp_path))
    with pytest.raises(ValueError, match="no input_types"):
        source()


def test_config_parser_utils_and_default_decorators():
    from sculler.trainer_config_helpers import (
        data_layer,
        fc_layer,
        outputs,
        parse_network_config,
        parse_optimizer_config,
        settings,
        wrap_bias_attr_default,
        wrap_name_default,
    )

    @wrap_name_default("my_layer")
    @wrap_bias_attr_default()
    def my_layer(input, name=None, bias_attr=None):  # noqa: A002
        return fc_layer(input=input, size=2, name=name, bias_attr=bias_attr)

    def network():
        outputs(my_layer(data_layer(name="x", size=3)))

    mc = parse_network_config(network)
    assert [lc.name for lc in mc.layers] == ["x", "__my_layer_0__"]
    assert mc.layer("__my_layer_0__").bias_parameter_name == "___my_layer_0__.wbias"
    assert parse_optimizer_config(lambda: settings(batch_size=16))["batch_size"] == 16


def test_trainer_config_helpers_has_paddles_module_names():
    import sculler.trainer_config_helpers as tch
    from sculler.trainer_config_helpers import layer_math

    assert layer_math.exp is paddle.op.exp
    for name in ("img_conv_layer", "mixed_layer", "full_matrix_projection", "auc_evaluator",
                 "define_py_data_sources2", "simple_lstm", "TanhActivation", "MaxPooling",
                 "parse_network_config", "wrap_name_default", "layer_math", "inputs"):
        assert name in tch.__all__ and hasattr(tch, name), name


def test_a_v2_script_using_declared_functions_and_operators_stays_a_v2_script(tmp_path):
    from sculler.config.config_parser import run_config

    script = tmp_path / "v2_script.py"
    script.write_text("""
import sculler as paddle
x = paddle.layer.data(name="x", type=paddle.data_type.dense_vector(3))
y = paddle.layer.fc(input=paddle.op.exp(x) * 2 + 1, size=2)
cost = paddle.layer.sum_cost(input=y)
""")
    parsed, names = run_config(script)
    assert parsed is None and names["cost"].layer_type == "sum_cost"


def test_a_mixed_layer_built_in_a_with_block_joins_the_config_when_done(tmp_path):
    mc = _parse(tmp_path, """
x = data_layer(name='x', size=4)
with mixed_layer(size=3) as m:
    m += full_matrix_projection(input=x)
y = fc_layer(input=m, size=2)
outputs(y)
""")
    assert [lc.name for lc in mc.layers] == ["x", "__mixed_0__", "__fc_layer_0__"]
    assert mc.layer("__mixed_0__").inputs[0].input_parameter_name == "___mixed_0__.w0"
