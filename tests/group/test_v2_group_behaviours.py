"""Group behaviours PaddlePaddle v2 programs rely on: a non-layer ``recurrent_group`` input
reaches the step unchanged, ``beam_search`` over an external (sequence-valued) memory, and
scheduled sampling's embedding of ``max_id`` sharing the target table with ``GeneratedInput``."""

import numpy as np
import pytest

import sculler as paddle

D = paddle.data_type
V, E, BOS, EOS = 5, 3, 0, 1


@pytest.fixture(autouse=True)
def fresh_names():
    paddle.layer.reset_names()


def test_non_layer_input_reaches_the_step_unchanged():
    words = paddle.layer.data(name="words", type=D.integer_value_sub_sequence(V))
    emb = paddle.layer.embedding(input=words, size=E)
    seen = []

    def sentence(sub, hidden_size):
        seen.append(hidden_size)
        h = paddle.layer.memory(name="h", size=hidden_size)
        inner = paddle.layer.recurrent_group(
            step=lambda w: paddle.layer.fc(input=w, size=hidden_size), input=sub)
        return paddle.layer.fc(input=[paddle.layer.last_seq(input=inner), h],
                               size=hidden_size, name="h")

    doc = paddle.layer.recurrent_group(step=sentence,
                                       input=[paddle.layer.SubsequenceInput(emb), 6])
    assert seen == [6] and doc.size == 6
    out = paddle.layer.fc(input=paddle.layer.last_seq(input=doc), size=2,
                          act=paddle.activation.Softmax())
    params = paddle.parameters.create(out)
    probs = paddle.infer(output_layer=out, parameters=params,
                         input=[([[1, 2], [3]],), ([[4], [2, 2, 1]],)])
    assert probs.shape == (2, 2) and np.allclose(probs.sum(axis=1), 1)


def memory_step(ctx_seq):
    """A decoder with an external memory: each step reads the sum of the memory's rows and
    writes a projection of its state into every row (the memory is a sequence per path)."""

    def step(word):
        mem = paddle.layer.memory(name="ext", size=E, boot_layer=ctx_seq)
        read = paddle.layer.pooling(input=mem, pooling_type=paddle.pooling.Sum())
        h_prev = paddle.layer.memory(name="h", size=4)
        h = paddle.layer.fc(input=[word, read, h_prev], size=4, name="h")
        write = paddle.layer.fc(input=h, size=E, name="write")
        paddle.layer.addto(input=[mem, paddle.layer.expand(input=write, expand_as=mem)],
                           name="ext")
        return paddle.layer.fc(input=h, size=V, act=paddle.activation.Softmax(), name="prob")

    return step


def test_beam_search_over_a_sequence_valued_memory_follows_the_greedy_path():
    ctx = paddle.layer.data(name="ctx", type=D.dense_vector_sequence(E))
    trg = paddle.layer.data(name="trg", type=D.integer_value_sequence(V))
    emb = paddle.layer.embedding(input=trg, size=E, param_attr=paddle.attr.Param(name="emb"))
    train = paddle.layer.recurrent_group(step=memory_step(ctx), input=emb, name="dec")
    gen = paddle.layer.beam_search(
        step=memory_step(ctx), name="dec", bos_id=BOS, eos_id=EOS, beam_size=1, max_length=4,
        input=[paddle.layer.GeneratedInput(size=V, embedding_name="emb", embedding_size=E)])
    paddle.init(seed=3)
    params = paddle.parameters.create([paddle.topology.Topology(train),
                                       paddle.topology.Topology(gen)])
    for name in params.names():
        params.set(name, params.get(name) * 3.0)
    rng = np.random.RandomState(0)
    ctxs = [rng.uniform(-1, 1, (n, E)) for n in (2, 3, 1)]
    prob, ids = paddle.infer(output_layer=gen, parameters=params, input=[(c,) for c in ctxs],
                             field=["prob", "id"])
    start = 0
    for s, c in enumerate(ctxs):
        prefix, score = [], 0.0
        while len(prefix) < 4 and (not prefix or prefix[-1] != EOS):
            p = paddle.infer(output_layer=train, parameters=params,
                             input=[(c, [BOS] + prefix)], feeding={"ctx": 0, "trg": 1})[-1]
            prefix.append(int(p.argmax()))
            score += float(np.log(p.max()))
        assert list(ids[start:start + len(prefix)]) == prefix
        np.testing.assert_allclose(prob[s, 0], score, rtol=1e-5)
        start += len(prefix)
    assert start == ids.size


