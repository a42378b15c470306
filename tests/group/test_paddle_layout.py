"""Recurrent groups in PaddlePaddle's ModelConfig layout: the flat layer list, the root and
per-group sub-models, agent names and parameter names, as PaddlePaddle 0.11 writes them
(trainer_config_helpers/tests/configs/protostr/test_rnn_group.protostr and the generator
layout of config_parser's RecurrentLayerGroupEnd); the layout survives JSON and runs."""

import numpy as np
import pytest

import sculler as paddle
from sculler.core.argument import Argument
from sculler.core.model_config import LinkConfig, MemoryConfig, ModelConfig
from sculler.core.network import Network

D = paddle.data_type
G0 = "__recurrent_group_0__"


@pytest.fixture(autouse=True)
def fresh_names():
    paddle.layer.reset_names()


def rnn_step(name):
    def step(s):
        m = paddle.layer.memory(name=name, size=200)
        return paddle.layer.fc(input=[s, m], size=200, name=name)
    return step


def layout(model):
    return [(lc.name, lc.type, lc.size) for lc in model.layers]


def subs(model):
    return {sm.name: sm for sm in model.sub_models}


def test_simple_group_is_laid_out_as_paddle():
    seq = paddle.layer.data(name="seq_input", type=D.dense_vector_sequence(100))
    out = paddle.layer.last_seq(input=paddle.layer.recurrent_group(
        step=rnn_step("rnn_forward"), input=seq))
    model = paddle.topology.Topology(out).proto()
    assert model.type == "recurrent_nn"
    assert layout(model) == [
        ("seq_input", "data", 100), (G0, "recurrent_layer_group", 0),
        (f"seq_input@{G0}", "scatter_agent", 100), (f"rnn_forward+delay1@{G0}", "agent", 200),
        (f"rnn_forward@{G0}", "fc", 200), ("rnn_forward", "gather_agent", 200),
        ("__last_seq_0__", "seqlastins", 200)]
    fc = model.layer(f"rnn_forward@{G0}")
    assert [(i.input_layer_name, i.input_parameter_name) for i in fc.inputs] == [
        (f"seq_input@{G0}", f"_rnn_forward@{G0}.w0"),
        (f"rnn_forward+delay1@{G0}", f"_rnn_forward@{G0}.w1")]
    assert fc.bias_parameter_name == f"_rnn_forward@{G0}.wbias"
    assert [p.name for p in model.parameters] == [
        f"_rnn_forward@{G0}.w0", f"_rnn_forward@{G0}.w1", f"_rnn_forward@{G0}.wbias"]
    root, group = model.sub_models
    assert root.name == "root" and not root.is_recurrent_layer_group
    assert root.layer_names == ["seq_input", G0, "rnn_forward", "__last_seq_0__"]
    assert group.name == G0 and group.is_recurrent_layer_group and not group.reversed
    assert group.layer_names == [f"seq_input@{G0}", f"rnn_forward+delay1@{G0}",
                                 f"rnn_forward@{G0}"]
    assert group.memories == [MemoryConfig(f"rnn_forward@{G0}", f"rnn_forward+delay1@{G0}")]
    assert group.in_links == [LinkConfig("seq_input", f"seq_input@{G0}")]
    assert group.out_links == [LinkConfig(f"rnn_forward@{G0}", "rnn_forward")]
    assert group.generator is None


def test_reversed_group_and_unnamed_memory_counter():
    seq = paddle.layer.data(name="seq_input", type=D.dense_vector_sequence(100))
    paddle.layer.recurrent_group(step=rnn_step("a"), input=seq)  # memory number 0 is used

    def step(s):
        m = paddle.layer.memory(name=None, size=200)
        fc = paddle.layer.fc(input=[s, m], size=200)
        m.set_input(fc)
        return fc

    out = paddle.layer.recurrent_group(step=step, input=seq, reverse=True, name="back")
    group = subs(paddle.topology.Topology(out).proto())["back"]
    assert group.reversed
    assert group.layer_names == ["seq_input@back", "__memory_1__@back", "__fc_layer_0__@back"]
    assert group.memories == [MemoryConfig("__fc_layer_0__@back", "__memory_1__@back")]


