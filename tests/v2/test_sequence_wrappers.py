"""v2 wrappers of the sequence layers and text networks: PaddlePaddle v0.11 signatures,
automatic names, sizes, engine attrs, v1 helpers, and a short training run."""

import inspect

import numpy as np
import pytest

import sculler as paddle
from sculler import data_type as dt

L, P, A = paddle.layer, paddle.pooling, paddle.activation

# PaddlePaddle v0.11 paddle.v2.layer signatures (parameter names and defaults)
SIGNATURES = {
    "pooling": "input, pooling_type=None, name=None, bias_attr=None, agg_level=non-seq, "
               "stride=-1, layer_attr=None",
    "last_seq": "input, name=None, agg_level=non-seq, stride=-1, layer_attr=None",
    "first_seq": "input, name=None, agg_level=non-seq, stride=-1, layer_attr=None",
    "expand": "input, expand_as, name=None, bias_attr=False, expand_level=non-seq, "
              "layer_attr=None",
    "seq_concat": "a, b, act=None, name=None, layer_attr=None, bias_attr=None",
    "seq_reshape": "input, reshape_size, act=None, name=None, layer_attr=None, bias_attr=None",
    "sub_seq": "input, offsets, sizes, act=None, bias_attr=None, name=None",
    "seq_slice": "input, starts, ends, name=None",
    "sub_nested_seq": "input, selected_indices, name=None",
    "kmax_seq_score": "input, name=None, beam_size=1",
    "context_projection": "input, context_len, context_start=None, padding_attr=False",
}


def describe(fn):
    parts = []
    for p in inspect.signature(fn).parameters.values():
        parts.append(p.name if p.default is inspect.Parameter.empty else f"{p.name}={p.default}")
    return ", ".join(parts)


@pytest.fixture(autouse=True)
def fresh_names():
    paddle.layer.reset_names()


@pytest.mark.parametrize("name", list(SIGNATURES))
def test_signatures_match_paddle(name):
    assert describe(getattr(L, name)) == SIGNATURES[name]


def test_networks_signature():
    got = describe(paddle.networks.sequence_conv_pool)
    assert got.startswith("input, context_len, hidden_size, name=None, context_start=None, "
                          "pool_type=None, context_proj_layer_name=None, "
                          "context_proj_param_attr=False, fc_layer_name=None")
    assert paddle.networks.text_conv_pool is paddle.networks.sequence_conv_pool


def test_names_sizes_and_attrs():
    x = L.data(name="x", type=dt.dense_vector_sub_sequence(4))
    p = L.pooling(input=x, pooling_type=P.SquareRootN(),
                  agg_level=L.AggregateLevel.TO_SEQUENCE)
    assert (p.name, p.layer_type, p.size) == ("__seq_pooling_0__", "average", 4)
    assert p.config.attrs == {"trans_type": "seq", "seq_pool_stride": -1,
                              "average_strategy": "squarerootn"}
    m = L.pooling(input=x, stride=3)
    assert (m.layer_type, m.config.attrs["seq_pool_stride"]) == ("max", 3)
    mi = L.pooling(input=x, pooling_type=P.Max(output_max_index=True))
    assert mi.config.attrs["output_max_index"] is True
    last, first = L.last_seq(input=x), L.first_seq(input=x, stride=2)
    assert (last.name, first.name) == ("__last_seq_0__", "__first_seq_0__")
    assert first.config.attrs["select_first"] and not last.config.attrs["select_first"]
    e = L.expand(input=last, expand_as=x, expand_level=L.ExpandLevel.FROM_SEQUENCE)
    assert (e.name, e.size, e.config.attrs["trans_type"]) == ("__expand_layer_0__", 4, "seq")
    c = L.seq_concat(a=x, b=x)
    r = L.seq_reshape(input=x, reshape_size=2)
    assert (c.name, c.size, r.name, r.size) == ("__seqconcat_0__", 4, "__seqreshape_0__", 2)
    k = L.kmax_seq_score(input=L.fc(input=x, size=1), beam_size=3)
    assert (k.name, k.size) == ("__kmax_seq_score_layer_0__", 3)
    s = L.seq_slice(input=x, starts=None, ends=L.data(name="e", type=dt.dense_vector(2)))
    assert s.config.attrs == {"select_first": False} and len(s.parents) == 2
    n = L.sub_nested_seq(input=x, selected_indices=k)
    assert (n.name, n.size) == ("__sub_nested_seq_layer_0__", 4)
    ids = L.data(name="o", type=dt.integer_value(10))
    sub = L.sub_seq(input=x, offsets=ids, sizes=ids)
    assert (sub.name, sub.layer_type) == ("__sub_seq_0__", "subseq")


