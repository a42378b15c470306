"""Models PaddlePaddle deployed load into Sculler and infer what Sculler infers itself.

Each file is built here the way PaddlePaddle v2's code path writes it: the ModelConfig message
as PaddlePaddle's config_parser fills it (written out in its text format, with its quirks: conv
and batch-norm weights without dims, a conv bias of dims ``[F, 1]``, ``depth: 1``,
``is_shared``, data layers without geometry), serialized with the message classes, then

* ``Topology.serialize_for_inference``: ``cPickle.dump({'protobin': ..., 'data_type': ...},
  stream, 2)`` under Python 2 (the opcodes are emitted by :func:`py2_pickle` below);
* ``merge_v2_model``: ``struct.pack('q', len(conf))``, the bytes, then per parameter
  ``struct.pack('IIQ', 0, 4, size)`` and the float32 values.
"""

import gzip
import io
import os
import pickle
import struct
import tarfile

import numpy as np
import pytest

import sculler as paddle
from sculler.core.expression import reset_names
from sculler.core.model_config import ParameterConfig
from sculler.fileio import FileFormatError
from sculler.proto import messages

MLP = """
type: "nn"
layers { name: "x" type: "data" size: 6 active_type: "" }
layers { name: "hidden" type: "fc" size: 5 active_type: "tanh"
  inputs { input_layer_name: "x" input_parameter_name: "_hidden.w0" }
  bias_parameter_name: "_hidden.wbias" }
layers { name: "out" type: "fc" size: 3 active_type: "softmax"
  inputs { input_layer_name: "hidden" input_parameter_name: "_out.w0" }
  bias_parameter_name: "_out.wbias" }
parameters { name: "_hidden.w0" size: 30 initial_mean: 0.0 initial_std: 0.408248290464
  dims: 6 dims: 5 initial_strategy: 0 initial_smart: true }
parameters { name: "_hidden.wbias" size: 5 initial_mean: 0.0 initial_std: 0.0
  dims: 1 dims: 5 initial_strategy: 0 initial_smart: false }
parameters { name: "_out.w0" size: 15 initial_mean: 0.0 initial_std: 0.4472135955
  dims: 5 dims: 3 initial_strategy: 0 initial_smart: true }
parameters { name: "_out.wbias" size: 3 initial_mean: 0.0 initial_std: 0.0
  dims: 1 dims: 3 initial_strategy: 0 initial_smart: false }
input_layer_names: "x"
output_layer_names: "out"
sub_models { name: "root" layer_names: "x" layer_names: "hidden" layer_names: "out"
  input_layer_names: "x" output_layer_names: "out" is_recurrent_layer_group: false }
"""

