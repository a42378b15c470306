"""Evaluators of sculler.core.metrics (and the existing auc) on hand-computed examples."""

import logging
from types import SimpleNamespace

import numpy as np
import pytest

import sculler as paddle
from sculler.core.argument import Argument
from sculler.core.evaluator import create_evaluator
from sculler.core.metrics import chunk_segments
from sculler.core.model_config import EvaluatorConfig
from sculler.math.sparse import CsrMatrix


def layers(**args):
    return {name: SimpleNamespace(output=arg) for name, arg in args.items()}


def make(type_name, inputs, **attrs):
    return create_evaluator(EvaluatorConfig("ev", type_name, inputs, attrs))


P = np.array([[0.7, 0.2, 0.1],   # pred 0, label 0: TP0
              [0.1, 0.8, 0.1],   # pred 1, label 0: FP1, FN0
              [0.2, 0.2, 0.6],   # pred 2, label 2: TP2
              [0.5, 0.3, 0.2]])  # pred 0, label 1: FP0, FN1
Y = np.array([0, 0, 2, 1])


def test_precision_recall_macro_and_positive_label():
    ev = make("precision_recall", ["p", "y"], positive_label=-1)
    ev.eval_batch(layers(p=Argument(P[:2]), y=Argument(ids=Y[:2])))
    ev.eval_batch(layers(p=Argument(P[2:]), y=Argument(ids=Y[2:])))
    # class 0: TP1 FP1 FN1 -> P=R=1/2; class 1: TP0 FP1 FN1 -> 0, 0; class 2: P=R=1
    np.testing.assert_array_equal(ev.stats, [[1, 1, 1, 1], [0, 2, 1, 1], [1, 3, 0, 0]])
    vals = ev.values()
    assert vals["macro-average-precision"] == pytest.approx(0.5)
    assert vals["macro-average-recall"] == pytest.approx(0.5)
    assert vals["micro-average-precision"] == pytest.approx(2 / 4)
    assert ev.value() == pytest.approx(0.5)
    pos = make("precision_recall", ["p", "y", "w"], positive_label=0)
    pos.eval_batch(layers(p=Argument(P), y=Argument(ids=Y),
                          w=Argument(np.array([[1.0], [3.0], [1.0], [1.0]]))))
    # class 0 weighted: TP 1, FP 1 (row 3), FN 3 (row 1) -> P = 1/2, R = 1/4
    assert pos.values()["precision"] == pytest.approx(0.5)
    assert pos.values()["recall"] == pytest.approx(0.25)
    assert pos.value() == pytest.approx(2 * 0.5 * 0.25 / 0.75)


def test_precision_recall_multi_binary_label():
    ev = make("precision_recall", ["p", "y"], positive_label=-1)
    p = np.array([[0.9, 0.6], [0.2, 0.7]])
    y = CsrMatrix.from_rows([[0], [0, 1]], 2, False, dtype=np.float64)
    ev.eval_batch(layers(p=Argument(p), y=Argument(y)))
    # class 0: TP1 FN1; class 1: FP1 TP1
    np.testing.assert_array_equal(ev.stats, [[1, 0, 0, 1], [1, 0, 1, 0]])
    vals = ev.values()
    assert vals["micro-average-recall"] == pytest.approx(2 / 3)
    assert vals["macro-average-precision"] == pytest.approx(0.75)


def test_pnpair_counts_ordered_pairs_per_query():
    ev = make("pnpair", ["s", "y", "q"])
    s = np.array([[0.9], [0.5], [0.1], [0.3], [0.3], [0.8]])
    y = np.array([2, 1, 0, 1, 0, 0])
    q = np.array([7, 7, 7, 9, 9, 9])
    ev.eval_batch(layers(s=Argument(s), y=Argument(ids=y), q=Argument(ids=q)))
    # query 7: all 3 pairs correctly ordered; query 9: (0.3,y1) vs (0.3,y0) tie -> special,
    # (0.3,y1) vs (0.8,y0) wrong, (0.3,y0) vs (0.8,y0) same label -> ignored
    vals = ev.values()
    assert (vals["pos"], vals["neg"], vals["special"]) == (3.0, 1.0, 1.0)
    assert ev.value() == 3.0


