"""Trainers, shards and the master as plain objects in one process (remote calls replaced by
direct calls): fc over a sparse input with a row-split table, local tables that grow, and sync
steps equal to local training."""

import numpy as np
import pytest

import sculler as paddle
from sculler.distributed import ShardMap
from sculler.distributed import worker as W
from sculler.distributed.master import Master
from sculler.distributed.pserver import ParameterShard
from sculler.topology import Topology


@pytest.fixture
def in_process(monkeypatch):
    monkeypatch.setattr(W, "call", lambda role, method, *args, timeout_s: method(*args))
    monkeypatch.setattr(W, "call_all", lambda calls, timeout_s: [m(*a) for _, m, a in calls])


def _model(first: str = "fc"):
    """A sparse input into a sparse table, read by an fc layer or by a mixed layer's
    full-matrix projection, then an fc softmax."""
    paddle.layer.reset_names()
    paddle.init(seed=7)
    words = paddle.layer.data(name="words",
                              type=paddle.data_type.sparse_binary_vector(1000))
    label = paddle.layer.data(name="label", type=paddle.data_type.integer_value(3))
    table = paddle.attr.Param(sparse_update=True)
    if first == "fc":
        h = paddle.layer.fc(input=words, size=8, act=paddle.activation.Tanh(),
                            param_attr=table)
    else:
        h = paddle.layer.mixed(
            input=paddle.layer.full_matrix_projection(input=words, size=8, param_attr=table),
            size=8, act=paddle.activation.Tanh(), bias_attr=True)
    pred = paddle.layer.fc(input=h, size=3, act=paddle.activation.Softmax())
    return paddle.layer.classification_cost(input=pred, label=label)


def _optimizer():
    return paddle.optimizer.Momentum(learning_rate=0.05, momentum=0.9)


@pytest.mark.parametrize("first", ["fc", "mixed"])
def test_sync_steps_over_a_sparse_table_equal_local_training(in_process, first):
    cost = _model(first)
    topo = Topology(cost)
    params = paddle.parameters.create(cost)
    start = {n: params.get(n) for n in params.names()}
    rng = np.random.RandomState(0)
    batches = [[(sorted(rng.choice(1000, size=rng.randint(1, 6), replace=False).tolist()),
                 int(rng.randint(3))) for _ in range(12)] for _ in range(6)]
    mc = topo.proto()
    smap = ShardMap(mc.parameters, 2)
    assert smap.sparse and smap.sparse == [pc.name for pc in mc.parameters if pc.sparse_update]
    shards = [ParameterShard(s, smap, _optimizer()) for s in range(2)]
    for s, shard in enumerate(shards):
        values = {n: start[n] for n in smap.dense_on(s)}
        values.update({n: smap.slice_table(n, start[n], s) for n in smap.sparse})
        shard.init_values(values)
    master = Master(timeout_s=60)
    master.start_pass(0, len(batches), 1)
    workers = [W.TrainerWorker(t, mc, topo.data_type(), None, lambda: iter(batches), smap,
                               shards, master, capacity=4) for t in range(2)]
    order = []
    for step in range(3):
        out = [w.compute(0) for w in workers]
        assert all(master.commit([(m["task"], m["batch"]) for m, *_ in out]))
        for s, shard in enumerate(shards):
            shard.apply_sync(step, *[pushes[s] for _, *pushes in out])
        order.append([m["batch"] for m, *_ in out])
        for m, *pushes in out:  # only touched rows travel: 8 bytes of id + 8 floats each
            rows = len({i for sample in batches[m["batch"]] for i in sample[0]})
            sparse = sum(r.nbytes + g.nbytes for p in pushes for r, g in p["sparse"].values())
            assert sparse == rows * (8 + 8 * 4)
    assert master.progress()["finished"]
    assert max(w.capacity for w in workers) > 4  # a batch touched more rows: the table grew
    local = paddle.parameters.create(cost)
    for n, v in start.items():
        local.set(n, v)
    sgd = paddle.trainer.SGD(cost=cost, parameters=local, update_equation=_optimizer())
    sgd.train(lambda: iter([batches[a] + batches[b] for a, b in order]), num_passes=1,
              show_progress=False)
    for n in smap.dense:
        np.testing.assert_allclose(shards[smap.dense_owner[n]].values[n], local.get(n),
                                   rtol=0, atol=1e-6, err_msg=n)
    for n in smap.sparse:
        table = np.zeros_like(start[n])
        smap.assemble_table(n, [sh.values[n] for sh in shards], table)
        np.testing.assert_allclose(table, local.get(n), rtol=0, atol=1e-6, err_msg=n)
        touched = {i for b in batches for sample in b for i in sample[0]}
        untouched = sorted(set(range(1000)) - touched)
        np.testing.assert_array_equal(table[untouched], start[n][untouched])


def test_a_data_layer_feeding_a_sparse_table_and_another_layer_is_refused():
    paddle.layer.reset_names()
    words = paddle.layer.data(name="w", type=paddle.data_type.integer_value(50))
    emb = paddle.layer.embedding(input=words, size=4,
                                 param_attr=paddle.attr.Param(sparse_update=True))
    other = paddle.layer.embedding(input=words, size=4)
    out = paddle.layer.fc(input=[emb, other], size=2)
    mc = Topology(out).proto()
    sparse = [pc.name for pc in mc.parameters if pc.sparse_update]
    with pytest.raises(NotImplementedError, match="feeds sparse table"):
        W.sparse_inputs(mc, sparse)


@pytest.mark.parametrize("how", ["dense", "transposed"])
def test_a_sparse_table_whose_rows_a_batch_cannot_name_is_refused(how):
    """A dense input touches every row, and a sparse input of a transposed projection names
    columns of the table: neither can fetch only the rows a batch needs."""
    paddle.layer.reset_names()
    kind = (paddle.data_type.dense_vector(20) if how == "dense"
            else paddle.data_type.sparse_binary_vector(20))
    x = paddle.layer.data(name="x", type=kind)
    table = paddle.attr.Param(sparse_update=True)
    if how == "dense":
        h = paddle.layer.fc(input=x, size=4, param_attr=table)
    else:
        h = paddle.layer.mixed(input=paddle.layer.trans_full_matrix_projection(
            input=x, size=4, param_attr=table), size=4)
    mc = Topology(h).proto()
    sparse = [pc.name for pc in mc.parameters if pc.sparse_update]
    with pytest.raises(NotImplementedError, match="only ids, or a sparse vector"):
        W.sparse_inputs(mc, sparse)
