"""Values and width errors of the similarity layers (cos, rank-cost) added with the v2 API;
their gradient checks are rows of tests/layers/grad_table.py."""

import numpy as np
import pytest

import sculler.layers.similarity  # noqa: F401 - registers cos and rank-cost
from sculler.core.builder import ModelBuilder
from sculler.core.model_config import InputConfig, LayerConfig


def test_cos_value_and_width_mismatch():
    from sculler.core.argument import Argument
    from sculler.core.network import Network

    b = ModelBuilder()
    b.add_layer(LayerConfig("a", "data", size=3))
    b.add_layer(LayerConfig("b", "data", size=3))
    b.add_layer(LayerConfig("c", "cos", size=1, inputs=[InputConfig("a"), InputConfig("b")],
                            attrs={"scale": 2.0}))
    net = Network(b.build(["c"]))
    x = np.array([[1.0, 0, 0], [1, 1, 0]], dtype=np.float32)
    y = np.array([[2.0, 0, 0], [0, 1, 0]], dtype=np.float32)
    out = net.forward({"a": Argument(x), "b": Argument(y)})[0].value
    np.testing.assert_allclose(out[:, 0], [2.0, 2.0 / np.sqrt(2)], rtol=1e-6)

    b2 = ModelBuilder()
    b2.add_layer(LayerConfig("a", "data", size=3))
    b2.add_layer(LayerConfig("b", "data", size=4))
    b2.add_layer(LayerConfig("c", "cos", size=1, inputs=[InputConfig("a"), InputConfig("b")]))
    with pytest.raises(ValueError, match="widths 3 and 4"):
        b2.build(["c"])


def test_rank_cost_value():
    from sculler.core.argument import Argument
    from sculler.core.network import Network

    b = ModelBuilder()
    for n in ("l", "r", "y"):
        b.add_layer(LayerConfig(n, "data", size=1))
    b.add_layer(LayerConfig("c", "rank-cost", inputs=[InputConfig(n) for n in "lry"]))
    net = Network(b.build(["c"]))
    left = np.array([[2.0], [0.0]], dtype=np.float32)
    right = np.array([[1.0], [0.0]], dtype=np.float32)
    lab = np.array([[1.0], [0.0]], dtype=np.float32)
    out = net.forward({"l": Argument(left), "r": Argument(right), "y": Argument(lab)})[0].value
    np.testing.assert_allclose(out[:, 0], [np.log1p(np.exp(1.0)) - 1.0, np.log(2.0)], rtol=1e-6)
