"""Gradient-check rows for the similarity layers (cos, rank-cost) added with the v2 API."""

import numpy as np
import pytest

import sculler.layers.similarity  # noqa: F401 - registers cos and rank-cost
from sculler.core.builder import ModelBuilder
from sculler.core.model_config import InputConfig, LayerConfig
from sculler.testing import INPUT_DATA, INPUT_DATA_TARGET, INPUT_SEQUENCE_DATA, check_layer_grad

PROB = dict(low=0.05, high=0.95)
POSITIVE = dict(low=0.5, high=2.0)

CASES = [
    ("cos", dict(size=1), [INPUT_DATA(5), INPUT_DATA(5)], False),
    ("cos", dict(size=1, scale=2.5), [INPUT_DATA(4), INPUT_DATA(4)], False),
    ("cos", dict(size=1), [INPUT_SEQUENCE_DATA(3), INPUT_SEQUENCE_DATA(3)], False),
    ("rank-cost", dict(), [INPUT_DATA(1), INPUT_DATA(1), INPUT_DATA_TARGET(1, **PROB)], False),
    ("rank-cost", dict(coeff=0.7),
     [INPUT_DATA(1), INPUT_DATA(1), INPUT_DATA_TARGET(1, **PROB), INPUT_DATA(1, **POSITIVE)],
     False),
]


@pytest.mark.parametrize("case", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_layer_gradient(case):
    layer_type, settings, inputs, use_weight = case
    report = check_layer_grad({**settings, "inputs": inputs}, layer_type, 10,
                              use_weight=use_weight)
    assert report.errors, "the check compared no gradient"
    assert report.max_error < 1e-6


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
