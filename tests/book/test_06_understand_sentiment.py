"""Book chapter 06 (understand sentiment): ``convolution_net`` (embedding -> two
sequence_conv_pool branches of context 3 and 4 -> softmax) and ``stacked_lstm_net``
(fc + lstmemory pairs, every other LSTM reversed, max-pooled over time -> softmax), trained with
Adam, L2 and a ModelAverage. Data: imdb-format ``(word ids, label)`` reviews of a synthetic
vocabulary where words 0..9 are positive and 10..19 negative (the rest neutral)."""

import numpy as np
import pytest

import sculler as paddle

DICT_DIM, CLASS_DIM = 60, 2


def imdb_like(n, seed):
    rng = np.random.RandomState(seed)
    reviews = []
    for _ in range(n):
        label = int(rng.randint(2))  # imdb: 0 positive, 1 negative
        words = rng.randint(20, DICT_DIM, size=rng.randint(3, 15)).tolist()
        for _ in range(rng.randint(1, 3)):
            words.insert(int(rng.randint(len(words) + 1)), int(rng.randint(10) + 10 * label))
        reviews.append((words, label))
    return lambda: iter(reviews)


def convolution_net(input_dim, class_dim=2, emb_dim=16, hid_dim=16):
    data = paddle.layer.data("word", paddle.data_type.integer_value_sequence(input_dim))
    emb = paddle.layer.embedding(input=data, size=emb_dim)
    conv_3 = paddle.networks.sequence_conv_pool(input=emb, context_len=3, hidden_size=hid_dim)
    conv_4 = paddle.networks.sequence_conv_pool(input=emb, context_len=4, hidden_size=hid_dim)
    output = paddle.layer.fc(input=[conv_3, conv_4], size=class_dim,
                             act=paddle.activation.Softmax())
    lbl = paddle.layer.data("label", paddle.data_type.integer_value(2))
    return paddle.layer.classification_cost(input=output, label=lbl), output


def stacked_lstm_net(input_dim, class_dim=2, emb_dim=16, hid_dim=16, stacked_num=3):
    assert stacked_num % 2 == 1
    fc_para_attr = paddle.attr.Param(learning_rate=1e-3)
    lstm_para_attr = paddle.attr.Param(initial_std=0., learning_rate=1.)
    para_attr = [fc_para_attr, lstm_para_attr]
    bias_attr = paddle.attr.Param(initial_std=0., l2_rate=0.)
    relu = paddle.activation.Relu()
    linear = paddle.activation.Linear()
    data = paddle.layer.data("word", paddle.data_type.integer_value_sequence(input_dim))
    emb = paddle.layer.embedding(input=data, size=emb_dim)
    fc1 = paddle.layer.fc(input=emb, size=hid_dim, act=linear, bias_attr=bias_attr)
    lstm1 = paddle.layer.lstmemory(input=fc1, act=relu, bias_attr=bias_attr)
    inputs = [fc1, lstm1]
    for i in range(2, stacked_num + 1):
        fc = paddle.layer.fc(input=inputs, size=hid_dim, act=linear, param_attr=para_attr,
                             bias_attr=bias_attr)
        lstm = paddle.layer.lstmemory(input=fc, reverse=(i % 2) == 0, act=relu,
                                      bias_attr=bias_attr)
        inputs = [fc, lstm]
    fc_last = paddle.layer.pooling(input=inputs[0], pooling_type=paddle.pooling.Max())
    lstm_last = paddle.layer.pooling(input=inputs[1], pooling_type=paddle.pooling.Max())
    output = paddle.layer.fc(input=[fc_last, lstm_last], size=class_dim,
                             act=paddle.activation.Softmax(), bias_attr=bias_attr,
                             param_attr=para_attr)
    lbl = paddle.layer.data("label", paddle.data_type.integer_value(2))
    return paddle.layer.classification_cost(input=output, label=lbl), output


@pytest.mark.parametrize("net", [convolution_net, stacked_lstm_net])
def test_chapter06_trains_with_falling_cost(net, book):
    paddle.init(use_gpu=False, trainer_count=1, seed=1)
    cost, output = net(DICT_DIM, class_dim=CLASS_DIM)
    parameters = paddle.parameters.create(cost)
    adam_optimizer = paddle.optimizer.Adam(
        learning_rate=1e-2, regularization=paddle.optimizer.L2Regularization(rate=8e-4),
        model_average=paddle.optimizer.ModelAverage(average_window=0.5))
    trainer = paddle.trainer.SGD(cost=cost, parameters=parameters,
                                 update_equation=adam_optimizer)
    feeding = {"word": 0, "label": 1}
    results = []
    costs = book.train_costs(trainer, imdb_like(300, 0), batch_size=30, num_passes=4,
                        feeding=feeding, on_pass=lambda e: results.append(
                            trainer.test(paddle.batch(imdb_like(100, 1), 50), feeding)))
    book.assert_finite_and_falling(costs, factor=0.8)
    assert results[-1].metrics["classification_error_evaluator"] < 0.3
    probs = paddle.infer(output_layer=output, parameters=parameters,
                         input=[([1, 30, 2],), ([15, 40, 12, 13],)], feeding={"word": 0})
    assert probs.argmax(axis=1).tolist() == [0, 1]