IOB = [0, 1, 4, 2, 3, 1, 4]  # 2 chunk types; tag = type*2 + (0 begin, 1 inside); 4 = O


def test_chunk_segments_for_each_scheme():
    assert chunk_segments(IOB, "IOB", 2) == [(0, 1, 0), (3, 4, 1), (5, 5, 0)]
    # IOE: inside 0, end 1
    assert chunk_segments([0, 1, 1, 4, 2], "IOE", 2) == [(0, 1, 0), (2, 2, 0), (4, 4, 1)]
    # IOBES: B0 I1 E2 S3 with 1 type; 4 = O
    assert chunk_segments([0, 1, 2, 3, 4, 0, 2], "IOBES", 1) == [(0, 2, 0), (3, 3, 0),
                                                                 (5, 6, 0)]
    assert chunk_segments([0, 0, 1, 2, 1], "plain", 2) == [(0, 1, 0), (2, 2, 1), (4, 4, 1)]


def test_chunk_f1_over_sequences_and_excluded_types():
    pred = np.array([0, 1, 4, 2, 3, 4, 4, 0, 4])
    truth = np.array(IOB + [0, 4])
    starts = np.array([0, 7, 9])
    feed = layers(o=Argument(ids=pred, seq_starts=starts),
                  y=Argument(ids=truth, seq_starts=starts))
    ev = make("chunk", ["o", "y"], chunk_scheme="IOB", num_chunk_types=2)
    ev.eval_batch(feed)
    # predicted chunks (0,1,0) (3,4,1) | (0,0,0); true (0,1,0) (3,4,1) (5,5,0) | (0,0,0)
    vals = ev.values()
    assert (vals["correct_chunks"], vals["result_chunks"], vals["true_chunks"]) == (3, 3, 4)
    assert ev.value() == pytest.approx(2 * 1.0 * 0.75 / 1.75)
    ex = make("chunk", ["o", "y"], chunk_scheme="IOB", num_chunk_types=2,
              excluded_chunk_types=[1])
    ex.eval_batch(feed)
    assert (ex.num_correct, ex.num_output, ex.num_label) == (2, 2, 3)


def test_column_sum_is_weighted_mean_of_last_column():
    ev = make("last-column-sum", ["x", "w"], column=-1)
    x = np.array([[1.0, 2.0], [3.0, 4.0]])
    ev.eval_batch(layers(x=Argument(x), w=Argument(np.array([[1.0], [3.0]]))))
    ev.eval_batch(layers(x=Argument(x[:1]), w=Argument(np.array([[2.0]]))))
    assert ev.value() == pytest.approx((2 + 12 + 4) / 6)
    first = make("last-column-sum", ["x"], column=0)
    first.eval_batch(layers(x=Argument(x)))
    assert first.value() == pytest.approx(2.0)


def test_value_printer_logs_values(caplog):
    ev = make("value_printer", ["x", "y"])
    with caplog.at_level(logging.INFO, logger="sculler.evaluator"):
        ev.eval_batch(layers(x=Argument(np.array([[1.5, -2.0]])), y=Argument(ids=np.array([3]))))
    assert "layer=x [[ 1.5 -2. ]]" in caplog.text and "layer=y [3]" in caplog.text
    assert ev.value() == 0.0


def test_existing_auc_on_a_hand_example():
    ev = make("auc", ["p", "y"])
    # positives score 0.8, 0.4; negatives 0.6, 0.4, 0.1: pairs won 1 + 1 + 0.5 + 1 + 1 = 4.5 / 6
    p = np.array([[0.2, 0.8], [0.6, 0.4], [0.4, 0.6], [0.6, 0.4], [0.9, 0.1]])
    ev.eval_batch(layers(p=Argument(p), y=Argument(ids=np.array([1, 1, 0, 0, 0]))))
    assert ev.value() == pytest.approx(4.5 / 6)


