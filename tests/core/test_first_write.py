"""The first-write gradient mechanism: opted-in layers overwrite stale buffers, everything else
still sees zeroed buffers, and the gradients equal the plain zero-then-add ones."""

import numpy as np
import pytest

from sculler.core.argument import Argument
from sculler.core.builder import ModelBuilder
from sculler.core.layer import Layer, get_layer_class
from sculler.core.model_config import InputConfig, LayerConfig
from sculler.core.network import Network
from sculler.core.parameter import ParameterSet


def model(shared: bool):
    """x feeds two fc layers (first-write) and a concat (plain +=); the fc layers may share
    their weight; the cost output is the only consumer of `out`."""
    b = ModelBuilder()
    b.add_layer(LayerConfig("x", "data", size=5))
    b.add_layer(LayerConfig("label", "data", size=3))
    w = [{"name": "shared_w"}] if shared else None
    b.add_layer(LayerConfig("h0", "fc", size=5, active_type="tanh", inputs=[InputConfig("x")]))
    for name in ("h1", "h2"):
        b.add_layer(LayerConfig(name, "fc", size=5, active_type="tanh",
                                inputs=[InputConfig("h0")]), weight_attrs=w)
    b.add_layer(LayerConfig("sum", "concat", inputs=[InputConfig("h1"), InputConfig("h2"),
                                                     InputConfig("h0")]))
    b.add_layer(LayerConfig("out", "fc", size=3, active_type="softmax",
                            inputs=[InputConfig("sum"), InputConfig("h1")]))
    b.add_layer(LayerConfig("cost", "multi-class-cross-entropy",
                            inputs=[InputConfig("out"), InputConfig("label")]))
    return b.build(["cost"])


def gradients(config, batches, first_write: bool, monkeypatch, data_gradients=False):
    with monkeypatch.context() as m:
        if not first_write:
            for t in ("fc", "exconv", "pool", "multi-class-cross-entropy", "addto",
                      "batch_norm"):
                m.setattr(get_layer_class(t), "first_write", False)
        net = Network(config, ParameterSet(seed=1), data_gradients=data_gradients)
        for feed in batches:
            net.zero_grad()
            net.forward(feed, "train")
            net.backward()
        grads = {p.name: p.grad.copy() for p in net.used_parameters}
        if data_gradients:
            grads["x"] = net.get_layer("x").output.grad.copy()
        return net, grads


def feeds(n_batches, rng, width=5):
    return [{"x": Argument(rng.randn(6, width).astype(np.float32)),
             "label": Argument(ids=rng.randint(0, 3, size=6))} for _ in range(n_batches)]


def residual_model():
    """A ResNet block: conv -> batch_norm (relu) -> conv -> batch_norm, summed by an addto
    (relu) with the block's input (the shortcut, which also feeds the first conv); x is
    2 x 4 x 4 and is read twice by the addto (x + block + x) to cover a repeated input."""
    b = ModelBuilder()
    img = {"height": 4, "width": 4}
    b.add_layer(LayerConfig("x", "data", size=32, attrs=img))
    b.add_layer(LayerConfig("label", "data", size=3))
    conv = {"filter_size": 3, "padding": 1, "num_filters": 2, "channels": 2}
    prev = "x"
    for i, act in ((0, "relu"), (1, "")):
        b.add_layer(LayerConfig(f"conv{i}", "exconv", attrs=dict(conv),
                                inputs=[InputConfig(prev)]))
        b.add_layer(LayerConfig(f"bn{i}", "batch_norm", active_type=act,
                                inputs=[InputConfig(f"conv{i}") for _ in range(3)]))
        prev = f"bn{i}"
    b.add_layer(LayerConfig("sum", "addto", active_type="relu",
                            inputs=[InputConfig("x"), InputConfig("bn1"), InputConfig("x")]))
    b.add_layer(LayerConfig("out", "fc", size=3, active_type="softmax",
                            inputs=[InputConfig("sum")]))
    b.add_layer(LayerConfig("cost", "multi-class-cross-entropy",
                            inputs=[InputConfig("out"), InputConfig("label")]))
    return b.build(["cost"])


def test_batch_norm_and_addto_first_writes_equal_zero_then_add(monkeypatch):
    """batch_norm and addto overwrite the gradients they write first (so neither the convs'
    outputs nor the batch norms' are cleared each batch) and give the zero-then-add result."""
    config = residual_model()
    data = feeds(3, np.random.RandomState(3), width=32)
    net, fast = gradients(config, data, True, monkeypatch, data_gradients=True)
    _, ref = gradients(config, data, False, monkeypatch, data_gradients=True)
    for name in ("x", "conv0", "conv1", "bn0", "bn1", "sum"):
        assert net.get_layer(name).defer_grad_zero, name
    for k in ref:
        np.testing.assert_allclose(fast[k], ref[k], rtol=1e-5, atol=1e-6, err_msg=k)


@pytest.mark.parametrize("shared", [False, True])
def test_first_write_gradients_equal_zero_then_add(shared, monkeypatch):
    config = model(shared)
    data = feeds(3, np.random.RandomState(0))
    net, fast = gradients(config, data, True, monkeypatch, data_gradients=True)
    _, ref = gradients(config, data, False, monkeypatch, data_gradients=True)
    assert net.get_layer("sum").defer_grad_zero
    assert fast.keys() == ref.keys()
    for k in ref:
        np.testing.assert_allclose(fast[k], ref[k], rtol=1e-6, atol=1e-7, err_msg=k)


