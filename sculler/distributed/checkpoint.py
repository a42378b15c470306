"""Atomic, durable checkpoint files: safetensors arrays plus JSON metadata, no pickle.

A write goes to a temp file in the same directory, is flushed and fsynced, renamed over the
target (``os.replace`` is atomic) and the directory is fsynced, so a crash at any point leaves
either the previous checkpoint or the new one, never a torn file.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from sculler.backend import to_numpy
from sculler.fileio import atomic_write


def write_atomic(path: str, payload: bytes) -> None:
    """Write ``payload`` to ``path`` atomically and durably (:func:`sculler.fileio.atomic_write`,
    creating the checkpoint directory if needed)."""
    atomic_write(path, lambda fh: fh.write(payload), what="checkpoint", make_dirs=True)


def save_arrays(path: str, arrays: dict[str, np.ndarray], meta: dict[str, Any]) -> None:
    """Arrays and a JSON-able ``meta`` dict into one safetensors file, atomically."""
    from safetensors.numpy import save

    tensors = {k: np.asarray(to_numpy(v), order="C") for k, v in arrays.items()}
    write_atomic(path, save(tensors, metadata={"sculler_dist": json.dumps(meta)}))


def load_arrays(path: str) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """What :func:`save_arrays` wrote: ``(arrays, meta)`` (arrays are writable copies)."""
    from safetensors import safe_open

    with safe_open(path, framework="numpy") as f:
        raw = (f.metadata() or {}).get("sculler_dist")
        if raw is None:
            raise ValueError(f"{path!r} is not a Sculler distributed checkpoint")
        arrays = {k: np.array(f.get_tensor(k)) for k in f.keys()}
    return arrays, json.loads(raw)


def save_json(path: str, obj: dict[str, Any]) -> None:
    write_atomic(path, json.dumps(obj, sort_keys=True).encode("utf-8"))


def load_json(path: str) -> dict[str, Any]:
    with open(path, encoding="utf-8") as fh:
        return json.load(fh)
