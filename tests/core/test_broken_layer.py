"""The gradient check must catch a wrong backward: deliberately broken fc layers. (The table of
correct layers it checks is tests/layers/grad_table.py.)"""

import re

import pytest

import sculler.core.layer as layer_module
from sculler.core.layer import register_layer
from sculler.layers.fc import FCLayer
from sculler.testing import INPUT_DATA, GradientCheckError, check_layer_grad


@register_layer("test_broken_fc")
class BrokenFC(FCLayer):
    """fc whose backward forgets the activation derivative: dz is taken as dy."""

    def backward_activation(self) -> None:
        pass


@register_layer("test_broken_bias_fc")
class BrokenBiasFC(FCLayer):
    """fc whose bias gradient is doubled."""

    def backward(self, callback=None) -> None:
        super().backward(callback)
        self.bias.w_grad *= 2


@register_layer("test_nondeterministic_fc")
class NondeterministicFC(FCLayer):
    def forward(self, pass_type):
        super().forward(pass_type)
        self.output.value += self._rng.random_sample(self.output.value.shape) * 1e-3


def test_wrong_activation_derivative_is_caught():
    config = {"size": 4, "active_type": "tanh", "inputs": [INPUT_DATA(5)]}
    with pytest.raises(GradientCheckError) as err:
        check_layer_grad(config, "test_broken_fc", 8)
    msg = str(err.value)
    assert "test_broken_fc" in msg
    assert re.search(r"index \(\d+, \d+\)", msg)
    assert "backward gives" in msg and "finite differences give" in msg


def test_wrong_parameter_gradient_names_the_parameter():
    with pytest.raises(GradientCheckError, match=r"parameter _test_layer\.wbias"):
        check_layer_grad({"size": 3, "inputs": [INPUT_DATA(4)]}, "test_broken_bias_fc", 8)


def test_nondeterministic_forward_is_caught():
    with pytest.raises(GradientCheckError, match="deterministic|fresh network"):
        check_layer_grad({"size": 3, "inputs": [INPUT_DATA(4)]}, "test_nondeterministic_fc", 8)


def test_correct_layer_passes_with_small_error():
    report = check_layer_grad({"size": 4, "active_type": "tanh", "inputs": [INPUT_DATA(5)]},
                              "fc", 8)
    assert 0 <= report.max_error < 1e-6


@register_layer("test_stale_addto")
class StaleAddto(FCLayer):
    """fc that accumulates into its output buffer without resetting it between batches."""

    def forward(self, pass_type):
        self.pass_type = pass_type
        out = self.reserve_output(self.check_same_batch(), self.size)
        out += self.get_input_value(0) @ self.weights[0].w
        self.forward_activation()


def test_stale_buffer_between_batches_is_caught():
    with pytest.raises(GradientCheckError, match="fresh network|deterministic"):
        check_layer_grad({"size": 3, "bias": False, "inputs": [INPUT_DATA(4)]},
                         "test_stale_addto", 8)


@register_layer("test_act_ignored")
class ActIgnored(FCLayer):
    """fc whose forward and backward never apply the activation."""

    first_write = False  # its backward adds into zeroed gradients

    def forward(self, pass_type):
        self.pass_type = pass_type
        out = self.reserve_output(self.check_same_batch(), self.size)
        out[...] = self.get_input_value(0) @ self.weights[0].w

    def backward(self, callback=None):
        dz = self.output.grad
        self.weights[0].w_grad += self.get_input_value(0).T @ dz
        grad = self.get_input_grad(0)
        if grad is not None:
            grad += dz @ self.weights[0].w.T
        self.weights[0].parameter.inc_update(callback)


def test_act_a_layer_never_applies_is_refused():
    """act=relu on a layer whose forward never calls forward_activation() was silently ignored
    (and its gradient check passed): the network refuses it at the first batch."""
    config = {"size": 3, "bias": False, "active_type": "relu", "inputs": [INPUT_DATA(4)]}
    with pytest.raises(ValueError, match=r"'test_act_ignored'.*act='relu'.*never calls "
                                         r"self.forward_activation\(\)"):
        check_layer_grad(config, "test_act_ignored", 8)
    report = check_layer_grad({**config, "active_type": "linear"}, "test_act_ignored", 8)
    assert report.max_error < 1e-6  # without an act the layer is fine


@pytest.fixture
def scratch_registry(monkeypatch):
    """Layers a test registers leave the registry when it ends."""
    monkeypatch.setattr(layer_module, "_REGISTRY", dict(layer_module._REGISTRY))


@pytest.mark.parametrize("wrong, least_error", [("scaled by 1.01", 0.009), ("transposed", 1e-3)])
def test_slightly_wrong_weight_gradient_is_caught(scratch_registry, wrong, least_error):
    """A weight gradient 1% too large, or transposed (square weight: the shapes agree), fails
    the check, whose bound is 1e-6."""

    @register_layer("test_wrong_weight_grad_fc")
    class WrongWeightGradFC(FCLayer):
        def backward(self, callback=None) -> None:
            super().backward(callback)
            grad = self.weights[0].w_grad
            if wrong == "transposed":
                grad[...] = grad.T.copy()
            else:
                grad *= 1.01

    config = {"size": 4, "bias": False, "active_type": "tanh", "inputs": [INPUT_DATA(4)]}
    with pytest.raises(GradientCheckError, match=r"parameter _test_layer\.w0") as err:
        check_layer_grad(config, "test_wrong_weight_grad_fc", 8)
    error = float(re.search(r"relative error (\S+) >", str(err.value)).group(1))
    assert error > least_error
