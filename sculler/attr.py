"""Parameter and layer attributes of the v2 API (``paddle.v2.attr``).

``Param`` turns v2 keyword names into :class:`~sculler.core.model_config.ParameterConfig`
fields (``l2_rate`` is ``decay_rate``, ``l1_rate`` is ``decay_rate_l1``); ``Extra`` carries
per-layer settings (``drop_rate``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sculler.validate import boolean, number, probability

__all__ = ["Param", "ParamAttr", "ParameterAttribute", "Extra", "ExtraAttr",
           "ExtraLayerAttribute", "Hook", "HookAttr"]


class ParameterAttribute:
    """Settings of one parameter.

    ``initial_std``/``initial_mean`` draw N(mean, std); ``initial_min``/``initial_max`` draw
    U(min, max); without either Paddle's smart default std ``1/sqrt(fan_in)`` applies.
    ``initializer`` is a callable ``name -> ndarray`` applied when parameters are created.
    """

    def __init__(self, name: str | None = None, is_static: bool = False,
                 initial_std: float | None = None, initial_mean: float | None = None,
                 initial_max: float | None = None, initial_min: float | None = None,
                 l1_rate: float | None = None, l2_rate: float | None = None,
                 learning_rate: float | None = None, momentum: float | None = None,
                 gradient_clipping_threshold: float | None = None, sparse_update: bool = False,
                 update_hooks: Any = None, initializer: Callable[[str], Any] | None = None):
        if name is not None and (not isinstance(name, str) or not name):
            raise TypeError(f"Param name must be a non-empty str, got {name!r}")
        if update_hooks is not None:
            raise NotImplementedError("Param(update_hooks=...) (pruning hooks) is not supported")
        if initializer is not None and not callable(initializer):
            raise TypeError(f"initializer must be a callable name -> ndarray, got {initializer!r}")
        if (initial_min is None) != (initial_max is None):
            raise ValueError("give both initial_min and initial_max (uniform init) or neither, "
                             f"got initial_min={initial_min!r}, initial_max={initial_max!r}")
        self.name = name
        self.initializer = initializer
        a: dict[str, Any] = {}
        if boolean(is_static, "Param(is_static=...)"):
            a["is_static"] = True
        if boolean(sparse_update, "Param(sparse_update=...)"):
            a["sparse_update"] = True
        if initial_min is not None:
            low = number(initial_min, "Param(initial_min=...)")
            high = number(initial_max, "Param(initial_max=...)")
            if low > high:
                raise ValueError(f"initial_min {initial_min} > initial_max {initial_max}")
            a.update(initial_strategy="uniform", initial_min=low, initial_max=high)
        if initial_std is not None:
            a["initial_std"] = number(initial_std, "Param(initial_std=...)", low=0.0)
        if initial_mean is not None:
            a["initial_mean"] = number(initial_mean, "Param(initial_mean=...)")
        for key, val, arg in (("decay_rate_l1", l1_rate, "l1_rate"),
                              ("decay_rate", l2_rate, "l2_rate"),
                              ("learning_rate", learning_rate, "learning_rate"),
                              ("momentum", momentum, "momentum"),
                              ("gradient_clipping_threshold", gradient_clipping_threshold,
                               "gradient_clipping_threshold")):
            if val is not None:
                a[key] = number(val, f"Param({arg}=...)", low=0.0)
        self.attrs = a

    def to_weight_attrs(self) -> dict[str, Any]:
        """ModelBuilder weight attributes (ParameterConfig fields + ``name``)."""
        d = dict(self.attrs)
        if self.name is not None:
            d["name"] = self.name
        return d

    def __repr__(self) -> str:
        return f"Param(name={self.name!r}, {self.attrs})"


class ExtraLayerAttribute:
    """Per-layer extras: ``drop_rate`` (dropout on the output, Paddle's non-inverted form) and
    ``error_clipping_threshold`` t (the gradient reaching the layer's output is clipped
    elementwise to [-t, t] before the activation's backward)."""

    def __init__(self, error_clipping_threshold: float | None = None,
                 drop_rate: float | None = None, device: int | None = None):
        if error_clipping_threshold is not None and not error_clipping_threshold > 0:
            raise ValueError(f"error_clipping_threshold must be > 0, got "
                             f"{error_clipping_threshold!r}")
        if device is not None and device != -1:
            raise NotImplementedError(f"Extra(device={device!r}): per-layer device placement is "
                                      "not supported; use init(use_gpu=...)")
        self.drop_rate = 0.0 if drop_rate is None else probability(drop_rate,
                                                                  "Extra(drop_rate=...)")
        self.error_clipping_threshold = (None if error_clipping_threshold is None else number(
            error_clipping_threshold, "Extra(error_clipping_threshold=...)", low=0.0))
        self.device = device


class HookAttribute:
    def __init__(self, type: str, sparsity_ratio: float | None = None):  # noqa: A002
        raise NotImplementedError("parameter update hooks (pruning) are not supported")


Param = ParamAttr = ParameterAttribute
Extra = ExtraAttr = ExtraLayerAttribute
Hook = HookAttr = HookAttribute
