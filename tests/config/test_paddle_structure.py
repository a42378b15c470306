"""v1 configs of every layer family build the ModelConfig PaddlePaddle's config parser builds:
layer names, types, sizes, activations, inputs with their parameter names, and parameters
with their sizes and the dims Paddle writes (facts read from PaddlePaddle 0.11's
trainer_config_helpers test dumps; the configs here are our own)."""

import pytest

from sculler.config.config_parser import parse_config


def structure(tmp_path, text):
    path = tmp_path / "conf.py"
    path.write_text("from sculler.trainer_config_helpers import *\n" + text)
    mc = parse_config(path).model_config
    layers = [(lc.name, lc.type, lc.size, "" if lc.active_type == "linear" else lc.active_type,
               [(i.input_layer_name, i.input_parameter_name) for i in lc.inputs],
               lc.bias_parameter_name) for lc in mc.layers]
    params = {p.name: (p.size, p.dims if p.paddle_dims is None else p.paddle_dims)
              for p in mc.parameters}
    return layers, params, mc


FC = """
data = data_layer(name='data', size=30)
t = trans_layer(input=data)
h = fc_layer(input=t, size=30, bias_attr=False)
mask = data_layer(name='mask', size=30)
s = selective_fc_layer(input=data, size=30, select=mask, act=SigmoidActivation())
outputs(h, s)
"""


def test_fc_family(tmp_path):
    layers, params, _ = structure(tmp_path, FC)
    assert layers == [
        ("data", "data", 30, "", [], None),
        ("__trans_layer_0__", "trans", 30, "", [("data", None)], None),
        ("__fc_layer_0__", "fc", 30, "tanh", [("__trans_layer_0__", "___fc_layer_0__.w0")],
         None),
        ("mask", "data", 30, "", [], None),
        ("__selective_fc_layer_0__", "selective_fc", 30, "sigmoid",
         [("data", "___selective_fc_layer_0__.w0"), ("mask", None)],
         "___selective_fc_layer_0__.wbias")]
    assert params["___fc_layer_0__.w0"] == (900, [30, 30])
    assert params["___selective_fc_layer_0__.wbias"] == (30, [1, 30])


RNN = """
data = data_layer(name='data', size=12)
h = fc_layer(input=data, size=12, act=SigmoidActivation())
r = recurrent_layer(input=h, act=SigmoidActivation())
x4 = fc_layer(input=h, size=48, act=LinearActivation(), bias_attr=False)
l = lstmemory(input=x4, act=SigmoidActivation())
x3 = fc_layer(input=h, size=36, act=LinearActivation(), bias_attr=False)
g = grumemory(input=x3, act=SigmoidActivation())
outputs(last_seq(input=r), first_seq(input=l), last_seq(input=g))
"""


def test_recurrent_family(tmp_path):
    layers, params, _ = structure(tmp_path, RNN)
    names = [(n, t, s, a) for n, t, s, a, _, _ in layers]
    assert names == [
        ("data", "data", 12, ""), ("__fc_layer_0__", "fc", 12, "sigmoid"),
        ("__recurrent_layer_0__", "recurrent", 12, "sigmoid"), ("__fc_layer_1__", "fc", 48, ""),
        ("__lstmemory_0__", "lstmemory", 12, "sigmoid"), ("__fc_layer_2__", "fc", 36, ""),
        ("__gru_0__", "gated_recurrent", 12, "sigmoid"),
        ("__last_seq_0__", "seqlastins", 12, ""), ("__first_seq_0__", "seqlastins", 12, ""),
        ("__last_seq_1__", "seqlastins", 12, "")]
    assert params["___recurrent_layer_0__.w0"] == (144, [12, 12])
    assert params["___lstmemory_0__.w0"] == (576, [12, 12, 4])
    assert params["___lstmemory_0__.wbias"] == (84, [1, 84])
    assert params["___gru_0__.w0"] == (432, [12, 36])
    assert params["___gru_0__.wbias"] == (36, [1, 36])


IMAGE = """
img = data_layer(name='image', size=3 * 16 * 16, height=16, width=16)
conv = img_conv_layer(input=img, num_channels=3, num_filters=8, filter_size=3, padding=1,
                      act=LinearActivation())
bn = batch_norm_layer(input=conv, act=ReluActivation())
norm = img_cmrnorm_layer(input=bn, size=5)
pool = img_pool_layer(input=conv, pool_size=2, stride=2, pool_type=MaxPooling())
outputs(pool, norm)
"""


