"""Scheduled sampling in the shape of PaddlePaddle's models/scheduled_sampling program: an
attention seq2seq whose training decoder feeds each step either the true previous word or its
own previous prediction (``max_id`` of the last step's softmax, embedded with the target
table ``_target_language_embedding``), chosen by a ``true_token_flag`` sequence that a reader
decorator draws on a decaying schedule. Generation reads the same table through
``GeneratedInput``. The task is reversing short digit strings; after training, beam search
gets most held-out strings right, and the training decoder fed only its own predictions
follows the path greedy generation finds, with the same probabilities."""

import numpy as np

import sculler as paddle

BOS, EOS = 0, 1  # <s>, <e>; digit d is token d + 2
DICT = 6
WORD_DIM, ENC_SIZE, DEC_SIZE = 12, 16, 16
BEAM_SIZE, MAX_LENGTH = 2, 5


def reverse_pairs(n, seed):
    """wmt14-style samples (src, trg, trg_next): src = <s> x <e>, trg = <s> y, trg_next = y <e>,
    with y the reversed x."""
    rng = np.random.RandomState(seed)
    data = []
    for _ in range(n):
        x = [int(t) for t in rng.randint(2, DICT, size=rng.randint(2, 4))]
        y = x[::-1]
        data.append(([BOS] + x + [EOS], [BOS] + y, y + [EOS]))
    return lambda: iter(data)


class RandomScheduleGenerator:
    """The probability of feeding the true word decays linearly with the samples seen,
    p = max(a, 1 - seen / b); each step draws whether to feed the true word (flag 0) or the
    model's own previous prediction (flag 1)."""

    def __init__(self, a, b, seed):
        self.a, self.b, self.seen = a, b, 0
        self.rng = np.random.RandomState(seed)

    def true_word_rate(self):
        return max(self.a, 1.0 - self.seen / self.b)

    def flags(self, length):
        rate = self.true_word_rate()
        self.seen += 1
        return [0] + [int(u >= rate) for u in self.rng.rand(length - 1)]


def gen_schedule_data(reader, schedule):
    def data_reader():
        for src_ids, trg_ids, trg_ids_next in reader():
            yield src_ids, trg_ids, trg_ids_next, schedule.flags(len(trg_ids))
    return data_reader


def seqToseq_net(source_dict_dim, target_dict_dim, is_generating=False, beam_size=BEAM_SIZE):
    src_word_id = paddle.layer.data(
        name="source_language_word",
        type=paddle.data_type.integer_value_sequence(source_dict_dim))
    src_embedding = paddle.layer.embedding(
        input=src_word_id, size=WORD_DIM,
        param_attr=paddle.attr.ParamAttr(name="_source_language_embedding"))
    src_forward = paddle.networks.simple_gru(input=src_embedding, size=ENC_SIZE)
    src_backward = paddle.networks.simple_gru(input=src_embedding, size=ENC_SIZE, reverse=True)
    encoded_vector = paddle.layer.concat(input=[src_forward, src_backward])
    encoded_proj = paddle.layer.mixed(
        size=DEC_SIZE, input=paddle.layer.full_matrix_projection(encoded_vector))
    backward_first = paddle.layer.first_seq(input=src_backward)
    decoder_boot = paddle.layer.mixed(
        size=DEC_SIZE, act=paddle.activation.Tanh(),
        input=paddle.layer.full_matrix_projection(backward_first))

    def gru_decoder_with_attention(enc_vec, enc_proj, current_word):
        decoder_mem = paddle.layer.memory(name="gru_decoder", size=DEC_SIZE,
                                          boot_layer=decoder_boot)
        context = paddle.networks.simple_attention(encoded_sequence=enc_vec,
                                                   encoded_proj=enc_proj,
                                                   decoder_state=decoder_mem)
        with paddle.layer.mixed(size=DEC_SIZE * 3) as decoder_inputs:
            decoder_inputs += paddle.layer.full_matrix_projection(input=context)
            decoder_inputs += paddle.layer.full_matrix_projection(input=current_word)
        gru_step = paddle.layer.gru_step(name="gru_decoder", input=decoder_inputs,
                                         output_mem=decoder_mem, size=DEC_SIZE)
        with paddle.layer.mixed(name="gru_out", size=target_dict_dim, bias_attr=True,
                                act=paddle.activation.Softmax()) as out:
            out += paddle.layer.full_matrix_projection(input=gru_step)
        return out

    def gru_decoder_with_attention_train(enc_vec, enc_proj, true_word, true_token_flag):
        gru_out_memory = paddle.layer.memory(name="gru_out", size=target_dict_dim)
        generated_word = paddle.layer.max_id(input=gru_out_memory)
        generated_word_emb = paddle.layer.embedding(
            input=generated_word, size=WORD_DIM,
            param_attr=paddle.attr.ParamAttr(name="_target_language_embedding"))
        current_word = paddle.layer.multiplex(
            input=[true_token_flag, true_word, generated_word_emb])
        return gru_decoder_with_attention(enc_vec, enc_proj, current_word)

    group_inputs = [paddle.layer.StaticInput(input=encoded_vector, is_seq=True),
                    paddle.layer.StaticInput(input=encoded_proj, is_seq=True)]
    if not is_generating:
        trg_embedding = paddle.layer.embedding(
            input=paddle.layer.data(
                name="target_language_word",
                type=paddle.data_type.integer_value_sequence(target_dict_dim)),
            size=WORD_DIM, param_attr=paddle.attr.ParamAttr(name="_target_language_embedding"))
        true_token_flags = paddle.layer.data(name="true_token_flag",
                                             type=paddle.data_type.integer_value_sequence(2))
        decoder = paddle.layer.recurrent_group(
            name="decoder_group", step=gru_decoder_with_attention_train,
            input=group_inputs + [trg_embedding, true_token_flags])
        lbl = paddle.layer.data(name="target_language_next_word",
                                type=paddle.data_type.integer_value_sequence(target_dict_dim))
        return paddle.layer.classification_cost(input=decoder, label=lbl), decoder

    trg_embedding = paddle.layer.GeneratedInput(
        size=target_dict_dim, embedding_name="_target_language_embedding",
        embedding_size=WORD_DIM)
    return paddle.layer.beam_search(name="decoder_group", step=gru_decoder_with_attention,
                                    input=group_inputs + [trg_embedding], bos_id=BOS,
                                    eos_id=EOS, beam_size=beam_size, max_length=MAX_LENGTH)


