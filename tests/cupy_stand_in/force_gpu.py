"""pytest plugin (``-p force_gpu``, with this folder on the path): every ``paddle.init`` runs
with ``use_gpu=True``, here the CuPy stand-in, so CPU tests of whole programs walk the GPU
code paths; after each test the backend goes back to the CPU, so a test that never calls
``init`` runs on the CPU as written."""

import sculler
from sculler import backend

_init = sculler.init


def _init_on_the_gpu(*args, **kwargs):
    kwargs["use_gpu"] = True
    return _init(*args, **kwargs)


sculler.init = _init_on_the_gpu


def pytest_runtest_teardown(item):
    backend.use_gpu(False)
