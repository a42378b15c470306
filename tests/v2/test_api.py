"""The v2 layer expression: names, data types, attributes, topology and shared parameters."""

import numpy as np
import pytest

import sculler as paddle
from sculler.core.builder import ModelBuilder
from sculler.core.model_config import InputConfig, LayerConfig


@pytest.fixture(autouse=True)
def fresh_names():
    paddle.layer.reset_names()


def test_top_level_names():
    for n in ["init", "layer", "activation", "attr", "data_type", "pooling", "topology",
              "parameters", "optimizer", "trainer", "event", "evaluator", "reader", "batch",
              "dataset", "plot", "infer", "train", "inference"]:
        assert hasattr(paddle, n), n


def test_data_types():
    t = paddle.data_type.integer_value_sequence(100)
    assert (t.dim, t.seq_type, t.type) == (100, 1, paddle.data_type.DataType.Index)
    assert paddle.data_type.dense_vector(3).seq_type == 0
    assert paddle.data_type.sparse_binary_vector_sub_sequence(7).seq_type == 2
    assert paddle.data_type.sparse_vector(7).type == paddle.data_type.DataType.SparseValue
    with pytest.raises(ValueError, match="positive int dim"):
        paddle.data_type.dense_vector(0)


def test_paddle_default_names_and_parameter_names():
    x = paddle.layer.data(name="x", type=paddle.data_type.dense_vector(4))
    h = paddle.layer.fc(input=x, size=3)
    h2 = paddle.layer.fc(input=h, size=2, act=paddle.activation.Softmax())
    assert (h.name, h2.name) == ("__fc_layer_0__", "__fc_layer_1__")
    assert h.activation == "tanh"  # Paddle's fc default
    params = paddle.parameters.create(h2)
    assert params.names() == ["___fc_layer_0__.w0", "___fc_layer_0__.wbias",
                              "___fc_layer_1__.w0", "___fc_layer_1__.wbias"]
    assert params.get_shape("___fc_layer_0__.w0") == (4, 3)
    assert params.get_shape("___fc_layer_0__.wbias") == (1, 3)
    assert np.all(params.get("___fc_layer_0__.wbias") == 0)


def test_shared_parameter_created_once_and_shape_conflict():
    a = paddle.layer.data(name="a", type=paddle.data_type.dense_vector(4))
    b = paddle.layer.data(name="b", type=paddle.data_type.dense_vector(4))
    fa = paddle.layer.fc(input=a, size=3, parameter_name="shared", bias_attr=False)
    fb = paddle.layer.fc(input=b, size=3, param_attr=paddle.attr.Param(name="shared"),
                         bias_attr=False)
    s = paddle.layer.addto(input=[fa, fb])
    params = paddle.parameters.create(s)
    assert params.names() == ["shared"]
    # a second topology using the same name shares it too
    t2 = paddle.layer.fc(input=b, size=3, parameter_name="shared", bias_attr=False)
    params2 = paddle.parameters.create([paddle.topology.Topology(s), paddle.topology.Topology(t2)])
    assert params2.names() == ["shared"]
    bad = paddle.layer.fc(input=paddle.layer.data(name="c", type=paddle.data_type.dense_vector(5)),
                          size=3, parameter_name="shared", bias_attr=False)
    with pytest.raises(ValueError, match="shared"):
        paddle.parameters.create(paddle.layer.addto(input=[fa, bad]))


def test_param_attr_fields_reach_the_config():
    x = paddle.layer.data(name="x", type=paddle.data_type.dense_vector(4))
    y = paddle.layer.fc(input=x, size=2, name="out",
                        param_attr=paddle.attr.Param(name="W", initial_std=0.0, initial_mean=0.5,
                                                     l2_rate=0.1, learning_rate=2.0,
                                                     is_static=True),
                        bias_attr=paddle.attr.Param(name="B", initial_std=0.0),
                        layer_attr=paddle.attr.Extra(drop_rate=0.25))
    mc = paddle.topology.Topology(y).proto()
    w = mc.parameter("W")
    assert (w.decay_rate, w.learning_rate, w.is_static, w.initial_mean) == (0.1, 2.0, True, 0.5)
    assert mc.layer("out").drop_rate == 0.25 and mc.layer("out").bias_parameter_name == "B"
    params = paddle.parameters.create(y)
    assert np.all(params.get("W") == 0.5)