def test_image_family(tmp_path):
    layers, params, _ = structure(tmp_path, IMAGE)
    assert [(n, t, s, a) for n, t, s, a, _, _ in layers] == [
        ("image", "data", 768, ""), ("__conv_0__", "exconv", 2048, ""),
        ("__batch_norm_0__", "batch_norm", 2048, "relu"), ("__crmnorm_0__", "norm", 2048, ""),
        ("__pool_0__", "pool", 512, "")]
    assert layers[2][4] == [("__conv_0__", f"___batch_norm_0__.w{i}") for i in range(3)]
    assert params["___conv_0__.w0"] == (216, [])
    assert params["___conv_0__.wbias"] == (8, [8, 1])
    assert params["___batch_norm_0__.w0"] == (8, [])
    assert params["___batch_norm_0__.w1"] == (8, [1, 8])
    assert params["___batch_norm_0__.wbias"] == (8, [1, 8])


COSTS = """
feature = data_layer(name='feature', size=20)
label = data_layer(name='label', size=5)
probs = fc_layer(input=feature, size=5, act=SoftmaxActivation())
c1 = classification_cost(input=probs, label=label)
tag = data_layer(name='tag', size=5)
c2 = crf_layer(input=probs, label=tag, size=5)
left, right = data_layer(name='left', size=1), data_layer(name='right', size=1)
flag = data_layer(name='flag', size=1)
c3 = rank_cost(left=left, right=right, label=flag)
c4 = hsigmoid(input=feature, label=label, num_classes=6)
c5 = square_error_cost(input=probs, label=data_layer(name='target', size=5))
outputs(c1, c2, c3, c4, c5)
"""


def test_cost_family(tmp_path):
    layers, params, mc = structure(tmp_path, COSTS)
    by_name = {n: (t, s, ins) for n, t, s, _, ins, _ in layers}
    assert by_name["__cost_0__"] == ("multi-class-cross-entropy", 1,
                                     [("__fc_layer_0__", None), ("label", None)])
    assert by_name["__crf_layer_0__"] == ("crf", 5, [("__fc_layer_0__",
                                                      "___crf_layer_0__.w0"), ("tag", None)])
    assert by_name["__rank_cost_0__"][:2] == ("rank-cost", 1)
    assert by_name["__hsigmoid_0__"] == ("hsigmoid", 1, [("feature", "___hsigmoid_0__.w0"),
                                                         ("label", None)])
    assert by_name["__square_error_cost_0__"][:2] == ("square_error", 1)
    assert params["___crf_layer_0__.w0"] == (35, [7, 5])
    assert params["___hsigmoid_0__.w0"] == (100, [5, 20])
    assert params["___hsigmoid_0__.wbias"] == (5, [1, 5])
    assert [e.name for e in mc.evaluators] == ["classification_error_evaluator"]


MERGE = """
a, b = data_layer(name='a', size=6), data_layer(name='b', size=6)
s = addto_layer(input=[a, b])
c = concat_layer(input=[a, b])
c2 = concat_layer(input=[identity_projection(input=a), identity_projection(input=b)])
m = mixed_layer(size=6, input=[full_matrix_projection(input=a), dotmul_projection(input=b),
                                scaling_projection(input=s)])
outputs(c, c2, m)
"""


def test_merge_and_projection_family(tmp_path):
    layers, params, _ = structure(tmp_path, MERGE)
    assert [(n, t, s) for n, t, s, _, _, _ in layers] == [
        ("a", "data", 6), ("b", "data", 6), ("__addto_0__", "addto", 6),
        ("__concat_0__", "concat", 12), ("__concat_1__", "concat2", 12),
        ("__mixed_0__", "mixed", 6)]
    assert layers[5][4] == [("a", "___mixed_0__.w0"), ("b", "___mixed_0__.w1"),
                            ("__addto_0__", "___mixed_0__.w2")]
    assert params == {"___mixed_0__.w0": (36, [6, 6]), "___mixed_0__.w1": (6, [1, 6]),
                      "___mixed_0__.w2": (1, [1, 1])}


@pytest.mark.parametrize("pooling, layer_type", [("MaxPooling()", "max"),
                                                  ("AvgPooling()", "average"),
                                                  ("SumPooling()", "average")])
