"""A multi-input model scored without ``feeding``: the data layers are created as
``src, src_pos, trg, trg_pos`` (the NMT inference script's order) but the network uses them
target first; samples are fed to data layers in creation order, as PaddlePaddle v2's
topology lists them. Inference is checked against a forward pass written out in NumPy."""

import numpy as np

import sculler as paddle

SRC_VOCAB, TRG_VOCAB, MAX_LEN, EMB = 15, 17, 6, 6


def pairs(n, seed):
    """A target is a 'translation' (label 1) when its words are the source words plus 2."""
    rng = np.random.RandomState(seed)
    data = []
    for _ in range(n):
        src = [int(w) for w in rng.randint(0, SRC_VOCAB, rng.randint(2, MAX_LEN))]
        good = rng.rand() < 0.5
        trg = [w + 2 for w in src] if good else [int(w) for w in rng.randint(0, TRG_VOCAB,
                                                                           len(src))]
        data.append((src, list(range(len(src))), trg, list(range(len(trg))), int(good)))
    return lambda: iter(data)


def embed_sum(ids, name):
    emb = paddle.layer.embedding(input=ids, size=EMB, param_attr=paddle.attr.Param(name=name))
    return paddle.layer.pooling(input=emb, pooling_type=paddle.pooling.Sum())


def test_infer_without_feeding_on_a_multi_input_model():
    src = paddle.layer.data(name="src", type=paddle.data_type.integer_value_sequence(SRC_VOCAB))
    src_pos = paddle.layer.data(name="src_pos",
                                type=paddle.data_type.integer_value_sequence(MAX_LEN))
    trg = paddle.layer.data(name="trg", type=paddle.data_type.integer_value_sequence(TRG_VOCAB))
    trg_pos = paddle.layer.data(name="trg_pos",
                                type=paddle.data_type.integer_value_sequence(MAX_LEN))
    label = paddle.layer.data(name="label", type=paddle.data_type.integer_value(2))
    # used in another order than created: target side first
    parts = [embed_sum(trg, "trg_emb"), embed_sum(trg_pos, "trg_pos_emb"),
             embed_sum(src, "src_emb"), embed_sum(src_pos, "src_pos_emb")]
    score = paddle.layer.fc(input=parts, size=2, act=paddle.activation.Softmax(),
                            param_attr=[paddle.attr.Param(name=f"w{i}") for i in range(4)],
                            bias_attr=paddle.attr.Param(name="b"))
    cost = paddle.layer.classification_cost(input=score, label=label)

    parameters = paddle.parameters.create(cost)
    trainer = paddle.trainer.SGD(cost=cost, parameters=parameters,
                                 update_equation=paddle.optimizer.Adam(learning_rate=0.05))
    costs = []
    trainer.train(reader=paddle.batch(pairs(128, 1), 32), num_passes=5,
                  event_handler=lambda e: costs.append(e.cost) if isinstance(
                      e, paddle.event.EndIteration) else None)
    assert np.mean(costs[-4:]) < np.mean(costs[:4])

    samples = [s[:4] for s in pairs(6, 2)()]  # [src, src_pos, trg, trg_pos], no feeding
    probs = paddle.infer(output_layer=score, parameters=parameters, input=samples)

    def forward(sample):
        src_ids, src_pos_ids, trg_ids, trg_pos_ids = sample
        vecs = [parameters.get("trg_emb")[trg_ids].sum(0),
                parameters.get("trg_pos_emb")[trg_pos_ids].sum(0),
                parameters.get("src_emb")[src_ids].sum(0),
                parameters.get("src_pos_emb")[src_pos_ids].sum(0)]
        logits = sum(v @ parameters.get(f"w{i}") for i, v in enumerate(vecs))
        logits = logits + parameters.get("b").reshape(-1)
        e = np.exp(logits - logits.max())
        return e / e.sum()

    assert probs.shape == (6, 2)
    np.testing.assert_allclose(probs, np.stack([forward(s) for s in samples]), rtol=1e-4,
                               atol=1e-6)
