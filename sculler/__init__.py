"""Sculler: layers with explicit forward/backward, first-class gradient checks, PaddlePaddle
v1 configs, the v2 API and eager PyLayers on one set of NumPy kernels."""

__version__ = "0.1.0"
