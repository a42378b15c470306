"""What a training batch moves between the host and the GPU: the feeder sends a batch in one
copy, small index arrays go once per distinct content, and the cost and the evaluators'
counts come back in one copy a batch. Counted by the CuPy stand-in of tests/cupy_stand_in
(``cupy.counts``), so these run through tests/test_gpu_paths_on_cpu.py; on a real GPU, whose
CuPy counts nothing, they skip."""

import collections
import pathlib
import sys

import numpy as np
import pytest

import sculler as paddle
from sculler import backend
from sculler.data_feeder import DataFeeder
from sculler.math.sparse import add_rows

pytestmark = pytest.mark.gpu
BENCH = pathlib.Path(__file__).resolve().parents[1] / "bench"


@pytest.fixture
def counts():
    """The stand-in's tally, cleared; the GPU is given back afterwards."""
    import cupy

    if not hasattr(cupy, "counts"):
        pytest.skip("transfers are counted by the CuPy stand-in only (a real CuPy is here)")
    paddle.init(use_gpu=True, seed=0)
    cupy.counts.clear()
    yield cupy.counts
    paddle.init(use_gpu=False)


def test_the_feeder_sends_a_batch_in_one_copy(counts):
    types = [("img", paddle.data_type.dense_vector(3)),
             ("label", paddle.data_type.integer_value(5)),
             ("words", paddle.data_type.integer_value_sequence(9))]
    batch = [([0.5, 1.5, 2.5], 4, [1, 2, 3]), ([3.0, 4.0, 5.0], 0, [8])]
    args = DataFeeder(types).convert(batch)
    assert counts["h2d"] == 1 and counts["d2h"] == 0
    for name in ("img", "label", "words"):
        arg = args[name]
        assert backend.is_gpu_array(arg.value if name == "img" else arg.ids)
    np.testing.assert_array_equal(backend.to_numpy(args["img"].value),
                                  np.array([[0.5, 1.5, 2.5], [3, 4, 5]], np.float32))
    np.testing.assert_array_equal(backend.to_numpy(args["label"].ids), [4, 0])
    counts.clear()
    words = args["words"]
    np.testing.assert_array_equal(words.host_ids(), [1, 2, 3, 8])  # the feeder's copy
    assert counts["d2h"] == 0
    assert words.ids_known_below(9)  # the range check still holds for the device array
    np.testing.assert_array_equal(words.seq_starts, [0, 3, 4])


def test_arrays_sent_together_keep_their_values_dtypes_and_alignment(counts):
    arrays = [np.arange(15, dtype=np.float32).reshape(3, 5), np.arange(7) * -3,
              np.array([[True, False], [False, True]]), np.zeros((0, 4)),
              np.array([1, -2, 3], np.int8), np.arange(12.0).reshape(3, 4)[:, ::2]]
    moved = backend.to_gpu_together(arrays)
    assert counts["h2d"] == 1
    for a, d in zip(arrays, moved):
        assert backend.is_gpu_array(d) and d.dtype == a.dtype and d.shape == a.shape
        np.testing.assert_array_equal(backend.to_numpy(d), a)
        if d.size:  # (CuPy's allocations start 512-byte aligned)
            assert (backend.address(d) - backend.address(moved[0])) % backend.STAGING_ALIGN == 0
    again = backend.to_gpu_together([np.ones(3)])  # the other staging buffer, then this one
    third = backend.to_gpu_together([np.full(3, 7.0)])
    np.testing.assert_array_equal(backend.to_numpy(again[0]), np.ones(3))
    np.testing.assert_array_equal(backend.to_numpy(third[0]), np.full(3, 7.0))
    np.testing.assert_array_equal(backend.to_numpy(moved[0]), arrays[0])  # not overwritten


