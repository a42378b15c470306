"""The trainer's tqdm bar: a total (hence ETA) from the reader's len or the previous pass, with
the batch cost and metrics."""

import re

import numpy as np
import pytest
import tqdm

import sculler as paddle


class EveryUpdate(tqdm.tqdm):
    """The trainer's bar, redrawn on every update and kept at the end (for reading)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **{**kwargs, "mininterval": 0, "leave": True})


@pytest.fixture(autouse=True)
def _every_update(monkeypatch):
    monkeypatch.setattr(tqdm, "tqdm", EveryUpdate)


def _trainer():
    paddle.init(seed=1)
    paddle.layer.reset_names()
    x = paddle.layer.data(name="x", type=paddle.data_type.dense_vector(3))
    y = paddle.layer.data(name="y", type=paddle.data_type.integer_value(2))
    out = paddle.layer.fc(input=x, size=2, act=paddle.activation.Softmax())
    cost = paddle.layer.classification_cost(input=out, label=y)
    params = paddle.parameters.create(cost)
    return paddle.trainer.SGD(cost, params, paddle.optimizer.Momentum(learning_rate=0.01))


SAMPLES = [(np.full(3, i / 10, np.float32), i % 2) for i in range(40)]


def _bars(err: str, pass_id: int) -> list[str]:
    return [s for s in re.split(r"[\r\n]", err) if s.startswith(f"pass {pass_id}:")]


def test_total_comes_from_the_previous_pass_when_the_reader_has_no_len(capsys):
    _trainer().train(paddle.batch(lambda: iter(SAMPLES), 10), num_passes=2,
                     show_progress=True)
    err = capsys.readouterr().err
    first, second = _bars(err, 0), _bars(err, 1)
    assert first and not any("/4" in s for s in first)  # length unknown in pass 0
    last = second[-1]  # elapsed<ETA, rate, then the postfix (cost and metrics)
    assert re.search(r"\| 4/4 \[\d\d:\d\d<\d\d:\d\d, [0-9.]+batch/s, ", last), last
    assert re.search(r"cost=[0-9.]+", last) and "classification_error_evaluator=" in last


def test_total_comes_from_len_of_the_reader(capsys):
    batches = [SAMPLES[i:i + 10] for i in range(0, 40, 10)]
    _trainer().train(lambda: batches, num_passes=1, show_progress=True)
    assert any(" 4/4 [" in s for s in _bars(capsys.readouterr().err, 0))
