"""Behaviours PaddlePaddle v2 programs rely on (issue 22): the default feeding order of data
layers, evaluators in ``extra_layers``, ``layer_attr`` on data layers, the layout of
``infer`` results, and the message for float ids."""

import numpy as np
import pytest

import sculler as paddle
from sculler.data_type import InputType

L = paddle.layer
DT = paddle.data_type


def _nmt_like():
    """Four data layers created as src, src_pos, trg, trg_pos but used trg first; each has its
    own id range, so feeding a field to the wrong layer fails."""
    paddle.layer.reset_names()
    paddle.init(seed=3)
    src = L.data(name="src", type=DT.integer_value_sequence(11))
    src_pos = L.data(name="src_pos", type=DT.integer_value_sequence(5))
    trg = L.data(name="trg", type=DT.integer_value_sequence(13))
    trg_pos = L.data(name="trg_pos", type=DT.integer_value_sequence(4))
    trg_vec = L.pooling(input=L.embedding(input=trg, size=6), pooling_type=paddle.pooling.Sum())
    trg_pos_vec = L.pooling(input=L.embedding(input=trg_pos, size=6),
                            pooling_type=paddle.pooling.Sum())
    src_vec = L.pooling(input=L.embedding(input=src, size=6), pooling_type=paddle.pooling.Sum())
    src_pos_vec = L.pooling(input=L.embedding(input=src_pos, size=6),
                            pooling_type=paddle.pooling.Sum())
    out = L.fc(input=[trg_vec, trg_pos_vec, src_vec, src_pos_vec], size=3,
               act=paddle.activation.Softmax())
    label = L.data(name="label", type=DT.integer_value(3))
    cost = L.classification_cost(input=out, label=label)
    rng = np.random.RandomState(0)
    samples = []
    for _ in range(24):
        n, m = rng.randint(1, 5), rng.randint(1, 4)
        samples.append(([int(i) for i in rng.randint(0, 11, n)],
                        [int(i) for i in rng.randint(0, 5, n)],
                        [int(i) for i in rng.randint(0, 13, m)],
                        [int(i) for i in rng.randint(0, 4, m)], int(rng.randint(0, 3))))
    return out, cost, samples


def test_data_layers_feed_in_creation_order_for_train_test_and_infer():
    out, cost, samples = _nmt_like()
    topo = paddle.topology.Topology(cost)
    # PaddlePaddle's parse_network lists data layers in the order the program created them
    assert [n for n, _ in topo.data_type()] == ["src", "src_pos", "trg", "trg_pos", "label"]
    params = paddle.parameters.create(cost)
    trainer = paddle.trainer.SGD(cost, params, paddle.optimizer.Adam(learning_rate=0.05))
    costs = []
    trainer.train(paddle.batch(lambda: iter(samples), 8), num_passes=8, show_progress=False,
                  event_handler=lambda e: costs.append(e.cost) if isinstance(
                      e, paddle.event.EndIteration) else None)
    assert costs[-1] < costs[0]
    named = {"src": 0, "src_pos": 1, "trg": 2, "trg_pos": 3, "label": 4}
    assert trainer.test(paddle.batch(lambda: iter(samples), 8)).cost == pytest.approx(
        trainer.test(paddle.batch(lambda: iter(samples), 8), feeding=named).cost)
    # the NMT inference case: the script passes [src, src_pos, trg, trg_pos] and no feeding
    inputs = [s[:4] for s in samples]
    got = paddle.infer(output_layer=out, parameters=params, input=inputs)
    want = paddle.infer(output_layer=out, parameters=params, input=inputs,
                        feeding={k: v for k, v in named.items() if k != "label"})
    assert got.shape == (24, 3)
    np.testing.assert_array_equal(got, want)