def test_scheduled_sampling_shares_the_target_embedding():
    """The training decoder feeds back ``embedding(max_id(previous probabilities))`` with the
    target words' table, and generation reads it through ``GeneratedInput``: one parameter
    ``trg_emb`` of shape [V, E] (max_id's size is its input's width, as in PaddlePaddle)."""
    src = paddle.layer.data(name="src", type=D.dense_vector(E))
    trg = paddle.layer.data(name="trg", type=D.integer_value_sequence(V))
    nxt = paddle.layer.data(name="next", type=D.integer_value_sequence(V))
    flag = paddle.layer.data(name="flag", type=D.integer_value_sequence(2))
    table = paddle.attr.Param(name="trg_emb")
    true_emb = paddle.layer.embedding(input=trg, size=E, param_attr=table)

    def decoder(ctx, current):
        h_prev = paddle.layer.memory(name="h", size=4)
        h = paddle.layer.fc(input=[current, ctx, h_prev], size=4, name="h")
        return paddle.layer.fc(input=h, size=V, act=paddle.activation.Softmax(), name="out")

    def train_step(ctx, true_word, use_true):
        previous = paddle.layer.memory(name="out", size=V)
        generated = paddle.layer.embedding(input=paddle.layer.max_id(input=previous), size=E,
                                           param_attr=table)
        current = paddle.layer.multiplex(input=[use_true, true_word, generated])
        return decoder(ctx, current)

    out = paddle.layer.recurrent_group(
        step=train_step, name="dec", input=[paddle.layer.StaticInput(src), true_emb, flag])
    cost = paddle.layer.classification_cost(input=out, label=nxt)
    gen = paddle.layer.beam_search(
        step=decoder, name="dec", bos_id=BOS, eos_id=EOS, beam_size=2, max_length=3,
        input=[paddle.layer.StaticInput(src),
               paddle.layer.GeneratedInput(size=V, embedding_name="trg_emb", embedding_size=E)])
    params = paddle.parameters.create(cost)
    assert params.get_shape("trg_emb") == (V, E)
    rng = np.random.RandomState(1)
    data = [(rng.uniform(-1, 1, E), [BOS, 2, 3], [2, 3, EOS], [1, 0, 1]) for _ in range(8)]
    before = params.get("trg_emb").copy()
    trainer = paddle.trainer.SGD(cost=cost, parameters=params,
                                 update_equation=paddle.optimizer.Momentum(learning_rate=0.1))
    trainer.train(reader=paddle.batch(lambda: iter(data), 4), num_passes=2,
                  feeding={"src": 0, "trg": 1, "next": 2, "flag": 3})
    assert not np.array_equal(params.get("trg_emb"), before)
    prob, ids = paddle.infer(output_layer=gen, parameters=params, input=[(d[0],) for d in data],
                             field=["prob", "id"])
    assert prob.shape == (8, 2) and np.all(np.isfinite(prob[:, 0]))


def test_beam_search_passes_values_through_and_refuses_bare_layers():
    ctx = paddle.layer.data(name="ctx", type=D.dense_vector(E))
    words = paddle.layer.GeneratedInput(size=V, embedding_name="emb", embedding_size=E)
    seen = []

    def step(c, width, word):
        seen.append(width)
        return paddle.layer.fc(input=[c, word], size=V, act=paddle.activation.Softmax())

    paddle.layer.beam_search(step=step, input=[paddle.layer.StaticInput(ctx), 7, words],
                             bos_id=BOS, eos_id=EOS, beam_size=2)
    assert seen == [7]
    with pytest.raises(TypeError, match=r"input 0 \('ctx'\) is a layer; wrap it in StaticInput"):
        paddle.layer.beam_search(step=step, input=[ctx, 7, words], bos_id=BOS, eos_id=EOS,
                                 beam_size=2)