def test_boot_layer_static_input_and_boot_bias():
    seq = paddle.layer.data(name="x", type=D.dense_vector_sequence(3))
    ctx = paddle.layer.data(name="ctx", type=D.dense_vector(2))
    boot = paddle.layer.fc(input=ctx, size=4, name="boot")

    def step(x_t, c):
        h = paddle.layer.memory(name="h", size=4, boot_layer=boot)
        b = paddle.layer.memory(name="b", size=4, boot_bias=paddle.attr.Param(initial_std=0.0))
        out = paddle.layer.fc(input=[x_t, c, h, b], size=4, name="h")
        paddle.layer.fc(input=out, size=4, name="b")
        return out

    out = paddle.layer.recurrent_group(step=step, input=[seq, paddle.layer.StaticInput(ctx)],
                                       name="g")
    model = paddle.topology.Topology(out).proto()
    group = subs(model)["g"]
    assert group.layer_names[:4] == ["x@g", "__memory_0__@g", "h+delay1@g", "b+delay1@g"]
    assert model.layer("__memory_0__@g").type == "agent"
    assert group.memories == [
        MemoryConfig("__memory_0__@g", "__memory_0__@g", boot_layer_name="ctx"),
        MemoryConfig("h@g", "h+delay1@g", boot_layer_name="boot"),
        MemoryConfig("b@g", "b+delay1@g", boot_bias_parameter_name="_b+delay1@g.wbias",
                     boot_bias_active_type="linear")]
    assert "_b+delay1@g.wbias" in [p.name for p in model.parameters]


def test_nested_group_over_subsequences():
    sub = paddle.layer.data(name="sub_seq_input", type=D.dense_vector_sub_sequence(100))
    out = paddle.layer.recurrent_group(step=rnn_step("rnn_subseq_forward"),
                                       input=paddle.layer.SubsequenceInput(sub))
    model = paddle.topology.Topology(out).proto()
    group = subs(model)[G0]
    assert group.layer_names == [f"sub_seq_input@{G0}", f"rnn_subseq_forward+delay1@{G0}",
                                 f"rnn_subseq_forward@{G0}"]
    assert model.layer(f"sub_seq_input@{G0}").type == "scatter_agent"
    assert group.memories == [MemoryConfig(f"rnn_subseq_forward@{G0}",
                                           f"rnn_subseq_forward+delay1@{G0}")]
    assert group.in_links == [LinkConfig("sub_seq_input", f"sub_seq_input@{G0}")]
    assert group.out_links == [LinkConfig(f"rnn_subseq_forward@{G0}", "rnn_subseq_forward")]


def test_group_inside_a_group():
    x = paddle.layer.data(name="x", type=D.dense_vector_sub_sequence(2))

    def outer_step(s):
        inner = paddle.layer.recurrent_group(step=rnn_step("i"), input=s, name="inner")
        return paddle.layer.last_seq(input=inner, name="last")

    out = paddle.layer.recurrent_group(step=outer_step, input=x, name="outer")
    model = paddle.topology.Topology(out).proto()
    s = subs(model)
    assert s["outer"].layer_names == ["x@outer", "inner@outer", "i@outer", "last@outer"]
    inner = s["inner@outer"]  # PaddlePaddle names a nested group and its layers so
    assert inner.layer_names == ["x@inner@outer", "i+delay1@inner@outer", "i@inner@outer"]
    assert inner.in_links == [LinkConfig("x@outer", "x@inner@outer")]
    assert inner.out_links == [LinkConfig("i@inner@outer", "i@outer")]
    assert "_i@inner@outer.w0" in [p.name for p in model.parameters]
    assert model.layer("inner@outer").type == "recurrent_layer_group"
    assert model.layer("i@outer").type == "gather_agent"


def generator():
    ctx = paddle.layer.data(name="ctx", type=D.dense_vector(3))

    def step(c, word):
        h = paddle.layer.memory(name="h", size=5)
        h = paddle.layer.fc(input=[word, c, h], size=5, name="h")
        return paddle.layer.fc(input=h, size=4, act=paddle.activation.Softmax(), name="prob")

    return paddle.layer.beam_search(
        step=step, bos_id=0, eos_id=1, beam_size=2, max_length=3,
        input=[paddle.layer.StaticInput(ctx), paddle.layer.GeneratedInput(
            size=4, embedding_name="emb", embedding_size=3)])


