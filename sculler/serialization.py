"""``save(obj, path)`` / ``load(path)`` for (nested) state dicts, without pickle.

The file is a safetensors file: every array is one entry ("t0", "t1", ...), and the
structure (dicts, lists, tuples, scalars, strings, which leaves were Tensors and their
names) is a JSON document stored in the safetensors metadata under ``"sculler"``. Writes
go through :func:`sculler.fileio.atomic_write` — a crash never leaves a half-written file
under ``path``.

``load`` returns plain Tensors (not Parameters; name and stop_gradient kept) where Tensors
were saved (Paddle 2.x's ``paddle.load`` default),
or plain ndarrays with ``return_numpy=True``; ndarrays saved as ndarrays load as ndarrays.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from sculler.backend import is_gpu_array, to_device, to_numpy
from sculler.eager.tensor import Tensor
from sculler.fileio import (
    CHECKPOINT_FORMAT,
    SAVE_FORMAT,
    FileFormatError,
    atomic_write,
    check_input_path,
    open_safetensors,
)

__all__ = ["save", "load"]



def _encode(obj: Any, arrays: dict, where: str) -> Any:
    if isinstance(obj, Tensor):
        key = f"t{len(arrays)}"
        arrays[key] = np.asarray(to_numpy(obj._array), order="C")
        return {"tensor": key, "name": obj.name, "stop_gradient": obj.stop_gradient}
    if isinstance(obj, np.ndarray) or is_gpu_array(obj):
        key = f"t{len(arrays)}"
        arrays[key] = np.asarray(to_numpy(obj), order="C")
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
    arrays: dict = {}
    structure = _encode(obj, arrays, "obj")
    import json
    meta = {"sculler": json.dumps({"format": SAVE_FORMAT, "structure": structure})}
    from safetensors.numpy import save as _st_save

    blob = _st_save(arrays, metadata=meta)
    atomic_write(path, lambda stream: stream.write(blob), "save", make_dirs=True)


def _decode(node: dict, f: Any, return_numpy: bool) -> Any:
    if "tensor" in node:
        arr = f.get_tensor(node["tensor"])
        if return_numpy:
            return arr
        return Tensor(to_device(arr), stop_gradient=node["stop_gradient"], name=node["name"])
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
    path = check_input_path(path, "load")
    doc, f = open_safetensors(path, "load")
    with f:
        if doc.get("format") != SAVE_FORMAT:
            kind = ("a Sculler trainer checkpoint (read it with SGD.load_checkpoint)"
                    if doc.get("format") == CHECKPOINT_FORMAT else "not written by sculler.save")
            raise FileFormatError(f"load: {path!r} is {kind}")
        try:
            return _decode(doc["structure"], f, return_numpy)
        except (KeyError, TypeError, ValueError) as e:
            raise FileFormatError(f"load: {path!r} has a damaged structure record "
                                  f"({type(e).__name__}: {e})") from e
