"""sculler.distributed on a real local Ray cluster (one per session, see conftest.py): sync
equals local training, async reaches local accuracy, pserver and trainer kills lose no
batch, and a 2,000,000-row sparse table trains while trainers hold only the touched rows."""

import numpy as np
import pytest

import sculler as paddle
from sculler.distributed import Cluster
from sculler.distributed.rpc import call

pytestmark = pytest.mark.slow


def _mlp(seed=1):
    paddle.layer.reset_names()
    paddle.init(seed=seed)
    pixel = paddle.layer.data(name="pixel", type=paddle.data_type.dense_vector(64))
    label = paddle.layer.data(name="label", type=paddle.data_type.integer_value(10))
    h = paddle.layer.fc(input=pixel, size=32, act=paddle.activation.Relu())
    pred = paddle.layer.fc(input=h, size=10, act=paddle.activation.Softmax())
    return paddle.layer.classification_cost(input=pred, label=label)


def _optimizer():
    return paddle.optimizer.Momentum(learning_rate=0.05 / 64, momentum=0.9)


def _test_accuracy(cost, params):
    tr = paddle.trainer.SGD(cost=cost, parameters=params, update_equation=_optimizer())
    res = tr.test(paddle.batch(paddle.dataset.digits.test(), 128))
    return 1 - res.metrics["classification_error_evaluator"]


TRAIN = paddle.batch(paddle.dataset.digits.train(), 64)  # 23 batches, the same every pass
N_BATCHES = 23
PASSES = 6  # converged: test accuracy ~0.975-0.983 with batches of 64 or 128 alike


class Recorder:
    """Keeps EndIteration events; optionally runs ``action`` once at a given (pass, count)."""

    def __init__(self, at=None, action=None):
        self.iters, self.passes = [], []
        self.at, self.action = at, action

    def __call__(self, e):
        if isinstance(e, paddle.event.EndIteration):
            self.iters.append(e)
            count = sum(1 for i in self.iters if i.pass_id == e.pass_id)
            if self.at == (e.pass_id, count):
                self.action()
        elif isinstance(e, paddle.event.EndPass):
            self.passes.append(e.metrics)

    def batches(self, pass_id):
        return sorted(e.batch_id for e in self.iters if e.pass_id == pass_id)


def test_sync_equals_local_training_on_the_concatenated_batches(ray_cluster):
    paddle.layer.reset_names()
    paddle.init(seed=3)
    pixel = paddle.layer.data(name="pixel", type=paddle.data_type.dense_vector(64))
    word = paddle.layer.data(name="word", type=paddle.data_type.integer_value(50))
    label = paddle.layer.data(name="label", type=paddle.data_type.integer_value(10))
    emb = paddle.layer.embedding(input=word, size=8,
                                 param_attr=paddle.attr.Param(sparse_update=True))
    h = paddle.layer.fc(input=[pixel, emb], size=16, act=paddle.activation.Tanh())
    pred = paddle.layer.fc(input=h, size=10, act=paddle.activation.Softmax())
    cost = paddle.layer.classification_cost(input=pred, label=label)
    X, y = paddle.dataset.digits.load_arrays("train")
    samples = [(X[i], int(y[i] * 5 + i % 5), int(y[i])) for i in range(224)]
    batches = [samples[i:i + 32] for i in range(0, len(samples), 32)]  # 7 batches
    params = paddle.parameters.create(cost)
    start = {n: params.get(n) for n in params.names()}
    opt = paddle.optimizer.Momentum(learning_rate=0.01, momentum=0.9,
                                    regularization=paddle.optimizer.L2Regularization(1e-3))
    rec = Recorder()
    with Cluster(num_trainers=2, num_pservers=2, mode="sync", batches_per_task=2,
                 rpc_timeout_s=120) as cluster:
        cluster.train(cost, params, opt, lambda: iter(batches), num_passes=2,
                      event_handler=rec)
    steps = {}
    for e in rec.iters:
        steps.setdefault(e.step, []).append(e.batch_id)
    # per pass: 7 batches in tasks of 2 -> steps of 2, 2, 2, 1 (the last task alone)
    assert sorted(len(v) for v in steps.values()) == [1, 1] + [2] * 6
    assert {e.trainer_id for e in rec.iters} == {0, 1}
    local = paddle.parameters.create(cost)
    for n, v in start.items():
        local.set(n, v)
    concat = [sum((batches[b] for b in sorted(steps[s])), []) for s in sorted(steps)]
    sgd = paddle.trainer.SGD(cost=cost, parameters=local, update_equation=paddle.optimizer.Momentum(
        learning_rate=0.01, momentum=0.9, regularization=paddle.optimizer.L2Regularization(1e-3)))
    sgd.train(lambda: iter(concat), num_passes=1, show_progress=False)
    worst = max(float(np.abs(params.get(n) - local.get(n)).max()) for n in params.names())
    print(f"sync vs local: max abs difference {worst:.3g}")
    for n in params.names():
        assert not np.array_equal(params.get(n), start[n]), n
        np.testing.assert_allclose(params.get(n), local.get(n), rtol=0, atol=1e-5, err_msg=n)


