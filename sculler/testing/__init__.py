"""Gradient checks for layers (``check_layer_grad``) and PyLayers and eager functions
(``check_pylayer_grad``, ``check_grad``; loaded on first use, with the eager front end)."""

from typing import Any

from sculler.testing.grad_check import (
    INPUT_DATA,
    INPUT_DATA_TARGET,
    INPUT_HASSUB_SEQUENCE_DATA,
    INPUT_LABEL,
    INPUT_SEQUENCE_DATA,
    INPUT_SEQUENCE_LABEL,
    INPUT_SPARSE_FLOAT_VALUE_DATA,
    INPUT_SPARSE_NON_VALUE_DATA,
    GradCheckReport,
    GradientCheckError,
    InputDef,
    TestConfig,
    check_layer_grad,
    compare_devices,
)
from sculler.testing.network_check import check_network_grad, random_argument

__all__ = [
    "INPUT_DATA", "INPUT_DATA_TARGET", "INPUT_HASSUB_SEQUENCE_DATA", "INPUT_LABEL",
    "INPUT_SEQUENCE_DATA", "INPUT_SEQUENCE_LABEL", "INPUT_SPARSE_FLOAT_VALUE_DATA",
    "INPUT_SPARSE_NON_VALUE_DATA", "GradCheckReport", "GradientCheckError", "InputDef",
    "TestConfig", "check_grad", "check_layer_grad", "check_network_grad",
    "compare_devices", "check_pylayer_grad",
    "random_argument",
]

_EAGER_CHECKS = ("check_grad", "check_pylayer_grad")


def __getattr__(name: str) -> Any:
    """``check_grad`` and ``check_pylayer_grad`` import the eager front end: load it only when
    one is asked for."""
    if name in _EAGER_CHECKS:
        from sculler.testing import pylayer_check

        return getattr(pylayer_check, name)
    raise AttributeError(f"module 'sculler.testing' has no attribute {name!r}")
