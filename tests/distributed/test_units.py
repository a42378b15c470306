"""sculler.distributed without Ray: sharding, the task queue, shard updates, sequence numbers
and checkpoints."""

import os
import subprocess
import sys

import numpy as np
import pytest

from sculler.core.model_config import ParameterConfig
from sculler.distributed import ShardMap, TaskQueue, stable_shard
from sculler.distributed import checkpoint as ckpt
from sculler.distributed.pserver import ParameterShard
from sculler.optimizer import Momentum


def test_stable_shard_is_the_same_in_every_process():
    names = ["___fc_layer_0__.w0", "emb", "b"]
    here = [stable_shard(n, 3) for n in names]
    code = ("from sculler.distributed import stable_shard;"
            f"print([stable_shard(n, 3) for n in {names!r}])")
    for seed in ("1", "2"):
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             env={**os.environ, "PYTHONHASHSEED": seed}, check=True)
        assert out.stdout.strip() == str(here)


def _configs():
    return [ParameterConfig("w", [4, 3]), ParameterConfig("b", [1, 3]),
            ParameterConfig("emb", [10, 2], sparse_update=True)]


def test_shard_map_dense_whole_sparse_by_rows():
    smap = ShardMap(_configs(), 3)
    assert smap.sparse == ["emb"] and set(smap.dense) == {"w", "b"}
    assert sorted(n for s in range(3) for n in smap.dense_on(s)) == ["b", "w"]
    assert [smap.rows_on("emb", s) for s in range(3)] == [4, 3, 3]
    rows = np.array([0, 4, 5, 9])
    split = smap.split_rows(rows)
    for s, (pos, local) in enumerate(split):
        np.testing.assert_array_equal(rows[pos] % 3, s)
        np.testing.assert_array_equal(smap.global_rows(s, 10)[local], rows[pos])
    table = np.arange(20, dtype=np.float32).reshape(10, 2)
    parts = [smap.slice_table("emb", table, s) for s in range(3)]
    out = np.zeros_like(table)
    smap.assemble_table("emb", parts, out)
    np.testing.assert_array_equal(out, table)
    with pytest.raises(ValueError, match="num_shards"):
        ShardMap(_configs(), 0)


def test_task_queue_hands_out_commits_in_order_and_rejects_duplicates():
    q = TaskQueue(timeout_s=10, clock=lambda: 0.0)
    q.start_pass(0, 5, 2)  # tasks [0,2) [2,4) [4,5)
    assert q.next_batch(7) == (0, 0) and q.next_batch(8) == (1, 2)
    assert q.commit(0, 0) and not q.commit(0, 0)  # duplicate
    assert not q.commit(1, 3)  # out of order
    assert q.next_batch(7) == (0, 1) and q.commit(0, 1)
    assert q.next_batch(7) == (2, 4)
    assert q.commit(1, 2) and q.next_batch(8) == (1, 3) and q.commit(1, 3)
    assert q.commit(2, 4) and q.pass_finished() and q.committed_batches() == 5
    assert q.next_batch(7) is None


def test_task_queue_requeues_a_dead_trainers_task_at_its_commit_point():
    q = TaskQueue(timeout_s=10, clock=lambda: 0.0)
    q.start_pass(0, 4, 4)
    assert q.next_batch(0) == (0, 0) and q.commit(0, 0)
    assert q.next_batch(0) == (0, 1)  # handed out, never committed: trainer 0 dies
    assert q.next_batch(1) is None
    q.trainer_failed(0)
    seen = []
    while (got := q.next_batch(1)) is not None:
        assert q.commit(*got)
        seen.append(got[1])
    assert seen == [1, 2, 3] and q.pass_finished() and q.requeued == 1


