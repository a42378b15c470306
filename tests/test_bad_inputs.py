"""Mistakes users really make, one row each: every one raises the named exception type with
a message that names the layer / parameter / argument / file and what was given."""

import os

import numpy as np
import pytest

import sculler as paddle
from sculler import nn
from sculler.config.config_parser import Layer, config_scope, get_config_arg
from sculler.fileio import FileFormatError
from sculler.parameters import Parameters

L, DT, A = paddle.layer, paddle.data_type, paddle.attr


def _x(dim=4):
    L.reset_names()
    return L.data(name="x", type=DT.dense_vector(dim))


def _model():
    x = _x()
    y = L.data(name="y", type=DT.integer_value(3))
    out = L.fc(input=x, size=3, act=paddle.activation.Softmax(), name="out")
    cost = L.classification_cost(input=out, label=y, name="cost")
    params = paddle.parameters.create(cost)
    return cost, params


def _trainer():
    cost, params = _model()
    return paddle.trainer.SGD(cost, params, paddle.optimizer.Momentum(learning_rate=0.1))


def _samples():
    return [(np.ones(4, np.float32), 1), (np.zeros(4, np.float32), 2)]


def _creator():
    def reader():
        yield from _samples()

    return reader


def _v1(*layers, **conf_args):
    with config_scope({k: str(v) for k, v in conf_args.items()}):
        for kw in layers:
            Layer(**kw)


def _v1_arg(name, kind, raw):
    with config_scope({name: raw}):
        return get_config_arg(name, kind)


def _train(reader, **kw):
    _trainer().train(reader, show_progress=False, **kw)


def _file(tmp, name, data):
    path = os.path.join(tmp, name)
    with open(path, "wb") as f:
        f.write(data)
    return path


def _ckpt(tmp):
    path = os.path.join(tmp, "c.ckpt")
    _trainer().save_checkpoint(path)
    return path


def _saved(tmp):
    path = os.path.join(tmp, "s.pd")
    paddle.save({"w": np.ones(2)}, path)
    return path


def _two_layers(first, second):
    x = _x()
    layers = [L.fc(input=x, size=3, **first), L.fc(input=x, size=2, **second)]
    paddle.parameters.create(layers)


def _v1_layer_result_as_input():
    with config_scope():
        x = Layer(name="x", type="data", size=4)
        Layer(name="h", type="fc", size=3, inputs=[x])


def _set(name, value):
    _, params = _model()
    params.set(name, value)


def _eager_linear_forward():
    nn.Linear(3, 2)(paddle.ones([2, 4]))


