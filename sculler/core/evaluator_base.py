"""The evaluator base class and the type registry (no evaluator families: those import this
module, and :mod:`sculler.core.evaluator` imports them, so imports run one way)."""

from __future__ import annotations

from typing import Any

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
    # True when the whole state is ``total`` and ``count``, each a sum over batches: the
    # trainer then evaluates a batch once and adds its sums to the pass's evaluator. A
    # subclass that keeps more state must set it back to False.
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

    def device_sums(self, layers: dict) -> tuple[Any, float] | None:
        """This batch's additions to ``total`` (a 0-d float64 device array) and ``count`` (a
        number) where an additive evaluator counts on the GPU, so that the trainer reads the
        totals back with the cost in one transfer a batch; None where :meth:`eval_batch` must
        run (the default, and always on the CPU)."""
        return None

    def value(self) -> float:
        return self.total / self.count if self.count else 0.0

    def values(self) -> dict[str, float]:
        """Further statistics (e.g. precision, recall); none by default."""
        return {}
