"""Mistakes a new user makes with Sculler, one row each (v2 API, v1 configs, the ``sculler``
command, readers, feeding, eager mode, custom layers): every one raises the named exception
type with one message naming the cause (matched by a regex), not a deep NumPy or Python
error from somewhere inside.

The command line's mistakes end with exit status 2 and one ``sculler: error:`` line; the
table's ``_cli`` turns that line into :class:`CliFailed` so it is checked the same way.
"""

import contextlib
import io
import os
import re
import textwrap

import numpy as np
import pytest

import sculler as paddle
from sculler import nn
from sculler.cli import main as cli_main
from sculler.core.nan_guard import NonFiniteError

L, DT, A, ACT = paddle.layer, paddle.data_type, paddle.attr, paddle.activation


class CliFailed(Exception):
    """``sculler ...`` exited with a non-zero status; the message is its stderr."""


def _cli(*argv):
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            status = cli_main(list(argv))
        except SystemExit as exc:  # argparse's own errors
            status = exc.code
    if status:  # argparse prints its usage first: the error is the last line
        lines = err.getvalue().strip().splitlines()
        assert not any(line.startswith("Traceback") for line in lines), err.getvalue()
        raise CliFailed(f"exit {status}: {lines[-1] if lines else ''}")


def _write(tmp, name, text):
    path = os.path.join(tmp, name)
    with open(path, "w") as f:
        f.write(textwrap.dedent(text))
    return path


def _net(act=None, classes=3, dim=4, two_inputs=False):
    """data x (dim), [data z], fc to ``classes`` with ``act`` (Softmax when None), label y."""
    L.reset_names()
    x = L.data(name="x", type=DT.dense_vector(dim))
    inputs = [x]
    if two_inputs:
        inputs.append(L.data(name="z", type=DT.dense_vector(2)))
    out = L.fc(input=inputs, size=classes, act=act or ACT.Softmax(), name="out")
    y = L.data(name="y", type=DT.integer_value(classes))
    cost = L.classification_cost(input=out, label=y, name="cost")
    return out, cost, paddle.parameters.create(cost)


def _trainer(**net):
    _, cost, params = _net(**net)
    return paddle.trainer.SGD(cost, params, paddle.optimizer.Momentum(learning_rate=0.1))


def _samples(n=6, dim=4):
    rng = np.random.default_rng(0)
    return [(rng.standard_normal(dim).astype(np.float32), int(i % 3)) for i in range(n)]


def _train(reader, num_passes=1, **kw):
    _trainer(**kw.pop("net", {})).train(reader, num_passes=num_passes, show_progress=False, **kw)


def _train_label(label_type, label_of):
    """classification_cost over a 3-way softmax with a label layer of ``label_type``."""
    out, _, _ = _net()
    cost = L.classification_cost(input=out, label=L.data(name="lab", type=label_type))
    trainer = paddle.trainer.SGD(cost, paddle.parameters.create(cost),
                                 paddle.optimizer.Momentum(learning_rate=0.1))
    samples = [(np.ones(4, np.float32), label_of(i)) for i in range(4)]
    trainer.train(paddle.batch(lambda: iter(samples), 2), show_progress=False,
                  feeding={"x": 0, "lab": 1})


def _infer(input, **net):  # noqa: A002
    out, _, params = _net(**net)
    return paddle.infer(output_layer=out, parameters=params, input=input)


# ---- files the CLI cases read ----
V1_HEAD = textwrap.dedent("""\
    from sculler.config.helpers import *
    """)
V1_NET = textwrap.dedent("""\
    x = data_layer(name="x", size=4)
    y = data_layer(name="y", size=3)
    out = fc_layer(input=x, size=3, act=SoftmaxActivation())
    outputs(classification_cost(input=out, label=y))
    """)
PROVIDER = textwrap.dedent("""\
    import numpy as np

    def train():
        def reader():
            rng = np.random.default_rng(0)
            for i in range(8):
                yield rng.standard_normal(4).astype(np.float32), i % 3
        return reader

    def float_labels():
        def reader():
            for i in range(8):
                yield np.ones(4, np.float32), float(i % 3)
        return reader
    """)
