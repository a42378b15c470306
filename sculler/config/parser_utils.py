"""The rest of PaddlePaddle's v1 configuration surface: ``config_parser_utils``
(``parse_network_config`` & co.), ``default_decorators`` (``wrap_name_default`` & co., for
writing helpers in PaddlePaddle's style) and the ``config_parser`` functions configs call
directly (``model_type``, ``cluster_config``).

Example:
    >>> from sculler.config.parser_utils import parse_network_config
    >>> from sculler.config.helpers import data_layer, fc_layer, outputs
    >>> def network():
    ...     outputs(fc_layer(input=data_layer(name="x", size=3), size=2))
    >>> [layer.name for layer in parse_network_config(network).layers]
    ['x', '__fc_layer_0__']
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any

from sculler import activation as _act
from sculler.attr import ParameterAttribute
from sculler.config.config_parser import TrainerConfig, _context, config_scope, parse_config
from sculler.core.expression import auto_name, reset_names
from sculler.core.model_config import ModelConfig

__all__ = ["parse_trainer_config", "parse_network_config", "parse_optimizer_config",
           "reset_parser", "wrap_name_default", "wrap_param_attr_default",
           "wrap_bias_attr_default", "wrap_act_default", "wrap_param_default", "model_type",
           "cluster_config", "parse_config"]


def parse_trainer_config(trainer_conf: Any, config_arg_str: str = "") -> TrainerConfig:
    """The model and settings of a config file or a function declaring one."""
    return parse_config(trainer_conf, config_arg_str)


def parse_network_config(network_conf: Any, config_arg_str: str = "") -> ModelConfig:
    """The ModelConfig of a config file or a function declaring one."""
    return parse_config(network_conf, config_arg_str).model_config


def parse_optimizer_config(optimizer_conf: Callable[[], Any],
                           config_arg_str: str = "") -> dict[str, Any]:
    """The training settings a function declares with ``settings(...)``, as a dict (Sculler
    has no OptimizationConfig message; ``sculler.cli.make_optimizer`` turns it into one)."""
    with config_scope() as ctx:
        optimizer_conf()
        return dict(ctx.settings)


def reset_parser() -> None:
    """Restart the automatic layer names, as a new parse does."""
    reset_names()


def model_type(name: str) -> None:
    """Set the model's type (``"nn"``; a recurrent group makes it ``"recurrent_nn"``)."""
    if name not in ("nn", "recurrent_nn", "recursive_nn"):
        raise ValueError(f"model_type must be 'nn', 'recurrent_nn' or 'recursive_nn', got "
                         f"{name!r}")
    _context().model_type = name


def cluster_config(**args: Any) -> None:
    """Accepted and ignored, as in PaddlePaddle (cluster settings come from the launcher)."""


def _fill(func: Callable, names: list[str], make: Callable[[], Any],
          unset: Callable[[dict, str], bool]) -> Callable:
    signature = inspect.signature(func)

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        bound = signature.bind_partial(*args, **kwargs).arguments
        for name in names:
            if unset(bound, name):
                kwargs[name] = make()
                for i, param in enumerate(signature.parameters):
                    if param == name and i < len(args):
                        args = args[:i] + (kwargs.pop(name),) + args[i + 1:]
        return func(*args, **kwargs)

    return wrapper


def _missing(bound: dict, name: str) -> bool:
    return bound.get(name) is None


def wrap_param_default(param_names: list[str] | None = None,
                       default_factory: Callable[[Callable], Any] | None = None,
                       not_set_callback: Callable[[dict, str], bool] = _missing) -> Callable:
    """Fill each of ``param_names`` that the caller left unset with
    ``default_factory(func)``."""
    if not param_names or default_factory is None:
        raise ValueError("wrap_param_default needs param_names and default_factory")

    def deco(func: Callable) -> Callable:
        return _fill(func, list(param_names), lambda: default_factory(func), not_set_callback)

    return deco


def wrap_name_default(name_prefix: str | None = None, name_param: str = "name") -> Callable:
    """Default ``name`` to ``__<prefix>_<n>__`` (prefix: the function's name)."""

    def deco(func: Callable) -> Callable:
        prefix = name_prefix or func.__name__
        return _fill(func, [name_param], lambda: auto_name(prefix), _missing)

    return deco


def wrap_param_attr_default(param_names: list[str] | None = None,
                            default_factory: Callable[[], Any] | None = None) -> Callable:
    """Default ``param_attr`` (or ``param_names``) to a fresh ``ParamAttr()``."""
    make = default_factory or ParameterAttribute

    def deco(func: Callable) -> Callable:
        return _fill(func, list(param_names or ["param_attr"]), make, _missing)

    return deco


def wrap_bias_attr_default(param_names: list[str] | None = None,
                           default_factory: Callable[[], Any] | None = None,
                           has_bias: bool = True) -> Callable:
    """Default ``bias_attr`` to a zero-initialised ``ParamAttr``; with ``has_bias=False``
    only an explicit ``True`` becomes that default (None stays: no bias)."""
    def make() -> Any:
        if default_factory is not None:
            return default_factory()
        return ParameterAttribute(initial_std=0.0, initial_mean=0.0)

    def unset(bound: dict, name: str) -> bool:
        value = bound.get(name)
        return value is True or (has_bias and value is None)

    def deco(func: Callable) -> Callable:
        return _fill(func, list(param_names or ["bias_attr"]), make, unset)

    return deco


def wrap_act_default(param_names: list[str] | None = None, act: Any = None) -> Callable:
    """Default ``act`` (or ``param_names``) to ``act`` (TanhActivation())."""
    default = act if act is not None else _act.Tanh()

    def deco(func: Callable) -> Callable:
        return _fill(func, list(param_names or ["act"]), lambda: default, _missing)

    return deco
