"""Helpers for the PaddlePaddle book chapter programs (re-created on offline synthetic data)."""

import math
from types import SimpleNamespace

import numpy as np
import pytest

import sculler as paddle


@pytest.fixture(autouse=True)
def fresh_names():
    """Each chapter program starts numbering unnamed layers from 0, like a new process."""
    paddle.layer.reset_names()
    yield


def train_costs(trainer, reader, batch_size, num_passes, feeding=None, on_pass=None):
    """Train like the chapters' loops (``paddle.batch(paddle.reader.shuffle(...))``, an event
    handler) and return the cost of every batch, per pass."""
    costs = [[] for _ in range(num_passes)]

    def event_handler(event):
        if isinstance(event, paddle.event.EndIteration):
            costs[event.pass_id].append(event.cost)
        if isinstance(event, paddle.event.EndPass) and on_pass is not None:
            on_pass(event)

    trainer.train(reader=paddle.batch(paddle.reader.shuffle(reader, buf_size=512),
                                      batch_size=batch_size),
                  num_passes=num_passes, event_handler=event_handler, feeding=feeding,
                  show_progress=False)
    return costs


def assert_finite_and_falling(costs, factor=0.9):
    """Every batch cost is finite and the last pass's mean is below ``factor`` times the
    first's."""
    flat = [c for per_pass in costs for c in per_pass]
    assert flat and all(math.isfinite(c) for c in flat), flat
    first, last = np.mean(costs[0]), np.mean(costs[-1])
    assert last < factor * first, (first, last)


@pytest.fixture
def book():
    """The helpers above, for the chapter tests (``book.train_costs``, ...)."""
    return SimpleNamespace(train_costs=train_costs,
                           assert_finite_and_falling=assert_finite_and_falling)
