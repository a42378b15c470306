"""ArrayBatch and array_batches: minibatches held as column views of in-memory arrays."""

import pickle

import numpy as np
import pytest

import sculler as paddle
from sculler import data_type as dt
from sculler.data_feeder import DataFeeder
from sculler.minibatch import ArrayBatch, array_batches


def _feeder(**kw):
    return DataFeeder([("x", dt.dense_vector(4)), ("y", dt.integer_value(3))], **kw)


def test_batches_are_views_cut_in_order():
    X = np.arange(20, dtype=np.float32).reshape(5, 4)
    y = np.array([0, 1, 2, 0, 1])
    batches = list(array_batches(X, y, batch_size=2)())
    assert [len(b) for b in batches] == [2, 2, 1]
    assert all(np.shares_memory(b.columns[0], X) for b in batches)
    np.testing.assert_array_equal(batches[2].columns[0], X[4:])
    assert [len(b) for b in array_batches(X, y, batch_size=2, drop_last=True)()] == [2, 2]
    assert len(array_batches(X, y, batch_size=2)()) == 3  # the progress bar's total


def test_shuffle_permutes_every_pass_reproducibly():
    X = np.arange(10, dtype=np.float32).reshape(10, 1)
    reader = array_batches(X, np.arange(10), batch_size=3, shuffle=True, seed=7)
    first = np.concatenate([b.columns[1] for b in reader()])
    second = np.concatenate([b.columns[1] for b in reader()])
    assert sorted(first) == list(range(10)) and sorted(second) == list(range(10))
    assert list(first) != list(second) and list(first) != list(range(10))
    again = array_batches(X, np.arange(10), batch_size=3, shuffle=True, seed=7)
    np.testing.assert_array_equal(np.concatenate([b.columns[1] for b in again()]), first)
    for b in reader():  # rows stay paired with their labels
        np.testing.assert_array_equal(b.columns[0][:, 0], b.columns[1])


def test_an_array_batch_is_a_sequence_of_sample_tuples():
    X = np.arange(6.0).reshape(3, 2)
    b = ArrayBatch(X, np.array([2, 0, 1]))
    assert len(b) == 3 and b[1][1] == 0
    np.testing.assert_array_equal(b[1][0], [2.0, 3.0])
    assert isinstance(b[1:], ArrayBatch) and len(b[::2]) == 2
    assert [s[1] for s in b] == [2, 0, 1]
    copy = pickle.loads(pickle.dumps(b))
    np.testing.assert_array_equal(copy.columns[0], X)
    with pytest.raises(ValueError, match=r"lengths \[3, 2\]"):
        ArrayBatch(X, [1, 2])
    with pytest.raises(ValueError, match=r"same length.*\[3, 2\]"):
        array_batches(X, [1, 2], batch_size=2)
    with pytest.raises(ValueError, match="positive"):
        array_batches(X, batch_size=0)


def test_a_column_of_the_training_dtype_is_bound_read_only_without_a_copy():
    X = np.random.RandomState(0).rand(5, 4).astype(np.float32)
    y = np.array([0, 1, 2, 0, 1])
    args = _feeder(reuse_buffers=True).convert(ArrayBatch(X, y))
    value = args["x"].value
    assert np.shares_memory(value, X) and not value.flags.writeable
    with pytest.raises(ValueError, match="read-only"):
        value[0, 0] = 1.0
    assert X.flags.writeable  # the user's array is untouched
    np.testing.assert_array_equal(args["y"].ids, y)


def test_a_column_of_another_dtype_is_converted_into_the_reused_buffer():
    f = _feeder(reuse_buffers=True)
    X = np.random.RandomState(0).rand(5, 4)  # float64
    first = f.convert(ArrayBatch(X, np.zeros(5, int)))["x"].value
    address = first.__array_interface__["data"][0]
    second = f.convert(ArrayBatch(X[::-1], np.zeros(5, int)))["x"].value
    assert second.dtype == np.float32 and second.__array_interface__["data"][0] == address
    np.testing.assert_array_equal(second, X[::-1].astype(np.float32))


def test_column_errors_name_layer_column_and_sample():
    f = _feeder()
    X = np.zeros((5, 4), np.float32)
    with pytest.raises(ValueError, match=r"data layer 'x'.*column 0 \(shape \(5, 3\) float32\)"
                                         r".*expected \(n, 4\)"):
        f.convert(ArrayBatch(X[:, :3], np.zeros(5, int)))
    with pytest.raises(ValueError, match=r"data layer 'y'.*sample 3 ArrayBatch column 1.*"
                                         r"id 3 outside \[0, 3\)"):
        f.convert(ArrayBatch(X, np.array([0, 1, 2, 3, 1])))
    with pytest.raises(ValueError, match=r"1 columns, but data layers \['y'\]"):
        f.convert(ArrayBatch(X))
    with pytest.raises(ValueError, match="dtype bool"):
        f.convert(ArrayBatch(X.astype(bool), np.zeros(5, int)))
    with pytest.raises(ValueError, match="not an integer"):
        f.convert(ArrayBatch(X, np.full(5, 0.5)))


