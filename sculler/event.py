"""Events the v2 trainer sends to ``event_handler`` (``paddle.v2.event``).

Plain records: the trainer builds them, handlers read their attributes. Events that
carry evaluation results derive from :class:`WithMetric` and expose ``metrics``, a dict
evaluator name -> float.

Example:
    >>> def handler(e):
    ...     if isinstance(e, EndIteration) and e.batch_id % 100 == 0:
    ...         print(e.pass_id, e.batch_id, e.cost, e.metrics)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = [
    "as_handler",
    "WithMetric",
    "BeginTraining",
    "EndTraining",
    "BeginPass",
    "EndPass",
    "BeginIteration",
    "EndForwardBackward",
    "EndIteration",
    "TestResult",
]


class WithMetric:
    """Base of events that carry evaluator results in ``metrics`` (name -> float)."""

    def __init__(self, metrics: dict[str, float] | None = None) -> None:
        self.metrics: dict[str, float] = dict(metrics) if metrics else {}


class BeginTraining:
    """Sent once before the first pass."""


class EndTraining:
    """Sent once after the last pass."""


class BeginPass:
    """Sent at the start of pass ``pass_id`` (0-based)."""

    def __init__(self, pass_id: int) -> None:
        self.pass_id = pass_id


class EndPass(WithMetric):
    """Sent at the end of pass ``pass_id`` with the pass's metrics."""

    def __init__(self, pass_id: int, metrics: dict[str, float] | None = None) -> None:
        super().__init__(metrics)
        self.pass_id = pass_id


class BeginIteration:
    """Sent before batch ``batch_id`` of pass ``pass_id`` is fed."""

    def __init__(self, pass_id: int, batch_id: int) -> None:
        self.pass_id = pass_id
        self.batch_id = batch_id


class EndForwardBackward:
    """Sent after forward and backward of a batch, before the parameter update."""

    def __init__(self, pass_id: int, batch_id: int) -> None:
        self.pass_id = pass_id
        self.batch_id = batch_id


class EndIteration(WithMetric):
    """Sent after the update of batch ``batch_id``; ``cost`` is the batch's mean cost."""

    def __init__(
        self,
        pass_id: int,
        batch_id: int,
        cost: float,
        metrics: dict[str, float] | None = None,
    ) -> None:
        super().__init__(metrics)
        self.pass_id = pass_id
        self.batch_id = batch_id
        self.cost = cost


class TestResult(WithMetric):
    """Result of ``trainer.test``: mean ``cost`` over the test data and its metrics."""

    __test__ = False  # not a pytest test class despite its name

    def __init__(self, cost: float, metrics: dict[str, float] | None = None) -> None:
        super().__init__(metrics)
        self.cost = cost


def _ignore(event: Any) -> None:
    return None


def as_handler(event_handler: Any) -> Callable[[Any], None]:
    """One callable from None, a handler, or a list/tuple of handlers (called in order)."""
    if event_handler is None:
        return _ignore
    if not isinstance(event_handler, (list, tuple)):
        if not callable(event_handler):
            raise TypeError(f"event_handler must be a function of one event (or a list of "
                            f"them), got {event_handler!r}")
        return event_handler
    handlers = list(event_handler)
    for h in handlers:
        if not callable(h):
            raise TypeError(f"event_handler list items must be callable, got {h!r}")

    def every(event: Any) -> None:
        for h in handlers:
            h(event)

    return every
