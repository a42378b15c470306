"""Sculler: layers with explicit forward/backward, first-class gradient checks, PaddlePaddle
v1 configs, the v2 API and eager PyLayers on one set of NumPy kernels."""

__version__ = "0.1.0"

# every built-in layer type registers here, before anything can look one up (the one place)
import sculler.layers  # noqa: E402,F401,I001

# --- eager mode exports (owned by sculler/eager; keep this block together) ---------------
from sculler import autograd, nn  # noqa: E402,F401,I001
from sculler.eager.api import *  # noqa: E402,F401,F403
from sculler.nn.layer import ParamAttr  # noqa: E402,F401
from sculler.serialization import load, save  # noqa: E402,F401
# --- end of eager mode exports ------------------------------------------------------------

# ---- v2 API (paddle.v2 names) --------------------------------------------------------------
from sculler import (  # noqa: E402, F401
    activation,
    attr,
    data_type,
    evaluator,
    event,
    inference,
    layer,
    networks,
    optimizer,
    parameters,
    pooling,
    reader,
    topology,
    trainer,
)
from sculler.inference import infer  # noqa: E402, F401
from sculler.minibatch import batch  # noqa: E402, F401
from sculler.trainer import train  # noqa: E402, F401
from sculler.v2.runtime import init  # noqa: E402, F401
# ---- end of v2 API -------------------------------------------------------------------------

# imported on first use (paddle.dataset.mnist, paddle.plot.Ploter, sculler.distributed): not
# needed to train locally; Ray itself is imported only when a Cluster is created
_LAZY_SUBMODULES = ("dataset", "plot", "distributed")


def __getattr__(name: str):
    import importlib

    if name in _LAZY_SUBMODULES:
        return importlib.import_module(f"sculler.{name}")
    if name == "dist_train":
        return importlib.import_module("sculler.distributed").dist_train
    raise AttributeError(f"module 'sculler' has no attribute {name!r}")