def test_bad_arguments_are_clear():
    x = L.data(name="x", type=dt.dense_vector_sequence(4))
    with pytest.raises(ValueError, match="agg_level must be one of"):
        L.pooling(input=x, agg_level="sequence")
    with pytest.raises(ValueError, match="stride=2 needs agg_level"):
        L.last_seq(input=x, agg_level=L.AggregateLevel.TO_SEQUENCE, stride=2)
    with pytest.raises(TypeError, match="pooling_type must be"):
        L.pooling(input=x, pooling_type="max")
    with pytest.raises(ValueError, match="give starts, ends or both"):
        L.seq_slice(input=x, starts=None, ends=None)
    with pytest.raises(ValueError, match="must have width 1"):
        L.kmax_seq_score(input=x)
    with pytest.raises(ValueError, match="widths 4 and 3"):
        L.seq_concat(a=x, b=L.data(name="y", type=dt.dense_vector_sequence(3)))


def test_context_projection_padding_attr_rules():
    x = L.data(name="x", type=dt.dense_vector_sequence(2))
    for attr, trainable in ((False, False), (None, True), (True, True),
                            (paddle.attr.Param(initial_std=0.1), True)):
        proj = L.context_projection(input=x, context_len=3, padding_attr=attr)
        assert proj.attrs.get("trainable_padding", False) is trainable
        assert proj.attrs["context_start"] == -1
    assert L.context_projection(input=x, context_len=4).attrs["context_start"] == -2
    m = L.mixed(input=L.context_projection(input=x, context_len=3, padding_attr=True))
    params = paddle.parameters.create(m)
    assert params.get_shape("___mixed_0__.w0") == (2, 2)
    assert np.all(params.get("___mixed_0__.w0") == 0)  # zero-initialised padding


def test_sequence_conv_pool_layers_and_defaults():
    w = L.data(name="w", type=dt.integer_value_sequence(50))
    emb = L.embedding(input=w, size=6)
    out = paddle.networks.sequence_conv_pool(input=emb, context_len=3, hidden_size=8)
    assert (out.name, out.layer_type, out.size) == ("__sequence_conv_pooling_0__", "max", 8)
    fc = out.parents[0]
    proj = fc.parents[0]
    assert (fc.name, fc.activation, fc.size) == ("__sequence_conv_pooling_0___conv_fc",
                                                 "tanh", 8)
    assert (proj.name, proj.layer_type, proj.size) == (
        "__sequence_conv_pooling_0___conv_proj", "mixed", 18)
    assert not proj.config.inputs[0].attrs.get("trainable_padding")
    avg = paddle.networks.text_conv_pool(input=emb, context_len=5, hidden_size=4, name="t",
                                         pool_type=P.Avg(), fc_act=A.Relu())
    assert (avg.name, avg.layer_type, avg.parents[0].activation) == ("t", "average", "relu")


