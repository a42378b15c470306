"""Book chapter 07 (label semantic roles): ``db_lstm``. Eight embedded inputs (the word, five
predicate-context words sharing the static pre-trained table ``emb``, the predicate, the mark)
go through one ``mixed`` layer of full-matrix projections, then a stack of lstmemory layers
alternating direction, each fed by a mixed layer over the previous hidden and LSTM outputs;
a last mixed layer gives per-tag scores for ``crf`` (the cost) and ``crf_decoding`` (sharing
``crfw``), scored by the IOB ``chunk`` evaluator. Momentum with L2 and a ModelAverage, as in
the chapter, but with rates for a few batches (the chapter's ``mix_hidden_lr`` 1e-3 and rate
2e-2 barely move in four passes; here 1.0 and 5e-3). Data: conll05-format nine-sequence
samples of a synthetic language where the predicate's left neighbours form an A0 chunk and its
right neighbour an A1 chunk."""

import math

import numpy as np

import sculler as paddle

WORD_DICT_LEN, PRED_DICT_LEN = 40, 8
LABELS = {"B-A0": 0, "I-A0": 1, "B-A1": 2, "I-A1": 3, "B-V": 4, "I-V": 5, "O": 6}
LABEL_DICT_LEN = len(LABELS)
MARK_DICT_LEN, WORD_DIM, MARK_DIM, HIDDEN_DIM, DEPTH = 2, 16, 5, 32, 4
DEFAULT_STD, MIX_HIDDEN_LR = 1 / math.sqrt(HIDDEN_DIM) / 3.0, 1.0
BOS, EOS = WORD_DICT_LEN - 2, WORD_DICT_LEN - 1


def conll05_like(n, seed):
    """(word, ctx_n2, ctx_n1, ctx_0, ctx_p1, ctx_p2, pred, mark, label) like
    paddle.dataset.conll05.test()."""
    rng = np.random.RandomState(seed)
    samples = []
    for _ in range(n):
        words = rng.randint(0, WORD_DICT_LEN - 2, size=rng.randint(4, 10)).tolist()
        v = int(rng.randint(1, len(words) - 1))
        tags = ["O"] * len(words)
        tags[v] = "B-V"
        start = max(0, v - 2)
        tags[start:v] = ["B-A0"] + ["I-A0"] * (v - 1 - start)
        tags[v + 1] = "B-A1"
        ctx = [words[i] if 0 <= i < len(words) else (BOS if i < 0 else EOS)
               for i in range(v - 2, v + 3)]
        mark = [1 if abs(i - v) <= 2 else 0 for i in range(len(words))]
        pred = [int(words[v] % PRED_DICT_LEN)] * len(words)
        samples.append((words, *[[c] * len(words) for c in ctx], pred, mark,
                        [LABELS[t] for t in tags]))
    return lambda: iter(samples)


def db_lstm():
    word = paddle.layer.data(name="word_data",
                             type=paddle.data_type.integer_value_sequence(WORD_DICT_LEN))
    predicate = paddle.layer.data(name="verb_data",
                                  type=paddle.data_type.integer_value_sequence(PRED_DICT_LEN))
    ctx_n2, ctx_n1, ctx_0, ctx_p1, ctx_p2 = (
        paddle.layer.data(name=name, type=paddle.data_type.integer_value_sequence(WORD_DICT_LEN))
        for name in ("ctx_n2_data", "ctx_n1_data", "ctx_0_data", "ctx_p1_data", "ctx_p2_data"))
    mark = paddle.layer.data(name="mark_data",
                             type=paddle.data_type.integer_value_sequence(MARK_DICT_LEN))
    emb_para = paddle.attr.Param(name="emb", initial_std=0., is_static=True)
    std_0 = paddle.attr.Param(initial_std=0.)
    std_default = paddle.attr.Param(initial_std=DEFAULT_STD)

    predicate_embedding = paddle.layer.embedding(
        size=WORD_DIM, input=predicate,
        param_attr=paddle.attr.Param(name="vemb", initial_std=DEFAULT_STD))
    mark_embedding = paddle.layer.embedding(size=MARK_DIM, input=mark, param_attr=std_0)
    word_input = [word, ctx_n2, ctx_n1, ctx_0, ctx_p1, ctx_p2]
    emb_layers = [paddle.layer.embedding(size=WORD_DIM, input=x, param_attr=emb_para)
                  for x in word_input]
    emb_layers += [predicate_embedding, mark_embedding]

    hidden_0 = paddle.layer.mixed(
        size=HIDDEN_DIM, bias_attr=std_default,
        input=[paddle.layer.full_matrix_projection(input=emb, param_attr=std_default)
               for emb in emb_layers])
    lstm_para_attr = paddle.attr.Param(initial_std=0.0, learning_rate=1.0)
    hidden_para_attr = paddle.attr.Param(initial_std=DEFAULT_STD, learning_rate=MIX_HIDDEN_LR)
    lstm_0 = paddle.layer.lstmemory(input=hidden_0, act=paddle.activation.Relu(),
                                    gate_act=paddle.activation.Sigmoid(),
                                    state_act=paddle.activation.Sigmoid(),
                                    bias_attr=std_0, param_attr=lstm_para_attr)
    input_tmp = [hidden_0, lstm_0]
    for i in range(1, DEPTH):
        mix_hidden = paddle.layer.mixed(
            size=HIDDEN_DIM, bias_attr=std_default,
            input=[paddle.layer.full_matrix_projection(input=input_tmp[0],
                                                       param_attr=hidden_para_attr),
                   paddle.layer.full_matrix_projection(input=input_tmp[1],
                                                       param_attr=lstm_para_attr)])
        lstm = paddle.layer.lstmemory(input=mix_hidden, act=paddle.activation.Relu(),
                                      gate_act=paddle.activation.Sigmoid(),
                                      state_act=paddle.activation.Sigmoid(),
                                      reverse=((i % 2) == 1), bias_attr=std_0,
                                      param_attr=lstm_para_attr)
        input_tmp = [mix_hidden, lstm]
    feature_out = paddle.layer.mixed(
        size=LABEL_DICT_LEN, bias_attr=std_default,
        input=[paddle.layer.full_matrix_projection(input=input_tmp[0],
                                                   param_attr=hidden_para_attr),
               paddle.layer.full_matrix_projection(input=input_tmp[1],
                                                   param_attr=lstm_para_attr)])
    return feature_out