def test_copies_over_wait_only_when_every_staging_buffer_is_in_flight(counts, monkeypatch):
    """A pinned staging buffer is refilled only after its copy has finished. The copies of
    one batch (the batch, a layer's index arrays, new offsets) each take a buffer of their
    own, so none waits for another; a wait comes only when ``STAGING_BUFFERS`` copies are in
    flight, and after the batch's read-back every buffer is free again (no new pinned
    memory)."""
    import cupyx

    pinned = []
    real = cupyx.empty_pinned
    monkeypatch.setattr(cupyx, "empty_pinned", lambda *a, **k: pinned.append(1) or real(*a, **k))
    monkeypatch.setattr(backend, "STAGING_BUFFERS", 3)
    monkeypatch.setitem(backend._staging, "free", [])
    monkeypatch.setitem(backend._staging, "busy", collections.deque())
    sent = [backend.to_gpu_together([np.full(4, float(k))])[0] for k in range(3)]
    assert counts["wait"] == 0 and len(pinned) == 3
    sent.append(backend.to_gpu_together([np.full(4, 3.0)])[0])  # the oldest buffer, once done
    assert counts["wait"] == 1 and len(pinned) == 3
    backend.to_numpy(sent[-1])  # a read-back: every copy before it has finished
    counts.clear()
    sent += [backend.to_gpu_together([np.full(4, float(k))])[0] for k in (4, 5, 6)]
    assert counts["wait"] == 0 and len(pinned) == 3
    big = backend.to_gpu_together([np.ones(backend.STAGING_MIN_BYTES)])[0]  # grows one
    assert len(pinned) == 4
    for k, d in enumerate(sent):
        np.testing.assert_array_equal(backend.to_numpy(d), np.full(4, float(k)))
    np.testing.assert_array_equal(backend.to_numpy(big), 1.0)


def test_a_small_array_goes_to_the_gpu_once_per_content(counts, monkeypatch):
    monkeypatch.setattr(backend, "GPU_COPY_CACHE_ENTRIES", 2)
    backend._gpu_copies.clear()
    starts = np.array([0, 3, 7])
    first = backend.cached_on_gpu(starts)
    assert backend.cached_on_gpu(np.array([0, 3, 7])) is first
    assert counts["h2d"] == 1
    other = backend.cached_on_gpu(np.array([0, 3, 8]))
    assert other is not first and counts["h2d"] == 2
    assert backend.cached_on_gpu(starts.astype(np.int32)) is not first  # dtype is content
    assert backend.cached_on_gpu(starts) is not first  # evicted: 2 entries at most
    assert counts["h2d"] == 4
    np.testing.assert_array_equal(backend.to_numpy(backend.cached_like(starts, first)), starts)
    assert backend.cached_like(starts, np.zeros(1)) is starts  # on the host: itself


