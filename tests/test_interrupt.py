"""Ctrl-C during training (a KeyboardInterrupt, here raised by an event handler or the
reader): one line saying where a resume starts and how, no traceback, exit status 130; the
checkpoint holds the state after the last finished batch, so resuming ends where an
uninterrupted run does (the CLI's side: tests/test_cli_commands.py)."""

import numpy as np
import pytest

import sculler as paddle
from sculler import event as E
from sculler.trainer import TrainingInterrupted

SAMPLES = [(np.linspace(-1, 1, 3).astype(np.float32) * (i % 7 - 3), i % 2) for i in range(60)]
READER = paddle.batch(lambda: iter(SAMPLES), 10)  # 6 batches a pass


def _ctrl_c_at(pass_id, batch_id, seen):
    def handler(e):
        seen.append(e)
        if isinstance(e, E.EndIteration) and (e.pass_id, e.batch_id) == (pass_id, batch_id):
            raise KeyboardInterrupt

    return handler


def _values(trainer):
    return {n: trainer.parameters.get(n) for n in trainer.parameters.names()}


def test_ctrl_c_saves_the_checkpoint_and_says_where_the_resume_starts(tmp_path, capsys,
                                                                     small_sgd):
    ckpt = str(tmp_path / "run.ckpt")
    seen = []
    with pytest.raises(TrainingInterrupted) as info:
        small_sgd(momentum=0.9).train(READER, num_passes=3, checkpoint=ckpt,
                         event_handler=_ctrl_c_at(1, 2, seen))
    assert info.value.code == 130 and isinstance(info.value, SystemExit)
    assert (info.value.next_pass, info.value.next_batch) == (1, 3)
    err = capsys.readouterr().err
    assert err == (f"training interrupted before pass 1, batch 3; to resume at pass 1, "
                   f"batch 3, run the same train(..., checkpoint={ckpt!r}) or sculler train "
                   f"--checkpoint {ckpt} again\n")
    resumed, rest = small_sgd(momentum=0.9), []
    resumed.train(READER, num_passes=3, checkpoint=ckpt, event_handler=rest.append)
    trained = [(e.pass_id, e.batch_id) for e in seen + rest if isinstance(e, E.EndIteration)]
    assert trained == [(p, b) for p in range(3) for b in range(6)]  # each batch once
    whole = small_sgd(momentum=0.9)
    whole.train(READER, num_passes=3)
    for name, value in _values(whole).items():
        np.testing.assert_array_equal(_values(resumed)[name], value, err_msg=name)


def test_ctrl_c_during_an_update_keeps_the_last_whole_checkpoint(tmp_path, capsys,
                                                                monkeypatch, small_sgd):
    ckpt = str(tmp_path / "run.ckpt")
    trainer = small_sgd(momentum=0.9)
    finish, calls = trainer.optimizer.finish_batch, []

    def interrupted_update(n):
        calls.append(n)
        if len(calls) == 9:  # pass 1, batch 2: parameters half-updated
            raise KeyboardInterrupt
        finish(n)

    monkeypatch.setattr(trainer.optimizer, "finish_batch", interrupted_update)
    with pytest.raises(TrainingInterrupted) as info:
        trainer.train(READER, num_passes=3, checkpoint=ckpt)
    assert (info.value.next_pass, info.value.next_batch) == (1, 0)  # the end of pass 0
    assert "before pass 1, batch 2; to resume at pass 1, batch 0" in capsys.readouterr().err


def test_ctrl_c_without_a_checkpoint_says_how_to_make_a_run_resumable(capsys, small_sgd):
    with pytest.raises(TrainingInterrupted):
        small_sgd(momentum=0.9).train(READER, num_passes=2, event_handler=_ctrl_c_at(0, 4, []))
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith("training interrupted before pass 0, batch 5; nothing was "
                          "checkpointed; pass checkpoint=PATH to train()")
