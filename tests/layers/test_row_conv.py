"""row_conv: forward values against the formula within each sequence, and its errors (the
gradient check is its row in the gradient-check table)."""

import numpy as np
import pytest

import sculler as paddle


def reference(seqs: list[np.ndarray], w: np.ndarray) -> np.ndarray:
    rows = []
    for s in seqs:
        for t in range(len(s)):
            rows.append(sum(s[t + k] * w[k] for k in range(len(w)) if t + k < len(s)))
    return np.array(rows)


@pytest.mark.parametrize("context", [1, 2, 4])
def test_forward_looks_ahead_within_each_sequence(context):
    rng = np.random.default_rng(context)
    paddle.layer.reset_names()
    x = paddle.layer.data(name="x", type=paddle.data_type.dense_vector_sequence(3))
    y = paddle.layer.row_conv(input=x, context_len=context)
    assert (y.name, y.size) == ("__row_conv_layer_0__", 3)
    params = paddle.parameters.create(y)
    w = rng.normal(size=(context, 3)).astype(np.float32)
    params.set("___row_conv_layer_0__.w0", w)
    seqs = [rng.normal(size=(n, 3)).astype(np.float32) for n in (5, 1, 3)]
    out = paddle.infer(output_layer=y, parameters=params, input=[(s,) for s in seqs])
    np.testing.assert_allclose(out, reference(seqs, w), rtol=1e-5, atol=1e-6)


def test_row_conv_needs_a_sequence_and_a_positive_context():
    x = paddle.layer.data(name="x", type=paddle.data_type.dense_vector(3))
    with pytest.raises(ValueError, match="context_len must be a positive int"):
        paddle.layer.row_conv(input=x, context_len=0)
    y = paddle.layer.row_conv(input=x, context_len=2)
    with pytest.raises(ValueError, match="must be a sequence"):
        paddle.infer(output_layer=y, parameters=paddle.parameters.create(y),
                     input=[(np.ones(3, np.float32),)])
