"""Sculler's ModelConfig to and from PaddlePaddle's ``paddle.ModelConfig`` message, its text
format and ``paddle.layer.parse_network``."""

import pathlib
import re
import subprocess
import sys

import numpy as np
import pytest
from google.protobuf import text_format

import sculler as paddle
from sculler.config import from_proto, model_config_text, to_proto
from sculler.core.expression import reset_names
from sculler.core.layer import PASS_TEST
from sculler.core.model_config import (
    EvaluatorConfig,
    GeneratorConfig,
    InputConfig,
    LayerConfig,
    LinkConfig,
    MemoryConfig,
    ModelConfig,
    ParameterConfig,
    SubModelConfig,
)
from sculler.core.network import Network
from sculler.data_feeder import DataFeeder
from sculler.proto import DESCRIPTOR_SET, messages
from sculler.topology import Topology

PROTO_DIR = pathlib.Path(DESCRIPTOR_SET).parent
FIELD = re.compile(r"^\s*(required|optional|repeated)\s+(\S+)\s+(\w+)\s*=\s*(\d+)")


def _repeated(f):
    return f.is_repeated if hasattr(f, "is_repeated") else f.label == f.LABEL_REPEATED


def _required(f):
    return f.is_required if hasattr(f, "is_required") else f.label == f.LABEL_REQUIRED


def test_compiled_descriptors_match_the_proto_sources():
    """paddle_model.desc was regenerated after the last .proto edit: every field of every
    message (label, type, name, number) is the one the .proto file declares."""
    M = messages()
    for proto in ("ParameterConfig.proto", "ModelConfig.proto"):
        message, declared = None, {}
        for line in (PROTO_DIR / proto).read_text().splitlines():
            if m := re.match(r"^message (\w+)", line):
                message = m.group(1)
                declared[message] = []
            elif m := FIELD.match(line):
                declared[message].append((m.group(1), m.group(2).split(".")[-1], m.group(3),
                                          int(m.group(4))))
        for name, want in declared.items():
            desc = getattr(M, name).DESCRIPTOR
            have = []
            for f in desc.fields:
                label = "repeated" if _repeated(f) else (
                    "required" if _required(f) else "optional")
                kind = f.message_type.name if f.message_type else {
                    f.TYPE_STRING: "string", f.TYPE_UINT64: "uint64", f.TYPE_UINT32: "uint32",
                    f.TYPE_INT32: "int32", f.TYPE_DOUBLE: "double", f.TYPE_FLOAT: "float",
                    f.TYPE_BOOL: "bool"}[f.type]
                have.append((label, kind, f.name, f.number))
            assert sorted(have) == sorted(want), name
        assert declared


