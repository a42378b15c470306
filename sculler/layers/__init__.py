"""Built-in layers, one family per module; importing this package registers them all, and
:func:`get_layer_class` (the one lookup by type name) lives here so that a lookup always
sees every built-in type. Imports run one way: this package -> families -> core.layer."""

from __future__ import annotations

import difflib
import importlib

from sculler.core.layer import _REGISTRY, Layer
from sculler.layers import (  # noqa: F401
    concat2,
    conv,
    cost,
    cost_extra,
    cost_sampled,
    crf,
    ctc,
    data,
    dense,
    dense_pair,
    dense_select,
    embedding,
    fc,
    image,
    merge,
    mixed,
    norm,
    pool,
    recurrent,
    sequence,
    sequence_select,
    sequence_shape,
    similarity,
)

# types whose class lives above the engine (a front end): imported by name on first lookup
_DEFERRED = {"py_layer": "sculler.eager.layer_bridge"}


def get_layer_class(type_name: str) -> type[Layer]:
    """The class registered as ``type_name``; an unknown name lists the close matches."""
    cls = _REGISTRY.get(type_name)
    if cls is None and type_name in _DEFERRED:
        importlib.import_module(_DEFERRED[type_name])
        cls = _REGISTRY.get(type_name)
    if cls is None:
        close = difflib.get_close_matches(type_name, list(_REGISTRY), n=5, cutoff=0.5)
        raise ValueError(
            f"unknown layer type {type_name!r}; close matches: {close or 'none'}. "
            "Register your own with @register_layer(name)."
        )
    return cls


def layer_types() -> list[str]:
    """Every registered layer type name, sorted."""
    return sorted(_REGISTRY)