CNN = """
type: "nn"
layers { name: "pixel" type: "data" size: 128 active_type: "" }
layers { name: "__conv_0__" type: "exconv" size: 256 active_type: "relu"
  inputs { input_layer_name: "pixel" input_parameter_name: "___conv_0__.w0"
    conv_conf { filter_size: 3 channels: 2 stride: 1 padding: 1 groups: 1 filter_channels: 2
      output_x: 8 img_size: 8 caffe_mode: true filter_size_y: 3 padding_y: 1 stride_y: 1
      output_y: 8 img_size_y: 8 dilation: 1 dilation_y: 1 } }
  bias_parameter_name: "___conv_0__.wbias" num_filters: 4 shared_biases: true
  height: 8 width: 8 }
layers { name: "__pool_0__" type: "pool" size: 64 active_type: ""
  inputs { input_layer_name: "__conv_0__"
    pool_conf { pool_type: "max-projection" channels: 4 size_x: 3 stride: 2 output_x: 4
      img_size: 8 padding: 0 size_y: 3 stride_y: 2 output_y: 4 img_size_y: 8 padding_y: 0 } }
  height: 4 width: 4 }
layers { name: "__batch_norm_0__" type: "batch_norm" size: 64 active_type: "relu"
  inputs { input_layer_name: "__pool_0__" input_parameter_name: "___batch_norm_0__.w0"
    image_conf { channels: 4 img_size: 4 img_size_y: 4 } }
  inputs { input_layer_name: "__pool_0__" input_parameter_name: "___batch_norm_0__.w1" }
  inputs { input_layer_name: "__pool_0__" input_parameter_name: "___batch_norm_0__.w2" }
  bias_parameter_name: "___batch_norm_0__.wbias" moving_average_fraction: 0.9
  height: 4 width: 4 depth: 1 epsilon: 1e-05 }
layers { name: "__fc_layer_0__" type: "fc" size: 3 active_type: "softmax"
  inputs { input_layer_name: "__batch_norm_0__" input_parameter_name: "___fc_layer_0__.w0" }
  bias_parameter_name: "___fc_layer_0__.wbias" }
parameters { name: "___conv_0__.w0" size: 72 initial_mean: 0.0 initial_std: 0.333333333333
  initial_strategy: 0 initial_smart: false }
parameters { name: "___conv_0__.wbias" size: 4 initial_mean: 0.0 initial_std: 0.0
  dims: 4 dims: 1 initial_strategy: 0 initial_smart: false }
parameters { name: "___batch_norm_0__.w0" size: 4 initial_mean: 1.0 initial_std: 0.0
  initial_strategy: 0 initial_smart: false }
parameters { name: "___batch_norm_0__.w1" size: 4 initial_mean: 0.0 initial_std: 0.0
  dims: 1 dims: 4 initial_strategy: 0 initial_smart: false is_static: true is_shared: true }
parameters { name: "___batch_norm_0__.w2" size: 4 initial_mean: 0.0 initial_std: 0.0
  dims: 1 dims: 4 initial_strategy: 0 initial_smart: false is_static: true is_shared: true }
parameters { name: "___batch_norm_0__.wbias" size: 4 initial_mean: 0.0 initial_std: 0.0
  dims: 1 dims: 4 initial_strategy: 0 initial_smart: false }
parameters { name: "___fc_layer_0__.w0" size: 192 initial_mean: 0.0 initial_std: 0.125
  dims: 64 dims: 3 initial_strategy: 0 initial_smart: true }
parameters { name: "___fc_layer_0__.wbias" size: 3 initial_mean: 0.0 initial_std: 0.0
  dims: 1 dims: 3 initial_strategy: 0 initial_smart: false }
input_layer_names: "pixel"
output_layer_names: "__fc_layer_0__"
"""

LSTM = """
type: "nn"
layers { name: "word" type: "data" size: 20 active_type: "" }
layers { name: "__embedding_0__" type: "mixed" size: 8 active_type: ""
  inputs { input_layer_name: "word" input_parameter_name: "___embedding_0__.w0"
    proj_conf { type: "table" name: "___embedding_0__.w0" input_size: 20 output_size: 8 } } }
layers { name: "lstm_transform___lstm_0__" type: "mixed" size: 24 active_type: ""
  inputs { input_layer_name: "__embedding_0__"
    input_parameter_name: "_lstm_transform___lstm_0__.w0"
    proj_conf { type: "fc" name: "_lstm_transform___lstm_0__.w0" input_size: 8
      output_size: 24 } } }
layers { name: "__lstm_0__" type: "lstmemory" size: 6 active_type: "tanh"
  inputs { input_layer_name: "lstm_transform___lstm_0__"
    input_parameter_name: "___lstm_0__.w0" }
  bias_parameter_name: "___lstm_0__.wbias" reversed: false active_gate_type: "sigmoid"
  active_state_type: "tanh" }
layers { name: "__seq_pooling_0__" type: "max" size: 6 active_type: ""
  inputs { input_layer_name: "__lstm_0__" } trans_type: "non-seq" seq_pool_stride: -1 }
layers { name: "__fc_layer_0__" type: "fc" size: 2 active_type: "softmax"
  inputs { input_layer_name: "__seq_pooling_0__" input_parameter_name: "___fc_layer_0__.w0" }
  bias_parameter_name: "___fc_layer_0__.wbias" }
parameters { name: "___embedding_0__.w0" size: 160 initial_mean: 0.0
  initial_std: 0.22360679775 dims: 20 dims: 8 initial_strategy: 0 initial_smart: true }
parameters { name: "_lstm_transform___lstm_0__.w0" size: 192 initial_mean: 0.0
  initial_std: 0.353553390593 dims: 8 dims: 24 initial_strategy: 0 initial_smart: true }
parameters { name: "___lstm_0__.w0" size: 144 initial_mean: 0.0 initial_std: 0.408248290464
  dims: 6 dims: 6 dims: 4 initial_strategy: 0 initial_smart: true }
parameters { name: "___lstm_0__.wbias" size: 42 initial_mean: 0.0 initial_std: 0.0
  dims: 1 dims: 42 initial_strategy: 0 initial_smart: false }
parameters { name: "___fc_layer_0__.w0" size: 12 initial_mean: 0.0
  initial_std: 0.408248290464 dims: 6 dims: 2 initial_strategy: 0 initial_smart: true }
parameters { name: "___fc_layer_0__.wbias" size: 2 initial_mean: 0.0 initial_std: 0.0
  dims: 1 dims: 2 initial_strategy: 0 initial_smart: false }
input_layer_names: "word"
output_layer_names: "__fc_layer_0__"
"""


