"""Layers of the v2 API (``paddle.v2.layer``): functions that build a layer expression.

Each function returns a :class:`LayerOutput` naming its parents; nothing runs until a
:class:`~sculler.topology.Topology` turns the expression into a ModelConfig. Unnamed layers get
PaddlePaddle's names (the first unnamed fc is ``__fc_layer_0__``, its parameters
``___fc_layer_0__.w0`` and ``___fc_layer_0__.wbias``), so tars saved by Paddle load by name.

Every function is declared in its layer's own file (``@layer_function`` in
``sculler/layers/fc.py`` and the others; see :mod:`sculler.core.faces`); this module collects
them, so it has no list of its own to keep up to date. Recurrent groups and their step layers
come from :mod:`sculler.v2.group_layers`.

Example:
    >>> import sculler as paddle
    >>> x = paddle.layer.data(name="x", type=paddle.data_type.dense_vector(13))
    >>> y = paddle.layer.fc(input=x, size=1, act=paddle.activation.Linear())
    >>> y.size
    1
"""

from __future__ import annotations

from typing import Any

import sculler.layers  # noqa: F401 - every layer file declares its functions on import
from sculler.core.expression import (  # noqa: F401 - re-exported
    LayerOutput,
    Projection,
    as_inputs,
    layer_support,
    make_layer,
    reset_names,
)
from sculler.core.faces import v2_functions
from sculler.layers.mixed import MixedLayerType  # noqa: F401 - re-exported
from sculler.layers.sequence import AggregateLevel, ExpandLevel  # noqa: F401 - re-exported
from sculler.v2 import group_layers as _groups


def py_layer(py_layer: type, input: Any, size: int, name: str | None = None,  # noqa: A002
             act: Any = None, layer_attr: Any = None, **kwargs: Any) -> LayerOutput:
    """Use an eager ``autograd.PyLayer`` (defined at module level) as a layer:
    ``y = act(MyPyLayer.apply(x_1, ..., x_n, **kwargs))`` with output width ``size``; its own
    ``backward`` gives the input gradients. ``kwargs`` must be JSON values."""
    from sculler.eager.layer_bridge import py_layer_path

    return make_layer("py_layer", as_inputs(input, "py_layer"), name=name, size=size, act=act,
                      layer_attr=layer_attr, bias_attr=False,
                      attrs={"py_layer": py_layer_path(py_layer), "kwargs": dict(kwargs)})


globals().update(v2_functions())
globals().update({name: getattr(_groups, name) for name in _groups.__all__})

__all__ = sorted(
    ["LayerOutput", "make_layer", "reset_names", "py_layer", "Projection", "MixedLayerType",
     "layer_support",
     "AggregateLevel", "ExpandLevel", *_groups.__all__, *v2_functions()])
