"""Every reader checks its file: a truncated, padded, foreign or random file is an error that
names the file (and the entry); every writer round-trips through its reader."""

import io
import os
import struct
import tarfile

import numpy as np
import pytest
from safetensors.numpy import save_file

import sculler as paddle
from sculler.fileio import FileFormatError
from sculler.parameters import Parameters
from sculler.topology import Topology
from sculler.v2.protobuf import encode_parameter_config


@pytest.fixture
def model():
    return _classifier("out")


def _classifier(name):
    """A softmax layer ``name`` over 4 inputs, its parameters and a trainer."""
    paddle.layer.reset_names()
    x = paddle.layer.data(name="x", type=paddle.data_type.dense_vector(4))
    y = paddle.layer.data(name="y", type=paddle.data_type.integer_value(3))
    out = paddle.layer.fc(input=x, size=3, act=paddle.activation.Softmax(), name=name)
    cost = paddle.layer.classification_cost(input=out, label=y)
    params = paddle.parameters.create(cost)
    trainer = paddle.trainer.SGD(cost, params, paddle.optimizer.Momentum(
        learning_rate=0.1, momentum=0.9))
    return out, params, trainer


def _tar(path, entries):
    with tarfile.open(path, "w") as tar:
        for name, data in entries.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


def _param_tar_bytes(params):
    buf = io.BytesIO()
    params.to_tar(buf)
    return buf.getvalue()


def test_every_writer_round_trips(model, tmp_path):
    out, params, trainer = model
    params.to_tar(tmp_path / "p.tar")
    back = Parameters.from_tar(tmp_path / "p.tar")
    for n in params.names():
        np.testing.assert_array_equal(back.get(n), params.get(n))
    Topology(out).serialize_for_inference(tmp_path / "m.tar", params)
    inf = paddle.inference.Inference(fileobj=str(tmp_path / "m.tar"))
    x = np.arange(4, dtype=np.float32)
    direct = paddle.infer(output_layer=out, parameters=params, input=[(x,)])
    np.testing.assert_allclose(inf.infer(input=[(x,)]), direct, rtol=1e-6)
    trainer.save_checkpoint(str(tmp_path / "c.ckpt"))
    saved = {n: params.get(n) for n in params.names()}
    for n in params.names():
        params.set(n, np.zeros(params.get_shape(n), np.float32))
    trainer.load_checkpoint(str(tmp_path / "c.ckpt"))
    for n in params.names():
        np.testing.assert_array_equal(params.get(n), saved[n])
    paddle.save({"a": np.arange(3.0), "b": [1, "two"]}, str(tmp_path / "s.pd"))
    state = paddle.load(str(tmp_path / "s.pd"))
    np.testing.assert_array_equal(state["a"], np.arange(3.0))
    assert state["b"] == [1, "two"]


@pytest.mark.parametrize("fraction", [0.0, 0.01, 0.1, 0.3, 0.5, 0.7, 0.9])
def test_truncated_parameter_tar_names_the_file(model, tmp_path, fraction):
    _, params, _ = model
    data = _param_tar_bytes(params)
    content = len(data.rstrip(b"\0"))  # the tar ends in zero blocks; cut inside its content
    path = tmp_path / "cut.tar"
    path.write_bytes(data[:int(content * fraction)])
    with pytest.raises(FileFormatError, match="cut.tar"):
        Parameters.from_tar(str(path))
    before = {n: params.get(n) for n in params.names()}
    with pytest.raises(FileFormatError, match="cut.tar"):
        params.init_from_tar(str(path))
    for n in params.names():  # nothing was overwritten by a half-read file
        np.testing.assert_array_equal(params.get(n), before[n])