def test_import_sculler_does_not_import_protobuf():
    code = ("import sys, sculler, sculler.config, sculler.layer; "
            "print('google.protobuf' in sys.modules, 'sculler.proto.convert' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=pathlib.Path(paddle.__file__).parent.parent)
    assert out.stdout.strip() == "False False"


def _outputs(model_config, params, data, data_types):
    net = Network(model_config, params.parameter_set)
    feeder = DataFeeder(data_types, None)
    return [np.array(a.value) for a in net.forward(feeder.convert(data), PASS_TEST)]


def _round_trip(out, data):
    """to_proto / from_proto / to_proto of ``out``'s network: the message is stable and the
    network Sculler rebuilds from it computes the same outputs."""
    topo = Topology(out)
    mc = topo.proto()
    message = to_proto(mc)
    back = from_proto(message.SerializeToString())
    assert to_proto(back) == message
    assert [lc.name for lc in back.layers] == [lc.name for lc in mc.layers]
    assert [(p.name, p.dims) for p in back.parameters] == [(p.name, p.dims)
                                                           for p in mc.parameters]
    params = paddle.parameters.create(out)
    want = _outputs(mc, params, data, topo.data_type())
    got = _outputs(back, params, data, topo.data_type())
    for w, g in zip(want, got):
        np.testing.assert_array_equal(w, g)
    return message


def test_image_layers_round_trip():
    reset_names()
    img = paddle.layer.data("img", paddle.data_type.dense_vector(2 * 9 * 9), height=9, width=9)
    conv = paddle.layer.img_conv(input=img, filter_size=3, filter_size_y=2, num_filters=4,
                                 num_channels=2, stride=2, padding=1, groups=2,
                                 act=paddle.activation.Relu())
    pool = paddle.layer.img_pool(input=conv, pool_size=2, stride=2, ceil_mode=False,
                                 pool_type=paddle.pooling.Avg())
    norm = paddle.layer.img_cmrnorm(input=pool, size=3, scale=0.02, power=0.5)
    bn = paddle.layer.batch_norm(input=norm, act=paddle.activation.Relu())
    out = paddle.layer.fc(input=bn, size=3, act=paddle.activation.Softmax())
    data = [(np.random.default_rng(k).normal(size=162).astype(np.float32),) for k in range(2)]
    message = _round_trip(out, data)
    conv_p, pool_p, norm_p = message.layers[1], message.layers[2], message.layers[3]
    assert (conv_p.inputs[0].conv_conf.filter_size, conv_p.inputs[0].conv_conf.filter_size_y,
            conv_p.inputs[0].conv_conf.filter_channels) == (3, 2, 1)
    assert (conv_p.height, conv_p.width) == (5, 5)
    # caffe_mode (floor) pooling: 5 -> floor(3/2)+1 = 2, where ceil mode would give 3
    assert pool_p.inputs[0].pool_conf.output_x == 2
    assert pool_p.inputs[0].pool_conf.pool_type == "avg-projection"
    assert norm_p.inputs[0].norm_conf.scale == pytest.approx(0.02 / 3)
    assert message.layers[4].inputs[0].image_conf.channels == 4


def test_sequence_layers_round_trip():
    reset_names()
    word = paddle.layer.data("word", paddle.data_type.integer_value_sequence(30))
    emb = paddle.layer.embedding(input=word, size=6)
    ctx = paddle.layer.mixed(size=18, input=paddle.layer.context_projection(emb, 3))
    gru_in = paddle.layer.mixed(size=12, input=paddle.layer.full_matrix_projection(ctx))
    gru = paddle.layer.grumemory(input=gru_in, reverse=True)
    lstm = paddle.networks.simple_lstm(input=emb, size=5)
    avg = paddle.layer.pooling(input=gru, pooling_type=paddle.pooling.Sum())
    first = paddle.layer.first_seq(input=lstm)
    out = paddle.layer.fc(input=[avg, first], size=2, act=paddle.activation.Softmax())
    message = _round_trip(out, [([1, 2, 3, 29],), ([4],), ([5, 6],)])
    by_name = {lp.name: lp for lp in message.layers}
    assert by_name["__embedding_0__"].type == "mixed"
    assert by_name["__embedding_0__"].inputs[0].proj_conf.type == "table"
    ctx_p = by_name["__mixed_0__"].inputs[0].proj_conf
    assert (ctx_p.type, ctx_p.context_start, ctx_p.context_length) == ("context", -1, 3)
    grus = [lp for lp in message.layers if lp.type == "gated_recurrent"]
    assert grus[0].reversed and grus[0].active_gate_type == "sigmoid"
    pooled = [lp for lp in message.layers if lp.type == "average"][0]
    assert (pooled.average_strategy, pooled.trans_type) == ("sum", "non-seq")
    assert [lp for lp in message.layers if lp.type == "seqlastins"][0].select_first


def test_projections_costs_and_dropout_round_trip():
    reset_names()
    x = paddle.layer.data("x", paddle.data_type.dense_vector(6))
    y = paddle.layer.data("y", paddle.data_type.dense_vector(6))
    lab = paddle.layer.data("lab", paddle.data_type.integer_value(3))
    mixed = paddle.layer.mixed(size=6, input=[
        paddle.layer.full_matrix_projection(x), paddle.layer.identity_projection(y),
        paddle.layer.dotmul_projection(x), paddle.layer.scaling_projection(y)],
        layer_attr=paddle.attr.ExtraLayerAttribute(drop_rate=0.5))
    part = paddle.layer.mixed(size=2, input=paddle.layer.identity_projection(x, offset=3,
                                                                              size=2))
    cos = paddle.layer.cos_sim(a=x, b=y, scale=3)
    clip = paddle.layer.clip(input=mixed, min=-0.5, max=0.5)
    out = paddle.layer.fc(input=[clip, part, cos], size=3, act=paddle.activation.Softmax())
    cost = paddle.layer.classification_cost(input=out, label=lab)
    data = [(np.arange(6, dtype=np.float32) / 6, np.ones(6, np.float32), 1)]
    message = _round_trip(cost, data)
    by_name = {lp.name: lp for lp in message.layers}
    assert [i.proj_conf.type for i in by_name["__mixed_0__"].inputs] == [
        "fc", "identity", "dot_mul", "scaling"]
    assert by_name["__mixed_0__"].drop_rate == 0.5
    assert by_name["__mixed_1__"].inputs[0].proj_conf.type == "identity_offset"
    assert by_name["__mixed_1__"].inputs[0].proj_conf.offset == 3
    assert by_name["__cos_sim_0__"].cos_scale == 3
    assert (by_name["__clip_0__"].inputs[0].clip_conf.min,
            by_name["__clip_0__"].inputs[0].clip_conf.max) == (-0.5, 0.5)
    assert [ev.type for ev in message.evaluators] == ["classification_error"]


def test_parameters_map_as_paddle_sets_them():
    mc = ModelConfig(
        layers=[LayerConfig("x", "data", 4),
                LayerConfig("h", "fc", 3, inputs=[InputConfig("x", "w")], bias_parameter_name="b")],
        parameters=[
            ParameterConfig("w", [4, 3], initial_std=None, learning_rate=0.5, momentum=0.9,
                            decay_rate=1e-3, decay_rate_l1=1e-4, gradient_clipping_threshold=5.0,
                            sparse_update=True),
            ParameterConfig("b", [1, 3], initial_strategy="uniform", initial_min=-0.2,
                            initial_max=0.6, is_static=True)],
        input_layer_names=["x"], output_layer_names=["h"])
    message = to_proto(mc)
    w, b = message.parameters
    assert (w.initial_smart, w.initial_mean, w.initial_std) == (True, 0.0, 0.5)
    assert (w.learning_rate, w.momentum, w.decay_rate, w.decay_rate_l1) == (0.5, 0.9, 1e-3, 1e-4)
    assert (w.gradient_clipping_threshold, w.sparse_update, w.size) == (5.0, True, 12)
    assert (b.initial_strategy, b.initial_smart, b.is_static) == (1, False, True)
    assert (b.initial_mean, b.initial_std) == pytest.approx((0.2, 0.4))
    back = from_proto(message)
    assert back.parameters[0] == mc.parameters[0]
    assert (back.parameters[1].initial_min, back.parameters[1].initial_max) == pytest.approx(
        (-0.2, 0.6))
    w.initial_mean = 0.1  # smart with a mean: not Sculler's smart default any more
    w.initial_smart = False
    assert from_proto(message).parameters[0].initial_std == 0.5


def test_sub_models_and_evaluators_round_trip():
    sub = SubModelConfig(
        name="g", layer_names=["h@g"], input_layer_names=["x"], output_layer_names=["h@g"],
        is_recurrent_layer_group=True, reversed=True,
        memories=[MemoryConfig("h@g", "h+delay1@g", boot_layer_name="x", is_sequence=False),
                  MemoryConfig("c@g", "c+delay1@g", boot_with_const_id=0)],
        in_links=[LinkConfig("x", "x@g", has_subseq=True)], out_links=[LinkConfig("h@g", "h")],
        generator=GeneratorConfig(max_num_frames=20, eos_layer_name="eos@g", beam_size=3),
        target_inlinkid=0)
    mc = ModelConfig(
        layers=[LayerConfig("x", "data", 4), LayerConfig("lab", "data", 1),
                LayerConfig("h@g", "fc", 3, inputs=[InputConfig("x", "w")])],
        parameters=[ParameterConfig("w", [4, 3], initial_std=0.1)],
        input_layer_names=["x", "lab"], output_layer_names=["h@g"],
        evaluators=[EvaluatorConfig("err", "classification_error", ["h@g", "lab"],
                                    {"threshold": 0.3, "top_k": 2})],
        sub_models=[SubModelConfig("root", ["x", "lab"], ["x", "lab"], []), sub])
    message = to_proto(mc)
    assert message.sub_models[1].memories[1].boot_with_const_id == 0
    assert message.evaluators[0].classification_threshold == pytest.approx(0.3)
    back = from_proto(message.SerializeToString())
    assert back.sub_models == mc.sub_models
    assert back.evaluators == mc.evaluators
    assert to_proto(back) == message


def test_text_format_is_paddles_and_parses_back():
    reset_names()
    x = paddle.layer.data("x", paddle.data_type.dense_vector(2))
    out = paddle.layer.fc(input=x, size=1, act=paddle.activation.Linear(), name="y")
    text = model_config_text(Topology(out).proto())
    assert 'layers {\n  name: "x"\n  type: "data"\n  size: 2\n  active_type: ""\n}' in text
    assert 'bias_parameter_name: "_y.wbias"' in text
    assert text.startswith('type: "nn"\n')
    parsed = text_format.Parse(text, messages().ModelConfig())
    assert [lc.name for lc in from_proto(parsed).layers] == ["x", "y"]


def test_parse_network_returns_the_message_v2_returned():
    reset_names()
    x = paddle.layer.data("x", paddle.data_type.dense_vector(3))
    lab = paddle.layer.data("lab", paddle.data_type.integer_value(2))
    pred = paddle.layer.fc(input=x, size=2, act=paddle.activation.Softmax(), name="pred")
    cost = paddle.layer.classification_cost(input=pred, label=lab, name="cost")
    message = paddle.layer.parse_network(cost, extra_layers=[pred])
    assert isinstance(message, messages().ModelConfig)
    assert text_format.Parse(str(message), messages().ModelConfig()) == message
    assert 'name: "pred"' in str(message) and 'name: "pred"' in model_config_text(message)
    assert list(message.output_layer_names) == ["cost"]
    assert list(message.input_layer_names) == ["x", "lab"]
    root = message.sub_models[0]
    # in creation order, as PaddlePaddle's parse_network lists them
    assert (root.name, list(root.layer_names)) == ("root", ["x", "lab", "pred", "cost"])
    assert list(root.evaluator_names) == [ev.name for ev in message.evaluators]
    assert [lc.name for lc in from_proto(message).layers] == ["x", "lab", "pred", "cost"]
    single = paddle.layer.parse_network([pred])
    assert list(single.output_layer_names) == ["pred"]
    assert [lp.name for lp in single.layers] == ["x", "pred"]


def _message(text):
    return text_format.Parse(text, messages().ModelConfig())


DATA = 'layers { name: "x" type: "data" size: 4 active_type: "" } '
FC = ('layers { name: "h" type: "fc" size: 3 active_type: "tanh" '
      'inputs { input_layer_name: "x" input_parameter_name: "w" } %s } '
      'parameters { name: "w" size: 12 dims: 4 dims: 3 } '
      'input_layer_names: "x" output_layer_names: "h"')


@pytest.mark.parametrize("text, message", [
    (DATA + 'layers { name: "p" type: "mkldnn_fc" inputs { input_layer_name: "x" } }',
     "layer 'p': PaddlePaddle layer type 'mkldnn_fc' has no Sculler implementation"),
    (DATA + FC % "directions: true",
     r"layer 'h': \(fc\) PaddlePaddle field directions=\[True\] has no Sculler equivalent"),
    (DATA + FC % "inputs { input_layer_name: \"x\" row_conv_conf { context_length: 2 } }",
     r"layer 'h': \(fc\) input 1 PaddlePaddle field row_conv_conf has no Sculler"),
    (DATA + 'layers { name: "c" type: "concat" size: 5 inputs { input_layer_name: "x" } }',
     r"layer 'c': \(concat\) the Paddle model says size 5, Sculler's concat layer computes 4"),
    (DATA + FC.replace("size: 12", "size: 13") % "",
     r"parameter 'w': the Paddle model says size 13, Sculler's layers need \[4, 3\]"),
    (DATA + FC.replace('input_parameter_name: "w"', 'input_parameter_name: "v"') % "",
     "layer 'h': uses parameter 'v', which the Paddle model does not define"),
    (DATA + FC.replace("tanh", "swish") % "", "layer 'h': active_type: unknown activation"),
    (DATA + FC.replace("dims: 4", "is_sparse: true dims: 4") % "",
     "parameter 'w': PaddlePaddle field is_sparse=True has no Sculler equivalent"),
    ('type: "multi_nn" ' + DATA + FC % "", "model type 'multi_nn' .* has no Sculler"),
    (DATA + FC % "depth: 3", r"layer 'h': \(fc\) PaddlePaddle field depth=3 has no Sculler"),
])
def test_from_proto_refuses_what_it_cannot_represent(text, message):
    with pytest.raises(ValueError, match=message):
        from_proto(_message(text))


def test_from_proto_accepts_bookkeeping_and_default_fields():
    mc = from_proto(_message(DATA + FC % "device: 1 depth: 1"))
    assert mc.layer("h").attrs == {} and mc.layer("h").active_type == "tanh"
    kept = from_proto(_message(DATA + FC % "shared_biases: false"))
    assert kept.layer("h").attrs == {"shared_biases": False}  # written back as PaddlePaddle had it
    with pytest.raises(TypeError, match="paddle.ModelConfig message or its bytes, got dict"):
        from_proto({})


def test_to_proto_refuses_settings_paddle_cannot_hold():
    mc = ModelConfig(
        layers=[LayerConfig("x", "data", 4),
                LayerConfig("h", "fc", 3, inputs=[InputConfig("x", "w")], attrs={"k": 2})],
        parameters=[ParameterConfig("w", [4, 3])], input_layer_names=["x"],
        output_layer_names=["h"])
    with pytest.raises(ValueError, match=r"layer 'h': \(fc\) setting k=2 has no field"):
        to_proto(mc)
    mc.layers[1].attrs = {}
    mc.layers[1].inputs[0].attrs = {"proj": "full_matrix"}
    with pytest.raises(ValueError, match=r"input 0 settings \['proj'\] have no field"):
        to_proto(mc)
    mc.layers[1].inputs[0].attrs = {}
    mc.evaluators = [EvaluatorConfig("e", "column_sum", ["h"], {"column": 1})]
    with pytest.raises(ValueError, match="evaluator 'e' .* column=1 has no field"):
        to_proto(mc)


def test_transposed_conv_and_image_conf_layers_round_trip():
    reset_names()
    img = paddle.layer.data("img", paddle.data_type.dense_vector(4 * 5 * 5), height=5, width=5)
    up = paddle.layer.img_conv(input=img, filter_size=3, num_filters=6, num_channels=4,
                               stride=2, padding=1, trans=True, act=paddle.activation.Relu())
    mx = paddle.layer.maxout(input=up, groups=2)
    padded = paddle.layer.pad(input=mx, pad_c=[1, 0], pad_h=[0, 1], pad_w=[2, 1])
    resized = paddle.layer.bilinear_interp(input=padded, out_size_x=6, out_size_y=5)
    pyramid = paddle.layer.spp(input=resized, pyramid_height=2)
    out = paddle.layer.fc(input=pyramid, size=2, act=paddle.activation.Softmax())
    data = [(np.random.default_rng(k).normal(size=100).astype(np.float32),) for k in range(2)]
    message = _round_trip(out, data)
    convt, maxout, pad_p, interp, spp_p = message.layers[1:6]
    # described as the convolution it inverts: input 5x5 is its output, 9x9 its image
    conf = convt.inputs[0].conv_conf
    assert (conf.output_x, conf.img_size, conf.channels, conf.filter_channels) == (5, 9, 4, 6)
    assert (convt.height, convt.width) == (9, 9)
    assert (maxout.inputs[0].maxout_conf.groups,
            maxout.inputs[0].maxout_conf.image_conf.channels) == (2, 6)
    assert list(pad_p.inputs[0].pad_conf.pad_w) == [2, 1]
    assert (interp.inputs[0].bilinear_interp_conf.out_size_x, interp.height) == (6, 5)
    assert (spp_p.inputs[0].spp_conf.pyramid_height, spp_p.height, spp_p.width) == (2, 1, 5)


def test_paddle_dot_mul_operator_with_an_input_between_its_operands():
    text = ('layers { name: "x" type: "data" size: 3 active_type: "" } '
            'layers { name: "y" type: "data" size: 3 active_type: "" } '
            'layers { name: "m" type: "mixed" size: 3 active_type: "" '
            '  inputs { input_layer_name: "x" } '
            '  inputs { input_layer_name: "x" input_parameter_name: "_m.w1" '
            '    proj_conf { type: "scaling" name: "_m.w1" input_size: 3 output_size: 3 } } '
            '  inputs { input_layer_name: "y" } '
            '  operator_confs { type: "dot_mul" input_indices: 0 input_indices: 2 '
            '    input_sizes: 3 input_sizes: 3 output_size: 3 dotmul_scale: 2 } } '
            'parameters { name: "_m.w1" size: 1 dims: 1 dims: 1 } '
            'input_layer_names: "x" input_layer_names: "y" output_layer_names: "m"')
    mc = from_proto(_message(text))
    assert [ic.attrs.get("proj") for ic in mc.layer("m").inputs] == [
        "dotmul_operator", "operand", "scaling"]
    params = paddle.parameters.Parameters()
    for pc in mc.parameters:
        params.parameter_set.create(pc, owner="test")
    params.set("_m.w1", np.array([[0.5]], np.float32))
    x, y = np.array([1, 2, 3], np.float32), np.array([4, -1, 0.5], np.float32)
    types = [("x", paddle.data_type.dense_vector(3)), ("y", paddle.data_type.dense_vector(3))]
    (got,) = _outputs(mc, params, [(x, y)], types)
    np.testing.assert_allclose(got[0], 2 * x * y + 0.5 * x)
    ops = to_proto(mc).layers[2].operator_confs
    assert (list(ops[0].input_indices), ops[0].dotmul_scale) == ([0, 1], 2)


def test_conv_projection_round_trips():
    reset_names()
    img = paddle.layer.data("img", paddle.data_type.dense_vector(2 * 6 * 6), height=6, width=6)
    proj = paddle.layer.conv_projection(input=img, filter_size=3, num_filters=4,
                                        num_channels=2, stride=2, padding=1)
    conv = paddle.layer.mixed(input=proj, size=4 * 3 * 3)
    out = paddle.layer.fc(input=conv, size=2, act=paddle.activation.Softmax())
    data = [(np.random.default_rng(k).normal(size=72).astype(np.float32),) for k in range(2)]
    message = _round_trip(out, data)
    proj_conf = message.layers[1].inputs[0].proj_conf
    assert (proj_conf.type, proj_conf.num_filters, proj_conf.output_size) == ("conv", 4, 36)
    conf = proj_conf.conv_conf
    assert (conf.output_x, conf.output_y, conf.img_size, conf.filter_channels) == (3, 3, 6, 2)


def test_transposed_conv_projection_round_trips_as_convt():
    reset_names()
    img = paddle.layer.data("img", paddle.data_type.dense_vector(4 * 3 * 3), height=3, width=3)
    proj = paddle.layer.conv_projection(input=img, filter_size=3, num_filters=2,
                                        num_channels=4, stride=2, padding=1, groups=2,
                                        trans=True)
    conv = paddle.layer.mixed(input=proj, size=2 * 5 * 5)
    out = paddle.layer.fc(input=conv, size=2, act=paddle.activation.Softmax())
    data = [(np.random.default_rng(k).normal(size=36).astype(np.float32),) for k in range(2)]
    message = _round_trip(out, data)
    proj_conf = message.layers[1].inputs[0].proj_conf
    assert (proj_conf.type, proj_conf.num_filters, proj_conf.output_size) == ("convt", 2, 50)
    conf = proj_conf.conv_conf
    # written as the convolution it inverts: its image is the 5 x 5 output
    assert (conf.img_size, conf.output_x, conf.channels, conf.filter_channels) == (5, 3, 4, 1)


def test_slice_projection_round_trips():
    reset_names()
    img = paddle.layer.data("img", paddle.data_type.dense_vector(2 * 3 * 3), height=3, width=3)
    conv = paddle.layer.img_conv(input=img, filter_size=1, num_filters=4)
    sliced = paddle.layer.mixed(input=paddle.layer.slice_projection(conv, [[0, 1], [2, 4]]))
    data = [(np.random.default_rng(k).normal(size=18).astype(np.float32),) for k in range(2)]
    message = _round_trip(sliced, data)
    proj_conf = message.layers[2].inputs[0].proj_conf
    assert proj_conf.type == "slice" and proj_conf.output_size == 27
    assert [(r.start, r.end) for r in proj_conf.slices] == [(0, 9), (18, 36)]


def test_paddle_row_conv_roi_pool_and_print_settings_load():
    text = ('layers { name: "x" type: "data" size: 8 active_type: "" } '
            'layers { name: "img" type: "data" size: 32 active_type: "" height: 4 width: 4 } '
            'layers { name: "rois" type: "data" size: 5 active_type: "" } '
            'layers { name: "rc" type: "row_conv" size: 8 active_type: "relu" '
            '  inputs { input_layer_name: "x" input_parameter_name: "_rc.w0" '
            '    row_conv_conf { context_length: 3 } } } '
            'layers { name: "roi" type: "roi_pool" size: 8 active_type: "" '
            '  inputs { input_layer_name: "img" '
            '    roi_pool_conf { pooled_width: 2 pooled_height: 2 spatial_scale: 0.5 } } '
            '  inputs { input_layer_name: "rois" } height: 2 width: 2 } '
            'layers { name: "show" type: "print" active_type: "" '
            '  inputs { input_layer_name: "x" } user_arg: "x=%s" } '
            'parameters { name: "_rc.w0" size: 24 dims: 3 dims: 8 } '
            'input_layer_names: "x" input_layer_names: "img" input_layer_names: "rois" '
            'output_layer_names: "rc" output_layer_names: "roi"')
    message = _message(text)
    mc = from_proto(message)
    assert mc.layer("rc").attrs == {"context_length": 3}
    assert mc.layer("roi").attrs["spatial_scale"] == 0.5
    assert mc.layer("roi").attrs["out_channels"] == 2  # 32 values of a 4x4 image: 2 channels
    assert mc.layer("show").attrs == {"format": "x=%s"}
    assert to_proto(mc).layers[3:] == message.layers[3:]
    bad = text.replace("spatial_scale: 0.5", "spatial_scale: 0.5 height: 4")
    with pytest.raises(ValueError, match=r"layer 'roi': \(roi_pool\) roi_pool_conf.height has"):
        from_proto(_message(bad))


def test_parameters_are_written_with_the_dims_paddle_writes():
    import sculler as paddle
    from sculler.config import to_proto

    img = paddle.layer.data(name="img", type=paddle.data_type.dense_vector(2 * 6 * 6),
                            height=6, width=6)
    conv = paddle.layer.img_conv(input=img, filter_size=3, num_filters=4, name="c",
                                 act=paddle.activation.Linear())
    fc = paddle.layer.fc(input=conv, size=3, name="f")
    message = to_proto(paddle.topology.Topology(fc).proto())
    dims = {p.name: list(p.dims) for p in message.parameters}
    assert dims["_c.w0"] == [] and dims["_c.wbias"] == [4, 1]
    assert dims["_f.w0"] == [64, 3] and dims["_f.wbias"] == [1, 3]
    smart = {p.name: p.initial_smart for p in message.parameters}
    assert smart["_f.w0"] and not smart["_c.w0"]


def test_3d_layers_round_trip_with_paddles_z_fields():
    reset_names()
    vol = paddle.layer.data("vol", paddle.data_type.dense_vector(2 * 4 * 5 * 6), depth=4,
                            height=5, width=6)
    conv = paddle.layer.img_conv3d(input=vol, filter_size=[3, 2, 2], num_filters=4, stride=2,
                                   padding=[1, 0, 1], groups=2)
    bn = paddle.layer.batch_norm(input=conv, img3D=True)
    pool = paddle.layer.img_pool3d(input=bn, pool_size=2, stride=1, pool_size_z=1,
                                   pool_type=paddle.pooling.Avg(), ceil_mode=False)
    deconv = paddle.layer.img_conv3d(input=pool, filter_size=2, num_filters=4, stride=2,
                                     trans=True, shared_biases=False)
    out = paddle.layer.fc(input=deconv, size=3, act=paddle.activation.Softmax())
    data = [(np.random.default_rng(k).normal(size=240).astype(np.float32),) for k in range(2)]
    message = _round_trip(out, data)
    vol_p, conv_p, bn_p, pool_p, deconv_p = message.layers[:5]
    assert vol_p.depth == 4
    cc = conv_p.inputs[0].conv_conf
    assert (cc.filter_size, cc.filter_size_y, cc.filter_size_z, cc.padding, cc.padding_z,
            cc.filter_channels) == (3, 2, 2, 1, 1, 1)
    assert (cc.img_size, cc.img_size_y, cc.img_size_z) == (6, 5, 4)
    assert (cc.output_x, cc.output_y, cc.output_z) == (3, 2, 3)
    assert (conv_p.depth, conv_p.height, conv_p.width) == (3, 2, 3)
    assert (bn_p.inputs[0].image_conf.img_size_z, bn_p.depth) == (3, 3)
    pc = pool_p.inputs[0].pool_conf
    assert (pc.size_x, pc.size_y, pc.size_z, pc.output_x, pc.output_z) == (2, 2, 1, 2, 3)
    dc = deconv_p.inputs[0].conv_conf
    # a deconv3d is written as the convolution it inverts: its input is that one's output
    assert (dc.output_x, dc.output_y, dc.output_z, dc.img_size, dc.img_size_z) == (2, 1, 3,
                                                                                  4, 6)
    assert (dc.filter_channels, deconv_p.size) == (4, 4 * 6 * 2 * 4)


PADDLE_3D = '''
type: "nn"
layers { name: "vol" type: "data" size: 360 active_type: "" height: 6 width: 5 depth: 4 }
layers { name: "pool" type: "pool3d" size: 72 active_type: ""
  inputs { input_layer_name: "vol" pool_conf { pool_type: "max-projection" channels: 3
    size_x: 3 stride: 2 output_x: 2 img_size: 5 padding: 0 size_y: 3 stride_y: 2 output_y: 4
    img_size_y: 6 padding_y: 1 size_z: 2 stride_z: 2 output_z: 3 img_size_z: 4 padding_z: 1 } }
  height: 4 width: 2 depth: 3 }
layers { name: "bn" type: "batch_norm" size: 72 active_type: "relu"
  inputs { input_layer_name: "pool" input_parameter_name: "_bn.w0"
    image_conf { channels: 3 img_size: 2 img_size_y: 4 img_size_z: 3 } }
  inputs { input_layer_name: "pool" input_parameter_name: "_bn.w1" }
  inputs { input_layer_name: "pool" input_parameter_name: "_bn.w2" }
  bias_parameter_name: "_bn.wbias" moving_average_fraction: 0.9 height: 4 width: 2 depth: 3
  epsilon: 1e-05 }
parameters { name: "_bn.w0" size: 3 initial_mean: 1.0 initial_std: 0.0 initial_strategy: 0
  initial_smart: false }
parameters { name: "_bn.w1" size: 3 initial_mean: 0.0 initial_std: 0.0 dims: 1 dims: 3
  initial_strategy: 0 initial_smart: false is_static: true }
parameters { name: "_bn.w2" size: 3 initial_mean: 0.0 initial_std: 0.0 dims: 1 dims: 3
  initial_strategy: 0 initial_smart: false is_static: true }
parameters { name: "_bn.wbias" size: 3 initial_mean: 0.0 initial_std: 0.0 dims: 1 dims: 3
  initial_strategy: 0 initial_smart: false }
input_layer_names: "vol"
output_layer_names: "bn"
'''


def test_paddle_written_pool3d_and_3d_batch_norm_load_and_write_back_unchanged():
    message = _message(PADDLE_3D)
    mc = from_proto(message)
    assert to_proto(mc) == message
    pool = mc.layer("pool")
    assert (pool.attrs["pool_size_z"], pool.attrs["padding"], pool.attrs["padding_z"],
            pool.attrs["ceil_mode"], pool.attrs["out_depth"]) == (2, 0, 1, True, 3)
    assert mc.layer("bn").attrs["img3D"] is True
    bad = PADDLE_3D.replace("output_x: 2 img_size: 5", "output_x: 7 img_size: 5")
    with pytest.raises(ValueError, match=r"layer 'pool': \(pool3d\) output_x 7 matches neither"):
        from_proto(_message(bad))


@pytest.mark.parametrize("as_row_vector", [True, False])
def test_repeat_writes_its_orientation_as_paddle_does(as_row_vector):
    import sculler as paddle
    from sculler.config import from_proto, to_proto

    x = paddle.layer.data(name="x", type=paddle.data_type.dense_vector(3))
    r = paddle.layer.repeat(input=x, num_repeats=2, as_row_vector=as_row_vector, name="r")
    message = to_proto(paddle.topology.Topology(r).proto())
    layer = [pl for pl in message.layers if pl.name == "r"][0]
    assert layer.user_arg == ("" if as_row_vector else "as_col_vec")
    assert from_proto(message).layer("r").attrs["as_row_vector"] is as_row_vector