@pytest.fixture(scope="module")
def unharmed(ray_cluster):
    cost = _mlp()
    params = paddle.parameters.create(cost)
    rec = Recorder()
    with Cluster(num_trainers=2, num_pservers=2, mode="sync", checkpoint_every=4,
                 rpc_timeout_s=120) as cluster:
        cluster.train(cost, params, _optimizer(), TRAIN, num_passes=PASSES, event_handler=rec)
    return _test_accuracy(cost, params), rec, {n: params.get(n) for n in params.names()}


def _assert_each_batch_once(rec):
    for p in range(PASSES):
        assert rec.batches(p) == list(range(N_BATCHES)), p


def test_unharmed_sync_run_trains_each_batch_once(unharmed):
    acc, rec, _ = unharmed
    _assert_each_batch_once(rec)
    assert acc >= 0.85
    assert rec.passes[-1]["dist.lost_updates"] == 0 and rec.passes[-1]["dist.requeued"] == 0


def test_async_reaches_local_accuracy(ray_cluster):
    cost = _mlp()
    local = paddle.parameters.create(cost)
    start = {n: local.get(n) for n in local.names()}
    paddle.trainer.SGD(cost=cost, parameters=local, update_equation=_optimizer()).train(
        TRAIN, num_passes=PASSES, show_progress=False)
    local_acc = _test_accuracy(cost, local)
    params = paddle.parameters.create(cost)
    for n, v in start.items():
        params.set(n, v)
    rec = Recorder()
    with Cluster(num_trainers=2, num_pservers=2, mode="async", rpc_timeout_s=120) as cluster:
        cluster.train(cost, params, _optimizer(), TRAIN, num_passes=PASSES, event_handler=rec)
    _assert_each_batch_once(rec)
    acc = _test_accuracy(cost, params)
    print(f"async accuracy {acc:.4f}, local {local_acc:.4f}, dropped "
          f"{rec.passes[-1]['dist.dropped']}")
    # async interleaving varies run to run (0.953-0.981 seen against local 0.975 on 360 test
    # digits; at 16 passes 0.958-0.986 over 7 runs, local training's spread over seeds, see
    # docs/distributed.md); 0.035 is 12 test samples
    assert acc >= local_acc - 0.035
    assert rec.passes[-1]["dist.dropped"] >= 0


def test_async_with_one_trainer_is_local_training(ray_cluster):
    """Without staleness (one trainer: its next batch is pulled after its last push is
    applied) async mode is local training: the same learning rate scaling, the same momentum
    state, no push lost or dropped. So what async loses with more trainers is staleness
    alone (docs/distributed.md, "Async accuracy")."""
    cost = _mlp()
    local = paddle.parameters.create(cost)
    start = {n: local.get(n) for n in local.names()}
    paddle.trainer.SGD(cost=cost, parameters=local, update_equation=_optimizer()).train(
        TRAIN, num_passes=2, show_progress=False)
    params = paddle.parameters.create(cost)
    for n, v in start.items():
        params.set(n, v)
    rec = Recorder()
    with Cluster(num_trainers=1, num_pservers=2, mode="async", rpc_timeout_s=120) as cluster:
        cluster.train(cost, params, _optimizer(), TRAIN, num_passes=2, event_handler=rec)
    assert rec.passes[-1]["dist.dropped"] == 0 and rec.passes[-1]["dist.duplicates"] == 0
    for n in params.names():
        assert not np.array_equal(params.get(n), start[n]), n
        np.testing.assert_allclose(params.get(n), local.get(n), rtol=0, atol=1e-5, err_msg=n)


def test_pserver_killed_mid_pass_recovers_from_its_checkpoint(unharmed):
    cost = _mlp()
    params = paddle.parameters.create(cost)
    with Cluster(num_trainers=2, num_pservers=2, mode="sync", checkpoint_every=4,
                 rpc_timeout_s=120) as cluster:
        killed = []
        rec = Recorder(at=(1, 10), action=lambda: killed.append(cluster.kill_pserver(0)))
        cluster.train(cost, params, _optimizer(), TRAIN, num_passes=PASSES, event_handler=rec)
    assert killed
    _assert_each_batch_once(rec)
    acc = _test_accuracy(cost, params)
    lost = rec.passes[-1]["dist.lost_updates"]
    print(f"pserver kill: accuracy {acc:.4f} vs unharmed {unharmed[0]:.4f}, lost {lost}")
    assert 1 <= lost <= 4  # at most one checkpoint interval (4 steps)
    assert abs(acc - unharmed[0]) <= 0.02


