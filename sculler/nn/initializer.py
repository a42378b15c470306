"""Parameter initializers: callables ``init(shape, dtype) -> ndarray`` from ``seed``'s RNG."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from sculler.backend import xp
from sculler.eager.creation import get_rng


def _fans(shape: tuple) -> tuple[int, int]:
    """fan_in, fan_out; for [in, out] weights (Paddle's layout) and conv kernels."""
    if len(shape) < 2:
        return int(shape[0]) if shape else 1, int(shape[0]) if shape else 1
    if len(shape) == 2:
        return int(shape[0]), int(shape[1])
    receptive = int(np.prod(shape[2:]))
    return int(shape[1]) * receptive, int(shape[0]) * receptive


class Initializer:
    def __call__(self, shape: tuple, dtype: Any) -> Any:
        return xp().asarray(self.sample(tuple(shape)).astype(dtype))

    def sample(self, shape: tuple) -> np.ndarray:
        raise NotImplementedError


class Constant(Initializer):
    """Every element equals ``value``."""

    def __init__(self, value: float = 0.0) -> None:
        self.value = value

    def sample(self, shape: tuple) -> np.ndarray:
        return np.full(shape, self.value)


class Normal(Initializer):
    """Gaussian N(mean, std^2)."""

    def __init__(self, mean: float = 0.0, std: float = 1.0) -> None:
        self.mean, self.std = mean, std

    def sample(self, shape: tuple) -> np.ndarray:
        return get_rng().normal(self.mean, self.std, shape)


class Uniform(Initializer):
    """Uniform on [low, high)."""

    def __init__(self, low: float = -1.0, high: float = 1.0) -> None:
        self.low, self.high = low, high

    def sample(self, shape: tuple) -> np.ndarray:
        return get_rng().uniform(self.low, self.high, shape)


class XavierUniform(Initializer):
    """Uniform on +-sqrt(6 / (fan_in + fan_out)) (Glorot); Paddle's default for weights."""

    def sample(self, shape: tuple) -> np.ndarray:
        fan_in, fan_out = _fans(shape)
        limit = math.sqrt(6.0 / (fan_in + fan_out))
        return get_rng().uniform(-limit, limit, shape)


class XavierNormal(Initializer):
    """N(0, 2 / (fan_in + fan_out))."""

    def sample(self, shape: tuple) -> np.ndarray:
        fan_in, fan_out = _fans(shape)
        return get_rng().normal(0.0, math.sqrt(2.0 / (fan_in + fan_out)), shape)


class KaimingNormal(Initializer):
    """N(0, 2 / fan_in), for relu networks."""

    def sample(self, shape: tuple) -> np.ndarray:
        return get_rng().normal(0.0, math.sqrt(2.0 / _fans(shape)[0]), shape)