def sculler_mlp():
    x = paddle.layer.data("x", paddle.data_type.dense_vector(6))
    h = paddle.layer.fc(input=x, size=5, act=paddle.activation.Tanh(), name="hidden")
    return paddle.layer.fc(input=h, size=3, act=paddle.activation.Softmax(), name="out")


def sculler_cnn():
    reset_names()
    img = paddle.layer.data("pixel", paddle.data_type.dense_vector(128), height=8, width=8)
    conv = paddle.layer.img_conv(input=img, filter_size=3, num_filters=4, num_channels=2,
                                 padding=1, act=paddle.activation.Relu())
    pool = paddle.layer.img_pool(input=conv, pool_size=3, stride=2)
    bn = paddle.layer.batch_norm(input=pool, act=paddle.activation.Relu())
    return paddle.layer.fc(input=bn, size=3, act=paddle.activation.Softmax())


def sculler_lstm():
    reset_names()
    word = paddle.layer.data("word", paddle.data_type.integer_value_sequence(20))
    emb = paddle.layer.embedding(input=word, size=8)
    lstm = paddle.networks.simple_lstm(input=emb, size=6)
    pooled = paddle.layer.pooling(input=lstm, pooling_type=paddle.pooling.Max())
    return paddle.layer.fc(input=pooled, size=2, act=paddle.activation.Softmax())


MLP_INPUT = [(np.linspace(-1, 1, 6, dtype=np.float32) * k,) for k in (1, -2, 3)]
CNN_INPUT = [(np.random.default_rng(k).normal(size=128).astype(np.float32),) for k in range(3)]
LSTM_INPUT = [([1, 5, 7, 19],), ([3],), ([0, 2, 4, 6, 8, 10],)]
CASES = {
    "mlp": (MLP, sculler_mlp, MLP_INPUT, [("x", paddle.data_type.dense_vector(6))]),
    "cnn": (CNN, sculler_cnn, CNN_INPUT, [("pixel", paddle.data_type.dense_vector(128))]),
    "lstm": (LSTM, sculler_lstm, LSTM_INPUT,
             [("word", paddle.data_type.integer_value_sequence(20))]),
}


def paddle_message(text):
    from google.protobuf import text_format

    return text_format.Parse(text, messages().ModelConfig())


def trained_like_values(message, seed=0):
    """Values for every parameter of the message (non-trivial batch-norm statistics too)."""
    rng = np.random.default_rng(seed)
    values = {}
    for p in message.parameters:
        v = rng.normal(scale=0.5, size=p.size).astype(np.float32)
        if p.name.endswith(".w2"):  # a batch norm's moving variance: positive
            v = np.abs(v) + 0.5
        values[p.name] = v
    return values


def paddle_parameters(message, values):
    """A Parameters object as PaddlePaddle's from_tar gives it: PaddlePaddle's dims (the
    size alone where the config has none)."""
    params = paddle.parameters.Parameters()
    for p in message.parameters:
        dims = list(p.dims) or [p.size]
        params.parameter_set.create(ParameterConfig(p.name, dims), owner="paddle tar")
        params.set(p.name, values[p.name].reshape(dims))
    return params


class Py2InputType:
    def __init__(self, dim, seq_type, tp):
        self.dim, self.seq_type, self.type = dim, seq_type, tp


def py2_pickle(obj):
    """The bytes Python 2's ``cPickle.dump(obj, f, 2)`` writes for dicts, lists, 2-tuples,
    str (here bytes), small ints and ``paddle.trainer.PyDataProvider2.InputType`` objects."""
    out, memo = bytearray(b"\x80\x02"), [0]

    def binput():
        out.extend(b"q" + bytes([memo[0]]))
        memo[0] += 1

    def put(o):
        if isinstance(o, dict):
            out.extend(b"}")
            binput()
            out.extend(b"(")
            for k, v in o.items():
                put(k)
                put(v)
            out.extend(b"u")
        elif isinstance(o, list):
            out.extend(b"]")
            binput()
            if o:
                out.extend(b"(")
                for v in o:
                    put(v)
                out.extend(b"e")
        elif isinstance(o, tuple):
            for v in o:
                put(v)
            out.extend(b"\x86")
            binput()
        elif isinstance(o, bytes):
            out.extend((b"U" + bytes([len(o)])) if len(o) < 256 else
                       (b"T" + struct.pack("<i", len(o))))
            out.extend(o)
            binput()
        elif o is None:
            out.extend(b"N")
        elif isinstance(o, int):
            out.extend(b"K" + bytes([o]) if 0 <= o < 256 else b"J" + struct.pack("<i", o))
        elif isinstance(o, Py2InputType):
            out.extend(b"cpaddle.trainer.PyDataProvider2\nInputType\n")
            binput()
            out.extend(b")\x81")
            binput()
            put((None, {b"dim": o.dim, b"seq_type": o.seq_type, b"type": o.type}))
            out.extend(b"b")
        else:
            raise TypeError(type(o))

    put(obj)
    out.extend(b".")
    return bytes(out)


