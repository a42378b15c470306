"""Parameters: Paddle v2 tar format (write, read, Paddle-written files), text-mode files."""

import io
import struct
import tarfile

import numpy as np
import pytest

import sculler as paddle
from sculler.v2.protobuf import decode_parameter_config, encode_parameter_config


def _params():
    paddle.layer.reset_names()
    x = paddle.layer.data(name="x", type=paddle.data_type.dense_vector(5))
    return paddle.parameters.create(paddle.layer.fc(input=x, size=3))


def test_tar_round_trip_exact(tmp_path):
    p = _params()
    buf = io.BytesIO()
    p.to_tar(buf)
    buf.seek(0)
    q = paddle.parameters.Parameters.from_tar(buf)
    assert q.names() == p.names()
    for n in p.names():
        assert q.get_shape(n) == p.get_shape(n)
        np.testing.assert_array_equal(q.get(n), p.get(n))
    path = tmp_path / "p.tar"
    p.to_tar(str(path))
    with tarfile.open(path) as tar:
        names = tar.getnames()
        raw = tar.extractfile("___fc_layer_0__.w0").read()
    assert "___fc_layer_0__.w0.protobuf" in names
    assert struct.unpack("IIQ", raw[:16]) == (0, 4, 15)
    assert [p.name for p in tmp_path.iterdir()] == ["p.tar"]  # no temporary file left


def test_text_mode_file_objects(tmp_path):
    p = _params()
    path = tmp_path / "t.tar"
    with open(path, "w") as f:
        p.to_tar(f)
    with open(path) as f:
        q = paddle.parameters.Parameters.from_tar(f)
    np.testing.assert_array_equal(q.get("___fc_layer_0__.w0"), p.get("___fc_layer_0__.w0"))


def test_reads_paddle_written_tar_with_packed_dims_and_init_from_tar():
    w = np.arange(6, dtype=np.float32).reshape(2, 3)
    # a ParameterConfig as Paddle's protobuf writes it, dims packed, extra unknown fields
    conf = (b"\x0a\x01W" + b"\x10\x06" + b"\x19" + struct.pack("<d", 1.0)
            + b"\x4a\x02\x02\x03" + b"\xa8\x01\x01")
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, data in (("W", struct.pack("IIQ", 0, 4, 6) + w.tobytes()),
                           ("W.protobuf", conf)):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    buf.seek(0)
    q = paddle.parameters.Parameters.from_tar(buf)
    np.testing.assert_array_equal(q.get("W"), w)

    paddle.layer.reset_names()
    x = paddle.layer.data(name="x", type=paddle.data_type.dense_vector(2))
    y = paddle.layer.fc(input=x, size=3, parameter_name="W")
    p = paddle.parameters.create(y)
    bias = p.get("___fc_layer_0__.wbias")
    buf.seek(0)
    p.init_from_tar(buf)
    np.testing.assert_array_equal(p.get("W"), w)
    np.testing.assert_array_equal(p.get("___fc_layer_0__.wbias"), bias)
    p.set("W", np.zeros((2, 3)))
    buf.seek(0)
    p.init_from_tar(buf, exclude_params=["W"])
    assert np.all(p.get("W") == 0)


def test_protobuf_round_trip_and_errors():
    raw = encode_parameter_config("abc", 12, [3, 4], {"learning_rate": 0.5})
    d = decode_parameter_config(raw)
    assert (d["name"], d["size"], d["dims"], d["learning_rate"]) == ("abc", 12, [3, 4], 0.5)
    p = _params()
    with pytest.raises(ValueError, match="shape"):
        p.set("___fc_layer_0__.w0", np.zeros((2, 2)))
    out = io.BytesIO()
    p.serialize("___fc_layer_0__.w0", out)
    bad = io.BytesIO(out.getvalue()[:-4])
    with pytest.raises(ValueError, match="15 values"):
        p.deserialize("___fc_layer_0__.w0", bad)


def test_create_of_a_large_table_peaks_near_the_table_itself():
    """parameters.create of a 2,000,000 x 64 table once peaked at 5x its size (float64
    draws, their scaled copy, the cast, and a gradient buffer nobody had asked for yet): the
    values are drawn in place in chunks, the gradient is allocated at first use."""
    import tracemalloc

    rows, width = 100_000, 64
    paddle.layer.reset_names()
    ids = paddle.layer.data(name="ids", type=paddle.data_type.integer_value(rows))
    emb = paddle.layer.embedding(input=ids, size=width,
                                 param_attr=paddle.attr.Param(name="table"))
    tracemalloc.start()
    try:
        params = paddle.parameters.create(emb)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    table = rows * width * 4
    assert peak <= 1.5 * table, peak / table
    values = params.get("table")
    assert values.shape == (rows, width) and 0.9 < values.std() * np.sqrt(rows) < 1.1
    assert params.parameter_set["table"]._grad is None  # no gradient until training


def test_chunked_initialisation_draws_the_stream_of_one_draw():
    from sculler.core.model_config import ParameterConfig
    from sculler.core.parameter import _INIT_CHUNK, Parameter

    shape = (3, _INIT_CHUNK // 2 + 5)  # spans several chunks, the last one partial
    for config, draw in (
        (ParameterConfig(name="n", dims=list(shape), initial_mean=0.5, initial_std=0.1),
         lambda rng: 0.5 + 0.1 * rng.standard_normal(shape)),
        (ParameterConfig(name="u", dims=list(shape), initial_min=-2.0, initial_max=3.0),
         lambda rng: rng.uniform(-2.0, 3.0, size=shape)),
    ):
        p = Parameter(config, dtype=np.float32)
        p.randomize(np.random.RandomState(5))
        np.testing.assert_array_equal(p.value, draw(np.random.RandomState(5)).astype(np.float32))
