"""factorization_machine: forward values against the pairwise sum, and a DeepFM-style model
learning known pairwise interactions (the gradient check is its table row)."""

import numpy as np
import pytest

import sculler as paddle


def test_forward_is_the_sum_of_pairwise_interactions():
    rng = np.random.default_rng(0)
    x = paddle.layer.data(name="x", type=paddle.data_type.dense_vector(5))
    y = paddle.layer.factorization_machine(input=x, factor_size=3, name="fm")
    params = paddle.parameters.create(y)
    v = rng.normal(size=(5, 3)).astype(np.float32)
    params.set("_fm.w0", v)
    xs = rng.normal(size=(4, 5)).astype(np.float32)
    out = paddle.infer(output_layer=y, parameters=params, input=[(r,) for r in xs])
    want = [sum(v[i] @ v[j] * r[i] * r[j] for i in range(5) for j in range(i + 1, 5))
            for r in xs]
    np.testing.assert_allclose(out[:, 0], want, rtol=1e-4, atol=1e-5)


def test_a_deepfm_style_model_learns_known_pairwise_interactions():
    """y = x2 x5 - x1 x7 + 0.5 x3 on sparse binary features: the FM part must recover the
    two interactions through its latent vectors, the linear part the first-order term."""
    paddle.init(seed=3)
    rng = np.random.default_rng(1)
    n, dim = 3000, 10
    active = [np.flatnonzero(rng.random(dim) < 0.4) for _ in range(n)]
    dense = np.zeros((n, dim), np.float32)
    for row, cols in zip(dense, active):
        row[cols] = 1
    target = dense[:, 2] * dense[:, 5] - dense[:, 1] * dense[:, 7] + 0.5 * dense[:, 3]

    x = paddle.layer.data(name="x", type=paddle.data_type.sparse_binary_vector(dim))
    label = paddle.layer.data(name="y", type=paddle.data_type.dense_vector(1))
    fm = paddle.layer.factorization_machine(input=x, factor_size=4, name="fm",
                                            param_attr=paddle.attr.Param(initial_std=0.1))
    linear = paddle.layer.fc(input=x, size=1, act=paddle.activation.Linear(), name="linear")
    score = paddle.layer.addto(input=[fm, linear])
    cost = paddle.layer.square_error_cost(input=score, label=label)
    params = paddle.parameters.create(cost)
    trainer = paddle.trainer.SGD(cost=cost, parameters=params,
                                 update_equation=paddle.optimizer.Adam(learning_rate=0.02))
    samples = [(list(c), [float(t)]) for c, t in zip(active, target)]
    trainer.train(paddle.batch(paddle.reader.shuffle(lambda: iter(samples), 3000), 100),
                  num_passes=15, event_handler=lambda e: None)

    v = params.get("_fm.w0")
    inter = v @ v.T
    assert inter[2, 5] == pytest.approx(1.0, abs=0.15)
    assert inter[1, 7] == pytest.approx(-1.0, abs=0.15)
    others = [inter[i, j] for i in range(dim) for j in range(i + 1, dim)
              if (i, j) not in ((2, 5), (1, 7))]
    assert max(abs(o) for o in others) < 0.2
    assert params.get("_linear.w0")[3, 0] == pytest.approx(0.5, abs=0.15)
    pred = paddle.infer(output_layer=score, parameters=params,
                        input=[(s[0],) for s in samples[:500]])
    assert np.mean((pred[:, 0] - target[:500]) ** 2) < 0.02


def test_factor_size_must_be_positive():
    x = paddle.layer.data(name="x", type=paddle.data_type.dense_vector(5))
    with pytest.raises(ValueError, match="factor_size must be a positive int"):
        paddle.layer.factorization_machine(input=x, factor_size=0)
