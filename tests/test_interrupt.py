"""Ctrl-C during training (a KeyboardInterrupt, here raised by an event handler or the
reader): one line saying where a resume starts and how, no traceback, exit status 130; the
checkpoint holds the state after the last finished batch, so resuming ends where an
uninterrupted run does; the CLI's summary counts only the passes a resumed run trained."""

import os
import pathlib
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import sculler as paddle
from sculler import event as E
from sculler.trainer import TrainingInterrupted

ROOT = pathlib.Path(__file__).resolve().parents[1]
SAMPLES = [(np.linspace(-1, 1, 3).astype(np.float32) * (i % 7 - 3), i % 2) for i in range(60)]
READER = paddle.batch(lambda: iter(SAMPLES), 10)  # 6 batches a pass


def _trainer():
    paddle.init(seed=1)
    paddle.layer.reset_names()
    x = paddle.layer.data(name="x", type=paddle.data_type.dense_vector(3))
    y = paddle.layer.data(name="y", type=paddle.data_type.integer_value(2))
    out = paddle.layer.fc(input=x, size=2, act=paddle.activation.Softmax())
    cost = paddle.layer.classification_cost(input=out, label=y)
    params = paddle.parameters.create(cost)
    return paddle.trainer.SGD(cost, params,
                              paddle.optimizer.Momentum(learning_rate=0.01, momentum=0.9))


def _ctrl_c_at(pass_id, batch_id, seen):
    def handler(e):
        seen.append(e)
        if isinstance(e, E.EndIteration) and (e.pass_id, e.batch_id) == (pass_id, batch_id):
            raise KeyboardInterrupt

    return handler


def _values(trainer):
    return {n: trainer.parameters.get(n) for n in trainer.parameters.names()}


def test_ctrl_c_saves_the_checkpoint_and_says_where_the_resume_starts(tmp_path, capsys):
    ckpt = str(tmp_path / "run.ckpt")
    seen = []
    with pytest.raises(TrainingInterrupted) as info:
        _trainer().train(READER, num_passes=3, checkpoint=ckpt,
                         event_handler=_ctrl_c_at(1, 2, seen))
    assert info.value.code == 130 and isinstance(info.value, SystemExit)
    assert (info.value.next_pass, info.value.next_batch) == (1, 3)
    err = capsys.readouterr().err
    assert err == (f"training interrupted before pass 1, batch 3; to resume at pass 1, "
                   f"batch 3, run the same train(..., checkpoint={ckpt!r}) or sculler train "
                   f"--checkpoint {ckpt} again\n")
    resumed, rest = _trainer(), []
    resumed.train(READER, num_passes=3, checkpoint=ckpt, event_handler=rest.append)
    trained = [(e.pass_id, e.batch_id) for e in seen + rest if isinstance(e, E.EndIteration)]
    assert trained == [(p, b) for p in range(3) for b in range(6)]  # each batch once
    whole = _trainer()
    whole.train(READER, num_passes=3)
    for name, value in _values(whole).items():
        np.testing.assert_array_equal(_values(resumed)[name], value, err_msg=name)


def test_ctrl_c_during_an_update_keeps_the_last_whole_checkpoint(tmp_path, capsys,
                                                                monkeypatch):
    ckpt = str(tmp_path / "run.ckpt")
    trainer = _trainer()
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


def test_ctrl_c_without_a_checkpoint_says_how_to_make_a_run_resumable(capsys):
    with pytest.raises(TrainingInterrupted):
        _trainer().train(READER, num_passes=2, event_handler=_ctrl_c_at(0, 4, []))
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith("training interrupted before pass 0, batch 5; nothing was "
                          "checkpointed; pass checkpoint=PATH to train()")


SCRIPT = textwrap.dedent('''
    import os
    import sys

    import numpy as np
    import sculler as paddle

    x = paddle.layer.data(name="x", type=paddle.data_type.dense_vector(4))
    y = paddle.layer.data(name="y", type=paddle.data_type.integer_value(2))
    predict = paddle.layer.fc(input=x, size=2, act=paddle.activation.Softmax())
    cost = paddle.layer.classification_cost(input=predict, label=y)
    optimizer = paddle.optimizer.Momentum(learning_rate=0.05, momentum=0.9)
    batch_size = 16
    calls = [0]

    def train_reader():
        calls[0] += 1
        marker = os.environ["CTRL_C_MARKER"]
        if calls[0] == 3 and not os.path.exists(marker):  # the third pass: Ctrl-C
            open(marker, "w").close()
            raise KeyboardInterrupt
        rng = np.random.RandomState(0)
        for _ in range(64):
            v = rng.randn(4).astype("float32")
            yield v, int(v[0] > 0)
''')


def test_cli_ctrl_c_is_one_line_and_a_resumed_run_counts_only_its_passes(tmp_path):
    script = tmp_path / "tiny.py"
    script.write_text(SCRIPT)
    ckpt = tmp_path / "run.ckpt"
    env = dict(os.environ, CTRL_C_MARKER=str(tmp_path / "interrupted"),
               PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    args = [sys.executable, "-m", "sculler.cli", "train", "--config", str(script),
            "--num_passes", "4", "--checkpoint", str(ckpt), "--save_dir", str(tmp_path / "out"),
            "--no_progress"]
    first = subprocess.run(args, env=env, capture_output=True, text=True, timeout=300)
    assert first.returncode == 130
    assert first.stderr == (f"training interrupted before pass 2, batch 0; to resume at pass "
                            f"2, batch 0, run the same train(..., checkpoint={str(ckpt)!r}) "
                            f"or sculler train --checkpoint {ckpt} again\n")
    second = subprocess.run(args, env=env, capture_output=True, text=True, timeout=300)
    assert second.returncode == 0, second.stderr
    assert [ln.split(":")[0] for ln in second.stdout.splitlines() if ln.startswith("Pass")] == [
        "Pass 2", "Pass 3"]
    assert "Trained 2 passes (passes 2-3 of 4) in " in second.stdout