# (id, callable taking tmp_path, exception type, strings the message must contain)
CASES = [
    # ---- v2 layer wrappers and attributes ----
    ("fc size is a float division", lambda t: L.fc(input=_x(), size=13 / 2, name="h"),
     ValueError, ["'h'", "size", "6.5", "//"]),
    ("fc size negative", lambda t: L.fc(input=_x(), size=-3, name="h"),
     ValueError, ["'h'", "size", "-3"]),
    ("fc size is a string", lambda t: L.fc(input=_x(), size="10", name="h"),
     TypeError, ["'h'", "size", "'10'", "str"]),
    ("fc size is a bool", lambda t: L.fc(input=_x(), size=True, name="h"),
     TypeError, ["size", "True"]),
    ("fc size missing (0)", lambda t: L.fc(input=_x(), size=0, name="h"),
     ValueError, ["'h'", "positive size"]),
    ("fc input is an array", lambda t: L.fc(input=np.ones(4), size=3),
     TypeError, ["fc", "input 0", "ndarray"]),
    ("fc act is a class", lambda t: L.fc(input=_x(), size=3, act=paddle.activation.Tanh),
     TypeError, ["act", "Tanh()"]),
    ("fc name not a str", lambda t: L.fc(input=_x(), size=3, name=7),
     TypeError, ["name", "7"]),
    ("param_attr count", lambda t: L.fc(input=_x(), size=3, name="h",
                                        param_attr=[A.Param(), A.Param()]),
     ValueError, ["'h'", "2 param_attr", "1 inputs"]),
    ("param_attr and parameter_name", lambda t: L.fc(input=_x(), size=3, name="h",
                                                     param_attr=A.Param(), parameter_name="w"),
     ValueError, ["'h'", "param_attr", "parameter_name"]),
    ("data dim is a float division", lambda t: DT.dense_vector(13 / 2),
     ValueError, ["dim", "6.5"]),
    ("data dim zero", lambda t: DT.integer_value(0), ValueError, ["dim", "0"]),
    ("drop_rate is a string", lambda t: A.Extra(drop_rate="0.5"),
     TypeError, ["drop_rate", "'0.5'"]),
    ("drop_rate out of range", lambda t: A.Extra(drop_rate=1.5),
     ValueError, ["drop_rate", "1.5"]),
    ("initial_std is a string", lambda t: A.Param(initial_std="0.1"),
     TypeError, ["initial_std", "'0.1'"]),
    ("initial_std negative", lambda t: A.Param(initial_std=-1.0),
     ValueError, ["initial_std", "-1.0"]),
    ("learning_rate is a string", lambda t: A.Param(learning_rate="fast"),
     TypeError, ["learning_rate", "'fast'"]),
    ("uniform init half given", lambda t: A.Param(initial_min=-1.0),
     ValueError, ["initial_min", "initial_max"]),
    ("param name not a str", lambda t: A.Param(name=3), TypeError, ["Param name", "3"]),
    ("param name empty", lambda t: A.Param(name=""), TypeError, ["Param name", "''"]),
    ("two layers one name", lambda t: _two_layers(dict(name="h"), dict(name="h")),
     ValueError, ["'h'", "unique"]),
    ("shared parameter other shape", lambda t: _two_layers(
        dict(name="a", parameter_name="w"), dict(name="b", parameter_name="w")),
     ValueError, ["'w'", "[4, 3]", "[4, 2]"]),
    ("unknown layer type", lambda t: L.__dict__["make_layer"]("fcc", [_x()], size=3),
     ValueError, ["'fcc'", "fc"]),
    ("data name not a str", lambda t: L.data(name=3, type=DT.dense_vector(4)),
     TypeError, ["data layer", "name", "3"]),
    ("data type is a number", lambda t: L.data(name="x", type=4),
     TypeError, ["data layer 'x'", "type", "dense_vector"]),
    ("bias_attr is a string", lambda t: L.fc(input=_x(), size=3, name="h", bias_attr="yes"),
     TypeError, ["'h'", "bias_attr", "'yes'"]),
    ("is_static is a string", lambda t: A.Param(is_static="no"),
     TypeError, ["is_static", "'no'", "True or False"]),
    ("img_conv filter_size float", lambda t: L.img_conv(
        input=L.data(name="im", type=DT.dense_vector(16)), filter_size=2.5, num_filters=2,
        num_channels=1),
     TypeError, ["img_conv", "filter_size", "2.5"]),
    ("classification_error top_k float", lambda t: paddle.evaluator.classification_error(
        input=_x(), label=_x(), top_k=1.5),
     ValueError, ["top_k", "1.5"]),
    ("init seed is a string", lambda t: paddle.init(seed="3"),
     TypeError, ["init(seed=...)", "'3'"]),
    ("optimizer learning_rate string", lambda t: paddle.optimizer.Momentum(learning_rate="0.1"),
     TypeError, ["learning_rate", "'0.1'"]),
    ("optimizer learning_rate negative", lambda t: paddle.optimizer.Adam(learning_rate=-1),
     ValueError, ["learning_rate", "-1"]),
    ("optimizer regularization string", lambda t: paddle.optimizer.Momentum(
        regularization="l2"),
     TypeError, ["regularization", "'l2'"]),
    # ---- v1 configs ----
    ("v1 size is a float division", lambda t: _v1(
        dict(name="x", type="data", size=4),
        dict(name="h", type="fc", size=13 / 2, inputs=["x"])),
     ValueError, ["'h'", "size", "6.5"]),
    ("v1 concat declared size", lambda t: _v1(
        dict(name="a", type="data", size=4), dict(name="b", type="data", size=5),
        dict(name="c", type="concat", size=7, inputs=["a", "b"])),
     ValueError, ["'c'", "concat", "size 7", "['a', 'b']", "[4, 5]", "give 9"]),
    ("v1 addto declared size", lambda t: _v1(
        dict(name="a", type="data", size=4), dict(name="b", type="data", size=4),
        dict(name="s", type="addto", size=8, inputs=["a", "b"])),
     ValueError, ["'s'", "addto", "size 8", "give 4"]),
    ("v1 input is a Layer() result", lambda t: _v1_layer_result_as_input(),
     TypeError, ["'h'", "input 0", "Layer()", "'x'", "inputs=['x']"]),
    ("v1 input is a number", lambda t: _v1(
        dict(name="h", type="fc", size=3, inputs=[3])),
     TypeError, ["'h'", "input 0", "int"]),
    ("v1 input not defined yet", lambda t: _v1(
        dict(name="h", type="fc", size=3, inputs=["later"])),
     ValueError, ["'h'", "'later'", "not defined"]),
    ("v1 layer defined twice", lambda t: _v1(
        dict(name="x", type="data", size=4), dict(name="x", type="data", size=4)),
     ValueError, ["'x'", "twice"]),
    ("v1 drop_rate is a string", lambda t: _v1(
        dict(name="x", type="data", size=4),
        dict(name="h", type="fc", size=3, inputs=["x"], drop_rate="0.1")),
     TypeError, ["'h'", "drop_rate", "'0.1'"]),
    ("v1 unknown type", lambda t: _v1(dict(name="x", type="dataa", size=4)),
     ValueError, ["'dataa'", "data"]),
    ("v1 unknown activation", lambda t: _v1(
        dict(name="x", type="data", size=4),
        dict(name="h", type="fc", size=3, inputs=["x"], active_type="tahn")),
     ValueError, ["'h'", "'tahn'", "tanh"]),
    ("config arg int given 1.5", lambda t: _v1_arg("hidden", int, "1.5"),
     ValueError, ["hidden", "'1.5'", "int"]),
    ("config arg int given text", lambda t: _v1_arg("hidden", int, "big"),
     ValueError, ["hidden", "'big'", "int"]),
    ("config arg bool given text", lambda t: _v1_arg("flag", bool, "maybe"),
     ValueError, ["flag", "'maybe'", "bool"]),
    ("config arg float given text", lambda t: _v1_arg("lr", float, "fast"),
     ValueError, ["lr", "'fast'", "float"]),
    # ---- parameters ----
    ("set transposed array", lambda t: _set("_out.w0", np.ones((3, 4))),
     ValueError, ["'_out.w0'", "(4, 3)", "(3, 4)", "transposed"]),
    ("set wrong size", lambda t: _set("_out.w0", np.ones((4, 2))),
     ValueError, ["'_out.w0'", "(4, 3)", "(4, 2)"]),
    ("set 2-D row of the right size", lambda t: _set("_out.w0", np.ones((1, 12))),
     ValueError, ["'_out.w0'", "(1, 12)"]),
    ("set strings", lambda t: _set("_out.w0", [["a"] * 3] * 4),
     TypeError, ["'_out.w0'", "numeric", "<U1"]),
    ("set ragged list", lambda t: _set("_out.w0", [[1, 2], [3]]),
     TypeError, ["'_out.w0'", "ragged"]),
    ("set objects", lambda t: _set("_out.w0", np.array([object()] * 12)),
     TypeError, ["'_out.w0'", "object"]),
    ("set unknown parameter", lambda t: _set("_out.w1", np.ones(3)),
     KeyError, ["'_out.w1'", "_out.w0"]),
    ("get unknown parameter", lambda t: _model()[1].get("nope"),
     KeyError, ["'nope'", "_out.wbias"]),
    ("SGD parameters is a dict", lambda t: paddle.trainer.SGD(
        _model()[0], {}, paddle.optimizer.Momentum()),
     TypeError, ["parameters", "dict"]),
    ("SGD optimizer missing", lambda t: paddle.trainer.SGD(*_model(), update_equation="sgd"),
     TypeError, ["update_equation", "str"]),
    ("SGD cost is a string", lambda t: paddle.trainer.SGD(
        "cost", _model()[1], paddle.optimizer.Momentum()),
     TypeError, ["cost", "str"]),
    ("immutable parameter unknown", lambda t: _train(
        paddle.batch(_creator(), 2), immutable_parameters=["w"]),
     ValueError, ["immutable_parameters", "['w']"]),
    # ---- readers ----
    ("batch of a reader creator", lambda t: list(paddle.batch(_creator, 2)()),
     TypeError, ["paddle.batch(reader)", "_creator", "reader creator", "_creator()"]),
    ("batch of a generator", lambda t: paddle.batch(_creator()(), 2),
     TypeError, ["paddle.batch(reader)", "generator", "reader=r, not reader=r()"]),
    ("batch of a list", lambda t: paddle.batch(_samples(), 2),
     TypeError, ["paddle.batch(reader)", "list", "lambda"]),
    ("train on a reader creator", lambda t: _train(lambda: paddle.batch(_creator(), 2)),
     TypeError, ["train(reader=...)", "reader creator"]),
    ("train on a generator", lambda t: _train(paddle.batch(_creator(), 2)()),
     TypeError, ["train(reader=...)", "generator", "reader itself"]),
    ("reader returns a number", lambda t: list(paddle.batch(lambda: 3, 2)()),
     TypeError, ["paddle.batch(reader)", "int", "not iterable"]),
    ("shuffle of a generator", lambda t: paddle.reader.shuffle(_creator()(), 10),
     TypeError, ["shuffle(reader)", "generator"]),
    ("chain of a reader creator", lambda t: list(paddle.reader.chain(_creator, _creator)()),
     TypeError, ["chain: reader 0", "reader creator"]),
    ("batch_size is a float", lambda t: paddle.batch(_creator(), 2.5),
     TypeError, ["batch_size", "2.5"]),
    ("batch_size zero", lambda t: paddle.batch(_creator(), 0),
     ValueError, ["batch_size", "0"]),
    ("batch drop_last is a string", lambda t: paddle.batch(_creator(), 2, drop_last="no"),
     TypeError, ["drop_last", "'no'"]),
    ("train num_passes float", lambda t: _train(paddle.batch(_creator(), 2), num_passes=2.5),
     ValueError, ["num_passes", "2.5"]),
    ("Inference batch_size zero", lambda t: paddle.inference.Inference(
        output_layer=_model()[0], parameters=_model()[1], batch_size=0),
     ValueError, ["Inference(batch_size=...)", "0"]),
    ("buffered size negative", lambda t: paddle.reader.buffered(_creator(), -1),
     ValueError, ["buffered", "size", ">= 0", "-1"]),
    # ---- data fed to a network (the feeder) ----
    ("sample has too few fields", lambda t: _train(
        lambda: iter([[(np.ones(4, np.float32),)]])),
     ValueError, ["sample 0", "1 fields", "'y'"]),
    ("dense vector of wrong width", lambda t: _train(
        lambda: iter([[(np.ones(5, np.float32), 1)]])),
     ValueError, ["'x'", "4", "5"]),
    ("float label 1.7", lambda t: _train(
        lambda: iter([[(np.ones(4, np.float32), 1.7)]])),
     ValueError, ["'y'", "1.7", "integer"]),
    ("label out of range", lambda t: _train(
        lambda: iter([[(np.ones(4, np.float32), 7)]])),
     ValueError, ["'y'", "7", "3"]),
    # ---- files ----
    ("from_tar of random bytes", lambda t: Parameters.from_tar(
        _file(t, "rand.tar", os.urandom(2048))),
     FileFormatError, ["from_tar", "rand.tar", "not a tar"]),
    ("from_tar of a directory", lambda t: Parameters.from_tar(str(t)),
     IsADirectoryError, ["from_tar", "directory"]),
    ("from_tar of a missing file", lambda t: Parameters.from_tar(os.path.join(t, "no.tar")),
     FileNotFoundError, ["from_tar", "no.tar"]),
    ("from_tar of an empty file", lambda t: Parameters.from_tar(_file(t, "e.tar", b"")),
     FileFormatError, ["e.tar", "empty"]),
    ("init_from_tar of text", lambda t: _model()[1].init_from_tar(
        _file(t, "t.tar", b"hello world" * 100)),
     FileFormatError, ["init_from_tar", "t.tar"]),
    ("Inference of random bytes", lambda t: paddle.inference.Inference(
        fileobj=_file(t, "m.bin", os.urandom(3000))),
     FileFormatError, ["load_for_inference", "m.bin"]),
    ("Inference of a parameter tar", lambda t: paddle.inference.Inference(
        fileobj=_file(t, "p.tar", _tar_bytes())),
     FileFormatError, ["p.tar", "model.json"]),
    ("load_checkpoint of a sculler.save file", lambda t: _trainer().load_checkpoint(_saved(t)),
     FileFormatError, ["s.pd", "sculler.save", "sculler.load"]),
    ("load_checkpoint of random bytes", lambda t: _trainer().load_checkpoint(
        _file(t, "r.ckpt", os.urandom(100))),
     FileFormatError, ["load_checkpoint", "r.ckpt"]),
    ("load_checkpoint of a directory", lambda t: _trainer().load_checkpoint(str(t)),
     IsADirectoryError, ["load_checkpoint", "directory"]),
    ("train checkpoint is a directory", lambda t: _train(
        paddle.batch(_creator(), 2), checkpoint=str(t)),
     IsADirectoryError, ["checkpoint", "directory"]),
    ("sculler.load of a checkpoint", lambda t: paddle.load(_ckpt(t)),
     FileFormatError, ["c.ckpt", "trainer checkpoint", "load_checkpoint"]),
    ("sculler.load of a missing file", lambda t: paddle.load(os.path.join(t, "none.pd")),
     FileNotFoundError, ["load", "none.pd"]),
    ("sculler.save into a directory", lambda t: paddle.save({"w": np.ones(2)}, str(t)),
     IsADirectoryError, ["save", "directory"]),
    ("sculler.save of a set", lambda t: paddle.save({"w": {1, 2}}, os.path.join(t, "x")),
     TypeError, ["obj['w']", "set"]),
    ("to_tar into a missing directory", lambda t: _model()[1].to_tar(
        os.path.join(t, "no", "p.tar")),
     FileNotFoundError, ["to_tar", "does not exist"]),
    ("save_checkpoint to a directory", lambda t: _trainer().save_checkpoint(str(t)),
     IsADirectoryError, ["save_checkpoint", "directory"]),
    # ---- eager modules ----
    ("Dropout p is a string", lambda t: nn.Dropout(p="0.5"),
     TypeError, ["Dropout(p=...)", "'0.5'", "str"]),
    ("Dropout p above 1", lambda t: nn.Dropout(p=1.5), ValueError, ["Dropout(p=...)", "1.5"]),
    ("Dropout unknown mode", lambda t: nn.Dropout(mode="inverted"),
     ValueError, ["Dropout(mode='inverted')", "upscale_in_train"]),
    ("Linear size is a float division", lambda t: nn.Linear(9 / 2, 3),
     ValueError, ["Linear(in_features=...)", "4.5"]),
    ("Linear size zero", lambda t: nn.Linear(4, 0),
     ValueError, ["Linear(out_features=...)", "positive int", "0"]),
    ("Linear size is a string", lambda t: nn.Linear("4", 3),
     TypeError, ["Linear(in_features=...)", "'4'"]),
    ("Linear input of wrong width", lambda t: _eager_linear_forward(),
     ValueError, ["Linear", "[..., 3]", "[2, 4]"]),
    ("Embedding dim zero", lambda t: nn.Embedding(10, 0),
     ValueError, ["Embedding(embedding_dim=...)", "0"]),
    ("Embedding padding_idx out of range", lambda t: nn.Embedding(10, 4, padding_idx=10),
     ValueError, ["padding_idx=10", "[-10, 10)"]),
    ("Conv2D kernel zero", lambda t: nn.Conv2D(3, 8, kernel_size=0),
     ValueError, ["Conv2D(kernel_size=...)", "0"]),
    ("Conv2D kernel triple", lambda t: nn.Conv2D(3, 8, kernel_size=(3, 3, 3)),
     ValueError, ["Conv2D(kernel_size=...)", "pair"]),
    ("Conv2D groups do not divide", lambda t: nn.Conv2D(3, 8, 3, groups=2),
     ValueError, ["Conv2D", "groups=2"]),
    ("MaxPool2D kernel zero", lambda t: nn.MaxPool2D(kernel_size=0),
     ValueError, ["MaxPool2D(kernel_size=...)", "0"]),
    ("AvgPool2D negative padding", lambda t: nn.AvgPool2D(2, padding=-1),
     ValueError, ["AvgPool2D(padding=...)", "-1"]),
    ("functional dropout p string", lambda t: nn.functional.dropout(paddle.ones([2]), p="0.5"),
     TypeError, ["dropout", "p", "'0.5'"]),
    ("to_tensor of strings", lambda t: paddle.to_tensor(["a", "b"]),
     TypeError, ["to_tensor", "<U1"]),
    ("Conv2D channels float", lambda t: nn.Conv2D(3.5, 8, 3),
     ValueError, ["Conv2D(in_channels=...)", "3.5"]),
]


def _tar_bytes():
    import io

    buf = io.BytesIO()
    _model()[1].to_tar(buf)
    return buf.getvalue()


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_bad_input_raises_a_precise_error(case, tmp_path):
    _, call, exc_type, names = case
    with pytest.raises(exc_type) as info:
        call(str(tmp_path))
    message = str(info.value.args[0]) if isinstance(info.value, KeyError) else str(info.value)
    missing = [n for n in names if n not in message]
    assert not missing, f"message lacks {missing}: {message}"


def test_table_is_large_and_distinct():
    assert len(CASES) >= 60
    assert len({c[0] for c in CASES}) == len(CASES)


def test_lossless_values_are_accepted():
    assert L.fc(input=_x(), size=8.0).size == 8  # 8.0 loses nothing
    assert _v1_arg("hidden", int, "1e3") == 1000
    assert _v1_arg("flag", bool, "off") is False
    _, params = _model()
    params.set("_out.w0", np.arange(12, dtype=np.float64))  # flat with the right size
    np.testing.assert_array_equal(params.get("_out.w0"), np.arange(12).reshape(4, 3))
    assert nn.Dropout(p=0).p == 0.0
    assert nn.Linear(np.int64(4), 3).in_features == 4
