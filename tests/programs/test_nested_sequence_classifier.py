"""A nested-sequence (paragraph of sentences) classifier in the shape of PaddlePaddle's
``sequence_nest_rnn`` configs: an outer recurrent group over the sentences
(``SubsequenceInput``) whose step runs an inner RNN over the words, booted from the last state
of the previous sentence; the last state of the last sentence is classified. Inference is
checked against the same recurrences written out in NumPy."""

import numpy as np

import sculler as paddle

VOCAB, EMB, HID, CLASSES = 10, 6, 8, 2


def paragraphs(n, seed):
    """Label 1 when any sentence holds one of the 'signal' words 0..2."""
    rng = np.random.RandomState(seed)
    data = []
    for _ in range(n):
        paragraph = [[int(w) for w in rng.randint(3, VOCAB, rng.randint(1, 5))]
                     for _ in range(rng.randint(1, 4))]
        label = int(rng.rand() < 0.5)
        if label:
            sentence = paragraph[rng.randint(len(paragraph))]
            sentence[rng.randint(len(sentence))] = int(rng.randint(3))
        data.append((paragraph, label))
    return lambda: iter(data)


def test_nested_sequence_classifier():
    words = paddle.layer.data(name="words",
                              type=paddle.data_type.integer_value_sub_sequence(VOCAB))
    label = paddle.layer.data(name="label", type=paddle.data_type.integer_value(CLASSES))
    emb = paddle.layer.embedding(input=words, size=EMB, param_attr=paddle.attr.Param(name="emb"))

    def outer_step(sentence):
        outer_mem = paddle.layer.memory(name="outer_rnn_state", size=HID)

        def inner_step(word):
            inner_mem = paddle.layer.memory(name="inner_rnn_state", size=HID,
                                            boot_layer=outer_mem)
            return paddle.layer.fc(input=[word, inner_mem], size=HID,
                                   act=paddle.activation.Tanh(), name="inner_rnn_state",
                                   param_attr=[paddle.attr.Param(name="w_x"),
                                               paddle.attr.Param(name="w_h")],
                                   bias_attr=paddle.attr.Param(name="b_h"))

        inner = paddle.layer.recurrent_group(step=inner_step, input=sentence, name="inner")
        paddle.layer.last_seq(input=inner, name="outer_rnn_state")
        return inner

    outer = paddle.layer.recurrent_group(step=outer_step,
                                         input=paddle.layer.SubsequenceInput(emb),
                                         name="outer")
    last = paddle.layer.last_seq(input=outer)
    prob = paddle.layer.fc(input=last, size=CLASSES, act=paddle.activation.Softmax(),
                           param_attr=paddle.attr.Param(name="w_out"),
                           bias_attr=paddle.attr.Param(name="b_out"))
    cost = paddle.layer.classification_cost(input=prob, label=label)

    parameters = paddle.parameters.create(cost)
    trainer = paddle.trainer.SGD(cost=cost, parameters=parameters,
                                 update_equation=paddle.optimizer.Adam(learning_rate=0.05))
    costs = []
    trainer.train(reader=paddle.batch(paragraphs(96, 1), 16), num_passes=5,
                  event_handler=lambda e: costs.append(e.cost) if isinstance(
                      e, paddle.event.EndIteration) else None)
    assert np.mean(costs[-3:]) < np.mean(costs[:3])

    samples = [(p,) for p, _ in paragraphs(5, 2)()]
    probs = paddle.infer(output_layer=prob, parameters=parameters, input=samples)

    get = parameters.get

    def forward(paragraph):
        h_outer = np.zeros(HID)
        for sentence in paragraph:
            h = h_outer
            for w in sentence:
                h = np.tanh(get("emb")[w] @ get("w_x") + h @ get("w_h") + get("b_h").reshape(-1))
            h_outer = h
        logits = h_outer @ get("w_out") + get("b_out").reshape(-1)
        e = np.exp(logits - logits.max())
        return e / e.sum()

    assert probs.shape == (5, CLASSES)
    np.testing.assert_allclose(probs, np.stack([forward(p) for (p,) in samples]), rtol=1e-4,
                               atol=1e-5)