def paddle_inference_file(message, data_types):
    types = [(name.encode(), Py2InputType(t.dim, t.seq_type, t.type)) for name, t in data_types]
    return py2_pickle({b"protobin": message.SerializeToString(), b"data_type": types})


def paddle_merged_model(message, values):
    conf = message.SerializeToString()
    out = io.BytesIO()
    out.write(struct.pack("q", len(conf)))
    out.write(conf)
    for p in message.parameters:
        out.write(struct.pack("IIQ", 0, 4, p.size))
        out.write(values[p.name].astype(np.float32).tobytes())
    return out.getvalue()


def sculler_reference(build, values, data):
    """Sculler's own inference of the same network with the same values."""
    out = build()
    params = paddle.parameters.create(out)
    for name in params.names():
        params.set(name, values[name])
    return paddle.infer(output_layer=out, parameters=params, input=data)


def test_py2_pickle_reads_back_as_python_reads_python2_pickles():
    data = py2_pickle({b"protobin": b"\x00\xff" * 200, b"data_type": [(b"x", 1)]})
    assert pickle.loads(data, encoding="latin1") == {
        "protobin": "\x00\xff" * 200, "data_type": [("x", 1)]}


@pytest.mark.parametrize("case", sorted(CASES))
def test_serialize_for_inference_file_written_by_paddle_infers_as_sculler(case):
    text, build, data, data_types = CASES[case]
    message = paddle_message(text)
    values = trained_like_values(message)
    fileobj = io.BytesIO(paddle_inference_file(message, data_types))
    inferer = paddle.inference.Inference(parameters=paddle_parameters(message, values),
                                         fileobj=fileobj)
    assert [n for n, _ in inferer.topology.data_type()] == [n for n, _ in data_types]
    got = inferer.infer(data)
    want = sculler_reference(build, values, data)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("case", sorted(CASES))
def test_merged_model_written_by_paddle_infers_as_sculler(case, tmp_path):
    text, build, data, data_types = CASES[case]
    message = paddle_message(text)
    values = trained_like_values(message, seed=1)
    path = tmp_path / "model.paddle"
    path.write_bytes(paddle_merged_model(message, values))
    inferer = paddle.load_inference_model(str(path), input_types=dict(data_types))
    np.testing.assert_allclose(inferer.infer(data), sculler_reference(build, values, data),
                               rtol=1e-6, atol=1e-7)


def test_merged_model_defaults_to_dense_inputs_and_checks_input_types(tmp_path):
    message = paddle_message(MLP)
    path = tmp_path / "mlp.paddle"
    path.write_bytes(paddle_merged_model(message, trained_like_values(message)))
    inferer = paddle.load_inference_model(path)
    assert inferer.topology.data_type()[0][1].dim == 6
    with pytest.raises(ValueError, match="'y', which is not a data layer.*\\['x'\\]"):
        paddle.load_inference_model(path, input_types={"y": paddle.data_type.dense_vector(6)})
    with pytest.raises(TypeError, match=r"input_types\['x'\] must be a paddle.data_type"):
        paddle.load_inference_model(path, input_types={"x": 6})