def test_sequence_pooling(tmp_path, pooling, layer_type):
    layers, _, _ = structure(tmp_path, f"""
x = data_layer(name='x', size=8)
outputs(pooling_layer(input=x, pooling_type={pooling}),
        expand_layer(input=x, expand_as=x), seq_concat_layer(a=x, b=x))
""")
    assert [(n, t, s) for n, t, s, _, _, _ in layers] == [
        ("x", "data", 8), ("__seq_pooling_0__", layer_type, 8),
        ("__expand_layer_0__", "expand", 8), ("__seqconcat_0__", "seqconcat", 8)]


VOLUMES = """
data = data_layer(name='vol', size=2 * 4 * 10 * 9, depth=4, height=10, width=9)
c = img_conv3d_layer(input=data, num_filters=6, num_channels=2, filter_size=3, stride=2,
                     padding=1, act=LinearActivation())
d = img_conv3d_layer(input=c, num_filters=6, filter_size=[2, 2, 2], stride=2, trans=True,
                     layer_type='deconv3d', act=LinearActivation())
p = img_pool3d_layer(input=d, num_channels=6, pool_size=3, stride=2, padding=1,
                     pool_type=AvgPooling())
b = batch_norm_layer(input=p, num_channels=6, img3D=True)
outputs(b)
"""


def test_3d_family(tmp_path):
    layers, params, mc = structure(tmp_path, VOLUMES)
    # conv3d: 4x10x9 -> 2x5x5; deconv3d: -> 4x10x10; pool3d (ceil): -> 3x6x6
    assert [(n, t, s, a) for n, t, s, a, _, _ in layers] == [
        ("vol", "data", 720, ""),
        ("__conv3d_0__", "conv3d", 6 * 2 * 5 * 5, ""),
        ("__conv3d_1__", "deconv3d", 6 * 4 * 10 * 10, ""),
        ("__pool3d_0__", "pool3d", 6 * 3 * 6 * 6, ""),
        ("__batch_norm_0__", "batch_norm", 6 * 3 * 6 * 6, "relu")]
    assert params["___conv3d_0__.w0"] == (6 * 2 * 27, [])  # Paddle writes no dims
    assert params["___conv3d_0__.wbias"] == (6, [6, 1])
    assert params["___conv3d_1__.w0"] == (6 * 6 * 8, [])  # C == F: Paddle's size too
    assert params["___batch_norm_0__.w1"] == (6, [1, 6])
    assert mc.layer("__conv3d_1__").attrs["out_depth"] == 4


BEAM = """
scores = data_layer(name='scores', size=1)
kept = kmax_seq_score_layer(input=scores, beam_size=3)
gold = data_layer(name='gold', size=1)
spans = fc_layer(input=data_layer(name='states', size=4), size=1, act=LinearActivation())
kept2 = kmax_seq_score_layer(input=spans, beam_size=3)
gold2 = data_layer(name='gold2', size=1)
cost = cross_entropy_over_beam(input=[
    BeamInput(candidate_scores=scores, selected_candidates=kept, gold=gold),
    BeamInput(candidate_scores=spans, selected_candidates=kept2, gold=gold2)])
outputs(cost)
"""


def test_cross_entropy_over_beam_takes_the_triples_in_order(tmp_path):
    layers, _, _ = structure(tmp_path, BEAM)
    name, layer_type, size, _, inputs, bias = layers[-1]
    assert (name, layer_type, size, bias) == ("__cross_entropy_over_beam_0__",
                                             "cross_entropy_over_beam", 1, None)
    assert [i for i, _ in inputs] == ["scores", "__kmax_seq_score_layer_0__", "gold",
                                      "__fc_layer_0__", "__kmax_seq_score_layer_1__", "gold2"]


TWO_OUTPUTS = """
flat = data_layer(name='flat', size=4)
h = fc_layer(input=flat, size=2)
outputs(h)
vol = data_layer(name='vol', size=2 * 3 * 4 * 4, depth=3, height=4, width=4)
p = img_pool3d_layer(input=vol, num_channels=2, pool_size=2, stride=2)
outputs(p)
outputs(h)
"""


def test_later_outputs_calls_add_outputs_but_keep_the_first_calls_inputs(tmp_path):
    """PaddlePaddle's outputs(): once inputs are set (HasInputsSet), a later call only appends
    its layers to the outputs."""
    _, _, mc = structure(tmp_path, TWO_OUTPUTS)
    assert mc.input_layer_names == ["flat"]
    assert mc.output_layer_names == ["__fc_layer_0__", "__pool3d_0__"]