V2_SCRIPT = textwrap.dedent("""\
    import numpy as np
    import sculler as paddle

    x = paddle.layer.data(name="x", type=paddle.data_type.dense_vector(4))
    y = paddle.layer.data(name="y", type=paddle.data_type.integer_value(3))
    out = paddle.layer.fc(input=x, size=3, act=paddle.activation.Softmax())
    cost = paddle.layer.classification_cost(input=out, label=y)
    optimizer = paddle.optimizer.Momentum(learning_rate=0.01)

    def samples():
        for i in range(8):
            yield np.ones(4, np.float32), i % 3
    """)


def _v1_train(tmp, body, settings="settings(batch_size=4)\n",
              sources='data_sources(train="provider:train")\n', *extra):
    _write(tmp, "provider.py", PROVIDER)
    parts = (V1_HEAD, settings, sources, body)
    conf = _write(tmp, "conf.py", "".join(textwrap.dedent(p) for p in parts))
    _cli("train", "--config", conf, "--save_dir", os.path.join(tmp, "out"), "--num_passes", "1",
         "--no_progress", *extra)


def _v2_train(tmp, tail, *extra):
    script = _write(tmp, "script.py", textwrap.dedent(V2_SCRIPT) + textwrap.dedent(tail))
    _cli("train", "--config", script, "--save_dir", os.path.join(tmp, "out"), "--num_passes",
         "1", "--no_progress", *extra)


def _trained_v2(tmp):
    """A v2 script and its parameter tar, for infer/export cases."""
    script = _write(tmp, "script.py", textwrap.dedent(V2_SCRIPT) + "train_reader = samples\n")
    _cli("train", "--config", script, "--save_dir", os.path.join(tmp, "out"), "--num_passes",
         "1", "--no_progress")
    return script, os.path.join(tmp, "out", "params.tar")


def _cli_infer(tmp, rows, name="rows.csv"):
    script, params = _trained_v2(tmp)
    path = os.path.join(tmp, name)
    np.savetxt(path, rows, delimiter=",")
    _cli("infer", "--config", script, "--params", params, "--input", path)


# ---- custom layers ----
def _register_twice():
    from sculler.core.layer import Layer, register_layer

    @register_layer("fc")
    class MyFc(Layer):
        pass


def _custom_check(config, layer_type="fc"):
    from sculler.testing import check_layer_grad

    return check_layer_grad(config, layer_type)


def _pylayer_not_applied():
    from sculler.testing.pylayer_check import TanhPyLayer

    TanhPyLayer(paddle.ones([2]))


def _pylayer_wrong_grad():
    from sculler.testing import check_pylayer_grad
    from sculler.testing.pylayer_check import TanhPyLayer

    class ForgotTheChainRule(TanhPyLayer):
        backward = staticmethod(lambda ctx, dy: dy)

    x = paddle.randn([2, 3], dtype="float64")
    x.stop_gradient = False
    check_pylayer_grad(ForgotTheChainRule, x)


def _backward_twice():
    x = paddle.ones([2])
    x.stop_gradient = False
    y = (x * x).sum()
    y.backward()
    y.backward()


def _ok_batches(n=6, size=3):
    return paddle.batch(lambda: iter(_samples(n)), size)


def _sparse_index_half():
    L.reset_names()
    x = L.data(name="s", type=DT.sparse_binary_vector(4))
    out = L.fc(input=x, size=2)
    paddle.infer(output_layer=out, parameters=paddle.parameters.create(out), input=[([0.5],)])