def test_sculler_merged_model_is_paddles_layout_and_merge_v2_model_reads_gzip_tars(tmp_path):
    from sculler.utils.merge_model import merge_v2_model

    reset_names()
    out = sculler_mlp()
    params = paddle.parameters.create(out)
    tar = tmp_path / "params.tar.gz"
    buf = io.BytesIO()
    params.to_tar(buf)
    tar.write_bytes(gzip.compress(buf.getvalue()))
    merge_v2_model(out, str(tar), str(tmp_path / "m.paddle"))
    raw = (tmp_path / "m.paddle").read_bytes()
    (n,) = struct.unpack_from("<q", raw)
    conf = messages().ModelConfig.FromString(raw[8:8 + n])
    assert [p.name for p in conf.parameters] == ["_hidden.w0", "_hidden.wbias", "_out.w0",
                                                 "_out.wbias"]
    assert struct.unpack_from("IIQ", raw, 8 + n) == (0, 4, 30)
    np.testing.assert_array_equal(
        np.frombuffer(raw, np.float32, 30, 8 + n + 16), params.get("_hidden.w0").reshape(-1))
    inferer = paddle.load_inference_model(str(tmp_path / "m.paddle"))
    np.testing.assert_allclose(inferer.infer(MLP_INPUT),
                               paddle.infer(output_layer=out, parameters=params, input=MLP_INPUT))


def test_damaged_merged_models_are_named(tmp_path):
    message = paddle_message(MLP)
    good = paddle_merged_model(message, trained_like_values(message))
    cases = {"short": good[:4], "length": struct.pack("q", 10 ** 6) + good[8:],
             "cut": good[:-3], "padded": good + b"\0", "config": struct.pack("q", 3) + b"\xff" * 3}
    messages_seen = {}
    for what, data in cases.items():
        with pytest.raises(FileFormatError) as e:
            paddle.load_inference_model(io.BytesIO(data))
        messages_seen[what] = str(e.value)
    assert "too short for the 8-byte config length" in messages_seen["short"]
    assert "says its ModelConfig has 1000000 bytes" in messages_seen["length"]
    assert "ends inside parameter '_out.wbias'" in messages_seen["cut"]
    assert "1 bytes after the last parameter" in messages_seen["padded"]
    assert "not a serialized paddle.ModelConfig" in messages_seen["config"]


def test_a_pickle_naming_another_class_is_refused_without_running_it(tmp_path):
    marker = tmp_path / "ran"
    evil = (b"\x80\x02cos\nsystem\nq\x00X" + bytes([len(f"touch {marker}")]) + b"\x00\x00\x00"
            + f"touch {marker}".encode() + b"\x85R.")
    with pytest.raises(FileFormatError, match="refusing os.system"):
        paddle.inference.Inference(parameters=paddle.parameters.Parameters(),
                                   fileobj=io.BytesIO(evil))
    assert not marker.exists()


def test_paddle_inference_file_needs_parameters():
    message = paddle_message(MLP)
    fileobj = io.BytesIO(paddle_inference_file(message, CASES["mlp"][3]))
    with pytest.raises(TypeError, match="PaddlePaddle inference file needs parameters="):
        paddle.inference.Inference(fileobj=fileobj)
    params = paddle_parameters(message, trained_like_values(message))
    params.parameter_set.create(ParameterConfig("_other", [2]), owner="test")
    small = paddle.parameters.Parameters()
    small.parameter_set.create(ParameterConfig("_hidden.w0", [29]), owner="test")
    with pytest.raises(ValueError, match="'_hidden.w0' has 29 values, the model needs"):
        paddle.inference.Inference(parameters=small, fileobj=io.BytesIO(fileobj.getvalue()))


def test_sculler_inference_files_still_load_next_to_paddles(tmp_path):
    reset_names()
    out = sculler_mlp()
    params = paddle.parameters.create(out)
    buf = io.BytesIO()
    paddle.topology.Topology(out).serialize_for_inference(buf, params)
    buf.seek(0)
    assert tarfile.is_tarfile(io.BytesIO(buf.getvalue()))
    got = paddle.inference.Inference(fileobj=buf).infer(MLP_INPUT)
    np.testing.assert_allclose(got, paddle.infer(output_layer=out, parameters=params,
                                                 input=MLP_INPUT))


def test_paddle_inference_file_is_recognised_on_an_unseekable_buffered_stream(tmp_path):
    message = paddle_message(MLP)
    values = trained_like_values(message)
    path = tmp_path / "inference.pkl"
    path.write_bytes(paddle_inference_file(message, CASES["mlp"][3]))
    read_end, write_end = os.pipe()
    with open(write_end, "wb") as w:
        w.write(path.read_bytes())
    with open(read_end, "rb") as pipe:
        assert not pipe.seekable()
        inferer = paddle.inference.Inference(parameters=paddle_parameters(message, values),
                                             fileobj=pipe)
    np.testing.assert_allclose(inferer.infer(MLP_INPUT),
                               sculler_reference(sculler_mlp, values, MLP_INPUT), rtol=1e-6)