def test_an_array_sent_with_others_is_not_sent_again_for_its_first_use(counts):
    """A recurrent layer sends its steps' offsets with its gather rows in one copy and
    remembers them: the recurrence kernel's look-up finds that copy. An array over the
    cache's size limit is not remembered (it would be sent again, as any large one)."""
    backend._gpu_copies.clear()
    starts, rows = np.array([0, 4, 7, 9]), np.arange(9)
    big = np.zeros(backend.GPU_COPY_CACHE_MAX_BYTES // 8 + 1, np.int64)
    d_starts, _, d_big = backend.to_gpu_together([starts, rows, big])
    backend.remember_on_gpu(starts, d_starts)
    backend.remember_on_gpu(big, d_big)
    counts.clear()
    assert backend.cached_on_gpu(np.array([0, 4, 7, 9])) is d_starts
    assert counts["h2d"] == 0
    assert backend.cached_on_gpu(big) is not d_big and counts["h2d"] == 1


def test_add_rows_sorts_on_the_host_copy_without_reading_back(counts):
    rng = np.random.RandomState(0)
    host_rows = rng.randint(0, 6, 40)
    src = rng.randn(40, 3)
    expected = np.zeros((6, 3))
    np.add.at(expected, host_rows, src)
    rows, src_d = backend.to_gpu_together([host_rows, src])
    dst = backend.to_gpu(np.zeros((6, 3)))
    counts.clear()
    add_rows(dst, rows, src_d, host_rows)
    assert counts["d2h"] == 0 and counts["h2d"] == 1  # the three index arrays in one copy
    assert counts["wait"] == 0
    np.testing.assert_allclose(backend.to_numpy(dst), expected, rtol=1e-12)
    counts.clear()
    add_rows(dst, rows, src_d)  # without the host copy: read back once, same sums
    assert counts["d2h"] == 1
    np.testing.assert_allclose(backend.to_numpy(dst), 2 * expected, rtol=1e-12)


def _train_classifier(use_gpu: bool, batches: int, counts=None):
    paddle.init(use_gpu=use_gpu, seed=3)
    paddle.layer.reset_names()
    x = paddle.layer.data(name="x", type=paddle.data_type.dense_vector(6))
    y = paddle.layer.data(name="y", type=paddle.data_type.integer_value(4))
    h = paddle.layer.fc(input=x, size=8, act=paddle.activation.Relu())
    out = paddle.layer.fc(input=h, size=4, act=paddle.activation.Softmax())
    cost = paddle.layer.classification_cost(input=out, label=y)  # + classification_error
    trainer = paddle.trainer.SGD(cost, paddle.parameters.create(cost),
                                 paddle.optimizer.Momentum(learning_rate=0.1, momentum=0.9))
    rng = np.random.RandomState(1)
    data = [[(rng.randn(6).astype(np.float32), int(rng.randint(4))) for _ in range(16)]
            for _ in range(batches)]
    seen = []

    def handler(event):
        if isinstance(event, paddle.event.EndIteration):
            seen.append((event.cost, event.metrics["classification_error_evaluator"]))

    if counts is not None:
        counts.clear()  # (building copied the initial parameters over)
    trainer.train(lambda: iter(data), num_passes=1, event_handler=handler)
    return seen


def test_training_reads_cost_and_error_back_in_one_copy_a_batch(counts):
    on_gpu = _train_classifier(True, 5, counts)
    assert counts["d2h"] == 5 and counts["h2d"] == 5
    assert counts["wait"] == 5  # the feeder's copies are asynchronous: only the read back waits
    on_cpu = _train_classifier(False, 5)
    assert [e for _, e in on_gpu] == [e for _, e in on_cpu]
    np.testing.assert_allclose([c for c, _ in on_gpu], [c for c, _ in on_cpu], rtol=1e-5)
    assert 0.0 <= min(e for _, e in on_gpu) and max(e for _, e in on_gpu) <= 1.0


@pytest.mark.parametrize("workload, most_h2d", [("lstm", 4), ("seq2seq", 11)])
def test_benchmark_batches_wait_for_the_gpu_once(counts, workload, most_h2d):
    """bench/gpu_launches.py's counts for the LSTM classifier and the seq2seq demo: one copy
    back a batch and no other wait; the copies over, all asynchronous, are the feeder's one,
    each recurrent layer's index arrays (its steps' offsets for the recurrence kernels
    among them), each embedding gradient's, and the first use of each index array of new
    content (segment offsets, gather rows: about 1 a batch in the LSTM, 5 in seq2seq, whose
    recurrent group sends the offsets and row segments its frames' attention reads, as
    fewer sequences stay active, in one copy)."""
    sys.path.insert(0, str(BENCH))
    try:
        import gpu_launches

        per_batch = gpu_launches.count(workload, gpu_launches.workloads(2)[workload], 2)
    finally:
        sys.path.remove(str(BENCH))
    assert per_batch["d2h"] == 1 and per_batch["wait"] == 1
    assert 1 <= per_batch["h2d"] <= most_h2d


@pytest.mark.parametrize("workload", ["mlp", "lenet", "lstm", "seq2seq"])
def test_narrow_benchmark_asks_the_gpu_for_the_same(counts, workload):
    """bench/gpu_launches.py's ``narrow ms`` times the workloads made narrow (next to no NumPy
    work in the stand-in): that is a fair stand-in for their host time only if narrowing
    leaves the launches, copies and waits a batch as they are."""
    sys.path.insert(0, str(BENCH))
    try:
        import gpu_launches

        wide = gpu_launches.count(workload, gpu_launches.workloads(2)[workload], 2)
        with gpu_launches.narrow():
            thin = gpu_launches.count(workload, gpu_launches.workloads(2)[workload], 2)
    finally:
        sys.path.remove(str(BENCH))
    for kind in ("launch", "h2d", "d2h", "wait"):
        assert thin[kind] == wide[kind], kind
    assert thin["launch"] > 0


def test_beam_search_reads_back_only_each_paths_best_ids(counts):
    """A beam-search step chooses each path's best ids on the GPU and reads back those and
    their log-probabilities in one copy (paths x beam numbers, not paths x vocabulary): the
    same candidates as the host's choice."""
    from sculler.layers.beam_search import BeamSearchLayer

    rng = np.random.RandomState(4)
    probs = rng.dirichlet(np.ones(50), size=6).astype(np.float32)
    scores = rng.randn(6)
    want = BeamSearchLayer._expand(probs, scores, 3)
    device = backend.to_gpu(probs)
    counts.clear()
    got = BeamSearchLayer._expand(device, scores, 3)
    assert counts["d2h"] == 1 and counts["d2h_bytes"] == 2 * 6 * 3 * 8
    order_w, order_g = np.lexsort((want[1], want[0])), np.lexsort((got[1], got[0]))
    for w, g in zip(want, got):  # the same (parent, id, score) set, in any order
        np.testing.assert_allclose(g[order_g], w[order_w], rtol=1e-12)


def _generate_with_the_seq2seq_demo(use_gpu: bool):
    """(prob, ids) of the attention demo's beam search (beam 3, untrained weights drawn with
    seed 1) over 12 source sequences, on the GPU or the CPU."""
    sys.path.insert(0, str(BENCH))
    try:
        import bench_seq2seq
    finally:
        sys.path.remove(str(BENCH))
    demo = bench_seq2seq.load_demo()
    paddle.init(seed=1, use_gpu=use_gpu)
    paddle.layer.reset_names()
    parameters = paddle.parameters.create(demo.seq2seq(is_generating=False))
    paddle.layer.reset_names()
    generator = demo.seq2seq(is_generating=True, beam_size=3)
    sources = [(src,) for src, _, _ in demo.make_pairs(12, seed=5)]
    inferer = paddle.inference.Inference(output_layer=generator, parameters=parameters)
    return inferer, sources


def test_beam_search_on_the_gpu_waits_only_for_each_steps_best_ids(counts):
    """Each step of a beam search sends its index arrays (ids, the rows of the statics and
    memories to gather) in one asynchronous copy and waits only for the one copy back of the
    paths' best ids; what it generates is the CPU's."""
    inferer, sources = _generate_with_the_seq2seq_demo(use_gpu=True)
    inferer.infer(input=sources, field=["prob", "id"])  # small index arrays now cached
    counts.clear()
    prob, ids = inferer.infer(input=sources, field=["prob", "id"])
    steps = counts["d2h"]
    assert steps >= 3 and counts["wait"] == steps
    # the batch, the index arrays of the encoder's two recurrent layers, then one copy a step
    assert counts["h2d"] == 1 + 2 + steps
    inferer, _ = _generate_with_the_seq2seq_demo(use_gpu=False)
    want_prob, want_ids = inferer.infer(input=sources, field=["prob", "id"])
    np.testing.assert_array_equal(ids, want_ids)
    np.testing.assert_allclose(prob, want_prob, rtol=1e-5)


def _train_with_evaluators(use_gpu: bool, counts=None):
    """A classifier trained 4 batches with a weight input and the evaluators that count on
    the GPU: weighted and one-column classification error, precision/recall (id labels,
    weighted or not, and dense multi-hot labels), sum and weighted column sum. Returns the
    metrics of each batch, those of the pass and those of ``test`` on the same data."""
    paddle.init(use_gpu=use_gpu, seed=3)
    paddle.layer.reset_names()
    ev = paddle.evaluator
    x = paddle.layer.data(name="x", type=paddle.data_type.dense_vector(6))
    y = paddle.layer.data(name="y", type=paddle.data_type.integer_value(4))
    w = paddle.layer.data(name="w", type=paddle.data_type.dense_vector(1))
    hot = paddle.layer.data(name="hot", type=paddle.data_type.dense_vector(4))
    h = paddle.layer.fc(input=x, size=8, act=paddle.activation.Relu())
    out = paddle.layer.fc(input=h, size=4, act=paddle.activation.Softmax())
    one = paddle.layer.fc(input=h, size=1, act=paddle.activation.Sigmoid())
    cost = paddle.layer.classification_cost(input=out, label=y)
    ev.classification_error(input=out, label=y, weight=w, name="weighted_error")
    ev.classification_error(input=one, label=y, name="one_column_error")
    ev.precision_recall(input=out, label=y, name="pr")
    ev.precision_recall(input=out, label=y, weight=w, positive_label=2, name="pr_weighted")
    ev.precision_recall(input=out, label=hot, name="pr_multi_hot")
    ev.sum(input=out, name="sum")
    ev.column_sum(input=out, weight=w, name="column_sum")
    trainer = paddle.trainer.SGD(cost, paddle.parameters.create(cost),
                                 paddle.optimizer.Momentum(learning_rate=0.1, momentum=0.9),
                                 extra_layers=[one, w, hot])
    rng = np.random.RandomState(1)
    data = [[(rng.randn(6).astype(np.float32), int(rng.randint(4)),
              [float(rng.uniform(0.5, 2))], (rng.rand(4) > 0.5).astype(np.float32).tolist())
             for _ in range(16)] for _ in range(4)]
    feeding = {"x": 0, "y": 1, "w": 2, "hot": 3}
    seen, passes = [], []

    def handler(event):
        if isinstance(event, paddle.event.EndIteration):
            seen.append(event.metrics)
        if isinstance(event, paddle.event.EndPass):
            passes.append(event.metrics)

    if counts is not None:
        counts.clear()
    trainer.train(lambda: iter(data), num_passes=1, event_handler=handler, feeding=feeding)
    training = dict(counts) if counts is not None else None
    if counts is not None:
        counts.clear()
    tested = trainer.test(lambda: iter(data), feeding=feeding).metrics
    return seen, passes[0], tested, training


def test_evaluators_count_on_the_gpu_and_come_back_with_the_cost(counts):
    """Weighted and one-column classification error, precision/recall, sum and column sum
    count on the GPU: training reads one copy back a batch, and so does test(); the metrics
    of every batch, of the pass and of test() are the CPU's."""
    seen, passed, tested, training = _train_with_evaluators(True, counts)
    assert training["d2h"] == 4 and training["wait"] == 4
    assert counts["d2h"] == 4 and counts["wait"] == 4  # test(): one read back a batch
    want_seen, want_passed, want_tested, _ = _train_with_evaluators(False)
    assert len(seen) == 4 and set(seen[0]) == set(want_seen[0])
    assert {"pr_weighted.F1-score", "pr_multi_hot.micro-average-recall"} <= set(passed)
    for got, want in [*zip(seen, want_seen), (passed, want_passed), (tested, want_tested)]:
        for name in want:
            np.testing.assert_allclose(got[name], want[name], rtol=1e-5, err_msg=name)


def test_a_printer_prints_in_test_on_the_gpu(counts, caplog):
    """``classification_error_printer`` shares the error's device counting but is no
    additive evaluator: test() still runs it, so it prints each batch."""
    import logging

    paddle.layer.reset_names()
    x = paddle.layer.data(name="x", type=paddle.data_type.dense_vector(3))
    y = paddle.layer.data(name="y", type=paddle.data_type.integer_value(2))
    out = paddle.layer.fc(input=x, size=2, act=paddle.activation.Softmax())
    cost = paddle.layer.classification_cost(input=out, label=y)
    paddle.evaluator.classification_error_printer(input=out, label=y)
    trainer = paddle.trainer.SGD(cost, paddle.parameters.create(cost),
                                 paddle.optimizer.Momentum(learning_rate=0.1))
    batch = [([0.1, 0.2, 0.3], 1), ([0.3, -0.2, 0.1], 0)]
    with caplog.at_level(logging.INFO, logger="sculler.evaluator"):
        trainer.test(lambda: iter([batch, batch]))
    assert caplog.text.count("Classification Error:") == 2
