"""Book chapter 04 (word2vec): an N-gram language model. Four context words go through table
projections that share one embedding (parameter ``_proj``), are concatenated (PaddlePaddle's
concat of projections), then a sigmoid hidden layer with dropout and a softmax over the
dictionary predict the fifth word. Data: imikolov-style 5-gram tuples of a synthetic language
in which the next word follows from the last context word."""

import math

import numpy as np

import sculler as paddle

DICT_SIZE, EMBSIZE, HIDDENSIZE, N = 40, 16, 64, 5


def ngram_reader(n_samples, seed):
    """5-gram tuples like paddle.dataset.imikolov.train(word_dict, 5): four context ids and
    the next id, here ``(last context word * 7 + 3) % DICT_SIZE``."""
    rng = np.random.RandomState(seed)
    grams = []
    for _ in range(n_samples):
        ctx = rng.randint(0, DICT_SIZE, size=4).tolist()
        grams.append(tuple(ctx + [(ctx[-1] * 7 + 3) % DICT_SIZE]))
    return lambda: iter(grams)


def wordemb(inlayer):
    return paddle.layer.table_projection(
        input=inlayer, size=EMBSIZE,
        param_attr=paddle.attr.Param(name="_proj", initial_std=0.001, learning_rate=1,
                                     l2_rate=0))


def test_chapter04_ngram_model_trains_with_falling_cost(book):
    paddle.init(use_gpu=False, trainer_count=1, seed=1)
    first_word = paddle.layer.data(name="firstw",
                                   type=paddle.data_type.integer_value(DICT_SIZE))
    second_word = paddle.layer.data(name="secondw",
                                    type=paddle.data_type.integer_value(DICT_SIZE))
    third_word = paddle.layer.data(name="thirdw",
                                   type=paddle.data_type.integer_value(DICT_SIZE))
    fourth_word = paddle.layer.data(name="fourthw",
                                    type=paddle.data_type.integer_value(DICT_SIZE))
    next_word = paddle.layer.data(name="fifthw", type=paddle.data_type.integer_value(DICT_SIZE))
    context_emb = paddle.layer.concat(input=[wordemb(first_word), wordemb(second_word),
                                             wordemb(third_word), wordemb(fourth_word)])
    hidden1 = paddle.layer.fc(
        input=context_emb, size=HIDDENSIZE, act=paddle.activation.Sigmoid(),
        layer_attr=paddle.attr.Extra(drop_rate=0.5),
        bias_attr=paddle.attr.Param(learning_rate=2),
        param_attr=paddle.attr.Param(initial_std=1.0 / math.sqrt(EMBSIZE * 8),
                                     learning_rate=1))
    predictword = paddle.layer.fc(input=hidden1, size=DICT_SIZE,
                                  bias_attr=paddle.attr.Param(learning_rate=2),
                                  act=paddle.activation.Softmax())
    cost = paddle.layer.classification_cost(input=predictword, label=next_word)
    parameters = paddle.parameters.create(cost)
    assert parameters.get_shape("_proj") == (DICT_SIZE, EMBSIZE)  # one shared table
    adam_optimizer = paddle.optimizer.Adam(
        learning_rate=3e-2, regularization=paddle.optimizer.L2Regularization(8e-4))
    trainer = paddle.trainer.SGD(cost, parameters, adam_optimizer)
    costs = book.train_costs(trainer, ngram_reader(400, 0), batch_size=50, num_passes=5)
    book.assert_finite_and_falling(costs, factor=0.8)
    result = trainer.test(paddle.batch(ngram_reader(100, 1), 50))
    assert result.metrics["classification_error_evaluator"] < 0.9  # chance is 0.975
    probs = paddle.infer(output_layer=predictword, parameters=parameters,
                         input=[(1, 2, 3, 4)], feeding={"firstw": 0, "secondw": 1,
                                                        "thirdw": 2, "fourthw": 3})
    assert probs.shape == (1, DICT_SIZE)