def test_chapter07_db_lstm_crf_trains_with_falling_cost(book):
    paddle.init(use_gpu=False, trainer_count=1, seed=1)
    feature_out = db_lstm()
    target = paddle.layer.data(name="target",
                               type=paddle.data_type.integer_value_sequence(LABEL_DICT_LEN))
    crf_cost = paddle.layer.crf(
        size=LABEL_DICT_LEN, input=feature_out, label=target,
        param_attr=paddle.attr.Param(name="crfw", initial_std=DEFAULT_STD,
                                     learning_rate=MIX_HIDDEN_LR))
    crf_dec = paddle.layer.crf_decoding(size=LABEL_DICT_LEN, input=feature_out,
                                        param_attr=paddle.attr.Param(name="crfw"))
    paddle.evaluator.chunk(input=crf_dec, label=target, chunk_scheme="IOB",
                           num_chunk_types=int(math.ceil((LABEL_DICT_LEN - 1) / 2.0)))
    parameters = paddle.parameters.create(crf_cost)
    # the chapter loads pre-trained vectors into the static table "emb"
    pretrained = np.random.RandomState(5).normal(0, 0.5, (WORD_DICT_LEN, WORD_DIM))
    parameters.set("emb", pretrained.astype(np.float32))
    optimizer = paddle.optimizer.Momentum(
        momentum=0, learning_rate=5e-3,
        regularization=paddle.optimizer.L2Regularization(rate=8e-4),
        model_average=paddle.optimizer.ModelAverage(average_window=0.5,
                                                    max_average_window=10000))
    trainer = paddle.trainer.SGD(cost=crf_cost, parameters=parameters,
                                 update_equation=optimizer, extra_layers=crf_dec)
    feeding = {"word_data": 0, "ctx_n2_data": 1, "ctx_n1_data": 2, "ctx_0_data": 3,
               "ctx_p1_data": 4, "ctx_p2_data": 5, "verb_data": 6, "mark_data": 7,
               "target": 8}
    costs = book.train_costs(trainer, conll05_like(200, 0), batch_size=20, num_passes=4,
                        feeding=feeding)
    book.assert_finite_and_falling(costs, factor=0.8)
    np.testing.assert_array_equal(parameters.get("emb"), pretrained.astype(np.float32))
    result = trainer.test(paddle.batch(conll05_like(60, 1), 30), feeding=feeding)
    assert np.isfinite(result.cost) and 0 <= result.metrics["chunk_evaluator"] <= 1
    sample = list(conll05_like(1, 2)())[0]
    tags = paddle.infer(output_layer=crf_dec, parameters=parameters, input=[sample[:8]],
                        feeding={k: v for k, v in feeding.items() if k != "target"},
                        field="id")
    assert np.asarray(tags).reshape(-1).shape == (len(sample[0]),)
    assert set(np.asarray(tags).reshape(-1).tolist()) <= set(range(LABEL_DICT_LEN))
