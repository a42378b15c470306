"""PaddlePaddle book chapter 08 (machine translation), re-created from the chapter's
description: the attention seq2seq network (simple_gru encoders, simple_attention, gru_step
decoder in a recurrent_group with an error-clipped input projection), its training branch on
wmt14-format tuples and its generation branch (beam_search, ``infer(field=['prob', 'id'])``
decoded as the chapter does), on small offline synthetic data with ``paddle`` = sculler."""

import io

import numpy as np
import pytest

import sculler as paddle

DICT = 16
BOS, EOS = 0, 1


@pytest.fixture(autouse=True)
def fresh_names():
    paddle.layer.reset_names()


def seqToseq_net(source_dict_dim, target_dict_dim, is_generating=False):  # noqa: N802
    decoder_size = encoder_size = 16
    word_vector_dim = 8
    max_length = 12
    beam_size = 3

    src_word_id = paddle.layer.data(
        name='source_language_word',
        type=paddle.data_type.integer_value_sequence(source_dict_dim))
    src_embedding = paddle.layer.embedding(input=src_word_id, size=word_vector_dim)
    src_forward = paddle.networks.simple_gru(input=src_embedding, size=encoder_size)
    src_backward = paddle.networks.simple_gru(input=src_embedding, size=encoder_size,
                                              reverse=True)
    encoded_vector = paddle.layer.concat(input=[src_forward, src_backward])
    encoded_proj = paddle.layer.fc(act=paddle.activation.Linear(), size=decoder_size,
                                   bias_attr=False, input=encoded_vector)
    backward_first = paddle.layer.first_seq(input=src_backward)
    decoder_boot = paddle.layer.fc(size=decoder_size, act=paddle.activation.Tanh(),
                                   bias_attr=False, input=backward_first)

    def gru_decoder_with_attention(enc_vec, enc_proj, current_word):
        decoder_mem = paddle.layer.memory(name='gru_decoder', size=decoder_size,
                                          boot_layer=decoder_boot)
        context = paddle.networks.simple_attention(encoded_sequence=enc_vec,
                                                   encoded_proj=enc_proj,
                                                   decoder_state=decoder_mem)
        decoder_inputs = paddle.layer.fc(
            act=paddle.activation.Linear(), size=decoder_size * 3, bias_attr=False,
            input=[context, current_word],
            layer_attr=paddle.attr.ExtraLayerAttribute(error_clipping_threshold=100.0))
        gru_step = paddle.layer.gru_step(name='gru_decoder', input=decoder_inputs,
                                         output_mem=decoder_mem, size=decoder_size)
        out = paddle.layer.fc(size=target_dict_dim, bias_attr=True,
                              act=paddle.activation.Softmax(), input=gru_step)
        return out

    decoder_group_name = "decoder_group"
    group_input1 = paddle.layer.StaticInput(input=encoded_vector)
    group_input2 = paddle.layer.StaticInput(input=encoded_proj)
    group_inputs = [group_input1, group_input2]

    if not is_generating:
        trg_embedding = paddle.layer.embedding(
            input=paddle.layer.data(
                name='target_language_word',
                type=paddle.data_type.integer_value_sequence(target_dict_dim)),
            size=word_vector_dim,
            param_attr=paddle.attr.ParamAttr(name='_target_language_embedding'))
        group_inputs.append(trg_embedding)
        decoder = paddle.layer.recurrent_group(name=decoder_group_name,
                                               step=gru_decoder_with_attention,
                                               input=group_inputs)
        lbl = paddle.layer.data(name='target_language_next_word',
                                type=paddle.data_type.integer_value_sequence(target_dict_dim))
        cost = paddle.layer.classification_cost(input=decoder, label=lbl)
        return cost
    trg_embedding = paddle.layer.GeneratedInput(
        size=target_dict_dim, embedding_name='_target_language_embedding',
        embedding_size=word_vector_dim)
    group_inputs.append(trg_embedding)
    beam_gen = paddle.layer.beam_search(name=decoder_group_name,
                                        step=gru_decoder_with_attention, input=group_inputs,
                                        bos_id=0, eos_id=1, beam_size=beam_size,
                                        max_length=max_length)
    return beam_gen


def wmt14_like(n, seed):
    """Tuples shaped like paddle.dataset.wmt14.train(): (<s> src <e>, <s> trg, trg <e>);
    the target is the source shifted by one id."""
    rng = np.random.RandomState(seed)

    def reader():
        for _ in range(n):
            words = list(rng.randint(3, DICT - 1, size=rng.randint(2, 6)))
            trg = [w + 1 for w in words]
            yield [BOS] + words + [EOS], [BOS] + trg, trg + [EOS]

    return reader


def test_chapter08_training_and_generation(capsys):
    paddle.init(use_gpu=False, trainer_count=1, seed=5)
    source_dict_dim = target_dict_dim = DICT

    # training branch
    cost = seqToseq_net(source_dict_dim, target_dict_dim)
    parameters = paddle.parameters.create(cost)
    optimizer = paddle.optimizer.Adam(learning_rate=1e-2,
                                      regularization=paddle.optimizer.L2Regularization(rate=8e-4))
    trainer = paddle.trainer.SGD(cost=cost, parameters=parameters, update_equation=optimizer)
    wmt14_reader = paddle.batch(paddle.reader.shuffle(wmt14_like(200, 0), buf_size=8192),
                                batch_size=10)
    costs = []

    def event_handler(event):
        if isinstance(event, paddle.event.EndIteration):
            costs.append(event.cost)
            if event.batch_id % 10 == 0:
                print("\nPass %d, Batch %d, Cost %f, %s" % (  # noqa: UP031 - the book's
                    event.pass_id, event.batch_id, event.cost, event.metrics))

    trainer.train(reader=wmt14_reader, event_handler=event_handler, num_passes=3)
    assert all(np.isfinite(costs))
    assert np.mean(costs[-5:]) < 0.7 * np.mean(costs[:5])
    saved = io.BytesIO()
    parameters.to_tar(saved)

    # generation branch (the chapter loads trained parameters: here our own tar)
    paddle.layer.reset_names()
    gen_creator = wmt14_like(3, 1)
    gen_data = []
    gen_num = 3
    for item in gen_creator():
        gen_data.append((item[0], ))
        if len(gen_data) == gen_num:
            break
    beam_gen = seqToseq_net(source_dict_dim, target_dict_dim, True)
    saved.seek(0)
    parameters = paddle.parameters.Parameters.from_tar(saved)
    beam_result = paddle.infer(output_layer=beam_gen, parameters=parameters, input=gen_data,
                               field=['prob', 'id'])
    trg_dict = {i: f"w{i}" for i in range(DICT)}
    trg_dict[EOS] = "<e>"
    seq_list = []
    seq = []
    for w in beam_result[1]:
        if w != -1:
            seq.append(w)
        else:
            seq_list.append(' '.join([trg_dict.get(w) for w in seq[1:]]))
            seq = []
    prob = beam_result[0]
    beam_size = 3
    for i in range(gen_num):
        for j in range(beam_size):
            print("prob = %f:" % (prob[i][j]), seq_list[i * beam_size + j])  # noqa: UP031
    assert prob.shape == (gen_num, beam_size) and len(seq_list) == gen_num * beam_size
    assert np.all(np.diff(prob, axis=1) <= 0) and np.all(prob < 0)
    for line in seq_list:
        words = line.split()
        assert words and (words[-1] == "<e>" or len(words) == 12)
    out = capsys.readouterr().out
    assert "Pass 0, Batch 0" in out and "prob = " in out