def test_padded_random_and_foreign_parameter_tars(model, tmp_path):
    _, params, _ = model
    data = _param_tar_bytes(params)
    cases = {"padded.tar": data + b"junk" * 100, "random.tar": os.urandom(4096),
             "empty.tar": b""}
    for name, raw in cases.items():
        (tmp_path / name).write_bytes(raw)
        with pytest.raises(FileFormatError, match=name):
            Parameters.from_tar(str(tmp_path / name))
    _tar(tmp_path / "foreign.tar", {"readme.txt": b"hello"})
    with pytest.raises(FileFormatError, match="foreign.tar.*'readme.txt'.*no"):
        Parameters.from_tar(str(tmp_path / "foreign.tar"))
    with pytest.raises(FileFormatError, match="random.tar"):
        with open(tmp_path / "random.tar", "rb") as f:
            Parameters.from_tar(f)
    with pytest.raises(IsADirectoryError, match="directory"):
        Parameters.from_tar(str(tmp_path))
    with pytest.raises(FileNotFoundError, match="missing.tar"):
        Parameters.from_tar(str(tmp_path / "missing.tar"))


def test_damaged_entries_name_the_entry(model, tmp_path):
    _, params, _ = model
    with tarfile.open(fileobj=io.BytesIO(_param_tar_bytes(params))) as tar:
        good = {m.name: tar.extractfile(m).read() for m in tar.getmembers()}
    w = "_out.w0"
    bad_entries = {
        "padded entry": {**good, w: good[w] + b"\0\0\0\0"},
        "short entry": {**good, w: good[w][:-4]},
        "wrong count": {**good, w: struct.pack("IIQ", 0, 4, 5) + good[w][16:]},
        "float64 header": {**good, w: struct.pack("IIQ", 0, 8, 12) + good[w][16:]},
        "no header": {**good, w: b"\0" * 8},
        "no value entry": {k: v for k, v in good.items() if k != w},
        "bad config": {**good, w + ".protobuf": b"\xff\xff\xff"},
    }
    for case, entries in bad_entries.items():
        path = tmp_path / f"{case.replace(' ', '_')}.tar"
        _tar(path, entries)
        with pytest.raises(FileFormatError, match=f"{path.name}.*'{w}") as info:
            Parameters.from_tar(str(path))
        assert path.name in str(info.value), case


def test_init_from_tar_shape_mismatch_names_the_parameter(model, tmp_path):
    _, params, _ = model
    paddle.layer.reset_names()
    x = paddle.layer.data(name="x", type=paddle.data_type.dense_vector(5))
    other = paddle.parameters.create(paddle.layer.fc(input=x, size=3, name="out"))
    other.to_tar(tmp_path / "other.tar")
    with pytest.raises(ValueError, match="'_out.w0' has shape \\(4, 3\\) here and \\(5, 3\\)"):
        params.init_from_tar(str(tmp_path / "other.tar"))


