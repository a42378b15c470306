"""A DSSM-style click model (query and document towers of word ids, their cosine similarity
and a classification head over the three) trained with
``extra_layers=paddle.evaluator.auc(...)`` as v2 programs passed it; the AUC shows up in the
events and in ``trainer.test``."""

import numpy as np

import sculler as paddle

VOCAB, EMB, HID = 40, 8, 8


def synthetic_pairs(n, seed):
    """A document is clicked (label 1) when it shares its topic (word ids mod 4) with the query."""
    rng = np.random.RandomState(seed)
    data = []
    for _ in range(n):
        q_topic, d_topic = rng.randint(4), rng.randint(4)
        if rng.rand() < 0.5:
            d_topic = q_topic
        query = [int(4 * rng.randint(VOCAB // 4) + q_topic) for _ in range(rng.randint(2, 6))]
        doc = [int(4 * rng.randint(VOCAB // 4) + d_topic) for _ in range(rng.randint(3, 8))]
        data.append((query, doc, int(q_topic == d_topic)))
    return lambda: iter(data)


def tower(word, prefix):
    emb = paddle.layer.embedding(input=word, size=EMB,
                                 param_attr=paddle.attr.Param(name=prefix + "_emb"))
    pooled = paddle.layer.pooling(input=emb, pooling_type=paddle.pooling.Sum())
    return paddle.layer.fc(input=pooled, size=HID, act=paddle.activation.Tanh(),
                           param_attr=paddle.attr.Param(name=prefix + "_fc.w"),
                           bias_attr=paddle.attr.Param(name=prefix + "_fc.b"))


def test_dssm_with_auc_in_extra_layers():
    query = paddle.layer.data(name="query",
                              type=paddle.data_type.integer_value_sequence(VOCAB))
    doc = paddle.layer.data(name="doc", type=paddle.data_type.integer_value_sequence(VOCAB))
    label = paddle.layer.data(name="label", type=paddle.data_type.integer_value(2))
    q_vec, d_vec = tower(query, "query"), tower(doc, "doc")
    similarity = paddle.layer.cos_sim(a=q_vec, b=d_vec)
    both = paddle.layer.fc(input=[q_vec, d_vec, similarity], size=HID,
                           act=paddle.activation.Relu())
    prediction = paddle.layer.fc(input=both, size=2, act=paddle.activation.Softmax())
    cost = paddle.layer.classification_cost(input=prediction, label=label)

    parameters = paddle.parameters.create(cost)
    optimizer = paddle.optimizer.Adam(learning_rate=0.02)
    trainer = paddle.trainer.SGD(cost=cost, parameters=parameters, update_equation=optimizer,
                                 extra_layers=paddle.evaluator.auc(input=prediction,
                                                                   label=label))
    pass_auc, costs = [], []

    def event_handler(event):
        if isinstance(event, paddle.event.EndIteration):
            costs.append(event.cost)
        if isinstance(event, paddle.event.EndPass):
            pass_auc.append(event.metrics["auc_evaluator"])

    trainer.train(reader=paddle.batch(paddle.reader.shuffle(synthetic_pairs(160, 1), 200), 32),
                  num_passes=6, event_handler=event_handler)
    assert np.mean(costs[-5:]) < np.mean(costs[:5])
    assert pass_auc[-1] > pass_auc[0] and pass_auc[-1] > 0.75
    result = trainer.test(reader=paddle.batch(synthetic_pairs(96, 2), 32))
    assert result.metrics["auc_evaluator"] > 0.7

    pairs = [s[:2] for s in synthetic_pairs(5, 3)()]
    probs = paddle.infer(output_layer=prediction, parameters=parameters, input=pairs)
    assert probs.shape == (5, 2)
    np.testing.assert_allclose(probs.sum(axis=1), 1.0, rtol=1e-5)