def test_v2_functions_attach_configs_and_trainer_reports_them():
    paddle.layer.reset_names()
    paddle.init(seed=0)
    x = paddle.layer.data(name="x", type=paddle.data_type.dense_vector(2))
    y = paddle.layer.data(name="y", type=paddle.data_type.integer_value(2))
    out = paddle.layer.fc(input=x, size=2, act=paddle.activation.Softmax())
    cost = paddle.layer.classification_cost(input=out, label=y, evaluator=None)
    paddle.evaluator.precision_recall(input=out, label=y, positive_label=1)
    paddle.evaluator.column_sum(input=out, name="mean_p1")
    with pytest.raises(ValueError, match="chunk_scheme"):
        paddle.evaluator.chunk(input=out, label=y, chunk_scheme="BIO", num_chunk_types=1)
    X = np.array([[1.0, 0.0], [0.0, 1.0]] * 8, dtype=np.float32)
    Y = np.array([0, 1] * 8)
    params = paddle.parameters.create(cost)
    tr = paddle.trainer.SGD(cost, params, paddle.optimizer.Momentum(learning_rate=0.5))
    tr.train(paddle.batch(lambda: zip(X, Y), 8), num_passes=10, show_progress=False)
    res = tr.test(paddle.batch(lambda: zip(X, Y), 8))
    assert res.metrics["precision_recall_evaluator"] == pytest.approx(1.0)
    probs = paddle.infer(output_layer=out, parameters=params, input=[(v,) for v in X])
    assert res.metrics["mean_p1"] == pytest.approx(probs[:, 1].mean(), rel=1e-5)


def test_metrics_of_reports_statistics_and_skips_printers():
    from sculler.core.evaluator import create_evaluator, metrics_of
    from sculler.core.model_config import EvaluatorConfig

    pr = create_evaluator(EvaluatorConfig("pr", "precision_recall", ["out", "label"]))
    printer = create_evaluator(EvaluatorConfig("show", "value_printer", ["out"]))
    import types

    import numpy as np

    from sculler.core.argument import Argument

    layers = {"out": types.SimpleNamespace(output=Argument(np.eye(3)[[0, 1, 1, 2]])),
              "label": types.SimpleNamespace(output=Argument(ids=np.array([0, 1, 2, 2])))}
    pr.eval_batch(layers)
    metrics = metrics_of([pr, printer])
    assert "pr" in metrics and "show" not in metrics
    assert {k for k in metrics if k.startswith("pr.")} == {f"pr.{k}" for k in pr.values()}
    assert len(metrics) > 1


@pytest.mark.parametrize("type_name, inputs, attrs, batches", [
    ("precision_recall", ["p", "y", "w"], {"positive_label": -1},
     [dict(p=Argument(P[:2]), y=Argument(ids=Y[:2]), w=Argument(np.array([[1.0], [3.0]]))),
      dict(p=Argument(P[2:]), y=Argument(ids=Y[2:]), w=Argument(np.array([[2.0], [1.0]])))]),
    ("precision_recall", ["p", "y"], {"positive_label": -1},
     [dict(p=Argument(P[:3]), y=Argument(np.array([[1, 0, 1], [0, 1, 0], [1, 1, 0.0]]))),
      dict(p=Argument(P[3:]), y=Argument(np.array([[0, 0, 1.0]])))]),
    ("last-column-sum", ["p", "w"], {"column": -1},
     [dict(p=Argument(P[:1]), w=Argument(np.array([[2.0]]))),
      dict(p=Argument(P[1:]), w=Argument(np.array([[1.0], [0.5], [3.0]])))]),
    ("classification_error", ["p", "y", "w"], {},
     [dict(p=Argument(P[:2]), y=Argument(ids=Y[:2]), w=Argument(np.array([[1.0], [3.0]]))),
      dict(p=Argument(P[2:]), y=Argument(ids=Y[2:]), w=Argument(np.array([[2.0], [1.0]])))]),
])
def test_a_pass_merged_from_batches_equals_one_evaluator_over_all(type_name, inputs, attrs,
                                                                  batches):
    """The trainer evaluates each batch once and merges it into the pass's evaluator
    (``Evaluator.merge``): that gives what one evaluator fed every batch gives."""
    whole = make(type_name, inputs, **attrs)
    merged = make(type_name, inputs, **attrs)
    for batch in batches:
        whole.eval_batch(layers(**batch))
        one = make(type_name, inputs, **attrs)
        one.eval_batch(layers(**batch))
        merged.merge(one)
    assert merged.additive
    assert merged.value() == pytest.approx(whole.value())
    assert merged.values() == pytest.approx(whole.values())
    assert (merged.total, merged.count) == pytest.approx((whole.total, whole.count))