def test_damaged_inference_files(model, tmp_path):
    out, params, _ = model
    Topology(out).serialize_for_inference(tmp_path / "m.tar", params)
    data = (tmp_path / "m.tar").read_bytes()
    (tmp_path / "cut.tar").write_bytes(data[:len(data.rstrip(b"\0")) // 2])
    (tmp_path / "random.bin").write_bytes(os.urandom(3000))
    params.to_tar(tmp_path / "params.tar")
    for name in ("cut.tar", "random.bin", "params.tar"):
        with pytest.raises(FileFormatError, match=name):
            paddle.inference.Inference(fileobj=str(tmp_path / name))
        with open(tmp_path / name, "rb") as f, pytest.raises(FileFormatError, match=name):
            paddle.inference.Inference(fileobj=f)
    _tar(tmp_path / "badjson.tar", {"model.json": b"{not json"})
    with pytest.raises(FileFormatError, match="badjson.tar.*model.json"):
        paddle.inference.Inference(fileobj=str(tmp_path / "badjson.tar"))


def test_checkpoint_reader_tells_files_apart(model, tmp_path):
    _, params, trainer = model
    ckpt = tmp_path / "c.ckpt"
    trainer.save_checkpoint(str(ckpt))
    data = ckpt.read_bytes()
    for cut in (0, 7, 100, len(data) // 2, len(data) - 1):
        (tmp_path / "cut.ckpt").write_bytes(data[:cut])
        with pytest.raises(FileFormatError, match="cut.ckpt"):
            trainer.load_checkpoint(str(tmp_path / "cut.ckpt"))
    paddle.save({"w": np.ones(3)}, str(tmp_path / "state.pd"))
    with pytest.raises(FileFormatError, match="state.pd.*sculler.save.*sculler.load"):
        trainer.load_checkpoint(str(tmp_path / "state.pd"))
    save_file({"w": np.ones(3)}, str(tmp_path / "foreign.st"))
    with pytest.raises(FileFormatError, match="foreign.st.*not written by Sculler"):
        trainer.load_checkpoint(str(tmp_path / "foreign.st"))
    with pytest.raises(FileFormatError, match="c.ckpt.*trainer checkpoint.*load_checkpoint"):
        paddle.load(str(ckpt))
    with pytest.raises(FileFormatError, match="foreign.st.*not written by sculler.save"):
        paddle.load(str(tmp_path / "foreign.st"))
    with pytest.raises(IsADirectoryError, match="directory"):
        trainer.load_checkpoint(str(tmp_path))
    with pytest.raises(IsADirectoryError, match="checkpoint .* is a directory"):
        trainer.train(lambda: iter([]), checkpoint=str(tmp_path))
    with pytest.raises(IsADirectoryError, match="is a directory"):
        paddle.load(str(tmp_path))


def test_checkpoint_of_another_model_names_the_parameters(model, tmp_path):
    _, params, trainer = model
    _, _, other = _classifier("other")
    other.save_checkpoint(str(tmp_path / "other.ckpt"))
    with pytest.raises(ValueError, match="other.ckpt.*another model.*'_other.w0'"):
        trainer.load_checkpoint(str(tmp_path / "other.ckpt"))


def _paddle_to_tar(f, params):
    """The tar PaddlePaddle 0.11's ``Parameters.to_tar`` writes: a ``TarFile`` over ``f``
    (Python 2's default GNU format) gets, per parameter, its raw values behind the
    ``IIQ`` header and its serialized ParameterConfig, and is never closed, so no
    end-of-archive marker follows the last entry."""
    tar = tarfile.TarFile(fileobj=f, mode="w", format=tarfile.GNU_FORMAT)
    for name in params.names():
        values = params.get(name).astype(np.float32)
        raw = struct.pack("IIQ", 0, 4, values.size) + values.tobytes()
        # the fields Paddle's config_parser sets, in field-number order: name, size, the
        # doubles, dims (proto2: not packed), initial_strategy = 11, initial_smart = 12
        conf = encode_parameter_config(name, values.size, list(values.shape), {
            "learning_rate": 1.0, "momentum": 0.0, "initial_mean": 0.0, "initial_std": 0.01,
            "decay_rate": 0.0}) + b"\x58\x00\x60\x00"
        for entry, data in ((name, raw), (name + ".protobuf", conf)):
            info = tarfile.TarInfo(name=entry)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


def test_paddle_written_tar_without_end_marker_loads(model, tmp_path):
    _, params, _ = model
    rng = np.random.RandomState(3)
    for n in params.names():
        params.set(n, rng.randn(*params.get_shape(n)).astype(np.float32))
    path = tmp_path / "paddle.tar"
    with open(path, "wb") as f:
        _paddle_to_tar(f, params)
    data = path.read_bytes()
    assert len(data) % 512 == 0 and data[-512:].count(0) < 512  # no zero blocks at the end
    back = Parameters.from_tar(str(path))
    assert back.names() == params.names()
    for n in params.names():
        np.testing.assert_array_equal(back.get(n), params.get(n))
    fresh = _classifier("out")[1]
    fresh.init_from_tar(str(path))
    for n in params.names():
        np.testing.assert_array_equal(fresh.get(n), params.get(n))
    # damage is still named: a header cut short, a damaged header, an entry cut short
    with tarfile.open(path) as tar:
        members = tar.getmembers()
    last = members[-1]
    cases = {"cut_header.tar": data[:last.offset + 100],
             "zeroed_magic.tar": data[:last.offset + 257] + b"\0" * 8 + data[last.offset + 265:],
             "cut_entry.tar": data[:last.offset_data + last.size - 3]}
    for case, raw in cases.items():
        (tmp_path / case).write_bytes(raw)
        with pytest.raises(FileFormatError, match=f"{case}.*'{members[-2].name}'|"
                                                  f"{case}.*'{last.name}'"):
            Parameters.from_tar(str(tmp_path / case))
    (tmp_path / "junk.tar").write_bytes(data + b"\0" * 1024 + b"junk")
    with pytest.raises(FileFormatError, match="junk.tar.*non-tar data"):
        Parameters.from_tar(str(tmp_path / "junk.tar"))


def test_zeroed_dims_bytes_are_damage_not_a_flat_parameter(tmp_path):
    """Zeroing a config's dims bytes once loaded a (5, 8) parameter as (40,): protobuf field
    number 0 does not exist, so the decoder refuses it and the error names the entry."""
    paddle.layer.reset_names()
    x = paddle.layer.data(name="x", type=paddle.data_type.dense_vector(5))
    params = paddle.parameters.create(paddle.layer.fc(input=x, size=8, name="fc"))
    with tarfile.open(fileobj=io.BytesIO(_param_tar_bytes(params))) as tar:
        good = {m.name: tar.extractfile(m).read() for m in tar.getmembers()}
    conf = good["_fc.w0.protobuf"]
    dims = b"\x48\x05\x48\x08"
    assert dims in conf
    _tar(tmp_path / "zeroed.tar", {**good, "_fc.w0.protobuf": conf.replace(dims, b"\0" * 4)})
    with pytest.raises(FileFormatError, match=r"zeroed.tar' entry '_fc.w0.protobuf'.*field "
                                              r"number 0"):
        Parameters.from_tar(str(tmp_path / "zeroed.tar"))


def test_init_from_tar_shape_error_names_the_file(model, tmp_path):
    _, params, _ = model
    paddle.layer.reset_names()
    x = paddle.layer.data(name="x", type=paddle.data_type.dense_vector(5))
    paddle.parameters.create(paddle.layer.fc(input=x, size=3, name="out")).to_tar(
        tmp_path / "wider.tar")
    with pytest.raises(ValueError, match=r"'_out.w0' has shape \(4, 3\) here and \(5, 3\) "
                                         r"in '.*wider.tar'"):
        params.init_from_tar(str(tmp_path / "wider.tar"))


def test_damaged_checkpoint_leaves_the_parameters_bit_identical(model, tmp_path):
    """load_checkpoint once overwrote the parameters before it met a damaged entry: now it
    checks the whole file first."""
    from safetensors import safe_open
    from safetensors.numpy import load_file

    _, params, trainer = model
    trainer.save_checkpoint(str(tmp_path / "good.ckpt"))
    with safe_open(str(tmp_path / "good.ckpt"), framework="numpy") as f:
        meta = f.metadata()
    tensors = load_file(str(tmp_path / "good.ckpt"))
    rng = np.random.RandomState(7)
    for n in params.names():  # the current values differ from the checkpoint's
        params.set(n, rng.randn(*params.get_shape(n)).astype(np.float32))
    before = {n: params.get(n).copy() for n in params.names()}
    state = trainer.optimizer.state_dict()
    damaged = {
        "rng.ckpt": ({**tensors, "rng/python": tensors["rng/python"][:5]}, meta),
        "opt.ckpt": ({**tensors, "opt/__optimizer__.bogus": np.zeros(1)}, meta),
        "counters.ckpt": (tensors, {**meta, "sculler": meta["sculler"].replace(
            '"next_pass": 0', '"next_pass": "x"')}),
    }
    for name, (entries, metadata) in damaged.items():
        save_file(entries, str(tmp_path / name), metadata=metadata)
        with pytest.raises(FileFormatError, match=f"{name}.*damaged"):
            trainer.load_checkpoint(str(tmp_path / name))
        for n in params.names():
            assert params.get(n).tobytes() == before[n].tobytes(), (name, n)
        after = trainer.optimizer.state_dict()
        assert after.keys() == state.keys(), name
        for k in state:
            np.testing.assert_array_equal(after[k], state[k])
