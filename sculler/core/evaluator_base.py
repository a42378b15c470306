"""The evaluator base class and the type registry (no evaluator families: those import this
module, and :mod:`sculler.core.evaluator` imports them, so imports run one way)."""

from __future__ import annotations

from typing import Any

import numpy as np

from sculler.core.model_config import EvaluatorConfig

_EVALUATORS: dict[str, type[Evaluator]] = {}


def register_evaluator(type_name: str):
    """Class decorator registering an evaluator under ``type_name``."""

    def deco(cls: type[Evaluator]) -> type[Evaluator]:
        _EVALUATORS[type_name] = cls
        cls.type_name = type_name
        return cls

    return deco


class Evaluator:
    """A metric over the batches of a pass: ``start``, ``eval_batch`` per batch, ``value``."""

    type_name = ""
    reports_value = True
    # True when a batch's state can be added to another's (:meth:`merge`): the trainer then
    # evaluates a batch once and merges it into the pass's evaluator. By default the state is
    # ``total`` and ``count``; a subclass that keeps more overrides ``merge`` too.
    additive = False

    def __init__(self, config: EvaluatorConfig):
        self.config = config
        self.name = config.name
        self.start()

    def start(self) -> None:
        self.total = 0.0
        self.count = 0

    def eval_batch(self, layers: dict) -> None:
        raise NotImplementedError

    def device_sums(self, layers: dict) -> tuple[Any, Any] | None:
        """Where this evaluator counts on the GPU: this batch's sums as one float64 device
        array (any shape) and a host value that goes with them, which :meth:`add_sums` takes
        once the trainer has read the array back together with the cost, in one transfer a
        batch. None where :meth:`eval_batch` must run instead (the default, and always on the
        CPU). The trainer asks this of ``additive`` evaluators only."""
        return None

    def add_sums(self, sums: np.ndarray, extra: Any) -> None:
        """Add a batch's :meth:`device_sums`, read back (``sums`` a host array of their
        shape), to the state. By default ``sums`` is the addition to ``total`` and ``extra``
        the one to ``count``."""
        self.total += float(sums)
        self.count += extra

    def merge(self, other: Evaluator) -> None:
        """Add the state of ``other``, an evaluator of this type over other batches, to this
        one's (how a batch evaluated once joins its pass)."""
        self.total += other.total
        self.count += other.count

    def value(self) -> float:
        return self.total / self.count if self.count else 0.0

    def values(self) -> dict[str, float]:
        """Further statistics (e.g. precision, recall); none by default."""
        return {}