def test_trainer_killed_mid_pass_its_task_goes_to_another(unharmed):
    cost = _mlp()
    params = paddle.parameters.create(cost)
    with Cluster(num_trainers=2, num_pservers=2, mode="sync", checkpoint_every=4,
                 rpc_timeout_s=120) as cluster:
        killed_after = []

        def kill():
            cluster.kill_trainer(1)
            killed_after.append(rec.iters[-1].step)

        rec = Recorder(at=(PASSES - 1, 7), action=kill)
        cluster.train(cost, params, _optimizer(), TRAIN, num_passes=PASSES, event_handler=rec)
    _assert_each_batch_once(rec)
    assert rec.passes[-1]["dist.live_trainers"] == 1 and rec.passes[-1]["dist.requeued"] >= 1
    assert {e.trainer_id for e in rec.iters if e.step > killed_after[0]} == {0}
    assert 1 in {e.trainer_id for e in rec.iters if e.step <= killed_after[0]}
    acc = _test_accuracy(cost, params)
    print(f"trainer kill: accuracy {acc:.4f} vs unharmed {unharmed[0]:.4f}")
    assert abs(acc - unharmed[0]) <= 0.02


def test_sparse_table_of_2m_rows_trainers_hold_only_touched_rows(ray_cluster):
    rows, width = 2_000_000, 64
    paddle.layer.reset_names()
    paddle.init(seed=5)
    word = paddle.layer.data(name="word", type=paddle.data_type.integer_value(rows))
    label = paddle.layer.data(name="label", type=paddle.data_type.integer_value(2))
    emb = paddle.layer.embedding(input=word, size=width, param_attr=paddle.attr.Param(
        name="big_table", sparse_update=True, initial_std=0.0))
    pred = paddle.layer.fc(input=emb, size=2, act=paddle.activation.Softmax())
    cost = paddle.layer.classification_cost(input=pred, label=label)
    params = paddle.parameters.create(cost)
    table_bytes = rows * width * 4
    rng = np.random.RandomState(0)
    uniques = [64, 128, 256, 512]
    batches = []
    for u in uniques:  # 512 samples over u distinct ids spread over the whole table
        ids = rng.choice(rows, size=u, replace=False)
        batches.append([(int(ids[i % u]), int(ids[i % u] % 2)) for i in range(512)])
    rss = []
    with Cluster(num_trainers=2, num_pservers=2, mode="sync", checkpoint_every=1000,
                 rpc_timeout_s=300) as cluster:
        def measure():
            for t, h in enumerate(cluster.trainers):
                rss.append(call(f"trainer {t}", h.node_status, timeout_s=60)["rss_bytes"])

        rec = Recorder(at=(0, 3), action=measure)
        cluster.train(cost, params, paddle.optimizer.Momentum(learning_rate=0.05),
                      lambda: iter(batches), num_passes=1, event_handler=rec)
    dense = (width * 2 + 2) * 4  # the fc weight and bias gradients
    for e in rec.iters:
        u = uniques[e.batch_id]
        assert e.pushed_bytes == u * (8 + width * 4) + dense  # ids + rows, nothing else
        assert e.pulled_bytes == u * width * 4 + dense
    table = params.get("big_table")
    touched = np.unique([s[0] for b in batches for s in b])
    assert np.abs(table[touched]).sum(axis=1).min() > 0  # every touched row trained
    untouched = np.setdiff1d(rng.choice(rows, size=1000, replace=False), touched)
    assert np.all(table[untouched] == 0)
    print(f"trainer RSS {[r >> 20 for r in rss]} MiB, table {table_bytes >> 20} MiB")
    assert rss and max(rss) < table_bytes / 2


class DriverDied(Exception):
    pass


