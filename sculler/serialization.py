"""``save(obj, path)`` / ``load(path)`` for (nested) state dicts, without pickle.

The file is a safetensors file: every array is one entry ("t0", "t1", ...), and the
structure (dicts, lists, tuples, scalars, strings, which leaves were Tensors and their
names) is a JSON document stored in the safetensors metadata under ``"sculler"``. Writes
go to a temporary file in the target directory, then ``os.replace`` — a crash never leaves
a half-written file under ``path``.

``load`` returns plain Tensors (not Parameters; name and stop_gradient kept) where Tensors
were saved (Paddle 2.x's ``paddle.load`` default),
or plain ndarrays with ``return_numpy=True``; ndarrays saved as ndarrays load as ndarrays.
"""

from __future__ import annotations

import json
import os
import tempfile
from typing import Any

import numpy as np

from sculler.backend import to_numpy
from sculler.eager.tensor import Tensor

__all__ = ["save", "load"]

_FORMAT = "sculler.save/1"


def _encode(obj: Any, arrays: dict, where: str) -> Any:
    if isinstance(obj, Tensor):
        key = f"t{len(arrays)}"
        arrays[key] = np.asarray(to_numpy(obj._array), order="C")
        return {"tensor": key, "name": obj.name, "stop_gradient": obj.stop_gradient}
    if isinstance(obj, np.ndarray):
        key = f"t{len(arrays)}"
        arrays[key] = np.asarray(obj, order="C")
        return {"ndarray": key}
    if isinstance(obj, np.generic):
        obj = obj.item()
    if obj is None or isinstance(obj, bool | int | float | str):
        return {"value": obj}
    if isinstance(obj, dict):
        items = []
        for k, v in obj.items():
            if not isinstance(k, str | int):
                raise TypeError(f"save: dict key {k!r} at {where} is a {type(k).__name__}; "
                                "only str and int keys can be saved")
            items.append([k, _encode(v, arrays, f"{where}[{k!r}]")])
        return {"dict": items}
    if isinstance(obj, list | tuple):
        kind = "list" if isinstance(obj, list) else "tuple"
        return {kind: [_encode(v, arrays, f"{where}[{i}]") for i, v in enumerate(obj)]}
    raise TypeError(f"save: {type(obj).__name__} at {where} cannot be saved; supported are "
                    "Tensors, ndarrays, numbers, strings, None and dicts/lists/tuples of them "
                    "(nothing is pickled)")


def save(obj: Any, path: str | os.PathLike, protocol: int = 4, **configs: Any) -> None:
    """Write ``obj`` (e.g. ``layer.state_dict()``) to ``path`` atomically."""
    path = os.fspath(path)
    if os.path.isdir(path):
        raise ValueError(f"save: {path!r} is a directory; pass a file path such as "
                         "'model.pdparams'")
    arrays: dict = {}
    structure = _encode(obj, arrays, "obj")
    meta = {"sculler": json.dumps({"format": _FORMAT, "structure": structure})}
    from safetensors.numpy import save as _st_save

    blob = _st_save(arrays, metadata=meta)
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".tmp-", suffix=".part")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(blob)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _decode(node: dict, f: Any, return_numpy: bool) -> Any:
    if "tensor" in node:
        arr = f.get_tensor(node["tensor"])
        if return_numpy:
            return arr
        t = Tensor(arr, stop_gradient=node["stop_gradient"], name=node["name"])
        return t
    if "ndarray" in node:
        return f.get_tensor(node["ndarray"])
    if "value" in node:
        return node["value"]
    if "dict" in node:
        return {k: _decode(v, f, return_numpy) for k, v in node["dict"]}
    if "list" in node:
        return [_decode(v, f, return_numpy) for v in node["list"]]
    return tuple(_decode(v, f, return_numpy) for v in node["tuple"])


def load(path: str | os.PathLike, return_numpy: bool = False, **configs: Any) -> Any:
    """Read what :func:`save` wrote; Tensors come back as Tensors unless ``return_numpy``."""
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise ValueError(f"load: no file at {path!r}")
    try:
        from safetensors import safe_open

        with safe_open(path, framework="numpy") as f:
            meta = f.metadata() or {}
            if "sculler" not in meta:
                raise ValueError(f"load: {path!r} is a safetensors file without sculler's "
                                 "structure record; it was not written by sculler.save")
            doc = json.loads(meta["sculler"])
            return _decode(doc["structure"], f, return_numpy)
    except (OSError, json.JSONDecodeError) as e:
        raise ValueError(f"load: {path!r} is not a file written by sculler.save ({e})") from e
    except Exception as e:  # safetensors raises its own error type on a bad header
        if type(e).__name__ == "SafetensorError":
            raise ValueError(f"load: {path!r} is not a safetensors file written by "
                             f"sculler.save ({e})") from e
        raise
