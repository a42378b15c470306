"""Network building, parameter sharing, buffer reuse and the errors users see."""

import numpy as np
import pytest

from sculler.core.argument import Argument
from sculler.core.builder import ModelBuilder
from sculler.core.layer import get_layer_class
from sculler.core.model_config import InputConfig, LayerConfig, ModelConfig
from sculler.core.network import Network
from sculler.core.parameter import ParameterSet
from sculler.math.sparse import CsrMatrix


def mlp(shared=False, hidden=4):
    b = ModelBuilder()
    b.add_layer(LayerConfig("x", "data", size=5))
    b.add_layer(LayerConfig("label", "data", size=3))
    w = [{"name": "shared_w"}] if shared else None
    b.add_layer(LayerConfig("h1", "fc", size=hidden, active_type="tanh",
                            inputs=[InputConfig("x")]), weight_attrs=w)
    b.add_layer(LayerConfig("h2", "fc", size=hidden, active_type="tanh",
                            inputs=[InputConfig("x")]), weight_attrs=w)
    b.add_layer(LayerConfig("sum", "addto", inputs=[InputConfig("h1"), InputConfig("h2")]))
    b.add_layer(LayerConfig("out", "fc", size=3, active_type="softmax",
                            inputs=[InputConfig("sum")]))
    b.add_layer(LayerConfig("cost", "multi-class-cross-entropy",
                            inputs=[InputConfig("out"), InputConfig("label")]))
    return b.build(["cost"])


def batch(n, rng=None):
    rng = rng or np.random.RandomState(0)
    return {"x": Argument(rng.randn(n, 5).astype(np.float32)),
            "label": Argument(ids=rng.randint(0, 3, size=n))}


def test_default_parameter_names_follow_paddle():
    names = [p.name for p in mlp().parameters]
    assert names == ["_h1.w0", "_h1.wbias", "_h2.w0", "_h2.wbias", "_out.w0", "_out.wbias"]


def test_shared_parameter_is_created_once_and_callback_fires_once():
    config = mlp(shared=True)
    assert [p.name for p in config.parameters].count("shared_w") == 1
    net = Network(config)
    net.forward(batch(6), "train")
    fired = []
    net.backward(lambda p: fired.append(p.name))
    assert sorted(fired) == sorted(set(fired))
    assert fired.count("shared_w") == 1
    # shared_w fires only after both users (h1 and h2) reported; h1 runs last in backward
    assert fired.index("shared_w") > fired.index("_h2.wbias")


def test_shared_gradient_is_the_sum_of_both_users():
    config = mlp(shared=True)
    params = ParameterSet(seed=3)
    net = Network(config, params)
    feed = batch(6)
    net.forward(feed, "train")
    net.backward()
    g = params["shared_w"].grad.copy()
    x = feed["x"].value
    dz1 = net.get_layer("h1").output.grad
    dz2 = net.get_layer("h2").output.grad
    np.testing.assert_allclose(g, x.T @ dz1 + x.T @ dz2, rtol=1e-5, atol=1e-6)


def test_two_networks_share_a_parameter_set():
    params = ParameterSet(seed=1)
    a = Network(mlp(), params)
    b = Network(mlp(), params)
    assert a.get_layer("h1").weights[0].parameter is b.get_layer("h1").weights[0].parameter


def test_shared_name_with_other_shape_names_both_layers():
    b = ModelBuilder()
    b.add_layer(LayerConfig("x", "data", size=5))
    b.add_layer(LayerConfig("a", "fc", size=3, inputs=[InputConfig("x", "w")]))
    b.add_layer(LayerConfig("b", "fc", size=4, inputs=[InputConfig("x", "w")]))
    with pytest.raises(ValueError, match=r"'w' is used by layer 'a' .* and by layer 'b'"):
        b.build(["a", "b"])


def test_output_buffers_grow_and_are_reused_when_smaller():
    net = Network(mlp())
    net.forward(batch(8), "train")
    layer = net.get_layer("h1")
    base = layer._bufs["value"]
    net.forward(batch(3), "train")
    assert layer._bufs["value"] is base
    assert np.shares_memory(layer.output.value, base)
    assert layer.output.value.shape == (3, 4)
    net.forward(batch(20), "train")
    assert layer._bufs["value"] is not base and layer.output.value.shape == (20, 4)


def test_cycle_is_rejected_naming_the_layers():
    config = ModelConfig(layers=[
        LayerConfig("a", "fc", size=2, inputs=[InputConfig("b")]),
        LayerConfig("b", "fc", size=2, inputs=[InputConfig("a")]),
    ])
    with pytest.raises(ValueError, match="cycle: .*a.*b|cycle: .*b.*a"):
        Network(config)


def test_dangling_input_is_rejected():
    b = ModelBuilder()
    b.add_layer(LayerConfig("fc1", "fc", size=2, inputs=[InputConfig("pool3")]))
    with pytest.raises(ValueError, match="layer 'fc1' takes input 'pool3', which is not defined"):
        b.build(["fc1"])


def test_unknown_layer_type_lists_close_matches():
    with pytest.raises(ValueError, match=r"unknown layer type 'fcc'.*'fc'"):
        get_layer_class("fcc")


