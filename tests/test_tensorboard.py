"""sculler.plot.TensorBoard: scalars written per iteration, per pass and per test result, read
back from the event files with tensorboardX's own protobuf (and its CRC), and
``event_handler=[h1, h2]`` in the trainer."""

from __future__ import annotations

import struct

import numpy as np
import pytest

import sculler as paddle
from sculler import event as E

tensorboardX = pytest.importorskip("tensorboardX")


def read_scalars(logdir) -> dict[str, list[tuple[int, float]]]:
    """tag -> [(step, value)] of every event file in ``logdir`` (TFRecord framing checked
    with tensorboardX's masked CRC-32C)."""
    from tensorboardX.crc32c import crc32c
    from tensorboardX.proto.event_pb2 import Event

    def masked(data: bytes) -> int:
        crc = crc32c(data)
        return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF

    scalars: dict[str, list[tuple[int, float]]] = {}
    for path in sorted(logdir.glob("events.out.tfevents.*")):
        raw = path.read_bytes()
        pos = 0
        while pos < len(raw):
            header = raw[pos:pos + 8]
            (length,) = struct.unpack("<Q", header)
            assert struct.unpack("<I", raw[pos + 8:pos + 12])[0] == masked(header)
            data = raw[pos + 12:pos + 12 + length]
            assert struct.unpack("<I", raw[pos + 12 + length:pos + 16 + length])[0] == masked(data)
            pos += 16 + length
            event = Event.FromString(data)
            for value in event.summary.value:
                scalars.setdefault(value.tag, []).append((event.step, value.simple_value))
    return scalars


def test_events_become_scalars_by_iteration_pass_and_test(tmp_path):
    with paddle.plot.TensorBoard(tmp_path) as board:
        for pass_id in range(2):
            for batch_id, cost in enumerate([1.0, 0.5]):
                board(E.EndIteration(pass_id, batch_id, cost + pass_id, {"err": 0.25}))
            board(E.EndPass(pass_id, {"err": 0.125 * (pass_id + 1)}))
            board(E.TestResult(0.75 - pass_id * 0.5, {"err": 0.5}))
        board.append("lr", 3, 0.01)
    got = read_scalars(tmp_path)
    assert got["train/cost"] == [(0, 1.0), (1, 0.5), (2, 2.0), (3, 1.5)]
    assert got["train/err"] == [(i, 0.25) for i in range(4)]
    assert got["pass/cost"] == [(0, 0.75), (1, 1.75)]
    assert got["pass/err"] == [(0, 0.125), (1, 0.25)]
    assert got["test/cost"] == [(0, 0.75), (1, 0.25)]
    assert got["test/err"] == [(0, 0.5), (1, 0.5)]
    assert got["lr"] == [(3, pytest.approx(0.01))]


def test_trainer_accepts_a_list_of_handlers_and_logs_every_batch(tmp_path):
    paddle.init(seed=1)
    paddle.layer.reset_names()
    x = paddle.layer.data(name="x", type=paddle.data_type.dense_vector(3))
    y = paddle.layer.data(name="y", type=paddle.data_type.integer_value(2))
    out = paddle.layer.fc(input=x, size=2, act=paddle.activation.Softmax())
    cost = paddle.layer.classification_cost(input=out, label=y)
    params = paddle.parameters.create(cost)
    trainer = paddle.trainer.SGD(cost, params, paddle.optimizer.Momentum(learning_rate=0.01))
    rng = np.random.RandomState(0)
    samples = [(rng.randn(3).astype(np.float32), int(rng.randint(2))) for _ in range(40)]
    seen: list = []
    board = paddle.plot.TensorBoard(tmp_path)
    trainer.train(paddle.batch(lambda: iter(samples), 10), num_passes=2,
                  event_handler=[seen.append, board])
    board.close()
    costs = [e.cost for e in seen if isinstance(e, E.EndIteration)]
    got = read_scalars(tmp_path)
    assert [s for s, _ in got["train/cost"]] == list(range(8))
    np.testing.assert_allclose([v for _, v in got["train/cost"]], costs, rtol=1e-6)
    assert [s for s, _ in got["pass/classification_error_evaluator"]] == [0, 1]
    with pytest.raises(TypeError, match="callable"):
        trainer.train(paddle.batch(lambda: iter(samples), 10), event_handler=[seen.append, 3])
