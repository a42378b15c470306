"""Training logs: sculler.plot.TensorBoard scalars per iteration, per pass and per test result,
read back from the event files with tensorboardX's own protobuf (and its CRC);
``event_handler=[h1, h2]`` in the trainer; the tqdm bar's total (hence ETA) from the reader's
len or the previous pass, with the batch cost and metrics."""

from __future__ import annotations

import errno
import importlib.util
import io
import os
import re
import struct
import threading

import numpy as np
import pytest
import tqdm

import sculler as paddle
from sculler import event as E
from sculler.fileio import FileWriteError

needs_tensorboardx = pytest.mark.skipif(importlib.util.find_spec("tensorboardX") is None,
                                        reason="TensorBoard logs need sculler[tensorboard]")


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


@needs_tensorboardx
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


SAMPLES = [(np.full(3, i / 10, np.float32), i % 2) for i in range(40)]


@needs_tensorboardx
def test_trainer_accepts_a_list_of_handlers_and_logs_every_batch(tmp_path, small_sgd):
    trainer = small_sgd()
    seen: list = []
    board = paddle.plot.TensorBoard(tmp_path)
    trainer.train(paddle.batch(lambda: iter(SAMPLES), 10), num_passes=2,
                  event_handler=[seen.append, board])
    board.close()
    costs = [e.cost for e in seen if isinstance(e, E.EndIteration)]
    got = read_scalars(tmp_path)
    assert [s for s, _ in got["train/cost"]] == list(range(8))
    np.testing.assert_allclose([v for _, v in got["train/cost"]], costs, rtol=1e-6)
    assert [s for s, _ in got["pass/classification_error_evaluator"]] == [0, 1]
    with pytest.raises(TypeError, match="callable"):
        trainer.train(paddle.batch(lambda: iter(SAMPLES), 10), event_handler=[seen.append, 3])


class EveryUpdate(tqdm.tqdm):
    """The trainer's bar, redrawn on every update and kept at the end (for reading)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **{**kwargs, "mininterval": 0, "leave": True})


@pytest.fixture
def every_update(monkeypatch):
    monkeypatch.setattr(tqdm, "tqdm", EveryUpdate)


def _bars(err: str, pass_id: int) -> list[str]:
    return [s for s in re.split(r"[\r\n]", err) if s.startswith(f"pass {pass_id}:")]


def test_total_comes_from_the_previous_pass_when_the_reader_has_no_len(every_update, capsys,
                                                                       small_sgd):
    small_sgd().train(paddle.batch(lambda: iter(SAMPLES), 10), num_passes=2,
                     show_progress=True)
    err = capsys.readouterr().err
    first, second = _bars(err, 0), _bars(err, 1)
    assert first and not any("/4" in s for s in first)  # length unknown in pass 0
    last = second[-1]  # elapsed<ETA, rate, then the postfix (cost and metrics)
    assert re.search(r"\| 4/4 \[\d\d:\d\d<\d\d:\d\d, [0-9.]+batch/s, ", last), last
    assert re.search(r"cost=[0-9.]+", last) and "classification_error_evaluator=" in last


def test_total_comes_from_len_of_the_reader(every_update, capsys, small_sgd):
    batches = [SAMPLES[i:i + 10] for i in range(0, 40, 10)]
    small_sgd().train(lambda: batches, num_passes=1, show_progress=True)
    assert any(" 4/4 [" in s for s in _bars(capsys.readouterr().err, 0))


class FillsUp(io.RawIOBase):
    """The event file at ``path`` on a disk with ``room`` bytes free: a write past it is
    ENOSPC, as the kernel says it (it goes to /dev/full, which always answers ENOSPC)."""

    def __init__(self, path, room):
        self.file = open(path, "wb", buffering=0)
        self.full = open("/dev/full", "wb", buffering=0)
        self.room = room

    def writable(self):
        return True

    def fileno(self):
        return self.file.fileno()

    def write(self, data):
        if len(data) > self.room:
            return self.full.write(data)
        self.room -= len(data)
        return self.file.write(data)

    def close(self):
        self.file.close()
        self.full.close()
        super().close()


def _bounded(fn, seconds=60):
    """Run ``fn`` in a thread; what it raised, or a failure if it is still running after
    ``seconds`` (a hang is a failure, not a stuck suite)."""
    out: list = []

    def run():
        try:
            fn()
        except BaseException as e:  # noqa: BLE001 - handed to the test
            out.append(e)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(seconds)
    assert not t.is_alive(), f"{fn} still running after {seconds} s: logging hangs"
    return out[0] if out else None


@needs_tensorboardx
@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_a_disk_that_fills_up_mid_training_is_an_error_naming_the_event_file(tmp_path,
                                                                             monkeypatch,
                                                                             small_sgd):
    from tensorboardX import record_writer

    monkeypatch.setattr(record_writer, "open_file", lambda path: io.BufferedWriter(
        FillsUp(path, room=2000), buffer_size=256))
    trainer = small_sgd()
    board = paddle.plot.TensorBoard(tmp_path, flush_secs=0)
    seen = []
    err = _bounded(lambda: trainer.train(paddle.batch(lambda: iter(SAMPLES), 10),
                                         num_passes=20, event_handler=[board, seen.append]))
    assert isinstance(err, FileWriteError) and err.errno == errno.ENOSPC
    assert re.fullmatch(r"\[Errno 28\] TensorBoard: cannot write '.*/events\.out\.tfevents\.[^']+'"
                        r": No space left on device", str(err)), str(err)
    assert str(tmp_path) in str(err)
    assert 0 < sum(isinstance(e, E.EndIteration) for e in seen) < 80  # it stopped at once
    assert _bounded(board.close) is None  # closing a failed board neither hangs nor raises


@needs_tensorboardx
def test_a_logdir_that_cannot_be_written_is_named(read_only_dir):
    with pytest.raises(FileWriteError, match=r"TensorBoard: cannot write '.*/read-only/events"
                                             r"\.out\.tfevents\.[^']+': Permission denied"):
        paddle.plot.TensorBoard(read_only_dir)