def test_beam_search_generator_layout():
    gen = generator()
    assert gen.name == "__beam_search_predict__"
    model = paddle.topology.Topology(gen).proto()
    g = "__beam_search_0__"
    assert layout(model) == [
        ("ctx", "data", 3), (g, "recurrent_layer_group", 0), (f"__memory_0__@{g}", "agent", 3),
        (f"__beam_search_predict__+delay1@{g}", "agent", 4),
        (f"__embedding_0__@{g}", "embedding", 3), (f"h+delay1@{g}", "agent", 5),
        (f"h@{g}", "fc", 5), (f"prob@{g}", "fc", 4), (f"__beam_search_predict__@{g}", "maxid", 4),
        (f"__{g}_eos_layer__@{g}", "eos_id", 2), ("__beam_search_predict__", "data", 4)]
    assert model.input_layer_names == ["ctx"]
    assert model.output_layer_names == ["__beam_search_predict__"]
    group = subs(model)[g]
    assert group.in_links == []
    assert group.out_links == [LinkConfig(f"__beam_search_predict__@{g}",
                                          "__beam_search_predict__")]
    assert group.memories[1] == MemoryConfig(f"__beam_search_predict__@{g}",
                                             f"__beam_search_predict__+delay1@{g}",
                                             boot_with_const_id=0)
    gc = group.generator
    assert (gc.max_num_frames, gc.eos_layer_name, gc.num_results_per_sample, gc.beam_size) == (
        3, f"__{g}_eos_layer__@{g}", 2, 2)
    assert model.layer(f"__embedding_0__@{g}").inputs[0].input_parameter_name == "emb"


def run_layout(model, feed, params=None):
    net = Network(ModelConfig.from_json(model.to_json()), params)
    return net, net.forward(feed)[0]


def test_layout_runs_after_a_json_round_trip():
    x = paddle.layer.data(name="x", type=D.dense_vector_sequence(3))
    ctx = paddle.layer.data(name="ctx", type=D.dense_vector(2))

    def step(x_t, c):
        h = paddle.layer.memory(name="h", size=4)
        return paddle.layer.fc(input=[x_t, c, h], size=4, name="h")

    out = paddle.layer.last_seq(input=paddle.layer.recurrent_group(
        step=step, input=[x, paddle.layer.StaticInput(ctx)], reverse=True, name="g"))
    topo = paddle.topology.Topology(out)
    params = paddle.parameters.create(topo)
    feed = {"x": Argument(value=np.arange(15, dtype=np.float32).reshape(5, 3) / 10,
                          seq_starts=np.array([0, 2, 5])),
            "ctx": Argument(value=np.ones((2, 2), np.float32))}
    want = paddle.infer(output_layer=out, parameters=params,
                        input=[(feed["x"].value[:2], [1.0, 1.0]), (feed["x"].value[2:], [1, 1])])
    net, got = run_layout(topo.proto(), feed, params.parameter_set)
    np.testing.assert_allclose(got.value, want, rtol=1e-6)
    assert "h@g" not in net.layers and net.get_layer("g").type_name == "recurrent_layer_group"


def test_generator_layout_runs_after_a_json_round_trip():
    gen = generator()
    topo = paddle.topology.Topology(gen)
    params = paddle.parameters.create(topo)
    ctx = np.random.RandomState(0).uniform(-1, 1, (3, 3))
    prob, ids = paddle.infer(output_layer=gen, parameters=params, input=[(c,) for c in ctx],
                             field=["prob", "id"])
    _, got = run_layout(topo.proto(), {"ctx": Argument(value=ctx)}, params.parameter_set)
    np.testing.assert_allclose(got.value, prob)
    np.testing.assert_array_equal(got.ids, ids)


def test_layout_errors_name_the_group():
    seq = paddle.layer.data(name="seq_input", type=D.dense_vector_sequence(3))
    out = paddle.layer.recurrent_group(step=rnn_step("r"), input=seq, name="g")
    model = paddle.topology.Topology(out).proto()
    model.parameters = [p for p in model.parameters if p.name != "_r@g.w1"]
    with pytest.raises(ValueError, match=r"recurrent group 'g'.*\['_r@g.w1'\]"):
        Network(model)
    model = paddle.topology.Topology(out).proto()
    subs(model)["g"].name = "other"
    with pytest.raises(ValueError, match="layer 'g' has no sub-model"):
        Network(model)


def test_print_probe_inside_a_step_stays_in_the_group():
    seq = paddle.layer.data(name="seq_input", type=D.dense_vector_sequence(3))

    def step(s):
        m = paddle.layer.memory(name="r", size=2)
        out = paddle.layer.fc(input=[s, m], size=2, name="r")
        paddle.layer.printer(input=out)
        return out

    out = paddle.layer.recurrent_group(step=step, input=seq, name="g")
    model = paddle.topology.Topology(out).proto()
    assert subs(model)["g"].layer_names == ["seq_input@g", "r+delay1@g", "r@g", "__print_0__@g"]
    _, got = run_layout(model, {"seq_input": Argument(value=np.ones((3, 3), np.float32),
                                                      seq_starts=np.array([0, 3]))})
    assert got.value.shape == (3, 2)