def test_layers_and_parameters_come_in_creation_order():
    paddle.layer.reset_names()
    x = L.data(name="x", type=DT.dense_vector(3))
    a = L.fc(input=x, size=2)
    b = L.fc(input=x, size=2)
    c = L.fc(input=[b, a], size=1)  # reaches b before a
    topo = paddle.topology.Topology(c)
    assert [lc.name for lc in topo.proto().layers] == ["x", a.name, b.name, c.name]
    assert paddle.parameters.create(c).names()[:4] == [
        "___fc_layer_0__.w0", "___fc_layer_0__.wbias", "___fc_layer_1__.w0",
        "___fc_layer_1__.wbias"]


def test_wrong_field_order_still_fails_on_the_layer_it_reaches():
    out, _, samples = _nmt_like()
    params = paddle.parameters.create(out)
    swapped = [(s[2], s[3], s[0], s[1]) for s in samples]  # trg ids (< 13) reach src (11)
    with pytest.raises(ValueError, match=r"data layer 'src'.*outside \[0, 11\)"):
        paddle.infer(output_layer=out, parameters=params, input=swapped)


def _binary_model():
    paddle.layer.reset_names()
    paddle.init(seed=1)
    x = L.data(name="x", type=DT.dense_vector(4))
    y = L.data(name="y", type=DT.integer_value(2))
    prob = L.fc(input=x, size=2, act=paddle.activation.Softmax())
    cost = L.classification_cost(input=prob, label=y)
    rng = np.random.RandomState(2)
    X = rng.randn(64, 4).astype(np.float32)
    Y = (X[:, 0] + 0.3 * X[:, 1] > 0).astype(int)
    return x, y, prob, cost, lambda: iter(zip(X, Y))


def test_evaluators_in_extra_layers_report_their_metrics():
    x, y, prob, cost, reader = _binary_model()
    params = paddle.parameters.create(cost)
    auc = paddle.evaluator.auc(input=prob, label=y)
    err = paddle.evaluator.classification_error(input=prob, label=y, name="err")
    trainer = paddle.trainer.SGD(cost=cost, parameters=params,
                                 update_equation=paddle.optimizer.Adam(learning_rate=0.1),
                                 extra_layers=auc)
    passes = []
    trainer.train(paddle.batch(reader, 16), num_passes=12, show_progress=False,
                  event_handler=lambda e: passes.append(e.metrics) if isinstance(
                      e, paddle.event.EndPass) else None)
    assert {"auc_evaluator", "err"} <= set(passes[-1])
    assert passes[0]["auc_evaluator"] < 0.8 < passes[-1]["auc_evaluator"]
    res = trainer.test(paddle.batch(reader, 16))
    assert 0.0 <= res.metrics["err"] <= 0.3 and res.metrics["auc_evaluator"] > 0.8
    # a list mixing evaluators and layers, as v2 programs write it
    both = paddle.trainer.SGD(cost=cost, parameters=params,
                              update_equation=paddle.optimizer.Adam(learning_rate=0.05),
                              extra_layers=[auc, err, prob])
    assert {"auc_evaluator", "err"} <= set(both.test(paddle.batch(reader, 16)).metrics)


def test_evaluator_on_layers_the_topology_does_not_reach_is_refused():
    x, y, prob, cost, _ = _binary_model()
    other = L.fc(input=x, size=2, act=paddle.activation.Softmax())
    params = paddle.parameters.create(cost)
    with pytest.raises(ValueError, match="evaluator 'auc_evaluator' reads layers .*__fc_layer_1__"):
        paddle.trainer.SGD(cost=cost, parameters=params,
                           update_equation=paddle.optimizer.Adam(),
                           extra_layers=paddle.evaluator.auc(input=other, label=y))
    with pytest.raises(TypeError, match=r"extra_layers \(besides evaluators\) must be layers"):
        paddle.topology.Topology(cost, extra_layers=[prob, "auc"])


