"""Every writer survives SIGKILL at a random moment: the file under the final name always
loads and holds the old or the new content, and the next successful save leaves no
temporary file behind (sculler.fileio.atomic_write)."""

import os
import random
import signal
import time

import numpy as np
import pytest

import sculler as paddle
from sculler.parameters import Parameters
from sculler.topology import Topology

KILLS = 20


def _network():
    paddle.layer.reset_names()
    x = paddle.layer.data(name="x", type=paddle.data_type.dense_vector(200))
    y = paddle.layer.data(name="y", type=paddle.data_type.integer_value(3))
    out = paddle.layer.fc(input=x, size=300, act=paddle.activation.Softmax())
    cost = paddle.layer.classification_cost(input=out, label=y)
    return out, cost, paddle.parameters.create(cost)


def _fill(params, value: float) -> None:
    for n in params.names():
        params.set(n, np.full(params.get_shape(n), value, np.float32))


def _tar_writer(tmp_path):
    _, _, params = _network()

    def save(version: int, path: str) -> None:
        _fill(params, float(version))
        params.to_tar(path)

    def load(path: str) -> float:
        values = {float(Parameters.from_tar(path).get(n).flat[0]) for n in params.names()}
        assert len(values) == 1, "a mix of two saves"
        return values.pop()

    return save, load


def _inference_writer(tmp_path):
    out, _, params = _network()
    topo = Topology(out)

    def save(version: int, path: str) -> None:
        _fill(params, float(version))
        topo.serialize_for_inference(path, params)

    def load(path: str) -> float:
        inf = paddle.inference.Inference(fileobj=path)
        _, ptar = Topology.load_for_inference(path)
        assert inf.topology.proto().to_dict() == topo.proto().to_dict()
        import io

        values = Parameters.from_tar(io.BytesIO(ptar))
        return float(values.get(values.names()[0]).flat[0])

    return save, load


def _checkpoint_writer(tmp_path):
    _, cost, params = _network()
    trainer = paddle.trainer.SGD(cost, params, paddle.optimizer.Momentum(
        learning_rate=0.1, momentum=0.9))

    def save(version: int, path: str) -> None:
        _fill(params, float(version))
        trainer._next_pass = version
        trainer.save_checkpoint(path)

    def load(path: str) -> float:
        trainer.load_checkpoint(path)
        w = {float(params.get(n).flat[0]) for n in params.names()}
        assert w == {float(trainer.next_pass)}, "parameters and counters from two saves"
        return w.pop()

    return save, load


def _save_writer(tmp_path):
    def save(version: int, path: str) -> None:
        paddle.save({"w": paddle.full([300, 300], float(version)), "v": version}, path)

    def load(path: str) -> float:
        state = paddle.load(path)
        assert np.all(state["w"].numpy() == state["v"])
        return float(state["v"])

    return save, load


def _plot_writer(tmp_path):
    pytest.importorskip("matplotlib", reason="plotting needs the optional extra sculler[plot]")
    from sculler.plot import Ploter

    plots = {}
    for version in (1, 2):
        p = Ploter("cost")
        for step in range(50):
            p.append("cost", step, version * step)
        plots[version] = p
    pngs = {}
    for version, p in plots.items():
        path = tmp_path / f"ref{version}.png"
        p.plot(path)
        pngs[path.read_bytes()] = float(version)
        os.unlink(path)

    def save(version: int, path: str) -> None:
        plots[version].plot(path)

    def load(path: str) -> float:
        with open(path, "rb") as f:
            return pngs[f.read()]

    return save, load


def _onnx_writer(tmp_path):
    onnx = pytest.importorskip("onnx", reason="ONNX export needs the optional extra")
    from onnx import numpy_helper

    from sculler.onnx import export

    out, _, params = _network()

    def save(version: int, path: str) -> None:
        _fill(params, float(version))
        export(out, params, path)

    def load(path: str) -> float:
        model = onnx.load(path)
        weights = [numpy_helper.to_array(t) for t in model.graph.initializer]
        values = {float(w.flat[0]) for w in weights if w.dtype.kind == "f"}
        assert len(values) == 1, "a mix of two saves"
        return values.pop()

    return save, load


def _infer_output_writer(tmp_path):
    from sculler.cli import write_array

    def save(version: int, path: str) -> None:
        write_array(path, np.full((300, 300), float(version), np.float32))

    def load(path: str) -> float:
        data = np.load(path)
        assert data.shape == (300, 300) and len(set(data.flat)) == 1
        return float(data.flat[0])

    return save, load


WRITERS = {"Parameters.to_tar": _tar_writer,
           "Topology.serialize_for_inference": _inference_writer,
           "SGD.save_checkpoint": _checkpoint_writer, "sculler.save": _save_writer,
           "Ploter.plot": _plot_writer, "sculler.onnx.export": _onnx_writer,
           "cli write_array": _infer_output_writer}


TARGET = {"cli write_array": "target.npy"}  # the writer picks the format by extension


@pytest.mark.slow
@pytest.mark.parametrize("writer", list(WRITERS))
def test_random_sigkill_never_leaves_a_partial_file(writer, tmp_path, monkeypatch):
    monkeypatch.delenv("DISABLE_PLOT", raising=False)
    save, load = WRITERS[writer](tmp_path)
    path = str(tmp_path / TARGET.get(writer, "target"))
    start = time.perf_counter()
    save(1, path)
    duration = time.perf_counter() - start
    assert load(path) == 1.0
    rng = random.Random(writer)
    seen = set()
    for _ in range(KILLS):
        pid = os.fork()
        if pid == 0:  # child: save versions 2 and 1 alternately until killed
            try:
                version = 2
                while True:
                    save(version, path)
                    version = 3 - version
            finally:
                os._exit(1)
        time.sleep(rng.uniform(0.0, 3 * duration))
        os.kill(pid, signal.SIGKILL)
        _, status = os.waitpid(pid, 0)
        assert os.WIFSIGNALED(status), "the writer child died by itself"
        seen.add(load(path))
    assert seen <= {1.0, 2.0}
    save(2, path)
    assert load(path) == 2.0
    assert os.listdir(tmp_path) == [os.path.basename(path)], "a temporary file survived"


def test_failed_save_removes_its_temporary_file(tmp_path):
    from sculler.fileio import atomic_write

    path = tmp_path / "f.bin"
    atomic_write(path, lambda s: s.write(b"old"))

    def broken(stream):
        stream.write(b"half")
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError, match="disk full"):
        atomic_write(path, broken)
    assert path.read_bytes() == b"old"
    assert os.listdir(tmp_path) == ["f.bin"]
    with pytest.raises(IsADirectoryError, match="is a directory"):
        atomic_write(tmp_path, lambda s: s.write(b"x"))
    with pytest.raises(FileNotFoundError, match="does not exist"):
        atomic_write(tmp_path / "no" / "f", lambda s: s.write(b"x"))
    assert oct(os.stat(path).st_mode & 0o777) != oct(0o600), "temp file mode leaked"