def test_a_run_resumes_from_checkpoint_dir_after_the_driver_dies(unharmed, tmp_path):
    cost = _mlp()
    params = paddle.parameters.create(cost)
    start = {n: params.get(n) for n in params.names()}

    def die():
        raise DriverDied

    first = Recorder(at=(2, 10), action=die)
    with pytest.raises(DriverDied):
        with Cluster(num_trainers=2, num_pservers=2, mode="sync", checkpoint_every=4,
                     checkpoint_dir=str(tmp_path), rpc_timeout_s=120) as cluster:
            cluster.train(cost, params, _optimizer(), TRAIN, num_passes=PASSES,
                          event_handler=first)
    for n, v in start.items():  # a new process: nothing in memory survives
        params.set(n, v)
    second = Recorder()
    with Cluster(num_trainers=2, num_pservers=2, mode="sync", checkpoint_every=4,
                 checkpoint_dir=str(tmp_path), rpc_timeout_s=120) as cluster:
        cluster.train(cost, params, _optimizer(), TRAIN, num_passes=PASSES,
                      event_handler=second)
    assert {e.pass_id for e in second.iters} == set(range(2, PASSES))
    resumed = second.batches(2)
    assert len(resumed) < N_BATCHES and resumed == sorted(set(resumed))
    assert set(first.batches(2)) | set(resumed) == set(range(N_BATCHES))
    for p in range(3, PASSES):
        assert second.batches(p) == list(range(N_BATCHES))
    for n, v in unharmed[2].items():  # a consistent cut: the same result as no interruption
        np.testing.assert_allclose(params.get(n), v, rtol=0, atol=1e-6, err_msg=n)


def test_docs_examples_run(ray_cluster, capsys):
    import pathlib
    import re

    doc = pathlib.Path(__file__).resolve().parents[2] / "docs" / "distributed.md"
    blocks = re.findall(r"```python\n(.*?)```", doc.read_text(), flags=re.S)
    assert len(blocks) == 2
    namespace: dict = {}
    for block in blocks:  # one script, in order, as the docs say
        exec(block, namespace)
    out = capsys.readouterr().out
    assert "pass 1: error" in out
    assert float(re.search(r"test accuracy ([0-9.]+)", out).group(1)) > 0.8


def test_a_call_past_its_deadline_or_to_a_dead_actor_raises_remote_timeout(ray_cluster):
    import time

    from sculler.distributed import RemoteTimeout

    @ray_cluster.remote(num_cpus=0)
    class Slow:
        def wait(self, seconds):
            time.sleep(seconds)
            return seconds

    h = Slow.remote()
    assert call("slow", h.wait, 0, timeout_s=60) == 0
    t0 = time.monotonic()
    with pytest.raises(RemoteTimeout, match="slow.wait did not answer within 1.0 s"):
        call("slow", h.wait, 30, timeout_s=1)
    ray_cluster.kill(h)
    with pytest.raises(RemoteTimeout):
        call("slow", h.wait, 0, timeout_s=1)
    assert time.monotonic() - t0 < 15  # no hang


@pytest.mark.parametrize("mode,checkpoint_every", [("sync", 100), ("async", 100), ("sync", 5)])
def test_master_killed_at_any_point_loses_no_batch_and_trains_none_twice(ray_cluster, mode,
                                                                          checkpoint_every):
    """SIGKILL the master before the first task is done, mid-pass and near the end of a pass,
    with the default checkpoint_every=100 (no snapshot within a pass) and with snapshots
    every 5 steps: Ray restarts it, it replays its journal onto its last snapshot, and every
    (pass, batch) is trained exactly once, as the driver's events and the servers' own counts
    of applied pushes both say."""
    cost = _mlp()
    params = paddle.parameters.create(cost)
    kill_at = {(0, 1), (0, 12), (1, N_BATCHES - 2)}  # (pass, batches trained in it)
    with Cluster(num_trainers=2, num_pservers=2, mode=mode, checkpoint_every=checkpoint_every,
                 rpc_timeout_s=120) as cluster:
        killed = []
        rec = Recorder()

        def handler(e):
            rec(e)
            if isinstance(e, paddle.event.EndIteration):
                if (e.pass_id, len(rec.batches(e.pass_id))) in kill_at:
                    killed.append(cluster.kill_master())
            elif isinstance(e, paddle.event.EndPass):
                statuses = [call(f"pserver {s}", h.status, timeout_s=60)
                            for s, h in enumerate(cluster.shards)]
                applied.append([st["applied"] for st in statuses])

        applied = []
        cluster.train(cost, params, _optimizer(), TRAIN, num_passes=2, event_handler=handler)
    for p in range(2):
        assert rec.batches(p) == list(range(N_BATCHES)), p  # none lost, none twice
    assert len(set(killed)) == 3  # three different master processes were killed
    # every shard applied one push per batch: 23 after pass 0, 46 after pass 1
    assert applied == [[N_BATCHES] * 2, [2 * N_BATCHES] * 2]
    assert rec.passes[-1]["dist.lost_updates"] == 0
