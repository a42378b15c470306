"""grumemory under a trainer that packs the parameters (ParameterSet.pack moves their
arrays): the layer must compute with, and write gradients into, the packed arrays."""

import numpy as np

import sculler as paddle


def test_grumemory_weight_views_follow_pack():
    paddle.layer.reset_names()
    paddle.init(seed=1)
    x = paddle.layer.data(name="x", type=paddle.data_type.dense_vector_sequence(4))
    proj = paddle.layer.fc(input=x, size=9, act=paddle.activation.Linear())
    g = paddle.layer.grumemory(input=proj)
    y = paddle.layer.data(name="y", type=paddle.data_type.integer_value(2))
    out = paddle.layer.fc(input=paddle.layer.last_seq(input=g), size=2,
                          act=paddle.activation.Softmax())
    cost = paddle.layer.classification_cost(input=out, label=y)
    params = paddle.parameters.create(cost)
    trainer = paddle.trainer.SGD(cost, params, paddle.optimizer.Momentum(learning_rate=0.1))
    rng = np.random.RandomState(0)
    data = [(rng.randn(rng.randint(2, 5), 4).tolist(), int(rng.randint(2))) for _ in range(32)]
    w_before = params.get(f"_{g.name}.w0")
    trainer.train(paddle.batch(lambda: iter(data), 16), num_passes=1)
    p = params.parameter_set[f"_{g.name}.w0"]
    layer = trainer.network.get_layer(g.name)
    assert p.packed and np.shares_memory(layer.w_gate, p.value)
    assert np.shares_memory(layer.dw_cand, p.grad)
    assert not np.allclose(params.get(f"_{g.name}.w0"), w_before)
