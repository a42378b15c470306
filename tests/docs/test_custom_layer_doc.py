"""The code in docs/custom_layer.md runs and its layers pass the gradient check, on the GPU too."""

import pathlib
import re

import pytest

from sculler.core.layer import register_layer
from sculler.testing import GradientCheckError, check_layer_grad, compare_devices

DOC = pathlib.Path(__file__).resolve().parents[2] / "docs" / "custom_layer.md"


def test_tutorial_layer_and_check_run():
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.S)
    namespace: dict = {}
    exec(blocks[0], namespace)  # the class, registered as "my_fc"
    exec(blocks[1], namespace)  # its gradient check
    report = namespace["report"]
    assert set(report.errors) == {"input 0 (layer_0)", "input 1 (layer_1)",
                                  "parameter _test_layer.w0", "parameter _test_layer.w1",
                                  "parameter _test_layer.wbias"}
    assert report.max_error < 1e-6


def _block_with(name: str) -> str:
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.S)
    return next(block for block in blocks if f'"{name}"' in block)


@pytest.mark.gpu
def test_the_get_array_module_layer_checks_on_the_gpu_and_matches_the_cpu():
    """The doc's user layer, written once with ``xp = get_array_module(x)``, passes the
    gradient check on the GPU and gives the CPU's output and gradients there; a wrong backward
    fails the GPU check."""
    namespace: dict = {}
    exec(_block_with("learned_swish"), namespace)  # runs its GPU checks too: CUDA is here
    config = namespace["config"]
    assert check_layer_grad(config, "learned_swish", use_gpu=True).max_error < 1e-6
    compare_devices(config, "learned_swish", dtype="float64")

    class WrongSlopeGradient(namespace["LearnedSwish"]):
        def backward(self, callback=None):
            self.s = self.s * 1.01  # dy/db and dy/dx 1% off
            super().backward(callback)

    register_layer("learned_swish_wrong")(WrongSlopeGradient)
    with pytest.raises(GradientCheckError, match="learned_swish_wrong"):
        check_layer_grad(config, "learned_swish_wrong", use_gpu=True)