def test_v2_layers_are_listed_in_creation_order():
    """As PaddlePaddle's parse_network lists them (a depth-first walk would put ``boot``
    right after ``ctx``)."""
    ctx = paddle.layer.data(name="ctx", type=D.dense_vector(3))
    trg = paddle.layer.data(name="trg", type=D.integer_value_sequence(6))
    emb = paddle.layer.embedding(input=trg, size=3)
    boot = paddle.layer.fc(input=ctx, size=4, name="boot")

    def step(c, word):
        h = paddle.layer.memory(name="h", size=4, boot_layer=boot)
        return paddle.layer.fc(input=[word, c, h], size=4, name="h")

    out = paddle.layer.recurrent_group(step=step, name="dec",
                                       input=[paddle.layer.StaticInput(ctx), emb])
    model = paddle.topology.Topology(out).proto()
    assert model.sub_models[0].layer_names == ["ctx", "trg", "__embedding_0__", "boot", "dec",
                                               "h"]
    assert subs(model)["dec"].layer_names == ["__embedding_0__@dec", "__memory_0__@dec",
                                              "h+delay1@dec", "h@dec"]


def test_groups_round_trip_through_paddles_protobuf():
    """The layout written as a ``paddle.ModelConfig`` message and read back (as a model
    PaddlePaddle serialized would be) builds and computes the same: an LSTM group (its cell
    through ``get_output``'s input_layer_argument), a static input and a generator."""
    from sculler.config import from_proto, to_proto

    x = paddle.layer.data(name="x", type=D.dense_vector_sequence(8))
    ctx = paddle.layer.data(name="ctx", type=D.dense_vector(3))
    lstm = paddle.networks.lstmemory_group(input=x, size=2, name="l")

    def step(h, c):
        m = paddle.layer.memory(name="s", size=4)
        return paddle.layer.fc(input=[h, c, m], size=4, name="s")

    out = paddle.layer.last_seq(input=paddle.layer.recurrent_group(
        step=step, input=[lstm, paddle.layer.StaticInput(ctx)], name="g"))
    topo = paddle.topology.Topology(out)
    params = paddle.parameters.create(topo)
    message = to_proto(topo.proto())
    assert message.layers[[lc.name for lc in message.layers].index(
        "l_state@l_recurrent_group")].inputs[0].input_layer_argument == "state"
    back = from_proto(message.SerializeToString())
    assert back.sub_models == topo.proto().sub_models
    rng = np.random.RandomState(0)
    feed = {"x": Argument(value=rng.uniform(-1, 1, (5, 8)), seq_starts=np.array([0, 2, 5])),
            "ctx": Argument(value=rng.uniform(-1, 1, (2, 3)))}
    want = Network(topo.proto(), params.parameter_set).forward(feed)[0].value
    got = Network(back, params.parameter_set).forward(feed)[0].value
    np.testing.assert_allclose(got, want)

    gen = generator()
    topo = paddle.topology.Topology(gen)
    params = paddle.parameters.create(topo)
    back = from_proto(to_proto(topo.proto()).SerializeToString())
    feed = {"ctx": Argument(value=rng.uniform(-1, 1, (3, 3)))}
    want = Network(topo.proto(), params.parameter_set).forward(feed)[0]
    got = Network(back, params.parameter_set).forward(feed)[0]
    np.testing.assert_array_equal(got.ids, want.ids)


def test_summary_gives_group_layers_their_sequence_level():
    from sculler.summary import summarize

    sub = paddle.layer.data(name="sub", type=D.dense_vector_sub_sequence(3))
    out = paddle.layer.last_seq(input=paddle.layer.recurrent_group(
        step=rnn_step("r"), input=paddle.layer.SubsequenceInput(sub), name="g"))
    levels = {r.name: r.seq_level for r in summarize(paddle.topology.Topology(out).proto())}
    # a step sees one sub-sequence and its fc keeps the rows: the group gives a nested sequence
    assert (levels["sub@g"], levels["r@g"], levels["r"], levels["__last_seq_0__"]) == (
        1, 1, 2, 1)
