"""The public faces of layer types, declared in each layer's own file.

A layer file registers its class (``@register_layer("fc")``) and, beside it, the functions users
call: the v2 function (``paddle.layer.fc``) and, through the same declaration, the v1 helper
(``fc_layer`` in ``trainer_config_helpers``)::

    @layer_function(v1="fc_layer", types=("fc",), prefix="fc_layer")
    def fc(input, size, act=None, name=None, ...) -> LayerOutput: ...

``sculler.layer`` exports every declared v2 function, ``sculler.config.helpers`` wraps every
declared v1 name so that the layers it makes join the config being parsed, and the layer
reference page (``docs/layer_reference.md``) lists them all; none of the three keeps a list of
its own. ``kind`` says how the v1 face wraps the function:

- ``"layer"``: it returns layers that join the config (``fc_layer``);
- ``"group"``: it runs a step function whose layers belong to a recurrent group;
- ``"plain"``: it returns no layer of the config (a projection, ``memory``'s placeholder, a
  ``StaticInput``): the v1 name is the function itself.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sculler.core.suggest import checked_keywords

KINDS = ("layer", "group", "plain")


@dataclass(frozen=True)
class Face:
    """One declared function: its v2 and v1 names, the engine layer types it emits and
    PaddlePaddle's default-name prefix (``__<prefix>_<n>__``)."""

    v2_names: tuple[str, ...]
    v1_names: tuple[str, ...]
    function: Callable[..., Any]
    types: tuple[str, ...]
    prefix: str | None
    kind: str
    module: str


_FACES: list[Face] = []
# the default-name prefixes of the declared functions now running, innermost last
_RUNNING: list[str] = []
# called with what a declared layer/group function returns (the v1 parser adopts it)
_RESULT_HOOKS: list[Callable[[Any], None]] = []


def on_result(hook: Callable[[Any], None]) -> None:
    """Call ``hook(result)`` whenever a declared ``"layer"`` or ``"group"`` function returns;
    the v1 config parser adds the layers to the config being parsed this way, so a function
    declared in a user's own module is a v1 helper as well."""
    if hook not in _RESULT_HOOKS:
        _RESULT_HOOKS.append(hook)


# called with (args, kwargs) before a declared function runs; returns them, maybe changed
_ARGUMENT_HOOKS: list[Callable[[tuple, dict], tuple[tuple, dict]]] = []


def on_arguments(hook: Callable[[tuple, dict], tuple[tuple, dict]]) -> None:
    """Pass the arguments of every declared function through ``hook(args, kwargs)`` first;
    the v1 parser turns the ``LayerConfig`` a raw ``Layer(...)`` returned into the layer it
    declared this way, so helpers take raw layers as inputs."""
    if hook not in _ARGUMENT_HOOKS:
        _ARGUMENT_HOOKS.append(hook)


def announce(result: Any) -> None:
    """Tell the result hooks (the v1 parser) about layers a declared function made; a layer
    finished later (a ``with mixed(...) as m:`` block) announces itself when it is done."""
    for hook in _RESULT_HOOKS:
        hook(result)


def running_prefix() -> str | None:
    """The declared default-name prefix of the innermost declared function now running:
    :func:`~sculler.core.expression.make_layer` names an unnamed layer with it."""
    return _RUNNING[-1] if _RUNNING else None


def layer_function(v1: str | tuple[str, ...] | None = None, *,
                   v2: str | tuple[str, ...] | bool = True,
                   types: tuple[str, ...] = (), prefix: str | None = None,
                   kind: str = "layer") -> Callable[[Callable], Callable]:
    """Declare ``function`` as a public face.

    Args:
        v1: the v1 helper name(s) (``"fc_layer"``); None when v1 has no such helper.
        v2: the v2 name(s): True (the function's own name), a string or tuple of names
            (aliases), or False (v1 only).
        types: the engine layer types the function emits (for the reference page).
        prefix: PaddlePaddle's default-name prefix of the layer it makes; default the first
            v1 name (Paddle's own rule: ``fc_layer`` names ``__fc_layer_0__``), else the v2
            name. While the function runs, ``make_layer`` names unnamed layers with it.
        kind: how the v1 face wraps it (:data:`KINDS`).
    """
    if kind not in KINDS:
        raise ValueError(f"layer_function: kind must be one of {KINDS}, got {kind!r}")
    v1_names = (v1,) if isinstance(v1, str) else tuple(v1 or ())

    def declare(function: Callable) -> Callable:
        v2_names = ((function.__name__,) if v2 is True else (v2,) if isinstance(v2, str)
                    else tuple(v2 or ()))
        name_prefix = prefix or (v1_names + v2_names)[0]
        checked = checked_keywords(function, "/".join(dict.fromkeys(v1_names + v2_names)))

        @functools.wraps(function)
        def named(*args: Any, **kwargs: Any) -> Any:
            for hook in _ARGUMENT_HOOKS:
                args, kwargs = hook(args, kwargs)
            _RUNNING.append(name_prefix)
            try:
                result = checked(*args, **kwargs)
            finally:
                _RUNNING.pop()
            if kind != "plain":
                announce(result)
            return result

        named.checks_keywords = True  # type: ignore[attr-defined]
        _FACES.append(Face(v2_names, v1_names, named, tuple(types), name_prefix, kind,
                           function.__module__))
        return named

    return declare


_ONNX: dict[str, Callable[..., str]] = {}


def onnx_converter(*types: str) -> Callable[[Callable], Callable]:
    """Declare ``converter(graph, layer_config, input_names, context) -> output name`` as the
    ONNX conversion of the engine ``types`` (test mode, before activation and dropout;
    ``sculler.onnx`` applies those). It is written beside the layer and uses only the graph
    and context objects it is given (``sculler.onnx.convert.Context``), so the layer file
    never imports the exporter."""

    def declare(converter: Callable[..., str]) -> Callable[..., str]:
        for type_name in types:
            _ONNX[type_name] = converter
        return converter

    return declare


def onnx_converters() -> dict[str, Callable[..., str]]:
    """Engine type -> declared ONNX converter (import ``sculler.layers`` first)."""
    return dict(_ONNX)


def faces() -> list[Face]:
    """Every declared face, in declaration order (import ``sculler.layers`` first)."""
    return list(_FACES)


def v2_functions() -> dict[str, Callable[..., Any]]:
    """v2 name -> function, for ``sculler.layer``; a name declared twice is an error."""
    names: dict[str, Callable[..., Any]] = {}
    for face in _FACES:
        for name in face.v2_names:
            if name in names and names[name] is not face.function:
                raise RuntimeError(f"v2 layer function {name!r} is declared twice "
                                   f"({names[name].__module__} and {face.module})")
            names[name] = face.function
    return names
