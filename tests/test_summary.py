"""Model summaries: print(topology) / Topology.summary() list layers, shapes and counts."""

import re

import sculler as paddle
from sculler.summary import summarize
from sculler.topology import Topology


def _mlp():
    paddle.layer.reset_names()
    x = paddle.layer.data(name="x", type=paddle.data_type.dense_vector(6))
    label = paddle.layer.data(name="y", type=paddle.data_type.integer_value(3))
    h = paddle.layer.fc(input=x, size=5, act=paddle.activation.Tanh())
    out = paddle.layer.fc(input=h, size=3, act=paddle.activation.Softmax())
    return Topology(paddle.layer.classification_cost(input=out, label=label))


def test_rows_give_types_sizes_shapes_and_counts():
    rows = {r.name: r for r in summarize(_mlp().proto())}
    fc0 = rows["__fc_layer_0__"]
    assert (fc0.type, fc0.size, fc0.seq_level) == ("fc", 5, 0)
    assert fc0.parameters == [("___fc_layer_0__.w0", (6, 5)), ("___fc_layer_0__.wbias", (1, 5))]
    assert fc0.count == 35 and rows["__fc_layer_1__"].count == 18
    assert rows["x"].parameters == [] and rows["x"].count == 0


def test_print_shows_every_layer_in_order_and_the_total():
    topo = _mlp()
    text = str(topo)
    assert text == topo.summary()
    names = [line.split()[0] for line in text.splitlines()[2:-2] if not line.startswith(" ")]
    assert names == [lc.name for lc in topo.proto().layers]
    assert re.search(r"___fc_layer_0__\.w0 \[6, 5\]\s+35$", text, re.M)
    assert text.splitlines()[-1].startswith("total parameters: 53 in 4 parameter arrays")


def test_sequence_levels_follow_the_data_and_shared_parameters_count_once():
    paddle.layer.reset_names()
    words = paddle.layer.data(name="w", type=paddle.data_type.integer_value_sequence(20))
    shared = paddle.attr.Param(name="emb")
    a = paddle.layer.embedding(input=words, size=4, param_attr=shared)
    b = paddle.layer.embedding(input=words, size=4, param_attr=shared)
    s = paddle.layer.addto(input=[a, b])
    topo = Topology(s)
    rows = {r.name: r for r in summarize(topo.proto())}
    assert rows["w"].seq_level == 1 and rows[s.name].seq_level == 1
    assert rows[a.name].parameters == [("emb", (20, 4))]
    assert str(topo).splitlines()[-1].startswith("total parameters: 80 in 1 parameter array,")
