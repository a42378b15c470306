"""DataFeeder: dense, ids, sequences, sparse and error messages."""

import numpy as np
import pytest

from sculler import data_type as dt
from sculler.data_feeder import DataFeeder


def test_dense_ids_and_feeding_orders():
    f = DataFeeder([("x", dt.dense_vector(2)), ("y", dt.integer_value(3))])
    args = f.convert([([1, 2], 0), ([3, 4], 2)])
    np.testing.assert_array_equal(args["x"].value, [[1, 2], [3, 4]])
    np.testing.assert_array_equal(args["y"].ids, [0, 2])
    g = DataFeeder([("x", dt.dense_vector(2)), ("y", dt.integer_value(3))], feeding={"x": 1,
                                                                                    "y": 0})
    np.testing.assert_array_equal(g.convert([(1, [5, 6])])["x"].value, [[5, 6]])
    h = DataFeeder([("x", dt.dense_vector(2)), ("y", dt.integer_value(3))], feeding=["y", "x"])
    assert h.feeding == {"y": 0, "x": 1}


def test_sequences_and_sparse():
    f = DataFeeder([("w", dt.integer_value_sequence(10)), ("s", dt.sparse_binary_vector(6)),
                    ("v", dt.sparse_float_vector(6)), ("d", dt.dense_vector_sub_sequence(1))])
    args = f.convert([([1, 2, 3], [0, 5], [(1, 0.5)], [[[1.0], [2.0]], [[3.0]]]),
                      ([4], [], [(2, 1.0), (3, 2.0)], [[[4.0]]])])
    np.testing.assert_array_equal(args["w"].ids, [1, 2, 3, 4])
    np.testing.assert_array_equal(args["w"].seq_starts, [0, 3, 4])
    np.testing.assert_array_equal(args["s"].value.toarray()[0], [1, 0, 0, 0, 0, 1])
    np.testing.assert_allclose(args["v"].value.toarray()[1], [0, 0, 1, 2, 0, 0])
    np.testing.assert_array_equal(args["d"].seq_starts, [0, 3, 4])
    np.testing.assert_array_equal(args["d"].sub_seq_starts, [0, 2, 3, 4])


def test_errors_name_layer_and_sample():
    f = DataFeeder([("x", dt.dense_vector(2)), ("y", dt.integer_value(3))])
    with pytest.raises(ValueError, match=r"data layer 'x'.*sample 1"):
        f.convert([([1, 2], 0), ([1, 2, 3], 1)])
    with pytest.raises(ValueError, match=r"sample 0 has 1 fields.*\['y'\]"):
        f.convert([([1, 2],)])
    with pytest.raises(ValueError, match=r"data layer 'y'.*sample 1.*outside"):
        f.convert([([1, 2], 0), ([1, 2], 7)])
    with pytest.raises(ValueError, match="no field for data layers"):
        DataFeeder([("x", dt.dense_vector(2))], feeding={"z": 0})


def test_nothing_is_coerced_silently():
    f = DataFeeder([("x", dt.dense_vector(2)), ("y", dt.integer_value(3))])
    with pytest.raises(ValueError, match=r"data layer 'y'.*sample 1 .*1\.7 is not an integer"):
        f.convert([([1, 2], 0), ([1, 2], 1.7)])
    # floats holding integral values are ids; so is a float array of them
    np.testing.assert_array_equal(f.convert([([1, 2], 2.0), ([1, 2], np.float32(1))])["y"].ids,
                                  [2, 1])
    with pytest.raises(ValueError, match=r"data layer 'y'.*sample 0.*boolean"):
        f.convert([([1, 2], True)])
    with pytest.raises(ValueError, match=r"data layer 'x'.*sample 1.*dtype <U"):
        f.convert([([1, 2], 0), (["1", "2"], 0)])
    s = DataFeeder([("w", dt.integer_value_sequence(5))])
    with pytest.raises(ValueError, match=r"data layer 'w'.*sample 1 .*not an integer"):
        s.convert([([1, 2],), ([3, 0.5],)])


