"""The v1 config front end: Layer/Input, @config_layer wrappers, parse_config."""

import textwrap

import numpy as np
import pytest

from sculler.config.config_parser import (
    Input,
    Layer,
    LayerBase,
    config_layer,
    config_scope,
    finish_config,
    parse_config,
)
from sculler.core.argument import Argument
from sculler.core.model_config import ModelConfig
from sculler.core.network import Network


def write(tmp_path, text):
    path = tmp_path / "conf.py"
    path.write_text(textwrap.dedent(text))
    return path


def test_seed_style_config_parses_and_runs(tmp_path):
    path = write(tmp_path, """
        from sculler.config.config_parser import Layer, Input, Outputs, Settings, get_config_arg
        hidden = get_config_arg("hidden", int, 8)
        Layer(name="pool3", type="data", size=12)
        Layer(name="label", type="data", size=3)
        Layer(name="fc1", type="fc", size=hidden, bias=True, active_type="tanh",
              inputs=[Input("pool3", parameter_name="fc1_w", initial_std=0.1)])
        Layer(name="out", type="fc", size=3, active_type="softmax", inputs=[Input("fc1")])
        Layer(name="cost", type="multi-class-cross-entropy", inputs=["out", "label"])
        Outputs("cost")
        Settings(batch_size=16, learning_rate=0.01)
    """)
    parsed = parse_config(path, "hidden=5")
    model = parsed.model_config
    assert parsed.settings == {"batch_size": 16, "learning_rate": 0.01}
    assert model.input_layer_names == ["pool3", "label"]
    assert model.output_layer_names == ["cost"]
    assert model.layer("fc1").size == 5
    w = model.parameter("fc1_w")
    assert w.dims == [12, 5] and w.initial_std == 0.1
    assert model.parameter("_fc1.wbias").dims == [1, 5]
    assert ModelConfig.from_json(model.to_json()) == model
    net = Network(model)
    outs = net.forward({"pool3": Argument(np.ones((4, 12), np.float32)),
                        "label": Argument(ids=np.array([0, 1, 2, 0]))})
    assert outs[0].value.shape == (4, 1)


def test_config_layer_wrapper_declares_parameters():
    @config_layer("fc")
    class FCLayer(LayerBase):
        def __init__(self, name, size, inputs, bias=True, **xargs):
            super().__init__(name, "fc", size, inputs=inputs, **xargs)
            for i in range(len(self.inputs)):
                input_layer = self.get_input_layer(i)
                psize = self.config.size * input_layer.size
                dims = [input_layer.size, self.config.size]
                self.create_input_parameter(i, psize, dims)
            self.create_bias_parameter(bias, self.config.size)

    try:
        with config_scope() as ctx:
            Layer(name="x", type="data", size=4)
            Layer(name="fc1", type="fc", size=3, bias=False, inputs=[Input("x")])
            model = finish_config(ctx)
        assert [p.name for p in model.parameters] == ["_fc1.w0"]
    finally:
        from sculler.config import config_parser
        config_parser._CONFIG_LAYERS.pop("fc")


def test_wrapper_with_wrong_shape_is_rejected():
    @config_layer("fc")
    class WrongFC(LayerBase):
        def __init__(self, name, size, inputs, **xargs):
            super().__init__(name, "fc", size, inputs=inputs, **xargs)
            self.create_input_parameter(0, 99, [9, 11])

    try:
        with config_scope(), pytest.raises(ValueError, match=r"declares weight 0 with shape "
                                           r"\[9, 11\], but the layer computes with shape "
                                           r"\[4, 3\]"):
            Layer(name="x", type="data", size=4)
            Layer(name="fc1", type="fc", size=3, inputs=[Input("x")])
    finally:
        from sculler.config import config_parser
        config_parser._CONFIG_LAYERS.pop("fc")


def test_undefined_input_names_layer_and_input():
    with config_scope(), pytest.raises(ValueError, match="'fc1' takes input 'pool3'"):
        Layer(name="fc1", type="fc", size=3, inputs=[Input("pool3")])


def test_unknown_type_in_config():
    with config_scope(), pytest.raises(ValueError, match="unknown layer type 'fully'"):
        Layer(name="x", type="data", size=4)
        Layer(name="fc1", type="fully", size=3, inputs=["x"])


def test_layer_outside_config_is_a_clear_error():
    with pytest.raises(RuntimeError, match="inside parse_config"):
        Layer(name="x", type="data", size=4)


def test_helpers_build_paddle_names_and_evaluator(tmp_path):
    path = write(tmp_path, """
        from sculler.config.helpers import *
        x = data_layer(name="x", size=6)
        y = data_layer(name="y", size=3)
        h = fc_layer(input=x, size=4, act=TanhActivation(),
                     param_attr=ParamAttr(name="shared", initial_std=0.2))
        h2 = fc_layer(input=x, size=4, param_attr=ParamAttr(name="shared"))
        both = addto_layer(input=[h, h2])
        Layer(name="raw", type="fc", size=4, active_type="tanh", inputs=[Input(both.name)])
        predict = fc_layer(input=both, size=3, act=SoftmaxActivation())
        outputs(classification_cost(input=predict, label=y))
    """)
    model = parse_config(path).model_config
    names = [p.name for p in model.parameters]
    assert names.count("shared") == 1
    assert model.parameter("shared").initial_std == 0.2
    assert "___fc_layer_2__.w0" in names
    assert model.layer("raw").size == 4
    assert [e.name for e in model.evaluators] == ["classification_error_evaluator"]
    assert model.output_layer_names == ["__cost_0__"]