def test_data_layer_accepts_layer_attr_as_paddle_did():
    x = L.data(name="x", type=DT.dense_vector(3), layer_attr=paddle.attr.Extra())
    assert x.size == 3
    assert L.data(name="x2", type=DT.dense_vector(3),
                  layer_attr=paddle.attr.ExtraAttr(device=-1)).size == 3
    with pytest.raises(ValueError, match="data layer 'x3'.*drop_rate=0.5.*dropout"):
        L.data(name="x3", type=DT.dense_vector(3), layer_attr=paddle.attr.Extra(drop_rate=0.5))
    with pytest.raises(ValueError, match="data layer 'x4'.*error_clipping_threshold"):
        L.data(name="x4", type=DT.dense_vector(3),
               layer_attr=paddle.attr.Extra(error_clipping_threshold=1.0))
    with pytest.raises(TypeError, match="data layer 'x5': layer_attr must be"):
        L.data(name="x5", type=DT.dense_vector(3), layer_attr={"drop_rate": 0.1})


def _two_outputs():
    paddle.layer.reset_names()
    x = L.data(name="x", type=DT.dense_vector(3))
    a = L.fc(input=x, size=2, act=paddle.activation.Softmax())
    b = L.fc(input=x, size=2, act=paddle.activation.Linear())
    c = L.fc(input=x, size=5, act=paddle.activation.Linear())
    params = paddle.parameters.create([a, b, c])
    rng = np.random.RandomState(4)
    inputs = [(r,) for r in rng.randn(3, 3).astype(np.float32)]
    return a, b, c, params, inputs


def test_infer_lays_results_out_as_v2():
    a, b, c, params, inputs = _two_outputs()
    va = paddle.infer(output_layer=a, parameters=params, input=inputs)
    vb = paddle.infer(output_layer=b, parameters=params, input=inputs)
    # several output layers, one field: v2 concatenates them along rows, layer after layer
    both = paddle.infer(output_layer=[a, b], parameters=params, input=inputs)
    np.testing.assert_array_equal(both, np.concatenate([va, vb]))
    # flatten_result=False: one array per output layer
    la, lb = paddle.infer(output_layer=[a, b], parameters=params, input=inputs,
                          flatten_result=False)
    np.testing.assert_array_equal(la, va)
    np.testing.assert_array_equal(lb, vb)
    # several fields: a list in field order; each holds every layer's result
    ids, values = paddle.infer(output_layer=[a, b], parameters=params, input=inputs,
                               field=["id", "value"])
    np.testing.assert_array_equal(ids, np.concatenate([va.argmax(1), vb.argmax(1)]))
    np.testing.assert_array_equal(values, both)
    nested = paddle.inference.Inference(parameters=params, output_layer=[a, b]).infer(
        inputs, field=["value", "id"], flatten_result=False)
    assert [len(f) for f in nested] == [2, 2]
    np.testing.assert_array_equal(nested[1][1], vb.argmax(1))
    # v2's positional order is Inference(parameters, output_layer)
    np.testing.assert_array_equal(paddle.inference.Inference(params, a).infer(inputs), va)
    # a chunked run joins its chunks back into v2's one batch before laying out
    chunked = paddle.inference.Inference(output_layer=[a, b], parameters=params,
                                         batch_size=2).infer(inputs)
    np.testing.assert_array_equal(chunked, both)
    assert paddle.infer(output_layer=a, parameters=params, input=[]) == []


def test_infer_of_unequal_widths_needs_flatten_result_false():
    a, _, c, params, inputs = _two_outputs()
    with pytest.raises(ValueError, match="flatten_result=False"):
        paddle.infer(output_layer=[a, c], parameters=params, input=inputs)
    la, lc = paddle.infer(output_layer=[a, c], parameters=params, input=inputs,
                          flatten_result=False)
    assert la.shape == (3, 2) and lc.shape == (3, 5)


def test_iter_infer_yields_v2_forward_test_dicts():
    a, b, _, params, inputs = _two_outputs()
    inf = paddle.inference.Inference(output_layer=[a, b], parameters=params)
    (batch,) = list(inf.iter_infer(input=inputs))
    assert [sorted(d) for d in batch] == [["id", "prob", "value"]] * 2
    assert batch[0]["id"] is None and batch[0]["value"].shape == (3, 2)
    items = list(inf.iter_infer_field(field="value", input=inputs))
    assert len(items) == 2 and items[1][0].shape == (3, 2)


