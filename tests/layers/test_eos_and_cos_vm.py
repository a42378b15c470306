"""eos (the eos_id check) and cos_sim's vector-matrix form (cos_vm): values against NumPy,
PaddlePaddle's names and sizes (cos_vm's gradient check is its table row)."""

import numpy as np
import pytest

import sculler as paddle


def test_eos_marks_the_end_ids():
    paddle.layer.reset_names()
    words = paddle.layer.data(name="w", type=paddle.data_type.integer_value_sequence(10))
    end = paddle.layer.eos(input=words, eos_id=1)
    assert (end.name, end.layer_type, end.size) == ("__eos_layer_0__", "eos_id", 2)
    out = paddle.infer(output_layer=end, parameters=paddle.parameters.create(end),
                       input=[([3, 1, 4],), ([1, 5],)], field="id")
    np.testing.assert_array_equal(np.ravel(out), [0, 1, 0, 1, 0])


def test_eos_needs_ids():
    x = paddle.layer.data(name="x", type=paddle.data_type.dense_vector(2))
    end = paddle.layer.eos(input=x, eos_id=0)
    with pytest.raises(ValueError, match="must be integer ids"):
        paddle.infer(output_layer=end, parameters=paddle.parameters.create(end),
                     input=[(np.zeros(2, np.float32),)], field="id")


def test_cos_sim_of_a_vector_against_several():
    rng = np.random.default_rng(0)
    paddle.layer.reset_names()
    a = paddle.layer.data(name="a", type=paddle.data_type.dense_vector(4))
    b = paddle.layer.data(name="b", type=paddle.data_type.dense_vector(12))
    y = paddle.layer.cos_sim(a=a, b=b, size=3, scale=2.0)
    assert (y.name, y.layer_type, y.size) == ("__cos_sim_0__", "cos_vm", 3)
    av, bv = rng.normal(size=(2, 4)), rng.normal(size=(2, 3, 4))
    out = paddle.infer(output_layer=y, parameters=paddle.parameters.create(y),
                       input=[(x.astype(np.float32), m.reshape(-1).astype(np.float32))
                              for x, m in zip(av, bv)])
    want = 2 * np.einsum("ij,ikj->ik", av, bv) / (
        np.linalg.norm(av, axis=1)[:, None] * np.linalg.norm(bv, axis=2))
    np.testing.assert_allclose(out, want, rtol=1e-5)
    with pytest.raises(ValueError, match="must hold size=2 vectors"):
        paddle.layer.cos_sim(a=a, b=b, size=2)
