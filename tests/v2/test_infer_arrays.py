"""``paddle.infer(input=X)`` with an array: its rows are the samples of a one-input model (the
PyTorch/Keras habit), exactly as the list of one-field tuples would be."""

import numpy as np
import pytest

import sculler as paddle

L, DT = paddle.layer, paddle.data_type


def _model(width=4, ids=False):
    L.reset_names()
    x = L.data(name="x", type=DT.integer_value(10) if ids else DT.dense_vector(width))
    hidden = L.embedding(input=x, size=width) if ids else x
    out = L.fc(input=hidden, size=3, act=paddle.activation.Softmax())
    return out, paddle.parameters.create(out)


def test_rows_of_an_array_are_the_samples():
    out, params = _model()
    rows = np.random.default_rng(0).standard_normal((7, 4)).astype(np.float32)
    expected = paddle.infer(output_layer=out, parameters=params, input=[(r,) for r in rows])
    got = paddle.infer(output_layer=out, parameters=params, input=rows)
    np.testing.assert_array_equal(got, expected)
    assert got.shape == (7, 3)
    np.testing.assert_array_equal(
        paddle.infer(output_layer=out, parameters=params, input=list(rows)), expected)
    np.testing.assert_allclose(  # float64 rows are converted as the tuples' would be
        paddle.infer(output_layer=out, parameters=params, input=rows.astype(np.float64)),
        expected, rtol=1e-6)


def test_more_rows_than_a_chunk():
    out, params = _model()
    rows = np.random.default_rng(1).standard_normal((2500, 4)).astype(np.float32)
    inference = paddle.inference.Inference(out, params, batch_size=1024)
    np.testing.assert_array_equal(inference.infer(rows),
                                  inference.infer([(r,) for r in rows]))


def test_an_id_vector_feeds_an_integer_input():
    out, params = _model(ids=True)
    ids = np.array([1, 5, 9])
    np.testing.assert_array_equal(
        paddle.infer(output_layer=out, parameters=params, input=ids),
        paddle.infer(output_layer=out, parameters=params, input=[(int(i),) for i in ids]))


def test_a_single_row_and_extra_dimensions_are_refused():
    out, params = _model()
    with pytest.raises(ValueError, match=r"1-D array of 4 values.*x\[None, :\]"):
        paddle.infer(output_layer=out, parameters=params, input=np.ones(4, np.float32))
    with pytest.raises(ValueError, match=r"data layer 'x'"):  # (2, 5, 4) is not 2 rows of 4
        paddle.infer(output_layer=out, parameters=params, input=np.ones((2, 5, 4), np.float32))


def test_two_input_model_says_how_to_pass_samples():
    L.reset_names()
    a = L.data(name="a", type=DT.dense_vector(2))
    b = L.data(name="b", type=DT.dense_vector(3))
    out = L.fc(input=[a, b], size=2)
    params = paddle.parameters.create(out)
    with pytest.raises(TypeError, match=r"2 data layers \['a', 'b'\].*one tuple per sample"):
        paddle.infer(output_layer=out, parameters=params, input=np.ones((4, 5), np.float32))
    got = paddle.infer(output_layer=out, parameters=params,
                       input=[(np.ones(2), np.ones(3))] * 4)
    assert got.shape == (4, 2)