def test_float_ids_say_use_floor_division():
    paddle.layer.reset_names()
    w = L.data(name="w", type=DT.integer_value(10))
    bag = L.data(name="bag", type=DT.sparse_binary_vector(10))
    out = L.fc(input=[L.embedding(input=w, size=2), bag], size=2)
    params = paddle.parameters.create(out)
    with pytest.raises(ValueError, match=r"data layer 'w'.*3\.5 is not an integer.*use '//'"):
        paddle.infer(output_layer=out, parameters=params, input=[(7 / 2, [1])])
    with pytest.raises(ValueError, match=r"2\.5 is not an integer.*use '//'"):
        paddle.infer(output_layer=out, parameters=params, input=[(3, [5 / 2])])
    whole = paddle.infer(output_layer=out, parameters=params, input=[(6 / 2, [4 / 2])])
    exact = paddle.infer(output_layer=out, parameters=params, input=[(3, [2])])
    np.testing.assert_array_equal(whole, exact)


def test_v2_helpers_and_argument_names():
    paddle.layer.reset_names()
    x = L.data(name="x", type=DT.dense_vector(3))
    y = L.data(name="y", type=DT.integer_value(2))
    q = L.data(name="q", type=DT.integer_value(5))
    prob = L.fc(input=x, size=2, act=paddle.activation.Softmax(),
                param_attr=paddle.attr.Param(name="w", sparse_update=True))
    cost = L.classification_cost(input=prob, label=y)
    topo = paddle.topology.Topology(cost)
    assert topo.get_layer_proto(prob.name).size == 2 and topo.get_layer_proto("nope") is None
    assert topo.use_sparse_updater()
    assert paddle.data_feeder.default_feeding_map(topo.data_type()) == {"x": 0, "y": 1}
    params = paddle.parameters.create(cost)
    params.set(parameter_name="w", value=np.ones((3, 2), np.float32))
    assert params.get(parameter_name="w").sum() == 6
    sgd = paddle.trainer.SGD(cost, params, paddle.optimizer.Momentum(momentum=0.9,
                                                                     is_async=False))
    assert sgd.get_topology_proto().output_layer_names == [cost.name]
    assert paddle.trainer.default_event_handler(paddle.event.BeginPass(0)) is None
    assert paddle.evaluator.pnpair(input=prob, label=y, query_id=q).input_layers == [
        prob.name, "y", "q"]
    with pytest.raises(NotImplementedError, match="is_async=True"):
        paddle.optimizer.Adam(is_async=True)
    assert list(paddle.reader.pipe_reader(left_cmd="printf 'a\\nb\\n'")()) == ["a", "b"]
    # PaddlePaddle's argument names and PyDataProvider2's names for the input types
    assert DT.integer_value(value_range=5) == DT.index_slot(5) == InputType(5, 0, 3)
    assert DT.integer_value_sequence(value_range=7) == DT.integer_sequence(7)
    assert DT.sparse_non_value_slot(4) == DT.sparse_binary_vector(4)
    assert DT.sparse_value_slot(4) == DT.sparse_float_vector(4)


def test_parameters_append_config_as_paddles_tests_build_them():
    from types import SimpleNamespace

    params = paddle.parameters.Parameters()
    params.__append_config__(SimpleNamespace(name="p0", dims=[3, 4], size=12))
    params.__append_config__(SimpleNamespace(name="p1", dims=[], size=5))
    assert params.names() == ["p0", "p1"]
    assert params.get_shape("p0") == (3, 4) and params.get_shape("p1") == (1, 5)
    with pytest.raises(ValueError, match="duplicated parameter 'p0'"):
        params.__append_config__(SimpleNamespace(name="p0", dims=[1], size=1))
