from sculler import event


def test_event_attributes():
    e = event.EndIteration(pass_id=1, batch_id=7, cost=0.5, metrics={"error": 0.25})
    assert (e.pass_id, e.batch_id, e.cost, e.metrics) == (1, 7, 0.5, {"error": 0.25})
    assert isinstance(e, event.WithMetric)
    p = event.EndPass(3)
    assert p.pass_id == 3 and p.metrics == {}
    t = event.TestResult(cost=1.5, metrics={"auc": 0.9})
    assert t.cost == 1.5 and t.metrics["auc"] == 0.9
    assert event.BeginIteration(0, 2).batch_id == 2
    assert event.EndForwardBackward(4, 5).pass_id == 4
    assert event.BeginPass(2).pass_id == 2


def test_metrics_dict_is_copied():
    m = {"error": 0.1}
    e = event.EndPass(0, m)
    m["error"] = 0.9
    assert e.metrics == {"error": 0.1}


def test_begin_and_end_training_are_distinct_types():
    assert not isinstance(event.BeginTraining(), event.EndTraining)
    assert not isinstance(event.EndTraining(), event.WithMetric)
