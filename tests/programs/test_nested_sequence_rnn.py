"""A nested-sequence text classifier in the shape of PaddlePaddle's models/nested_sequence
program: each sentence of a paragraph goes through two ``sequence_conv_pool`` networks inside
an outer ``recurrent_group`` whose input list carries the hidden size as a plain int
(``input=[SubsequenceInput(emb), hidden_size]``), the sentence vectors are averaged and
classified. Trained a few passes, then inferred on held-out paragraphs."""

import numpy as np

import sculler as paddle

VOCAB, EMB, HIDDEN, CLASSES = 16, 8, 8, 2


def paragraphs(n, seed):
    """Label 1 when some sentence holds the bigram "1 2" (both words occur in other paragraphs
    too, apart or reversed): a context window sees it, a bag of words does not."""
    rng = np.random.RandomState(seed)
    data = []
    for _ in range(n):
        paragraph = [[int(w) for w in rng.randint(3, VOCAB, rng.randint(3, 7))]
                     for _ in range(rng.randint(1, 4))]
        label = int(rng.rand() < 0.5)
        sentence = paragraph[rng.randint(len(paragraph))]
        at = rng.randint(len(sentence) - 1)
        sentence[at:at + 2] = [1, 2] if label else [[2, 1], [1, 0], [0, 2]][rng.randint(3)]
        data.append((paragraph, label))
    return lambda: iter(data)


def cnn_cov_group(group_input, hidden_size):
    conv3 = paddle.networks.sequence_conv_pool(input=group_input, context_len=3,
                                               hidden_size=hidden_size)
    conv4 = paddle.networks.sequence_conv_pool(input=group_input, context_len=4,
                                               hidden_size=hidden_size)
    return paddle.layer.fc(input=[conv3, conv4], size=hidden_size,
                           param_attr=paddle.attr.ParamAttr(name="_cov_value_weight"),
                           bias_attr=paddle.attr.ParamAttr(name="_cov_value_bias"),
                           act=paddle.activation.Linear())


def nested_net(dict_dim, class_num, is_infer=False):
    data = paddle.layer.data("word", paddle.data_type.integer_value_sub_sequence(dict_dim))
    emb = paddle.layer.embedding(input=data, size=EMB)
    nest_group = paddle.layer.recurrent_group(
        input=[paddle.layer.SubsequenceInput(emb), HIDDEN], step=cnn_cov_group)
    avg_pool = paddle.layer.pooling(input=nest_group, pooling_type=paddle.pooling.Avg(),
                                    agg_level=paddle.layer.AggregateLevel.TO_NO_SEQUENCE)
    prob = paddle.layer.mixed(size=class_num,
                              input=[paddle.layer.full_matrix_projection(input=avg_pool)],
                              act=paddle.activation.Softmax())
    if is_infer:
        return prob
    label = paddle.layer.data("label", paddle.data_type.integer_value(class_num))
    return paddle.layer.classification_cost(input=prob, label=label), prob


def test_nested_sequence_rnn_with_a_non_layer_step_argument():
    cost, prob = nested_net(VOCAB, CLASSES)
    assert prob.size == CLASSES
    parameters = paddle.parameters.create(cost)
    assert parameters.get_shape("_cov_value_weight") == (HIDDEN, HIDDEN)
    trainer = paddle.trainer.SGD(cost=cost, parameters=parameters,
                                 update_equation=paddle.optimizer.Adam(learning_rate=0.02))
    costs = []

    def event_handler(event):
        if isinstance(event, paddle.event.EndIteration):
            costs.append(event.cost)

    trainer.train(reader=paddle.batch(paddle.reader.shuffle(paragraphs(128, 1), 0), 16),
                  num_passes=6, event_handler=event_handler, feeding={"word": 0, "label": 1})
    assert np.mean(costs[-4:]) < 0.7 * np.mean(costs[:4])

    # inference with the prediction network alone, on the trained parameters
    paddle.layer.reset_names()
    infer_prob = nested_net(VOCAB, CLASSES, is_infer=True)
    held_out = list(paragraphs(40, 2)())
    probs = paddle.infer(output_layer=infer_prob, parameters=parameters,
                         input=[(p,) for p, _ in held_out])
    assert probs.shape == (40, CLASSES)
    np.testing.assert_allclose(probs.sum(axis=1), 1.0, rtol=1e-5)
    accuracy = np.mean(probs.argmax(axis=1) == np.array([label for _, label in held_out]))
    assert accuracy > 0.85
