"""Sculler: layers with explicit forward/backward, first-class gradient checks, PaddlePaddle
v1 configs, the v2 API and eager PyLayers on one set of NumPy kernels."""

__version__ = "0.1.0"

# every built-in layer type registers here, before anything can look one up (the one place)
import sculler.layers  # noqa: E402,F401,I001

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
    op,
    optimizer,
    parameters,
    pooling,
    reader,
    topology,
    trainer,
)
from sculler.inference import infer  # noqa: E402, F401
from sculler.minibatch import array_batches, batch  # noqa: E402, F401
from sculler.trainer import train  # noqa: E402, F401
from sculler.v2.runtime import init  # noqa: E402, F401
# ---- end of v2 API -------------------------------------------------------------------------

# imported on first use (paddle.dataset.mnist, paddle.plot.Ploter, sculler.distributed): not
# needed to train locally; Ray itself is imported only when a Cluster is created
_LAZY_SUBMODULES = ("dataset", "plot", "distributed", "image")

# --- eager mode exports (owned by sculler/eager): loaded on first use (paddle.to_tensor,
# paddle.nn, paddle.autograd.PyLayer, ...), since a v2 program never needs the eager ops ----
_EAGER_SUBMODULES = ("autograd", "nn")
_EAGER_EXTRAS = {"ParamAttr": "sculler.nn.layer", "load": "sculler.serialization",
                 "save": "sculler.serialization"}


def _eager_exports() -> dict:
    """Every eager top-level name (``sculler.eager.api.__all__``, ``autograd``, ``nn``,
    ``ParamAttr``, ``load``, ``save``) by name, importing eager mode."""
    import importlib

    api = importlib.import_module("sculler.eager.api")
    names = {n: getattr(api, n) for n in api.__all__}
    names.update({n: importlib.import_module(f"sculler.{n}") for n in _EAGER_SUBMODULES})
    names.update({n: getattr(importlib.import_module(m), n) for n, m in _EAGER_EXTRAS.items()})
    return names


def __getattr__(name: str):
    import importlib

    if name in _LAZY_SUBMODULES:
        return importlib.import_module(f"sculler.{name}")
    if name == "dist_train":
        return importlib.import_module("sculler.distributed").dist_train
    if not name.startswith("_"):
        eager = _eager_exports()
        if name in eager:
            for key, value in eager.items():  # later lookups are plain attribute reads;
                globals().setdefault(key, value)  # a v2 name of the same spelling wins
            return globals()[name]
    raise AttributeError(f"module 'sculler' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY_SUBMODULES) | set(_EAGER_SUBMODULES)
                  | set(_EAGER_EXTRAS))
