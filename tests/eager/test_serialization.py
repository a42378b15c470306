"""save/load: nested state dicts round-trip through safetensors + JSON, atomically."""

import json
import os

import numpy as np
import pytest
from safetensors import safe_open

import sculler as paddle
from sculler import nn


def test_state_dict_round_trip_returns_tensors(tmp_path):
    model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    path = tmp_path / "model.pdparams"
    paddle.save(model.state_dict(), str(path))
    loaded = paddle.load(str(path))
    assert list(loaded) == list(model.state_dict())
    for key, value in model.state_dict().items():
        assert isinstance(loaded[key], paddle.Tensor)
        assert loaded[key].name == value.name
        np.testing.assert_array_equal(loaded[key].numpy(), value.numpy())
    other = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    other.set_state_dict(loaded)
    x = paddle.randn([2, 3])
    np.testing.assert_array_equal(other(x).numpy(), model(x).numpy())
    as_numpy = paddle.load(str(path), return_numpy=True)
    assert isinstance(as_numpy["0.weight"], np.ndarray)


def test_nested_structures_and_scalars(tmp_path):
    obj = {
        "model": {"w": paddle.to_tensor([[1.0, 2.0]]), "steps": paddle.to_tensor([3])},
        "opt": {"lr": 0.1, "beta": [0.9, 0.999], "moments": (np.arange(3.0), None)},
        "epoch": 4, "tag": "run-1", 7: True,
    }
    path = tmp_path / "ckpt.pd"
    paddle.save(obj, path)
    got = paddle.load(path)
    assert got["opt"]["lr"] == 0.1 and got["opt"]["beta"] == [0.9, 0.999]
    assert isinstance(got["opt"]["moments"], tuple) and got["opt"]["moments"][1] is None
    np.testing.assert_array_equal(got["opt"]["moments"][0], np.arange(3.0))
    assert got["epoch"] == 4 and got["tag"] == "run-1" and got[7] is True
    assert got["model"]["steps"].dtype == np.int64
    np.testing.assert_array_equal(got["model"]["w"].numpy(), [[1.0, 2.0]])


def test_file_is_plain_safetensors_with_json_structure(tmp_path):
    path = str(tmp_path / "a.pdparams")
    paddle.save({"w": paddle.ones([2])}, path)
    with safe_open(path, framework="numpy") as f:
        assert list(f.keys()) == ["t0"]
        doc = json.loads(f.metadata()["sculler"])
    assert doc["structure"]["dict"][0][0] == "w"
    assert os.listdir(tmp_path) == ["a.pdparams"]  # no temporary file left


def test_unsupported_objects_and_bad_files_raise(tmp_path):
    with pytest.raises(TypeError, match="object at obj\\['x'\\] cannot be saved"):
        paddle.save({"x": object()}, str(tmp_path / "bad"))
    assert not (tmp_path / "bad").exists()
    junk = tmp_path / "junk.bin"
    junk.write_bytes(b"not a safetensors file at all")
    with pytest.raises(ValueError, match="junk.bin"):
        paddle.load(str(junk))
    with pytest.raises(FileNotFoundError, match="no file"):
        paddle.load(str(tmp_path / "missing"))


def test_failed_write_keeps_the_previous_file(tmp_path):
    path = str(tmp_path / "m.pdparams")
    paddle.save({"w": paddle.ones([2])}, path)
    with pytest.raises(TypeError):
        paddle.save({"w": paddle.zeros([2]), "bad": {1, 2}}, path)
    np.testing.assert_array_equal(paddle.load(path)["w"].numpy(), [1.0, 1.0])


def test_optimizer_state_round_trips_exactly(tmp_path):
    """sculler.save/load keep 0-d counters 0-d, so an optimizer resumes from a saved state."""
    import numpy as np

    import sculler as paddle

    opt = paddle.optimizer.Adam(learning_rate=0.01)
    w = np.ones((3, 2), np.float32)
    opt.update("w", w, np.full((3, 2), 0.5, np.float32))
    opt.finish_batch(4)
    state = opt.state_dict()
    paddle.save(state, tmp_path / "opt.pdopt")
    back = paddle.load(tmp_path / "opt.pdopt", return_numpy=True)
    assert set(back) == set(state)
    for key, value in state.items():
        assert back[key].shape == value.shape and back[key].dtype == value.dtype
        assert np.array_equal(back[key], value)
    resumed, fresh = w.copy(), w.copy()
    other = paddle.optimizer.Adam(learning_rate=0.01)
    other.load_state_dict(back)
    g = np.full((3, 2), -0.25, np.float32)
    other.update("w", resumed, g)
    opt.update("w", fresh, g)
    assert np.array_equal(resumed, fresh)
