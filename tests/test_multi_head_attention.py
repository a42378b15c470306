"""multi_head_attention: PaddlePaddle's layer names and structure, and the values of the
dot-product form against NumPy."""

import numpy as np
import pytest

import sculler as paddle


def _softmax(z):
    e = np.exp(z - z.max())
    return e / e.sum()


def test_dot_product_heads_against_numpy():
    paddle.layer.reset_names()
    q = paddle.layer.data(name="q", type=paddle.data_type.dense_vector(5))
    kv = paddle.layer.data(name="kv", type=paddle.data_type.dense_vector_sequence(5))
    att = paddle.networks.multi_head_attention(
        query=q, key=kv, value=kv, key_proj_size=3, value_proj_size=2, head_num=2,
        attention_type="dot-product attention")
    assert att.name == "__concat_0__" and att.size == 4
    params = paddle.parameters.create(att)
    names = params.names()
    assert sorted(names) == sorted(
        ["___multi_head_attention_0___query_proj.w0", "___multi_head_attention_0___key_proj.w0",
         "___multi_head_attention_0___value_proj.w0", "___multi_head_attention_0___softmax_0.w0",
         "___multi_head_attention_0___softmax_1.w0"])
    rng = np.random.default_rng(0)
    qv, seq = rng.normal(size=5).astype(np.float32), rng.normal(size=(4, 5)).astype(np.float32)
    out = paddle.infer(output_layer=att, parameters=params, input=[(qv, seq)])
    w = {n: params.get(n) for n in names}
    qp = qv @ w["___multi_head_attention_0___query_proj.w0"]
    kp = seq @ w["___multi_head_attention_0___key_proj.w0"]
    vp = seq @ w["___multi_head_attention_0___value_proj.w0"]
    heads = []
    for i in range(2):
        scores = kp[:, 3 * i:3 * i + 3] @ qp[3 * i:3 * i + 3] / np.sqrt(3)
        a = _softmax(scores * w[f"___multi_head_attention_0___softmax_{i}.w0"][0, 0])
        heads.append(a @ vp[:, 2 * i:2 * i + 2])
    np.testing.assert_allclose(out[0], np.concatenate(heads), rtol=1e-4, atol=1e-5)


def test_additive_attention_and_its_errors():
    q = paddle.layer.data(name="q", type=paddle.data_type.dense_vector(4))
    kv = paddle.layer.data(name="kv", type=paddle.data_type.dense_vector_sequence(4))
    att = paddle.networks.multi_head_attention(
        query=q, key=kv, value=kv, key_proj_size=2, value_proj_size=3, head_num=3,
        attention_type="additive attention", name="add")
    assert att.size == 9
    assert paddle.topology.Topology(att).get_layer("add_combine_2").layer_type == "mixed"
    with pytest.raises(ValueError, match="attention_type must be one of"):
        paddle.networks.multi_head_attention(q, kv, kv, 2, 2, 1, "scaled")
