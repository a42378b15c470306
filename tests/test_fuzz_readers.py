"""Fuzzing the readers of damaged files: parameter tars (Sculler's and PaddlePaddle's, which
lack the end-of-archive marker), trainer checkpoints and v1 config files. Every example either
loads correctly or raises a ValueError/TypeError (FileFormatError is one) with a message;
never an IndexError, AttributeError, struct.error or UnicodeDecodeError from deep inside, never
a hang, and a refused checkpoint changes nothing."""

import io
import math
import struct
import tarfile

import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

import sculler as paddle
from sculler.config.config_parser import parse_config
from sculler.core.model_config import ModelConfig
from sculler.parameters import Parameters
from sculler.v2.protobuf import decode_parameter_config, encode_parameter_config

# bounded and reproducible (pytest --hypothesis-show-statistics prints the counts)
FUZZ = settings(max_examples=200, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
NAMED = (ValueError, TypeError)


def _classifier():
    paddle.layer.reset_names()
    x = paddle.layer.data(name="x", type=paddle.data_type.dense_vector(4))
    y = paddle.layer.data(name="y", type=paddle.data_type.integer_value(3))
    out = paddle.layer.fc(input=x, size=3, act=paddle.activation.Softmax(), name="out")
    cost = paddle.layer.classification_cost(input=out, label=y)
    params = paddle.parameters.create(cost)
    trainer = paddle.trainer.SGD(cost, params, paddle.optimizer.Adam(learning_rate=1e-3))
    return params, trainer


def _paddle_tar(params) -> bytes:
    """As PaddlePaddle's Parameters.to_tar writes it: never closed, no end-of-archive marker."""
    buf = io.BytesIO()
    tar = tarfile.TarFile(fileobj=buf, mode="w", format=tarfile.GNU_FORMAT)
    for name in params.names():
        values = params.get(name)
        for entry, data in ((name, struct.pack("IIQ", 0, 4, values.size) + values.tobytes()),
                            (name + ".protobuf",
                             encode_parameter_config(name, values.size, list(values.shape)))):
            info = tarfile.TarInfo(entry)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


@st.composite
def damaged(draw, original: bytes):
    """``original`` after 1-3 edits: a byte changed, a stretch zeroed, cut, inserted or
    removed, or junk appended."""
    data = bytearray(original)
    for _ in range(draw(st.integers(1, 3))):
        at = draw(st.integers(0, max(len(data) - 1, 0)))
        edit = draw(st.sampled_from(["byte", "zero", "cut", "insert", "remove", "append"]))
        if edit == "byte" and data:
            data[at] = draw(st.integers(0, 255))
        elif edit == "zero":
            n = draw(st.integers(1, 64))
            data[at:at + n] = bytes(len(data[at:at + n]))
        elif edit == "cut":
            del data[at:]
        elif edit == "insert":
            data[at:at] = draw(st.binary(min_size=1, max_size=32))
        elif edit == "remove":
            del data[at:at + draw(st.integers(1, 64))]
        else:
            data += draw(st.binary(min_size=1, max_size=600))
    return bytes(data)


@pytest.fixture(scope="module")
def tars():
    params, _ = _classifier()
    buf = io.BytesIO()
    params.to_tar(buf)
    return {"sculler": buf.getvalue(), "paddle": _paddle_tar(params)}


def _check_loaded(loaded: Parameters) -> None:
    """A tar that loads holds float32 values of exactly the shape its config declares."""
    for name in loaded.names():
        values = loaded.get(name)
        assert values.dtype == np.float32
        assert values.shape == loaded.get_shape(name)
        assert math.prod(values.shape) > 0


@FUZZ
@given(st.data())
def test_parameter_tar_reader_fuzz(tars, data):
    raw = data.draw(damaged(tars[data.draw(st.sampled_from(["sculler", "paddle"]))]))
    try:
        loaded = Parameters.from_tar(io.BytesIO(raw))
    except NAMED as e:
        assert str(e), type(e)
        event(f"refused: {type(e).__name__}")
    else:
        event("loaded")
        _check_loaded(loaded)


@FUZZ
@given(st.binary(max_size=3000))
def test_random_bytes_are_never_a_parameter_tar(raw):
    with pytest.raises(NAMED) as info:
        Parameters.from_tar(io.BytesIO(raw))
    assert str(info.value)


@FUZZ
@given(damaged(encode_parameter_config("_fc.w0", 40, [5, 8], {"learning_rate": 1.0,
                                                               "is_static": True})))
def test_parameter_config_decoder_fuzz(raw):
    """Damage inside a ``.protobuf`` entry (zeroed dims decoded as field 0 once turned a
    (5, 8) parameter into (40,)) is a ValueError or a message that decodes consistently."""
    try:
        conf = decode_parameter_config(raw)
    except ValueError as e:
        assert str(e)
        event("refused")
    else:
        event("decoded")
        assert isinstance(conf["name"], str) and all(isinstance(d, int) for d in conf["dims"])


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    params, trainer = _classifier()
    trainer.train(lambda: iter([[(np.ones(4, np.float32), 1)] * 2]), num_passes=1,
                  show_progress=False)
    path = tmp_path_factory.mktemp("ckpt") / "good.ckpt"
    trainer.save_checkpoint(str(path))
    return params, trainer, path.read_bytes(), path.parent


@FUZZ
@given(st.data())
def test_checkpoint_reader_fuzz(checkpoint, data):
    params, trainer, good, folder = checkpoint
    raw = data.draw(damaged(good))
    path = folder / "damaged.ckpt"
    path.write_bytes(raw)
    for n in params.names():  # values unlike the checkpoint's, to see any write
        params.set(n, np.full(params.get_shape(n), 7.0, np.float32))
    state = trainer.optimizer.state_dict()
    try:
        trainer.load_checkpoint(str(path))
    except NAMED as e:
        assert str(e), type(e)
        event(f"refused: {type(e).__name__}")
        for n in params.names():
            assert np.all(params.get(n) == 7.0), n
        after = trainer.optimizer.state_dict()
        assert after.keys() == state.keys()
        for k in state:
            np.testing.assert_array_equal(after[k], state[k])
    else:
        event("loaded")
        for n in params.names():
            assert params.get(n).shape == params.get_shape(n)


# ------------------------------------------------------------------ v1 config files
# a valid config whose every slot is drawn from mostly valid values and a few mistakes
# (bad sizes, types, activations, inputs, keywords), in the raw Layer(...) style and in the
# trainer_config_helpers style


def _slot(valid: list, wrong: list):
    """Three draws in four from ``valid``."""
    return st.sampled_from(valid * (1 + 3 * len(wrong) // max(len(valid), 1)) + wrong)


SIZE = _slot([str(n) for n in range(1, 9)], ["0", "-2", "0.5", "'8'", "None", "True", "2.5"])
RAW_ACT = _slot(["'tanh'", "'relu'", "'sigmoid'", "''", "'linear'"],
                ["'bogus'", "None", "3", "'Tanh'"])
HELPER_ACT = _slot(["TanhActivation()", "ReluActivation()", "LinearActivation()"],
                   ["'tanh'", "None", "TanhActivation", "3"])
INPUT = _slot(["'x'"], ["'zz'", "None", "3", "['x', 'x']"])
TYPE = _slot(["'fc'"], ["'no_such_type'", "'data'", "'concat'", "None", "'FC'"])
EXTRA = _slot([""], [", activ_type='tanh'", ", drop_rate=-1", ", coeff='x'", ", bias=0",
                     ", size2=3", ", drop_rate=0.5"])
LABELS = _slot(["3"], ["0", "-1", "'3'", "2.5"])


@st.composite
def raw_config(draw) -> str:
    return f"""from sculler.config.config_parser import Input, Layer, Outputs
Layer(name="x", type="data", size={draw(SIZE)})
Layer(name="label", type="data", size={draw(LABELS)})
Layer(name="hidden", type={draw(TYPE)}, size={draw(SIZE)}, active_type={draw(RAW_ACT)},
      inputs=[Input({draw(INPUT)}, initial_std={draw(_slot(["0.1"], ["-1", "'a'"]))})]{draw(EXTRA)})
Layer(name="out", type="fc", size={draw(LABELS)}, active_type="softmax", inputs=["hidden"])
Layer(name="cost", type={draw(_slot(["'multi-class-cross-entropy'"], ["'square_error'"]))},
      inputs=["out", {draw(_slot(["'label'"], ["'x'", "'zz'"]))}])
Outputs({draw(_slot(["'cost'"], ["'zz'", "None", "3"]))})
"""


@st.composite
def helper_config(draw) -> str:
    pick = draw(_slot(["x"], ["None", "'x'", "[x, x]", "3"]))
    return f"""from sculler.config.helpers import *
settings(batch_size={draw(SIZE)}, learning_rate={draw(_slot(["0.1"], ["-1", "'x'", "0"]))})
x = data_layer(name="x", size={draw(SIZE)})
label = data_layer(name="label", size={draw(LABELS)})
hidden = fc_layer(input={pick}, size={draw(SIZE)}, act={draw(HELPER_ACT)}{draw(EXTRA)})
out = fc_layer(input=hidden, size={draw(LABELS)}, act=SoftmaxActivation())
cost = classification_cost(input=out, label={draw(_slot(["label"], ["x", "None", "'label'"]))})
outputs({draw(_slot(["cost"], ["None", "'zz'", "[cost, None]"]))})
"""


@pytest.fixture(scope="module")
def config_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("configs")


@FUZZ
@given(st.one_of(raw_config(), helper_config()))
def test_v1_config_parser_fuzz(config_dir, text):
    path = config_dir / "conf.py"
    path.write_text(text + "\n")
    try:
        parsed = parse_config(path)
    except NAMED as e:
        assert str(e), type(e)
        event(f"refused: {type(e).__name__}")
    else:
        event("parsed")
        model = parsed.model_config
        assert ModelConfig.from_json(model.to_json()) == model
        assert model.layers and all(layer.size > 0 for layer in model.layers)