def test_bias_false_and_initializer():
    x = paddle.layer.data(name="x", type=paddle.data_type.dense_vector(2))
    y = paddle.layer.fc(input=x, size=2, bias_attr=False,
                        param_attr=paddle.attr.Param(initializer=lambda n: np.eye(2)))
    params = paddle.parameters.create(y)
    assert params.names() == ["___fc_layer_0__.w0"]
    np.testing.assert_array_equal(params.get("___fc_layer_0__.w0"), np.eye(2))


def test_unsupported_arguments_raise():
    x = paddle.layer.data(name="x", type=paddle.data_type.dense_vector(4))
    with pytest.raises(ValueError, match="cos_vm.*must hold size=3 vectors"):
        paddle.layer.cos_sim(a=x, b=x, size=3)
    with pytest.raises(ValueError, match="error_clipping"):
        paddle.attr.Extra(error_clipping_threshold=-1.0)
    with pytest.raises(NotImplementedError, match="param_attr"):
        paddle.layer.concat(input=[x, x], param_attr=paddle.attr.Param(name="p"))
    with pytest.raises(TypeError, match="activation instance"):
        paddle.layer.fc(input=x, size=2, act="tanh")
    with pytest.raises(TypeError, match="LayerOutput"):
        paddle.layer.fc(input=np.zeros(3), size=2)


def test_classification_cost_attaches_evaluator_and_seed_reproducible():
    def build():
        paddle.layer.reset_names()
        img = paddle.layer.data(name="pixel", type=paddle.data_type.dense_vector(6))
        lab = paddle.layer.data(name="label", type=paddle.data_type.integer_value(3))
        out = paddle.layer.fc(input=img, size=3, act=paddle.activation.Softmax())
        return paddle.layer.classification_cost(input=out, label=lab)

    cost = build()
    assert cost.name == "__cost_0__"
    topo = paddle.topology.Topology(cost)
    mc = topo.proto()
    assert mc.layer(cost.name).type == "multi-class-cross-entropy"
    assert [e.name for e in mc.evaluators] == ["classification_error_evaluator"]
    assert [(n, t.type) for n, t in topo.data_type()] == [("pixel", 0), ("label", 3)]
    paddle.init(seed=7)
    p1 = paddle.parameters.create(cost).get("___fc_layer_0__.w0")
    paddle.init(seed=7)
    p2 = paddle.parameters.create(build()).get("___fc_layer_0__.w0")
    np.testing.assert_array_equal(p1, p2)


def test_dropout_is_addto_with_drop_rate():
    x = paddle.layer.data(name="x", type=paddle.data_type.dense_vector(4))
    d = paddle.layer.dropout(input=x, dropout_rate=0.3)
    lc = paddle.topology.Topology(d).proto().layer(d.name)
    assert (lc.type, lc.drop_rate, d.name) == ("addto", 0.3, "__dropout_0__")


def test_topology_from_model_config_data_types():
    b = ModelBuilder()
    b.add_layer(LayerConfig("words", "data", size=50, attrs={"kind": "ids", "seq_type": 1}))
    b.add_layer(LayerConfig("emb", "embedding", size=4, inputs=[InputConfig("words")]))
    b.add_layer(LayerConfig("x", "data", size=3))
    b.add_layer(LayerConfig("h", "fc", size=4, inputs=[InputConfig("x")]))
    topo = paddle.topology.Topology.from_model_config(b.build(["emb", "h"]))
    dt = dict(topo.data_type())
    assert dt["words"] == paddle.data_type.integer_value_sequence(50)
    assert dt["x"] == paddle.data_type.dense_vector(3)
    assert topo.get_layer("h").size == 4