def test_sequence_columns_take_the_per_sample_path():
    f = DataFeeder([("w", dt.integer_value_sequence(10)), ("y", dt.integer_value(2))])
    args = f.convert(ArrayBatch([[1, 2, 3], [4]], np.array([0, 1])))
    np.testing.assert_array_equal(args["w"].ids, [1, 2, 3, 4])
    np.testing.assert_array_equal(args["w"].seq_starts, [0, 3, 4])


def _classifier():
    paddle.layer.reset_names()
    paddle.init(seed=3)
    x = paddle.layer.data(name="x", type=dt.dense_vector(4))
    y = paddle.layer.data(name="y", type=dt.integer_value(3))
    out = paddle.layer.fc(input=paddle.layer.fc(input=x, size=8, act=paddle.activation.Relu()),
                          size=3, act=paddle.activation.Softmax())
    cost = paddle.layer.classification_cost(input=out, label=y)
    params = paddle.parameters.create(cost)
    return out, cost, params, paddle.trainer.SGD(cost, params, paddle.optimizer.Momentum(
        momentum=0.9, learning_rate=0.05))


def test_training_on_array_batches_equals_training_on_sample_tuples():
    rng = np.random.RandomState(1)
    X = rng.rand(40, 4).astype(np.float32)
    y = rng.randint(0, 3, 40)
    results = []
    for reader in (array_batches(X, y, batch_size=16),
                   paddle.batch(lambda: zip(X, y.tolist()), 16)):
        out, cost, params, tr = _classifier()
        costs: list[float] = []

        def handler(event, costs=costs):
            if isinstance(event, paddle.event.EndIteration):
                costs.append(event.cost)

        tr.train(reader, num_passes=3, event_handler=handler)
        test = tr.test(array_batches(X, y, batch_size=32))
        probs = paddle.infer(output_layer=out, parameters=params, input=ArrayBatch(X))
        results.append((costs, test.cost, probs, {n: params.get(n) for n in params.names()}))
    (c1, t1, p1, w1), (c2, t2, p2, w2) = results
    assert len(c1) == 9 and c1[-1] < c1[0]
    np.testing.assert_allclose(c1, c2, rtol=1e-6)
    np.testing.assert_allclose(t1, t2, rtol=1e-6)
    np.testing.assert_allclose(p1, p2, rtol=1e-6, atol=1e-7)
    for name in w1:
        np.testing.assert_allclose(w1[name], w2[name], rtol=1e-5, atol=1e-7)


def test_layers_reading_a_read_only_data_column_train_and_leave_it_unchanged():
    """Convolution, batch norm, projections and addto read the data layer's value, which
    is a read-only view of the user's array: none writes into it."""
    paddle.layer.reset_names()
    paddle.init(seed=0)
    img = paddle.layer.data(name="img", type=dt.dense_vector(64), height=8, width=8)
    lab = paddle.layer.data(name="label", type=dt.integer_value(3))
    conv = paddle.layer.img_conv(input=img, filter_size=3, num_filters=4, padding=1,
                                 act=paddle.activation.Relu())
    norm = paddle.layer.batch_norm(input=img, act=paddle.activation.Linear())
    mixed = paddle.layer.mixed(size=16, input=[paddle.layer.full_matrix_projection(input=img)])
    summed = paddle.layer.addto(input=[img, norm], act=paddle.activation.Tanh())
    joined = paddle.layer.concat(input=[paddle.layer.img_pool(input=conv, pool_size=2,
                                                              stride=2), mixed, summed])
    cost = paddle.layer.classification_cost(
        input=paddle.layer.fc(input=joined, size=3, act=paddle.activation.Softmax()),
        label=lab)
    tr = paddle.trainer.SGD(cost, paddle.parameters.create(cost),
                            paddle.optimizer.Momentum(momentum=0.9, learning_rate=0.01))
    rng = np.random.RandomState(2)
    X, y = rng.rand(20, 64).astype(np.float32), rng.randint(0, 3, 20)
    before = X.copy()
    costs: list[float] = []

    def handler(event):
        if isinstance(event, paddle.event.EndIteration):
            costs.append(event.cost)

    tr.train(array_batches(X, y, batch_size=8), num_passes=4, event_handler=handler)
    np.testing.assert_array_equal(X, before)
    assert np.isfinite(costs).all() and len(costs) == 12