# (id, callable taking tmp_path, exception type, regex the message must match)
CASES = [
    # ---- v2 API: building a network ----
    ("fc without input", lambda t: L.fc(size=3), TypeError, r"input"),
    ("act given as a string", lambda t: L.fc(input=L.data(name="x", type=DT.dense_vector(4)),
                                             size=3, act="softmax"),
     TypeError, r"act.*'softmax'"),
    ("cost label is a dense vector (one-hot)", lambda t: _train_label(
        DT.dense_vector(3), lambda i: np.eye(3, dtype=np.float32)[i % 3]),
     ValueError, r"label input \('lab'\) must carry integer ids"),
    ("label classes differ from the fc size", lambda t: _train_label(
        DT.integer_value(5), lambda i: 4),
     ValueError, r"label id 4 is out of range \[0, 3\)"),
    ("parameters of a non-layer", lambda t: paddle.parameters.create("cost"),
     TypeError, r"str"),
    ("SGD without an optimizer", lambda t: paddle.trainer.SGD(*_net()[1:]),
     TypeError, r"update_equation"),
    ("optimizer keyword from PyTorch", lambda t: paddle.optimizer.Adam(lr=0.1),
     TypeError, r"lr"),
    ("data type given as a string", lambda t: L.data(name="x", type="dense_vector"),
     TypeError, r"'x'.*type"),
    # ---- v2 API: training ----
    ("softmax forgotten before classification_cost", lambda t: _train(
        _ok_batches(), num_passes=2, net={"act": ACT.Tanh()}),
     NonFiniteError, r"classification_cost.*probabilit.*[Ss]oftmax"),
    ("unbatched reader passed to train", lambda t: _train(lambda: iter(_samples())),
     ValueError, r"looks like one sample.*paddle\.batch\(reader, batch_size\)"),
    ("batched twice", lambda t: _train(paddle.batch(_ok_batches(), 2)),
     ValueError, r"batched twice"),
    ("reader yields dicts", lambda t: _train(lambda: iter([[{"x": np.ones(4), "y": 1}]])),
     (TypeError, ValueError), r"sample 0.*dict|tuple"),
    ("label given as a string", lambda t: _train(lambda: iter([[(np.ones(4), "1")]])),
     ValueError, r"'y'.*expected numbers.*<U1"),
    ("dense sample is a string", lambda t: _train(lambda: iter([[("0.1,0.2", 1)]])),
     (TypeError, ValueError), r"'x'.*numbers"),
    ("image fed to a vector of another size", lambda t: _train(
        lambda: iter([[(np.ones((3, 3), np.float32), 1)]])),
     ValueError, r"'x'.*4"),
    ("feeding names a layer that does not exist", lambda t: _train(
        _ok_batches(), feeding={"pixel": 0, "label": 1}),
     ValueError, r"\['x', 'y'\]"),
    ("feeding list too short", lambda t: _train(_ok_batches(), feeding=["x"]),
     ValueError, r"'y'"),
    ("event handler takes no event", lambda t: _train(_ok_batches(), event_handler=lambda: 0),
     TypeError, r"positional argument"),
    ("event handler is not callable", lambda t: _train(_ok_batches(), event_handler="print"),
     TypeError, r"event_handler must be a function of one event.*'print'"),
    ("num_passes negative", lambda t: _train(_ok_batches(), num_passes=-1),
     ValueError, r"num_passes.*-1"),
    ("test on an unbatched reader", lambda t: _trainer().test(lambda: iter(_samples())),
     ValueError, r"looks like one sample.*paddle\.batch"),
    ("reader yields None", lambda t: _train(lambda: iter([None])),
     TypeError, r"minibatch must be a list of samples.*NoneType"),
    ("empty batch", lambda t: _train(lambda: iter([[]])), ValueError, r"empty minibatch"),
    ("reader yields more fields than data layers", lambda t: _train(
        lambda: iter([[(np.ones(4, np.float32), 1, 7)]])),
     ValueError, r"3 fields, but the data layers \['x', 'y'\] read 2"),
    ("boolean row among float rows", lambda t: _train(
        lambda: iter([[(np.ones(4, np.float32), 1), (np.array([True] * 4), 2)]])),
     (TypeError, ValueError), r"'x'.*bool"),
    ("sparse index 0.5", lambda t: _sparse_index_half(), (TypeError, ValueError), r"'s'.*0\.5"),
    # ---- v2 API: inference ----
    ("infer with a 2-D array for a two-input model", lambda t: _infer(
        np.ones((5, 4), np.float32), two_inputs=True),
     TypeError, r"2 data layers.*one tuple per sample"),
    ("infer with a list of bare rows", lambda t: _infer(
        [np.ones(4, np.float32)] * 5, two_inputs=True),
     TypeError, r"bare arrays.*one tuple per sample"),
    ("infer with a row of the wrong width", lambda t: _infer(np.ones((5, 3), np.float32)),
     ValueError, r"'x'.*4"),
    ("infer with an empty field list", lambda t: paddle.infer(
        output_layer=_net()[0], parameters=_net()[2], input=[(np.ones(4),)], field=[]),
     ValueError, r"field is an empty list"),
    ("infer with a 3-D array for a vector input", lambda t: _infer(
        np.ones((2, 5, 4), np.float32)),
     ValueError, r"data layer 'x'.*4 values"),
    ("infer unknown field", lambda t: paddle.infer(
        output_layer=_net()[0], parameters=_net()[2], input=[(np.ones(4),)], field="prob2"),
     ValueError, r"field"),
    ("infer with parameters of another model", lambda t: paddle.infer(
        output_layer=_net(dim=5)[0], parameters=_net(dim=4)[2], input=[(np.ones(5),)]),
     ValueError, r"shape"),
    # ---- readers ----
    ("shuffle buf_size a fraction", lambda t: paddle.reader.shuffle(lambda: iter([]), 2.5),
     ValueError, r"shuffle: buf_size must be an int >= 0.*2\.5"),
    ("batch size None", lambda t: paddle.batch(lambda: iter([]), None),
     TypeError, r"batch_size"),
    ("map_readers with a non-callable", lambda t: list(paddle.reader.map_readers(
        3, lambda: iter([1]))()),
     TypeError, r"map_readers.*func must be a function.*got 3"),
    ("compose readers of different lengths", lambda t: list(paddle.reader.compose(
        lambda: iter([1, 2]), lambda: iter([1]))()),
     ValueError, r"length|align|ended"),
    # ---- v1 configs through `sculler train` ----
    ("learning_method as a string", lambda t: _v1_train(
        t, V1_NET, settings='settings(batch_size=4, learning_method="adam")\n'),
     CliFailed, r"learning_method.*AdamOptimizer\(\).*'adam'"),
    ("reader defined inside a v1 config", lambda t: _v1_train(
        t, "def reader():\n    yield [0.0] * 4, 0\n" + V1_NET,
        sources="", ),
     CliFailed, r"data_sources"),
    ("reader function passed to data_sources", lambda t: _v1_train(
        t, "def my_reader():\n    yield [0.0] * 4, 0\ndata_sources(train=my_reader)\n" + V1_NET,
        sources=""),
     CliFailed, r"data_sources.*'module:function'.*beside"),
    ("float labels through data_sources", lambda t: _v1_train(
        t, V1_NET, sources='data_sources(train="provider:float_labels")\n'),
     CliFailed, r"'y'.*float.*int\(label\)"),
    ("data_sources names a missing function", lambda t: _v1_train(
        t, V1_NET, sources='data_sources(train="provider:tran")\n'),
     CliFailed, r"provider.*'tran'"),
    ("data_sources names a missing module", lambda t: _v1_train(
        t, V1_NET, sources='data_sources(train="providr:train")\n'),
     CliFailed, r"providr"),
    ("data_sources without a colon", lambda t: _v1_train(
        t, V1_NET, sources='data_sources(train="provider.train")\n'),
     CliFailed, r"module:function"),
    ("settings without batch_size", lambda t: _v1_train(t, V1_NET, settings="settings()\n"),
     CliFailed, r"batch_size"),
    ("no settings", lambda t: _v1_train(t, V1_NET, settings=""),
     CliFailed, r"settings\(batch_size"),
    ("data layer narrower than the data", lambda t: _v1_train(
        t, V1_NET.replace('"x", size=4', '"x", size=3')),
     CliFailed, r"'x'.*3"),
    ("v1 act given a class", lambda t: _v1_train(
        t, V1_NET.replace("SoftmaxActivation()", "SoftmaxActivation")),
     CliFailed, r"act"),
    ("v1 config syntax error", lambda t: _v1_train(t, "x = data_layer(name='x', size=4\n"),
     CliFailed, r"conf\.py.*SyntaxError"),
    ("v1 config imports a missing helper", lambda t: _v1_train(
        t, "from helpers_of_mine import width\n" + V1_NET),
     CliFailed, r"helpers_of_mine"),
    ("v1 input given by name", lambda t: _v1_train(
        t, 'x = data_layer(name="x", size=4)\nh = fc_layer(input="x", size=3)\n' + V1_NET),
     CliFailed, r"input 0 must be a layer.*str"),
    # ---- v2 scripts through `sculler train` ----
    ("pre-batched train_reader in a v2 script", lambda t: _v2_train(
        t, "train_reader = paddle.batch(samples, 4)\n"),
     CliFailed, r"batched twice.*`sculler train` batches a script's train_reader itself"),
    ("train_reader is a generator", lambda t: _v2_train(t, "train_reader = samples()\n"),
     CliFailed, r"generator"),
    ("v2 script without optimizer", lambda t: _v2_train(
        t, "train_reader = samples\ndel optimizer\n"),
     CliFailed, r"optimizer"),
    ("v2 script's main() lacks num_passes", lambda t: _v2_train(
        t, "del cost\ndef main():\n    return 1\n"),
     CliFailed, r"main\(\).*--num_passes"),
    # ---- the sculler command ----
    ("train without --config", lambda t: _cli("train"), CliFailed, r"--config"),
    ("config file missing", lambda t: _cli("train", "--config", os.path.join(t, "no.py")),
     CliFailed, r"no\.py.*not found"),
    ("--num_passes not a number", lambda t: _cli("train", "--config", "x.py",
                                                 "--num_passes", "ten"),
     CliFailed, r"num_passes.*'ten'"),
    ("unknown command", lambda t: _cli("fit", "--config", "x.py"), CliFailed, r"'fit'"),
    ("check-grad --inputs 5x3", lambda t: _cli("check-grad", "--type", "fc", "--inputs", "5x3"),
     CliFailed, r"--inputs.*'5x3'.*5,3"),
    ("check-grad unknown layer type", lambda t: _cli(
        "check-grad", "--type", "fcc", "--inputs", "5"),
     CliFailed, r"'fcc'"),
    ("check-grad unknown activation", lambda t: _cli(
        "check-grad", "--type", "fc", "--inputs", "5", "--act", "rleu"),
     CliFailed, r"'rleu'"),
    ("infer rows of the wrong width", lambda t: _cli_infer(t, np.ones((2, 5))),
     CliFailed, r"5 values.*takes 4"),
    ("infer input of another format", lambda t: _cli_infer(t, np.ones((2, 4)), "rows.txt"),
     CliFailed, r"\.npy or \.csv"),
    ("infer params missing", lambda t: _cli(
        "infer", "--config", _write(t, "s.py", V2_SCRIPT), "--params", "none.tar", "--input",
        "x.csv"),
     CliFailed, r"none\.tar.*not found"),
    ("summary of a script without layers", lambda t: _cli(
        "summary", "--config", _write(t, "s.py", "x = 1\n")),
     CliFailed, r"no v1 layers"),
    # ---- eager mode ----
    ("Linear called on a NumPy array", lambda t: nn.Linear(4, 2)(np.ones((3, 4))),
     TypeError, r"Linear expects a Tensor, got ndarray.*to_tensor"),
    ("matmul shapes do not match", lambda t: paddle.matmul(paddle.ones([2, 3]),
                                                          paddle.ones([2, 3])),
     ValueError, r"\[2, 3\]"),
    ("to_tensor of a ragged list", lambda t: paddle.to_tensor([[1, 2], [3]]),
     (TypeError, ValueError), r"ragged|inhomogeneous|shape"),
    ("backward twice", lambda t: _backward_twice(), RuntimeError, r"retain_graph"),
    ("PyLayer called instead of apply", lambda t: _pylayer_not_applied(),
     TypeError, r"call TanhPyLayer\.apply\(\.\.\.\)"),
    ("PyLayer backward wrong", lambda t: _pylayer_wrong_grad(),
     AssertionError, r"ForgotTheChainRule: gradient of input 0 differs"),
    # ---- custom layers ----
    ("custom layer reuses a built-in name", lambda t: _register_twice(),
     ValueError, r"'fc' is already the built-in.*a name of its own"),
    ("check_layer_grad without inputs", lambda t: _custom_check({"size": 4}),
     ValueError, r"config dict needs 'inputs'"),
    ("check_layer_grad of an unknown type", lambda t: _custom_check(
        {"size": 4, "inputs": [paddle_testing_input(4)]}, "my_layer"),
     ValueError, r"'my_layer'"),
]


def paddle_testing_input(width):
    from sculler.testing import INPUT_DATA

    return INPUT_DATA(width)


@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")  # the NaN case
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_user_mistake_gets_a_clear_error(case, tmp_path, monkeypatch):
    _, call, exc_type, pattern = case
    monkeypatch.chdir(tmp_path)
    with pytest.raises(exc_type) as info:
        call(str(tmp_path))
    message = str(info.value)
    assert "\n" not in message.strip(), f"not one line: {message}"
    assert re.search(pattern, message), f"{pattern!r} not in: {message}"


def test_table_is_large_and_distinct():
    assert len(CASES) >= 60
    assert len({c[0] for c in CASES}) == len(CASES)
