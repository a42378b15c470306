"""The printing evaluators: what each logs (or writes) in PaddlePaddle's format, and that they
report no metric."""

import logging

import numpy as np
import pytest

import sculler as paddle


def _train(cost, extra, samples, caplog, feeding=None):
    trainer = paddle.trainer.SGD(cost=cost, parameters=paddle.parameters.create(cost),
                                 update_equation=paddle.optimizer.Momentum(learning_rate=0.0))
    metrics = []
    with caplog.at_level(logging.INFO, logger="sculler.evaluator"):
        trainer.train(paddle.batch(lambda: iter(samples), len(samples)), num_passes=1,
                      feeding=feeding, event_handler=lambda e: metrics.append(e.metrics)
                      if isinstance(e, paddle.event.EndIteration) else None)
    return [r.getMessage() for r in caplog.records if r.name == "sculler.evaluator"], metrics


def test_maxid_gradient_and_maxframe_printers_log_as_paddle_does(caplog):
    x = paddle.layer.data(name="x", type=paddle.data_type.dense_vector_sequence(1))
    y = paddle.layer.fc(input=x, size=1, name="y", act=paddle.activation.Linear(),
                        bias_attr=False, param_attr=paddle.attr.Param(initial_mean=1.0,
                                                                      initial_std=0.0))
    cost = paddle.layer.sum_cost(input=y)
    paddle.evaluator.maxid_printer(input=y, num_results=1)
    paddle.evaluator.gradient_printer(input=y)
    paddle.evaluator.maxframe_printer(input=y, num_results=2)
    seqs = [(np.array([[1.0], [5.0], [3.0]], np.float32),), (np.array([[2.0]], np.float32),)]
    lines, metrics = _train(cost, None, seqs, caplog)
    assert "layer=y row max id vector:\n0 : 1, \n0 : 5, \n0 : 3, \n0 : 2, " in lines
    assert "layer=y grad matrix:\n[[1.]\n [1.]\n [1.]\n [1.]]" in lines
    assert "layer=y sequence max frames:\n1 : 5, 2 : 3, total 3 frames\n0 : 2, total 1 frames" \
        in lines
    assert metrics == [{}]


def test_seqtext_printer_writes_tokens_per_sequence(tmp_path, caplog):
    words = tmp_path / "words.txt"
    words.write_text("a\nb\nc\n")
    out = tmp_path / "out.txt"
    ids = paddle.layer.data(name="ids", type=paddle.data_type.integer_value_sequence(3))
    emb = paddle.layer.embedding(input=ids, size=2)
    cost = paddle.layer.sum_cost(input=emb)
    paddle.evaluator.seqtext_printer(input=ids, result_file=str(out), dict_file=str(words))
    _train(cost, None, [([0, 2, 1],), ([2],)], caplog)
    assert out.read_text() == "0\ta c b\n1\tc\n"
    with pytest.raises(ValueError, match="result_file must be a file name"):
        paddle.evaluator.seqtext_printer(input=ids, result_file="")
    with pytest.raises(ValueError, match="num_results must be a positive int"):
        paddle.evaluator.maxid_printer(input=ids, num_results=0)


def test_classification_error_printer_and_evaluator_base(caplog, tmp_path):
    x = paddle.layer.data(name="x", type=paddle.data_type.dense_vector(2))
    lbl = paddle.layer.data(name="lbl", type=paddle.data_type.integer_value(2))
    prob = paddle.layer.fc(input=x, size=2, act=paddle.activation.Softmax(), name="prob",
                           param_attr=paddle.attr.Param(initial_std=0.0, initial_mean=0.0),
                           bias_attr=False)
    cost = paddle.layer.classification_cost(input=prob, label=lbl, evaluator=None)
    paddle.evaluator.classification_error_printer(input=prob, label=lbl, name="printed")
    from sculler.trainer_config_helpers import evaluator_base

    evaluator_base(input=prob, type="last-column-auc", label=lbl, name="paddle_auc")
    samples = [(np.array([1.0, 0.0], np.float32), 0), (np.array([0.0, 1.0], np.float32), 1)]
    lines, metrics = _train(cost, None, samples, caplog)
    assert "Printer=printed Classification Error:\n[[0.]\n [1.]]" in lines  # ties: id 0
    assert set(metrics[0]) == {"paddle_auc"}
    with pytest.raises(ValueError, match="unknown evaluator type 'no_such'"):
        evaluator_base(input=prob, type="no_such", name="e")