def test_task_queue_timeout_and_failure_max():
    now = [0.0]
    q = TaskQueue(timeout_s=5, failure_max=1, clock=lambda: now[0])
    q.start_pass(3, 2, 2)
    assert q.next_batch(0) == (0, 0)
    now[0] = 4.0
    assert q.next_batch(1) is None  # not yet expired
    now[0] = 10.0
    assert q.next_batch(1) == (0, 0)  # expired, re-queued, given to trainer 1
    assert q.commit(0, 0) and not q.commit(0, 0)  # the slow trainer's late result is rejected
    now[0] = 20.0  # trainer 1 went silent too: a second expiry is one more than allowed
    assert q.next_batch(0) is None and q.failed == {0} and q.pass_finished()


def test_task_queue_state_dict_round_trip():
    q = TaskQueue(timeout_s=5, clock=lambda: 0.0)
    q.start_pass(1, 6, 3)
    q.next_batch(0)
    q.commit(0, 0)
    q.next_batch(0)
    r = TaskQueue(timeout_s=5, clock=lambda: 0.0)
    r.load_state_dict(q.state_dict())
    assert r.pass_id == 1 and r.committed_batches() == 1
    assert r.next_batch(4) == (0, 1)  # the uncommitted batch is handed out again


def _shard(opt, tmp=None, staleness=3):
    smap = ShardMap([ParameterConfig("w", [4, 3]),
                     ParameterConfig("emb", [6, 2], sparse_update=True)], 1)
    shard = ParameterShard(0, smap, opt, max_staleness=staleness, checkpoint_dir=tmp)
    rng = np.random.RandomState(0)
    w, emb = rng.randn(4, 3).astype(np.float32), rng.randn(6, 2).astype(np.float32)
    shard.init_values({"w": w, "emb": emb})
    return shard, w, emb


def _push(trainer, seq, gw, rows, gr, version=0, samples=2):
    return {"trainer": trainer, "seq": seq, "version": version, "samples": samples,
            "dense": {"w": gw}, "sparse": {"emb": (np.asarray(rows), gr)}}


def test_sync_step_applies_the_sum_with_the_optimizers_own_update():
    opt = Momentum(momentum=0.9, learning_rate=0.1)
    shard, w, emb = _shard(opt)
    rng = np.random.RandomState(1)
    g1, g2 = rng.randn(4, 3).astype(np.float32), rng.randn(4, 3).astype(np.float32)
    r1, r2 = rng.randn(2, 2).astype(np.float32), rng.randn(2, 2).astype(np.float32)
    for step in range(2):
        shard.apply_sync(step, _push(0, step + 1, g1, [1, 4], r1),
                         _push(1, step + 1, g2, [4, 5], r2))
    ref = Momentum(momentum=0.9, learning_rate=0.1)
    w_ref, emb_ref = w.copy(), emb.copy()
    summed = np.zeros((3, 2), np.float32)
    summed[0], summed[1], summed[2] = r1[0], r1[1] + r2[0], r2[1]
    for _ in range(2):
        ref.update("w", w_ref, g1 + g2)
        ref.update("emb", emb_ref, summed.copy(), rows=np.array([1, 4, 5]))
        ref.finish_batch(4)
    np.testing.assert_allclose(shard.values["w"], w_ref, rtol=1e-6)
    np.testing.assert_allclose(shard.values["emb"], emb_ref, rtol=1e-6)
    np.testing.assert_array_equal(shard.values["emb"][[0, 2, 3]], emb[[0, 2, 3]])  # untouched
    assert shard.version == 2 and shard.counters["applied"] == 4


def test_sequence_numbers_make_a_retried_push_apply_once():
    shard, w, _ = _shard(Momentum(learning_rate=0.5))
    g = np.ones((4, 3), np.float32)
    push = _push(0, 1, g, [0], np.ones((1, 2), np.float32))
    shard.apply_async(push)
    after_one = shard.values["w"].copy()
    shard.apply_async(push)  # the same push again (a retry after a timeout)
    shard.apply_sync(0, push)
    shard.apply_sync(0, _push(0, 2, g, [0], np.ones((1, 2), np.float32)))  # a retried step
    np.testing.assert_array_equal(shard.values["w"], after_one)
    np.testing.assert_allclose(after_one, w - 0.5, rtol=1e-6)
    assert shard.version == 1 and shard.counters["duplicates"] == 3


