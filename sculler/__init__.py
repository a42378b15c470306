"""Sculler: layers with explicit forward/backward, first-class gradient checks, PaddlePaddle
v1 configs, the v2 API and eager PyLayers on one set of NumPy kernels."""

__version__ = "0.1.0"

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
    dataset,
    evaluator,
    event,
    inference,
    layer,
    networks,
    optimizer,
    parameters,
    plot,
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

# ---- distributed training (sculler/distributed; Ray is imported only when used) ----------
from sculler import distributed  # noqa: E402, F401
from sculler.distributed import dist_train  # noqa: E402, F401
