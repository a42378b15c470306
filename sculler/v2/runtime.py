"""Process-wide v2 settings made by :func:`sculler.init` (device, seed)."""

from __future__ import annotations

import random
from typing import Any

import numpy as np

from sculler.validate import integer

SETTINGS: dict[str, Any] = {"use_gpu": False, "trainer_count": 1, "seed": None}


def init(use_gpu: bool = False, trainer_count: int = 1, seed: int | None = None,
         **kwargs: Any) -> None:
    """Set up the v2 runtime (``paddle.init``).

    ``seed`` makes parameter initialisation (and shuffles drawn from NumPy's and Python's
    global generators) reproducible. ``use_gpu=True`` needs CuPy and a
    CUDA device, else it raises a RuntimeError (never a silent CPU run). Other PaddlePaddle flags
    (``log_period``, ``port``, ...) are accepted and recorded; they do not change behaviour.
    """
    if isinstance(trainer_count, bool) or not isinstance(trainer_count, int) or trainer_count < 1:
        raise ValueError(f"trainer_count must be a positive int, got {trainer_count!r}")
    from sculler import backend

    if use_gpu:
        backend.require_gpu("init(use_gpu=True)")
    backend.use_gpu(bool(use_gpu))
    if seed is not None:
        seed = integer(seed, "init(seed=...)", minimum=0)
    SETTINGS.update(use_gpu=bool(use_gpu), trainer_count=trainer_count, seed=seed, **kwargs)
    if seed is not None:
        np.random.seed(seed)
        random.seed(seed)


def parameter_seed() -> int | None:
    return SETTINGS.get("seed")