def test_only_buffers_with_all_writers_opted_in_are_deferred():
    net = Network(model(shared=True), ParameterSet(seed=1))
    # h0 feeds fc layers and the addto (plain +=): its gradient is still cleared eagerly
    assert not net.get_layer("h0").defer_grad_zero
    assert net.get_layer("sum").defer_grad_zero  # only `out` (fc) consumes it
    assert net.get_layer("out").defer_grad_zero  # only the cost (first write) reads it
    lazy = {p.name for p in net._lazy_params}
    assert "shared_w" in lazy and "_out.w0" in lazy


def test_gradients_accumulate_without_zero_grad(monkeypatch):
    config = model(shared=True)
    feed = feeds(1, np.random.RandomState(2))[0]
    net = Network(config, ParameterSet(seed=1))
    net.zero_grad()
    net.forward(feed, "train")
    net.backward()
    once = {p.name: p.grad.copy() for p in net.used_parameters}
    net.forward(feed, "train")
    net.backward()  # no zero_grad: a second batch adds
    for p in net.used_parameters:
        np.testing.assert_allclose(p.grad, 2 * once[p.name], rtol=1e-5, err_msg=p.name)


def test_unwritten_gradients_read_as_zero():
    """A buffer no consumer writes (an output without a cost seed) is cleared before its layer
    reads it, and a parameter whose users never write is cleared before its callback."""
    b = ModelBuilder()
    b.add_layer(LayerConfig("x", "data", size=4))
    b.add_layer(LayerConfig("a", "fc", size=3, inputs=[InputConfig("x")]))
    b.add_layer(LayerConfig("b", "fc", size=2, inputs=[InputConfig("a")]))
    b.add_layer(LayerConfig("d", "fc", size=2, inputs=[InputConfig("x")]))
    net = Network(b.build(["a", "b", "d"]), ParameterSet(seed=0))
    a = net.get_layer("a")
    net.zero_grad()
    for p in net.used_parameters:
        p.grad[...] = 7.0  # stale values the first writer must overwrite
    net.forward({"x": Argument(np.ones((2, 4), np.float32))}, "train")
    a.output.grad[...] = 5.0  # stale: b's backward must overwrite it, not add
    net.backward(output_grads={"b": np.ones((2, 2), np.float32)})
    wb = net.parameters["_b.w0"].value
    np.testing.assert_allclose(a.output.grad, np.ones((2, 2)) @ wb.T, rtol=1e-6)
    np.testing.assert_allclose(net.parameters["_b.wbias"].grad, [[2.0, 2.0]])
    # nothing seeds d's output gradient: it is zero, and so are d's parameter gradients
    assert not net.get_layer("d").output.grad.any()
    assert not net.parameters["_d.w0"].grad.any() and not net.parameters["_d.wbias"].grad.any()


class _AddOnly(Layer):
    """A layer written before first writes existed: it only ever adds."""

    def forward(self, pass_type):
        super().forward(pass_type)
        self.reserve_output(self.get_input_value(0).shape[0], self.size)
        self.output.value[...] = self.get_input_value(0)

    def backward(self, callback=None):
        self.get_input_grad(0)[...] += self.output.grad


def test_legacy_consumer_keeps_zeroed_buffers(monkeypatch):
    from sculler.core import layer as layer_mod

    monkeypatch.setitem(layer_mod._REGISTRY, "test_add_only", _AddOnly)
    b = ModelBuilder()
    b.add_layer(LayerConfig("x", "data", size=3))
    b.add_layer(LayerConfig("a", "fc", size=3, inputs=[InputConfig("x")]))
    b.add_layer(LayerConfig("c", "test_add_only", size=3, inputs=[InputConfig("a")]))
    net = Network(b.build(["c"]), ParameterSet(seed=0))
    assert not net.get_layer("a").defer_grad_zero
    net.forward({"x": Argument(np.ones((2, 3), np.float32))}, "train")
    net.backward(output_grads={"c": np.full((2, 3), 2.0, np.float32)})
    np.testing.assert_allclose(net.get_layer("a").output.grad, 2.0)


def test_compiled_residual_sum_equals_numpy(monkeypatch):
    """addto(relu) of two inputs on the compiled pass (numba) gives NumPy's gradients of every
    parameter and of the data, a repeated input (the second sum reads its input twice)
    included."""
    from sculler.math.jit import numba_available

    if not numba_available():
        pytest.skip("numba is not installed (sculler[fast])")
    b = ModelBuilder()
    b.add_layer(LayerConfig("x", "data", size=5))
    b.add_layer(LayerConfig("label", "data", size=3))
    b.add_layer(LayerConfig("h", "fc", size=5, inputs=[InputConfig("x")]))
    b.add_layer(LayerConfig("s1", "addto", active_type="relu",
                            inputs=[InputConfig("x"), InputConfig("h")]), bias_attr=False)
    b.add_layer(LayerConfig("s2", "addto", active_type="relu",
                            inputs=[InputConfig("s1"), InputConfig("s1")]), bias_attr=False)
    b.add_layer(LayerConfig("out", "fc", size=3, active_type="softmax",
                            inputs=[InputConfig("s2")]))
    b.add_layer(LayerConfig("cost", "multi-class-cross-entropy",
                            inputs=[InputConfig("out"), InputConfig("label")]))
    config = b.build(["cost"])
    batches = feeds(2, np.random.RandomState(4))
    _, compiled = gradients(config, batches, True, monkeypatch, data_gradients=True)
    monkeypatch.setenv("SCULLER_JIT", "0")
    _, reference = gradients(config, batches, True, monkeypatch, data_gradients=True)
    for name, g in reference.items():
        assert np.abs(g).max() > 0, name
        np.testing.assert_allclose(compiled[name], g, rtol=1e-5, atol=1e-6)