def test_scheduled_sampling_trains_and_generates():
    cost, decoder = seqToseq_net(DICT, DICT)
    parameters = paddle.parameters.create(cost)
    assert parameters.get_shape("_target_language_embedding") == (DICT, WORD_DIM)
    trainer = paddle.trainer.SGD(cost=cost, parameters=parameters,
                                 update_equation=paddle.optimizer.Adam(learning_rate=1e-2))
    schedule = RandomScheduleGenerator(a=0.5, b=600, seed=3)
    feeding = {"source_language_word": 0, "target_language_word": 1,
               "target_language_next_word": 2, "true_token_flag": 3}
    costs = []

    def event_handler(event):
        if isinstance(event, paddle.event.EndIteration):
            costs.append(event.cost)

    train = gen_schedule_data(reverse_pairs(200, 1), schedule)
    trainer.train(reader=paddle.batch(paddle.reader.shuffle(train, 200), 20),
                  num_passes=8, event_handler=event_handler, feeding=feeding)
    assert schedule.true_word_rate() == 0.5  # the schedule reached its floor
    assert np.mean(costs[-3:]) < 0.5 * np.mean(costs[:3])

    paddle.layer.reset_names()
    beam_gen = seqToseq_net(DICT, DICT, is_generating=True)
    test = list(reverse_pairs(30, 2)())
    prob, ids = paddle.infer(output_layer=beam_gen, parameters=parameters,
                             input=[(src,) for src, _, _ in test], field=["prob", "id"])
    assert prob.shape == (len(test), BEAM_SIZE)
    assert np.all(prob[:, 0] >= prob[:, 1]) and np.all(prob <= 0)
    # ids: for each sample and result, [length, word ids..., -1]
    paths, start = [], 0
    while start < ids.size:
        length = int(ids[start])
        path = [int(w) for w in ids[start + 1:start + 1 + length]]
        assert ids[start + 1 + length] == -1 and 1 <= length <= MAX_LENGTH
        assert all(0 <= w < DICT for w in path)
        paths.append(path)
        start += length + 2
    assert len(paths) == len(test) * BEAM_SIZE
    best = paths[::BEAM_SIZE]
    exact = np.mean([p == trg_next for p, (_, _, trg_next) in zip(best, test)])
    assert exact >= 0.8

    # Fed its own predictions (flags 1 after <s>), the training decoder runs free: whatever
    # the target words say, it follows the greedy path that generation with one beam finds,
    # through the one shared target table.
    paddle.layer.reset_names()
    greedy_gen = seqToseq_net(DICT, DICT, is_generating=True, beam_size=1)
    greedy_prob, greedy_ids = paddle.infer(output_layer=greedy_gen, parameters=parameters,
                                           input=[(src,) for src, _, _ in test],
                                           field=["prob", "id"])
    # one result per sample: the paths back to back, each ending at <e> or at MAX_LENGTH words
    greedy = [[]]
    for w in greedy_ids:
        greedy[-1].append(int(w))
        if w == EOS or len(greedy[-1]) == MAX_LENGTH:
            greedy.append([])
    greedy = greedy[:-1]
    assert len(greedy) == len(test) and greedy_prob.shape == (len(test), 1)
    wrong_words = [[BOS] + [(w + 1) % DICT for w in path[:-1]] for path in greedy]
    free_running = paddle.infer(
        output_layer=decoder, parameters=parameters, feeding=feeding,
        input=[(src, wrong, path, [0] + [1] * (len(path) - 1))
               for (src, _, _), wrong, path in zip(test, wrong_words, greedy)])
    words = np.concatenate(greedy)
    assert np.array_equal(free_running.argmax(axis=1), words)
    starts = np.cumsum([0] + [len(path) for path in greedy[:-1]])
    np.testing.assert_allclose(
        greedy_prob[:, 0],
        np.add.reduceat(np.log(free_running[np.arange(words.size), words]), starts), rtol=1e-4)
