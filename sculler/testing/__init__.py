"""Gradient checks for layers (``check_layer_grad``) and PyLayers (``check_pylayer_grad``)."""

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
)
from sculler.testing.network_check import check_network_grad, random_argument

__all__ = [
    "INPUT_DATA", "INPUT_DATA_TARGET", "INPUT_HASSUB_SEQUENCE_DATA", "INPUT_LABEL",
    "INPUT_SEQUENCE_DATA", "INPUT_SEQUENCE_LABEL", "INPUT_SPARSE_FLOAT_VALUE_DATA",
    "INPUT_SPARSE_NON_VALUE_DATA", "GradCheckReport", "GradientCheckError", "InputDef",
    "TestConfig", "check_layer_grad", "check_network_grad", "random_argument",
]
