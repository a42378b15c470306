"""A word-level language model (embedding -> LSTM -> softmax over the next word at every
step) trained with a classification-error evaluator, then queried for next-word
probabilities, as v2 language-model programs did."""

import numpy as np

import sculler as paddle

VOCAB, EMB, HID = 12, 8, 16


def sentences(n, seed):
    """Counting sentences: each word is the previous plus one (mod VOCAB), so the next word is
    predictable; samples are (words, next words)."""
    rng = np.random.RandomState(seed)
    data = []
    for _ in range(n):
        start, length = rng.randint(VOCAB), rng.randint(3, 9)
        words = [(start + i) % VOCAB for i in range(length + 1)]
        data.append((words[:-1], words[1:]))
    return lambda: iter(data)


def test_lstm_language_model_with_evaluator():
    word = paddle.layer.data(name="word", type=paddle.data_type.integer_value_sequence(VOCAB))
    next_word = paddle.layer.data(name="next_word",
                                  type=paddle.data_type.integer_value_sequence(VOCAB))
    emb = paddle.layer.embedding(input=word, size=EMB)
    lstm = paddle.networks.simple_lstm(input=emb, size=HID)
    prob = paddle.layer.fc(input=lstm, size=VOCAB, act=paddle.activation.Softmax())
    cost = paddle.layer.classification_cost(input=prob, label=next_word)
    error = paddle.evaluator.classification_error(input=prob, label=next_word, name="word_error")

    parameters = paddle.parameters.create(cost)
    trainer = paddle.trainer.SGD(cost=cost, parameters=parameters,
                                 update_equation=paddle.optimizer.Adam(learning_rate=0.03),
                                 extra_layers=[error])
    errors, costs = [], []

    def event_handler(event):
        if isinstance(event, paddle.event.EndIteration):
            costs.append(event.cost)
        if isinstance(event, paddle.event.EndPass):
            errors.append(event.metrics["word_error"])

    trainer.train(reader=paddle.batch(sentences(96, 1), 16), num_passes=6,
                  event_handler=event_handler)
    assert costs[-1] < 0.5 * costs[0]
    assert errors[-1] < errors[0] and errors[-1] < 0.5
    assert trainer.test(reader=paddle.batch(sentences(32, 2), 16)).metrics["word_error"] < 0.5

    # next-word distribution at every step of two prompts: one row per word
    prompts = [([3, 4, 5],), ([9, 10],)]
    probs = paddle.infer(output_layer=prob, parameters=parameters, input=prompts)
    assert probs.shape == (5, VOCAB)
    np.testing.assert_allclose(probs.sum(axis=1), 1.0, rtol=1e-5)
    ids = paddle.infer(output_layer=prob, parameters=parameters, input=prompts, field="id")
    assert ids.shape == (5,) and (ids == probs.argmax(axis=1)).all()
    assert ids[2] == 6 and ids[4] == 11  # it learned to count