def test_concat_of_projections_shares_a_table_and_trains():
    """The word2vec chapter's shape: four context words through one shared table."""
    words = [L.data(name=f"w{i}", type=dt.integer_value(20)) for i in range(4)]
    nxt = L.data(name="next", type=dt.integer_value(20))
    table = paddle.attr.Param(name="_proj", initial_std=0.1)
    ctx = L.concat(input=[L.table_projection(input=w, size=8, param_attr=table)
                          for w in words])
    assert (ctx.layer_type, ctx.size) == ("concat2", 32)
    hidden = L.fc(input=ctx, size=16, act=A.Sigmoid())
    predict = L.fc(input=hidden, size=20, act=A.Softmax())
    cost = L.classification_cost(input=predict, label=nxt)
    params = paddle.parameters.create(cost)
    assert params.get_shape("_proj") == (20, 8)
    rng = np.random.RandomState(0)
    data = [tuple(int(v) for v in rng.randint(0, 20, size=4)) for _ in range(64)]
    data = [d + ((d[0] + 1) % 20,) for d in data]  # next word follows the first
    trainer = paddle.trainer.SGD(cost=cost, parameters=params,
                                 update_equation=paddle.optimizer.Adam(learning_rate=0.02))
    costs = []
    trainer.train(paddle.batch(lambda: iter(data), 16), num_passes=15,
                  event_handler=lambda e: costs.append(e.cost)
                  if isinstance(e, paddle.event.EndIteration) else None)
    assert np.isfinite(costs).all() and np.mean(costs[-4:]) < 0.5 * np.mean(costs[:4])
    with pytest.raises(TypeError, match="all layers or all projections"):
        L.concat(input=[words[0], L.table_projection(input=words[1], size=8)])


def test_text_classifier_trains_on_variable_length_sequences():
    """sequence_conv_pool + last_seq/first_seq/expand in one net learns a rule on sequences."""
    w = L.data(name="w", type=dt.integer_value_sequence(10))
    label = L.data(name="label", type=dt.integer_value(2))
    emb = L.embedding(input=w, size=8)
    conv = paddle.networks.sequence_conv_pool(input=emb, context_len=3, hidden_size=16)
    both = L.concat(input=[conv, L.last_seq(input=emb), L.first_seq(input=emb)])
    predict = L.fc(input=both, size=2, act=A.Softmax())
    cost = L.classification_cost(input=predict, label=label)
    params = paddle.parameters.create(cost)
    rng = np.random.RandomState(1)
    data = []
    for _ in range(96):
        seq = [int(v) for v in rng.randint(0, 10, size=rng.randint(1, 9))]
        data.append((seq, int(5 in seq)))
    trainer = paddle.trainer.SGD(cost=cost, parameters=params,
                                 update_equation=paddle.optimizer.Adam(learning_rate=0.01))
    trainer.train(paddle.batch(lambda: iter(data), 16), num_passes=20)
    probs = paddle.infer(output_layer=predict, parameters=params, input=[(s,) for s, _ in data])
    accuracy = np.mean(probs.argmax(axis=1) == [y for _, y in data])
    assert accuracy > 0.9


def test_v1_helpers_build_the_same_layers():
    from sculler.config import helpers as H
    from sculler.config.config_parser import config_scope, finish_config

    with config_scope() as ctx:
        x = H.data_layer(name="x", size=4)
        H.pooling_layer(input=x, pooling_type=H.SumPooling(),
                        agg_level=H.AggregateLevel.TO_SEQUENCE)
        H.last_seq(input=x)
        H.first_seq(input=x)
        H.expand_layer(input=H.last_seq(input=x), expand_as=x)
        H.seq_concat_layer(a=x, b=x)
        H.seq_reshape_layer(input=x, reshape_size=2)
        H.kmax_seq_score_layer(input=H.fc_layer(input=x, size=1), beam_size=2)
        H.text_conv_pool(input=x, context_len=3, hidden_size=5, name="conv")
        model = finish_config(ctx)
    types = {c.name: c.type for c in model.layers}
    assert types["__seq_pooling_0__"] == "average"
    assert types["__last_seq_1__"] == "seqlastins" and types["__expand_layer_0__"] == "expand"
    assert [types[n] for n in ("conv_conv_proj", "conv_conv_fc", "conv")] == [
        "mixed", "fc", "max"]