def test_dense_rows_become_one_float32_batch():
    x = np.arange(12, dtype=np.float32).reshape(6, 2)
    f = DataFeeder([("x", dt.dense_vector(2))])
    value = f.convert([(x[i],) for i in range(6)])["x"].value
    assert value.dtype == np.float32 and not np.shares_memory(value, x)
    np.testing.assert_array_equal(value, x)


def test_reused_buffer_is_overwritten_and_never_accepts_what_asarray_rejects():
    x = np.arange(12, dtype=np.float32).reshape(6, 2)
    f = DataFeeder([("x", dt.dense_vector(2))], reuse_buffers=True)
    first = f.convert([(x[i],) for i in range(6)])["x"].value
    np.testing.assert_array_equal(first, x)
    second = f.convert([(x[i] + 100,) for i in range(2)])["x"].value  # a shorter last batch
    assert second.shape == (2, 2) and np.shares_memory(first, second)
    np.testing.assert_array_equal(second, x[:2] + 100)
    # rows the buffer path cannot take fall back to the checked path, values unchanged
    mixed = [(x[0].astype(np.float64),), (x[1],)]
    np.testing.assert_array_equal(f.convert(mixed)["x"].value, x[:2])
    np.testing.assert_array_equal(f.convert([([1, 2],), ([3, 4],)])["x"].value, [[1, 2], [3, 4]])
    # equal total size, unequal rows: never silently re-cut into rows of 2
    with pytest.raises(ValueError, match=r"data layer 'x'.*sample"):
        f.convert([(np.ones(1, np.float32),), (np.ones(3, np.float32),)])
    with pytest.raises(ValueError, match=r"data layer 'x'.*expected \(n, 2\)"):
        f.convert([(np.ones((2, 2), np.float32),), (np.ones((2, 2), np.float32),)])
    with pytest.raises(ValueError, match=r"data layer 'x'.*boolean"):
        f.convert([(np.ones(2, bool),), (np.ones(2, bool),)])


def test_the_trainer_feeds_through_one_reused_buffer():
    """Steady-state training allocates no batch-sized input array: the data layer's value
    is the same buffer every batch."""
    import sculler as paddle

    paddle.layer.reset_names()
    x = paddle.layer.data(name="x", type=dt.dense_vector(3))
    y = paddle.layer.data(name="y", type=dt.integer_value(2))
    cost = paddle.layer.classification_cost(
        input=paddle.layer.fc(input=x, size=2, act=paddle.activation.Softmax()), label=y)
    params = paddle.parameters.create(cost)
    tr = paddle.trainer.SGD(cost, params, paddle.optimizer.Momentum(learning_rate=0.1))
    rows = np.random.RandomState(0).rand(8, 3).astype(np.float32)
    seen = []

    def handler(event):
        if isinstance(event, paddle.event.EndForwardBackward):
            value = tr.network.layers["x"].output.value
            seen.append((value.__array_interface__["data"][0], value.copy()))

    tr.train(lambda: iter([[(rows[i], i % 2) for i in range(4)],
                           [(rows[i], i % 2) for i in range(4, 8)]]), event_handler=handler)
    assert seen[0][0] == seen[1][0]
    np.testing.assert_array_equal(seen[0][1], rows[:4])
    np.testing.assert_array_equal(seen[1][1], rows[4:])


def test_image_samples_are_read_in_c_order_as_paddle_does():
    """PaddlePaddle's feeder takes HW or CHW arrays for a dense_vector of their size."""
    images = np.arange(2 * 3 * 4 * 5, dtype=np.float32).reshape(2, 3, 4, 5)
    for reuse in (False, True):
        f = DataFeeder([("img", dt.dense_vector(60)), ("y", dt.integer_value(2))],
                       reuse_buffers=reuse)
        value = f.convert([(images[0], 0), (images[1], 1)])["img"].value
        np.testing.assert_array_equal(value, images.reshape(2, 60))
        hw = f.convert([(images[0, 0].tolist() * 3, 0)])  # a 12 x 5 nested list
        np.testing.assert_array_equal(hw["img"].value, np.tile(images[0, 0], (3, 1)).reshape(1, 60))
        with pytest.raises(ValueError, match=r"data layer 'img'.*\(2, 3, 4, 4\).*60 values"):
            f.convert([(images[0, :, :, :4], 0), (images[1, :, :, :4], 1)])
        with pytest.raises(ValueError, match=r"data layer 'img'.*sample 1"):
            f.convert([(images[0], 0), (images[1, :, :, :4], 1)])