def test_input_width_mismatch_names_layer_and_sizes():
    net = Network(mlp())
    bad = batch(4)
    bad["x"] = Argument(np.zeros((4, 7), np.float32))
    with pytest.raises(ValueError, match=r"data layer 'x' expects width 5, got dense value of "
                       r"shape \(4, 7\)"):
        net.forward(bad)


def _three_class_cost_over_ten_label_ids() -> Network:
    """A cross-entropy over 3 probabilities whose label data layer admits ids up to 9."""
    b = ModelBuilder()
    b.add_layer(LayerConfig("p", "data", size=3))
    b.add_layer(LayerConfig("y", "data", size=10))
    b.add_layer(LayerConfig("c", "multi-class-cross-entropy",
                            inputs=[InputConfig("p"), InputConfig("y")]))
    net = Network(b.build(["c"]))
    return net


def test_label_out_of_range_names_the_cost_layer():
    net = Network(mlp())
    bad = batch(4)
    bad["label"] = Argument(ids=np.array([0, 1, 7, 2]))
    with pytest.raises(ValueError, match="id 7 is out of range"):
        net.forward(bad)
    # past the data layer's own check, the cost layer checks the label against its input
    net = _three_class_cost_over_ten_label_ids()
    with pytest.raises(ValueError, match=r"layer 'c' \(multi-class-cross-entropy\): label id 5 "
                       r"is out of range \[0, 3\)"):
        net.forward({"p": Argument(np.full((2, 3), 0.3)), "y": Argument(ids=np.array([1, 5]))})


def test_a_bound_proven_by_the_feeder_covers_only_that_ids_array():
    """The feeder marks its ids as checked below the data layer's width, so the data and cost
    layers skip their repeat of the range check; a wider proof, or a different array in the
    same Argument, is checked again."""
    net = _three_class_cost_over_ten_label_ids()
    p = Argument(np.full((2, 3), 0.3))
    labels = Argument(ids=np.array([1, 5]))
    labels.mark_ids_below(10)  # true, but wider than the cost's 3 classes
    with pytest.raises(ValueError, match=r"label id 5 is out of range \[0, 3\)"):
        net.forward({"p": p, "y": labels})
    labels.ids = np.array([1, 12])  # a new array: the old proof does not cover it
    with pytest.raises(ValueError, match=r"data layer 'y': id 12 is out of range"):
        net.forward({"p": p, "y": labels})
    good = Argument(ids=np.array([1, 2]))
    good.mark_ids_below(3)
    assert labels.ids_known_below(10) is False and good.ids_known_below(3)
    np.testing.assert_allclose(net.forward({"p": p, "y": good})[0].value, -np.log(0.3))


def test_wrong_number_of_inputs():
    b = ModelBuilder()
    b.add_layer(LayerConfig("x", "data", size=2))
    b.add_layer(LayerConfig("e", "embedding", size=2, inputs=[InputConfig("x"), InputConfig("x")]))
    with pytest.raises(ValueError, match=r"layer 'e' \(type 'embedding'\) takes 1 inputs, got 2"):
        b.build(["e"])


def test_sparse_fc_prefetch_and_touched_rows():
    b = ModelBuilder()
    b.add_layer(LayerConfig("x", "data", size=50))
    b.add_layer(LayerConfig("y", "fc", size=3, inputs=[InputConfig("x")]),
                weight_attrs=[{"sparse_update": True, "sparse_remote_update": True}])
    b.add_layer(LayerConfig("t", "data", size=3))
    b.add_layer(LayerConfig("c", "square_error", inputs=[InputConfig("y"), InputConfig("t")]))
    net = Network(b.build(["c"]))
    x = CsrMatrix.from_rows([[1, 7], [7, 30]], 50, with_values=False)
    net.forward({"x": Argument(x), "t": Argument(np.zeros((2, 3), np.float32))}, "train")
    assert net.prefetch() == {"_y.w0": pytest.approx(np.array([1, 7, 30]))}
    net.backward()
    p = net.parameters["_y.w0"]
    assert list(p.touched_rows_array()) == [1, 7, 30]
    untouched = np.setdiff1d(np.arange(50), [1, 7, 30])
    assert not p.grad[untouched].any() and p.grad[[1, 7, 30]].any()
    p.zero_grad()
    assert not p.grad.any() and p.touched_rows == []


def test_config_json_round_trip():
    config = mlp(shared=True)
    assert ModelConfig.from_json(config.to_json()) == config


def test_cost_gradient_is_per_sample_sum():
    """Doubling the batch with the same samples doubles the parameter gradient."""
    net = Network(mlp(), ParameterSet(seed=0))
    one = batch(4, np.random.RandomState(5))
    net.forward(one, "train")
    net.backward()
    g1 = net.parameters["_out.w0"].grad.copy()
    net.zero_grad()
    two = {"x": Argument(np.concatenate([one["x"].value] * 2)),
           "label": Argument(ids=np.concatenate([one["label"].ids] * 2))}
    net.forward(two, "train")
    net.backward()
    np.testing.assert_allclose(net.parameters["_out.w0"].grad, 2 * g1, rtol=1e-5)