def test_async_drops_and_counts_stale_pushes():
    shard, _, _ = _shard(Momentum(learning_rate=0.1), staleness=1)
    g = np.ones((4, 3), np.float32)
    gr = np.ones((1, 2), np.float32)
    for seq in range(1, 4):
        shard.apply_async(_push(0, seq, g, [2], gr, version=0))
    assert shard.version == 2 and shard.counters["dropped"] == 1  # version gap 2 > 1


def test_checkpoint_restore_keeps_values_state_and_sequence_numbers(tmp_path):
    opt = Momentum(momentum=0.9, learning_rate=0.1)
    shard, _, _ = _shard(opt, str(tmp_path))
    g = np.full((4, 3), 0.5, np.float32)
    gr = np.ones((1, 2), np.float32)
    shard.apply_async(_push(0, 1, g, [3], gr))
    shard.checkpoint(1)
    saved = {k: v.copy() for k, v in shard.values.items()}
    shard.apply_async(_push(0, 2, g, [3], gr))  # lost in the "crash" below
    restarted = ParameterShard(0, shard.map, opt, checkpoint_dir=str(tmp_path))
    assert restarted.restored_version == 1 and restarted.last_seq == {0: 1}
    for k in saved:
        np.testing.assert_array_equal(restarted.values[k], saved[k])
    restarted.init_values({})  # a restored shard keeps its values
    restarted.apply_async(_push(0, 1, g, [3], gr))  # already in the checkpoint: a duplicate
    assert restarted.version == 1
    restarted.apply_async(_push(0, 2, g, [3], gr))
    np.testing.assert_allclose(restarted.values["w"], shard.values["w"], rtol=1e-6)
    np.testing.assert_allclose(restarted.values["emb"], shard.values["emb"], rtol=1e-6)


def test_atomic_write_leaves_the_old_file_when_the_rename_fails(tmp_path, monkeypatch):
    path = str(tmp_path / "x.bin")
    ckpt.write_atomic(path, b"old")

    def boom(src, dst):
        raise OSError("disk gone")

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(OSError, match="disk gone"):
        ckpt.write_atomic(path, b"new")
    assert open(path, "rb").read() == b"old"
    assert os.listdir(tmp_path) == ["x.bin"]  # no temp file left behind


def test_merge_evaluator_sums_counts_of_one_batch_evaluators():
    from sculler.core.evaluator import create_evaluator
    from sculler.core.model_config import EvaluatorConfig
    from sculler.distributed.cluster import merge_evaluator

    cfg = EvaluatorConfig(name="err", type="classification_error", input_layers=["p", "l"])
    pass_ev, a, b = (create_evaluator(cfg) for _ in range(3))
    a.total, a.count, b.total, b.count = 3.0, 10, 1.0, 30
    merge_evaluator(pass_ev, a)
    merge_evaluator(pass_ev, b)
    assert pass_ev.value() == 4.0 / 40 and pass_ev.name == "err"


def test_a_reader_that_shuffles_differently_on_every_call_is_refused():
    import random

    from sculler.distributed.cluster import check_repeatable

    data = [[(np.full(2, i, np.float32), i)] for i in range(8)]

    def unseeded():
        order = list(range(8))
        random.shuffle(order)
        return iter([data[i] for i in order])

    def seeded():
        order = list(range(8))
        random.Random(0).shuffle(order)
        return iter([data[i] for i in order])

    random.seed(3)
    with pytest.raises(ValueError, match="different batches on two calls"):
        check_repeatable(unseeded)
    assert check_repeatable(seeded) == 8
    with pytest.raises(ValueError, match="no batches"):
        check_repeatable(lambda: iter([]))
