"""Whether the compiled (numba) CPU kernels can run: numba is the optional extra ``fast``
(``pip install sculler[fast]``), imported at the first kernel call, not with sculler.
``SCULLER_JIT=0`` in the environment turns every compiled kernel off (the NumPy code runs)."""

from __future__ import annotations

import os

_state: dict[str, bool] = {}


def numba_available() -> bool:
    """numba is importable and ``SCULLER_JIT`` is not ``0``."""
    if os.environ.get("SCULLER_JIT", "1") == "0":
        return False
    if "numba" not in _state:
        try:
            import numba  # noqa: F401, PLC0415
        except ImportError:
            _state["numba"] = False
        else:
            _state["numba"] = True
    return _state["numba"]
