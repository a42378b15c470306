"""data_norm: the three strategies against their formulas with loaded statistics, the v1
``Layer(type="data_norm")`` form, and the errors (the gradient check is its table row)."""

import numpy as np
import pytest

from sculler.config.config_parser import parse_config
from sculler.core.argument import Argument
from sculler.core.builder import ModelBuilder
from sculler.core.layer import PASS_TEST
from sculler.core.model_config import InputConfig, LayerConfig
from sculler.core.network import Network
from sculler.core.parameter import ParameterSet

X = np.array([[3.0, -20.0, 0.5], [5.0, 40.0, -0.25]])
LOW, HIGH = np.array([1.0, -50.0, -1.0]), np.array([9.0, 50.0, 1.0])
MEAN, STD = np.array([4.0, 10.0, 0.0]), np.array([2.0, 30.0, 0.5])
DECIMAL = np.array([10.0, 100.0, 1.0])
STATS = np.stack([LOW, 1 / (HIGH - LOW), MEAN, 1 / STD, 1 / DECIMAL])


def run(strategy, stats=STATS, weight_attrs=None):
    b = ModelBuilder()
    b.add_layer(LayerConfig("x", "data", size=3))
    b.add_layer(LayerConfig("norm", "data_norm", inputs=[InputConfig("x")],
                            attrs={"data_norm_strategy": strategy}),
                weight_attrs=weight_attrs)
    net = Network(b.build(["norm"]), ParameterSet(seed=1))
    net.parameters["_norm.w0"].value[...] = stats
    return net.forward({"x": Argument(value=X.copy())}, PASS_TEST)[0].value


@pytest.mark.parametrize("strategy, want", [
    ("z-score", (X - MEAN) / STD),
    ("min-max", (X - LOW) / (HIGH - LOW)),
    ("decimal-scaling", X / DECIMAL),
])
def test_each_strategy_is_its_formula(strategy, want):
    np.testing.assert_allclose(run(strategy), want, rtol=1e-6)


def test_v1_layer_form_makes_paddles_static_five_row_parameter(tmp_path):
    path = tmp_path / "conf.py"
    path.write_text("from sculler.trainer_config_helpers import *\n"
                    "x = data_layer(name='x', size=3)\n"
                    "Layer(name='norm', type='data_norm', inputs=[Input('x', "
                    "parameter_name='_x.stats')], data_norm_strategy='min-max')\n"
                    "Outputs('norm')\n")
    mc = parse_config(path).model_config
    (param,) = mc.parameters
    assert (param.name, param.dims, param.is_static) == ("_x.stats", [5, 3], True)
    assert mc.layer("norm").attrs["data_norm_strategy"] == "min-max"


def test_bad_settings_are_refused_by_name():
    with pytest.raises(ValueError, match="data_norm_strategy must be one of .* got 'l2'"):
        run("l2")
    with pytest.raises(ValueError, match="statistics '_norm.w0' must be a static parameter"):
        run("z-score", weight_attrs=[{"is_static": False}])
    b = ModelBuilder()
    b.add_layer(LayerConfig("x", "data", size=3))
    b.add_layer(LayerConfig("h", "slope_intercept", inputs=[InputConfig("x")]))
    with pytest.raises(ValueError, match="its input must be a data layer, got 'h'"):
        b.add_layer(LayerConfig("norm", "data_norm", inputs=[InputConfig("h")]))
        b.build(["norm"])
