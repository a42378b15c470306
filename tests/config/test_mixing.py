"""Helpers, ``@config_layer`` wrappers and raw ``Layer(...)`` mix in one config, both ways:
a helper takes what ``Layer(...)`` returned, a raw layer names (or is given) a helper's
layer, and a custom registered layer type declared raw reaches ``classification_cost``."""

import numpy as np

from sculler.config.config_parser import (
    Input,
    Layer,
    LayerBase,
    config_layer,
    config_scope,
    finish_config,
)
from sculler.config.parser_utils import parse_network_config
from sculler.core.layer import register_layer
from sculler.layers.fc import FCLayer
from sculler.trainer_config_helpers import (
    SoftmaxActivation,
    TanhActivation,
    classification_cost,
    classification_error_evaluator,
    data_layer,
    fc_layer,
    outputs,
)


@register_layer("mixing_test_fc")
class _MixingFC(FCLayer):
    """A user's own layer type (fc's computation under another name)."""


def _structure(model):
    return [(lc.name, lc.type, lc.size, lc.input_layer_names) for lc in model.layers]


def test_helper_takes_a_raw_custom_layer_into_classification_cost():
    def network():
        x = data_layer(name="x", size=6)
        lbl = data_layer(name="label", size=10)
        hidden = fc_layer(input=x, size=8, act=TanhActivation(), name="fc1")
        st = Layer(name="st", type="mixing_test_fc", size=10, active_type="softmax",
                   inputs=["fc1"])
        outputs(classification_cost(input=st, label=lbl))
        assert hidden.name == "fc1"

    model = parse_network_config(network)
    assert _structure(model) == [
        ("x", "data", 6, []), ("label", "data", 10, []), ("fc1", "fc", 8, ["x"]),
        ("st", "mixing_test_fc", 10, ["fc1"]), ("__cost_0__", "multi-class-cross-entropy", 1,
                                    ["st", "label"])]
    assert model.input_layer_names == ["x", "label"]
    assert [p.name for p in model.parameters] == [
        "_fc1.w0", "_fc1.wbias", "_st.w0", "_st.wbias"]
    assert model.evaluators[0].input_layers == ["st", "label"]


def test_inline_raw_layer_as_helper_input():
    def network():
        lbl = data_layer(name="lbl", size=10)
        fc_layer(input=data_layer(name="x", size=4), size=3, name="fc1")
        outputs(classification_cost(
            input=Layer(name="st", type="mixing_test_fc", size=10, inputs=["fc1"]), label=lbl))

    model = parse_network_config(network)
    assert [lc.name for lc in model.layers][-2:] == ["st", "__cost_0__"]


def test_raw_layers_all_the_way_then_helpers():
    def network():
        x = Layer(name="x", type="data", size=5)
        label = Layer(name="label", type="data", size=3)
        h = Layer(name="h", type="fc", size=4, active_type="tanh", inputs=[Input(x)])
        out = fc_layer(input=[h, x], size=3, act=SoftmaxActivation(), name="out")
        classification_error_evaluator(input=out, label=label, name="raw_label_error")
        outputs(classification_cost(input=out, label=label))

    model = parse_network_config(network)
    by_name = {lc.name: lc for lc in model.layers}
    assert by_name["out"].input_layer_names == ["h", "x"]
    assert by_name["__cost_0__"].input_layer_names == ["out", "label"]
    assert model.input_layer_names == ["x", "label"]
    assert any(e.name == "raw_label_error" and e.input_layers == ["out", "label"]
               for e in model.evaluators)


def test_raw_layer_names_or_takes_a_helpers_layer():
    with config_scope() as ctx:
        x = data_layer(name="x", size=4)
        h = fc_layer(input=x, size=3, name="h")
        Layer(name="by_name", type="fc", size=2, inputs=["h"])
        Layer(name="by_object", type="fc", size=2, inputs=[h, Input(x, parameter_name="w")])
        model = finish_config(ctx)
    by_name = {lc.name: lc for lc in model.layers}
    assert by_name["by_name"].input_layer_names == ["h"]
    assert by_name["by_object"].input_layer_names == ["h", "x"]
    assert by_name["by_object"].inputs[1].input_parameter_name == "w"


def test_config_layer_wrapper_output_feeds_a_helper():
    @config_layer("mixing_test_fc")
    class _Wrapper(LayerBase):
        def __init__(self, name, size, inputs, bias=True, **xargs):
            super().__init__(name, "mixing_test_fc", size, inputs=inputs, **xargs)
            for i in range(len(self.inputs)):
                width = self.get_input_layer(i).size
                self.create_input_parameter(i, width * self.config.size,
                                            [width, self.config.size])
            self.create_bias_parameter(bias, self.config.size)

    try:
        def network():
            x = data_layer(name="x", size=4)
            wrapped = Layer(name="w", type="mixing_test_fc", size=3, inputs=[x])
            outputs(fc_layer(input=wrapped, size=2, name="top"))

        model = parse_network_config(network)
    finally:
        from sculler.config import config_parser

        config_parser._CONFIG_LAYERS.pop("mixing_test_fc")
    assert _structure(model) == [("x", "data", 4, []), ("w", "mixing_test_fc", 3, ["x"]),
                                 ("top", "fc", 2, ["w"])]


def test_mixed_config_trains_from_a_file(tmp_path):
    """The mixed config runs: one SGD step on it changes the raw custom layer's weight."""
    import sculler as paddle
    from sculler.cli import set_data_kinds
    from sculler.config.config_parser import parse_config
    from sculler.topology import Topology

    path = tmp_path / "mixed.py"
    path.write_text(
        "from sculler.trainer_config_helpers import *\n"
        "import tests.config.test_mixing\n"
        "x = data_layer(name='x', size=4)\n"
        "lbl = data_layer(name='label', size=3)\n"
        "fc_layer(input=x, size=5, name='fc1')\n"
        "st = Layer(name='st', type='mixing_test_fc', size=3, active_type='softmax',"
        " inputs=['fc1'])\n"
        "outputs(classification_cost(input=st, label=lbl))\n")
    model = parse_config(path).model_config
    rng = np.random.default_rng(0)
    samples = [(rng.normal(size=4).astype(np.float32), int(rng.integers(3))) for _ in range(8)]
    set_data_kinds(model, samples[0], {})
    topology = Topology.from_model_config(model)
    params = paddle.parameters.create(topology)
    before = params.get("_st.w0").copy()
    trainer = paddle.trainer.SGD(cost=topology, parameters=params,
                                 update_equation=paddle.optimizer.Momentum(learning_rate=0.1))
    trainer.train(paddle.batch(lambda: iter(samples), 8), num_passes=1,
                  feeding={"x": 0, "label": 1})
    assert not np.allclose(before, params.get("_st.w0"))
