"""The design doc's 3-branch ranking model: A, Q and B go through one shared network ``f``.

    A -> f -\\
    Q -> f --> rank_cost(cos(f(A), f(Q)), cos(f(B), f(Q)), label)
    B -> f -/

``f`` maps a bag of words (sparse binary vector) to a semantic vector: an embedding-bag fc
named "embedding", then a softmax fc named "semantic" (bias "semantic.bias"). All three branches
share these parameters by name, so ``parameters.create`` creates each once; after training,
``infer`` runs the sub-network ``fA`` alone with the trained shared parameters.
Data: synthetic documents drawn from a few topics; A or B is from the query's topic.
"""

from __future__ import annotations

import numpy as np

import sculler as paddle

VOCAB, TOPICS, WORDS_PER_DOC = 60, 4, 6


def f(name: str) -> paddle.layer.LayerOutput:
    words = paddle.layer.data(name=name, type=paddle.data_type.sparse_binary_vector(VOCAB))
    e = paddle.layer.fc(input=words, size=16, act=paddle.activation.Linear(),
                        parameter_name="embedding", bias_attr=False)
    return paddle.layer.fc(input=e, size=8, act=paddle.activation.Softmax(),
                           parameter_name="semantic",
                           bias_attr=paddle.attr.Param(name="semantic.bias"))


def build():
    """The three branches and the cost (fA is returned for inference)."""
    paddle.layer.reset_names()
    f_a, f_q, f_b = f("A"), f("Q"), f("B")
    label = paddle.layer.data(name="label", type=paddle.data_type.dense_vector(1))
    cost = paddle.layer.rank_cost(left=paddle.layer.cos_sim(f_a, f_q),
                                  right=paddle.layer.cos_sim(f_b, f_q), label=label)
    return cost, f_a


def document(rng: np.random.RandomState, topic: int) -> list[int]:
    """A bag of distinct word ids, mostly from the topic's slice of the vocabulary."""
    per_topic = VOCAB // TOPICS
    own = rng.choice(per_topic, size=WORDS_PER_DOC - 1, replace=False) + topic * per_topic
    return sorted({*own.tolist(), int(rng.randint(VOCAB))})


def reader(n: int, seed: int):
    def read():
        rng = np.random.RandomState(seed)
        for _ in range(n):
            topic, other = rng.choice(TOPICS, size=2, replace=False)
            q, rel, irr = document(rng, topic), document(rng, topic), document(rng, other)
            if rng.rand() < 0.5:
                yield rel, q, irr, np.array([1.0], np.float32)
            else:
                yield irr, q, rel, np.array([0.0], np.float32)
    return read


def main(num_passes: int = 10, seed: int = 1) -> dict:
    paddle.init(seed=seed)
    cost, f_a = build()
    parameters = paddle.parameters.create(cost)
    paddle.train(cost, parameters, reader=paddle.batch(reader(2000, seed), 32),
                 num_passes=num_passes,
                 update_equation=paddle.optimizer.Adam(learning_rate=0.01),
                 feeding={"A": 0, "Q": 1, "B": 2, "label": 3}, show_progress=False)
    # inference with the sub-network fA alone, using the trained shared parameters
    rng = np.random.RandomState(seed + 100)
    docs = [document(rng, t) for t in range(TOPICS) for _ in range(5)]
    vectors = paddle.infer(output_layer=f_a, parameters=parameters, input=[(d,) for d in docs])
    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    sim = unit @ unit.T
    topic = np.repeat(np.arange(TOPICS), 5)
    same = sim[(topic[:, None] == topic[None, :]) & ~np.eye(len(docs), dtype=bool)].mean()
    different = sim[topic[:, None] != topic[None, :]].mean()
    return {"parameters": parameters.names(), "vectors": vectors, "same_topic": same,
            "different_topic": different}


if __name__ == "__main__":
    result = main()
    print("parameters:", result["parameters"])
    print(f"semantic vectors of A: {result['vectors'].shape}")
    print(f"mean cosine, same topic {result['same_topic']:.3f}, "
          f"different topics {result['different_topic']:.3f}")