def test_booleans_are_refused_wherever_they_hide():
    """A boolean row among float rows once became 1/0 (NumPy reads it so), while a batch of
    only booleans was refused: every boolean is refused now, naming the layer and sample."""
    f = DataFeeder([("x", dt.dense_vector(2)), ("y", dt.integer_value(3))])
    boolean = r"sample 1 field {} does not match: expected numbers, got a boolean"
    for row in ([True, False], np.array([True, False]), [0.5, np.bool_(True)]):
        with pytest.raises(ValueError, match=r"data layer 'x'.*" + boolean.format(0)):
            f.convert([([0.5, 1.0], 0), (row, 1)])
    with pytest.raises(ValueError, match=r"data layer 'y'.*" + boolean.format(1)):
        f.convert([([0.5, 1.0], 2), ([0.5, 1.0], True)])
    for reuse in (False, True):  # the reused-buffer path takes only arrays of its dtype
        g = DataFeeder([("x", dt.dense_vector(2))], reuse_buffers=reuse)
        with pytest.raises(ValueError, match=r"data layer 'x'.*sample 1.*boolean"):
            g.convert([(np.ones(2, np.float32),), (np.ones(2, bool),)])
    seq = DataFeeder([("s", dt.dense_vector_sequence(2))])
    with pytest.raises(ValueError, match=r"data layer 's'.*sample 1.*boolean"):
        seq.convert([([[0.5, 1.0]],), ([[0.5, 1.0], [False, 1.0]],)])


def test_sparse_entries_are_never_rounded_or_cut():
    binary = DataFeeder([("b", dt.sparse_binary_vector(4))])
    with pytest.raises(ValueError, match=r"data layer 'b'.*sample 1 .*column id 0\.5 is not "
                                         r"an integer"):
        binary.convert([([0, 1],), ([0.5],)])
    with pytest.raises(ValueError, match=r"data layer 'b'.*sample 0 .*boolean"):
        binary.convert([([True],), ([1],)])
    values = DataFeeder([("v", dt.sparse_float_vector(4))])
    with pytest.raises(ValueError, match=r"data layer 'v'.*sample 1 .*column id 0\.5"):
        values.convert([([(1, 2.0)],), ([(0.5, 1.0)],)])
    with pytest.raises(ValueError, match=r"data layer 'v'.*sample 1 .*pairs, got an entry of "
                                         r"3 values"):
        values.convert([([(1, 2.0)],), ([(0, 1.0, 2.0)],)])
    with pytest.raises(ValueError, match=r"data layer 'v'.*sample 0 .*a single number"):
        values.convert([([1, 2],)])
    with pytest.raises(ValueError, match=r"data layer 'v'.*sample 0 .*column id 4 outside"):
        values.convert([([(4, 1.0)],)])
    # what is right still converts, integral floats as column ids included
    csr = values.convert([([(1, 2.0), (3.0, 0.5)],), ([],)])["v"].value
    np.testing.assert_allclose(csr.toarray(), [[0, 2, 0, 0.5], [0, 0, 0, 0]])
    nested = DataFeeder([("n", dt.sparse_binary_vector_sub_sequence(4))])
    with pytest.raises(ValueError, match=r"data layer 'n'.*sample 1 .*column id 2\.5"):
        nested.convert([([[[0], [1, 2]]],), ([[[2.5]]],)])


def test_extra_fields_are_refused_unless_a_dict_picks_the_fields():
    types = [("x", dt.dense_vector(2)), ("y", dt.integer_value(3))]
    for feeding in (None, ["x", "y"]):
        f = DataFeeder(types, feeding=feeding)
        with pytest.raises(ValueError, match=r"sample 1 has 3 fields, but the data layers "
                                             r"\['x', 'y'\] read 2 .*feeding="):
            f.convert([([1, 2], 0), ([1, 2], 1, "extra")])
    picked = DataFeeder(types, feeding={"x": 0, "y": 2})  # a dict chooses: field 1 unread
    np.testing.assert_array_equal(picked.convert([([1, 2], "note", 1)])["y"].ids, [1])
