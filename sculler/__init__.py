"""Sculler: layers with explicit forward/backward, first-class gradient checks, PaddlePaddle
v1 configs, the v2 API and eager PyLayers on one set of NumPy kernels."""

__version__ = "0.1.0"

# --- eager mode exports (owned by sculler/eager; keep this block together) ---------------
from sculler import autograd, nn, optimizer  # noqa: E402,F401,I001
from sculler.eager.api import *  # noqa: E402,F401,F403
from sculler.nn.layer import ParamAttr  # noqa: E402,F401
from sculler.serialization import load, save  # noqa: E402,F401
# --- end of eager mode exports ------------------------------------------------------------
