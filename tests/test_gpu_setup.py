"""use_gpu without CuPy or without a CUDA device is one clear error (never a silent CPU run),
files store host arrays and read back through the backend's array constructor, and the
--use_gpu flags reach init and the gradient check. All on the CPU: "CuPy present, no device"
is a fake ``cupy`` module put into sys.modules by the test only."""

import os
import pathlib
import subprocess
import sys
import textwrap
import types

import numpy as np
import pytest

import sculler as paddle
from sculler import backend
from sculler.cli import main
from sculler.testing import INPUT_DATA, check_layer_grad, compare_devices

FC = {"size": 3, "inputs": [INPUT_DATA(4)]}


class CUDARuntimeError(RuntimeError):
    pass


def fake_cupy(device_count):
    """A ``cupy`` whose CUDA runtime reports ``device_count`` devices (or raises it)."""
    def get_device_count():
        if isinstance(device_count, Exception):
            raise device_count
        return device_count

    module = types.ModuleType("cupy")
    module.cuda = types.SimpleNamespace(runtime=types.SimpleNamespace(
        getDeviceCount=get_device_count))
    return module


@pytest.fixture
def no_cupy(monkeypatch):
    monkeypatch.setitem(sys.modules, "cupy", None)  # import cupy raises ImportError


@pytest.fixture
def cupy_without_device(monkeypatch):
    monkeypatch.setitem(sys.modules, "cupy", fake_cupy(
        CUDARuntimeError("cudaErrorNoDevice: no CUDA-capable device is detected")))


@pytest.fixture(autouse=True)
def cpu_afterwards():
    yield
    backend._state["use_gpu"] = False


def test_init_use_gpu_without_cupy_names_the_extras(no_cupy):
    with pytest.raises(RuntimeError, match=r"init\(use_gpu=True\) needs a CUDA GPU through "
                       r"CuPy: CuPy is not installed.*sculler\[gpu-cuda12\].*"
                       r"sculler\[gpu-cuda13\]"):
        paddle.init(use_gpu=True)
    assert backend.xp() is np and not backend.gpu_enabled()


@pytest.mark.parametrize("count, expected", [
    (CUDARuntimeError("cudaErrorNoDevice"), r"no usable device \(CUDARuntimeError: "
                                            r"cudaErrorNoDevice\)"),
    (0, "CUDA reports 0 devices"),
])
def test_init_use_gpu_with_cupy_but_no_device_says_so(monkeypatch, count, expected):
    monkeypatch.setitem(sys.modules, "cupy", fake_cupy(count))
    with pytest.raises(RuntimeError, match=expected):
        paddle.init(use_gpu=True)
    assert backend.xp() is np and not backend.gpu_enabled()


def test_backend_use_gpu_refuses_too(cupy_without_device):
    with pytest.raises(RuntimeError, match=r"use_gpu=True needs a CUDA GPU"):
        backend.use_gpu(True)
    with pytest.raises(RuntimeError, match="no usable device"), backend.device(True):
        pass
    assert not backend.gpu_enabled()


def test_gradient_checks_on_the_gpu_refuse_without_one(cupy_without_device):
    with pytest.raises(RuntimeError, match=r"check_layer_grad\('fc', use_gpu=True\) needs a "
                       "CUDA GPU through CuPy: CuPy is installed but CUDA reports no usable"):
        check_layer_grad(FC, "fc", use_gpu=True)
    with pytest.raises(RuntimeError, match=r"compare_devices\('fc'\) needs a CUDA GPU"):
        compare_devices(FC, "fc")
    assert check_layer_grad(FC, "fc").errors  # the CPU check is unchanged


def test_compare_devices_takes_float32_or_float64_only():
    with pytest.raises(TypeError, match=r"compare_devices\('fc'\): dtype must be float32 or "
                                        "float64, got float16"):
        compare_devices(FC, "fc", dtype=np.float16)


def test_cli_use_gpu_without_a_device_is_one_line(cupy_without_device, tmp_path, capsys):
    script = tmp_path / "job.py"
    script.write_text("def main():\n    raise SystemExit('must not run')\n")
    assert main(["train", "--use_gpu", "--config", str(script)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("sculler: error: sculler train --use_gpu: CuPy is installed but CUDA "
                          "reports no usable device")
    assert main(["check-grad", "--use_gpu", "--type", "fc", "--inputs", "4"]) == 2
    assert "sculler check-grad --use_gpu: CuPy is installed" in capsys.readouterr().err


def test_cli_use_gpu_reaches_a_script_main_or_is_refused(monkeypatch, tmp_path, capsys):
    monkeypatch.setitem(sys.modules, "cupy", fake_cupy(1))
    takes = tmp_path / "takes.py"
    takes.write_text(textwrap.dedent("""
        def main(use_gpu=False):
            return f"use_gpu={use_gpu}"
    """))
    assert main(["train", "--use_gpu", "--config", str(takes)]) == 0
    assert "returned use_gpu=True" in capsys.readouterr().out
    refuses = tmp_path / "refuses.py"
    refuses.write_text("def main(num_passes=1):\n    return 0\n")
    assert main(["train", "--use_gpu", "--config", str(refuses)]) == 2
    assert "does not accept --use_gpu" in capsys.readouterr().err


class RecordingArrayModule(types.ModuleType):
    """numpy, recording every array handed to ``asarray`` (stands in for the device's module)."""

    def __init__(self):
        super().__init__("recording_numpy")
        self.seen = []

    def asarray(self, a, dtype=None):
        self.seen.append(np.array(a))
        return np.asarray(a, dtype=dtype)

    def __getattr__(self, name):
        return getattr(np, name)

    def saw(self, value) -> bool:
        value = np.asarray(value)
        return any(s.shape == value.shape and np.array_equal(s, value) for s in self.seen)


@pytest.fixture
def device_module(monkeypatch):
    module = RecordingArrayModule()
    monkeypatch.setattr(backend, "xp", lambda: module)
    return module


def _tiny_model(use_gpu: bool = False):
    paddle.layer.reset_names()
    paddle.init(seed=3, use_gpu=use_gpu)
    x = paddle.layer.data(name="x", type=paddle.data_type.dense_vector(4))
    y = paddle.layer.data(name="y", type=paddle.data_type.integer_value(2))
    pred = paddle.layer.fc(input=x, size=2, act=paddle.activation.Softmax())
    return paddle.layer.classification_cost(input=pred, label=y)


def _trained(cost):
    params = paddle.parameters.create(cost)
    trainer = paddle.trainer.SGD(cost=cost, parameters=params,
                                 update_equation=paddle.optimizer.Momentum(
                                     learning_rate=0.1, momentum=0.9))
    rows = [([0.1, -0.2, 0.3, 0.5], 1), ([0.4, 0.1, -0.3, 0.2], 0)] * 4
    trainer.train(paddle.batch(lambda: iter(rows), 4), num_passes=1)
    return params, trainer


def test_parameter_tar_reads_onto_the_backend_device(tmp_path, device_module):
    params, _ = _trained(_tiny_model())
    params.to_tar(str(tmp_path / "p.tar"))
    device_module.seen.clear()
    loaded = paddle.parameters.Parameters.from_tar(str(tmp_path / "p.tar"))
    for name in params.names():
        assert device_module.saw(params.get(name)), name
        np.testing.assert_array_equal(loaded.get(name), params.get(name))


def test_checkpoint_reads_parameters_and_optimizer_state_onto_the_device(tmp_path,
                                                                         device_module):
    cost = _tiny_model()
    params, trainer = _trained(cost)
    trainer.save_checkpoint(str(tmp_path / "ck"))
    state = {k: np.asarray(v) for k, v in trainer.optimizer.state_dict().items()
             if np.asarray(v).ndim > 0}
    assert state, "momentum keeps a velocity per parameter"
    _, fresh = _trained(cost)
    device_module.seen.clear()
    fresh.load_checkpoint(str(tmp_path / "ck"))
    for name in params.names():
        assert device_module.saw(params.get(name)), name
    for key, value in state.items():
        assert device_module.saw(value), key


def test_sculler_load_puts_tensors_on_the_device(tmp_path, device_module):
    values = np.arange(6, dtype=np.float32).reshape(2, 3)
    paddle.save({"w": paddle.to_tensor(values)}, str(tmp_path / "s.pdparams"))
    device_module.seen.clear()
    loaded = paddle.load(str(tmp_path / "s.pdparams"))
    assert device_module.saw(values)
    np.testing.assert_array_equal(loaded["w"].numpy(), values)


class FakeDeviceArray:
    """Like a CuPy array to :func:`backend.to_numpy`; NumPy cannot convert it implicitly."""

    __module__ = "cupy.fake"

    def __init__(self, host):
        self._host = host

    def get(self):
        return self._host.copy()

    def __array__(self, *args, **kwargs):
        raise TypeError("Implicit conversion to a NumPy array is not allowed")


def test_distributed_checkpoints_store_host_arrays(tmp_path):
    from sculler.distributed.checkpoint import load_arrays, save_arrays

    host = np.arange(4, dtype=np.float32)
    save_arrays(str(tmp_path / "c"), {"w": FakeDeviceArray(host)}, {"step": 1})
    arrays, meta = load_arrays(str(tmp_path / "c"))
    np.testing.assert_array_equal(arrays["w"], host)
    assert meta == {"step": 1}


def test_bench_gpu_without_cuda_says_so_in_one_line_and_exits_0():
    root = pathlib.Path(__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": str(root)}
    code = ("import sys, runpy; sys.modules['cupy'] = None; sys.argv = ['bench_gpu.py']; "
            f"sys.path.insert(0, {str(root / 'bench')!r}); "
            f"runpy.run_path({str(root / 'bench' / 'bench_gpu.py')!r}, run_name='__main__')")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "bench_gpu: skipped, CUDA/CuPy not available (Sculler: CuPy is not installed; install "
        "CuPy for your CUDA version: `pip install sculler[gpu-cuda12]` (CUDA 12) or `pip "
        "install sculler[gpu-cuda13]` (CUDA 13))"]


def test_bench_gpu_device_time_sums_kernels_and_merges_overlapping_busy_spans():
    torch = pytest.importorskip("torch")
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "bench"))
    try:
        import bench_gpu
    finally:
        sys.path.pop(0)
    cuda, cpu = torch.autograd.DeviceType.CUDA, torch.autograd.DeviceType.CPU

    def event(name, device, start, end):
        return types.SimpleNamespace(name=name, device_type=device,
                                     time_range=types.SimpleNamespace(start=start, end=end))

    events = [event("gemm", cuda, 0, 1000), event("gemm", cuda, 500, 1500),
              event("Memcpy HtoD (Pinned -> Device)", cuda, 3000, 3100),
              event("relu", cuda, 4000, 4200), event("cudaLaunchKernel", cpu, 0, 9000),
              event("cudaMemcpyAsync", cpu, 100, 200), event("cudaMemcpy", cpu, 200, 1200),
              event("cudaEventSynchronize", cpu, 1300, 1500),
              event("cudaEventSynchronize", cpu, 2000, 2100)]
    report = bench_gpu.device_time(events, 0.010, lines=2)
    assert report == [
        "3 kernels + 1 copies/sets, 2.3 ms of GPU time; GPU busy 1.8 ms of 10.0 ms wall (18 %)",
        "host waited in 2 cudaEventSynchronize (0.3 ms), 1 cudaMemcpy (1.0 ms)",
        "     2.00 ms       2x  gemm",
        "     0.20 ms       1x  relu"]
    assert bench_gpu.device_time(events[-1:], 0.010, lines=2)[0].startswith("no CUDA kernel")
    assert bench_gpu.device_time(events[:1], 0.010, lines=0)[1] == (
        "host waited in no synchronizing CUDA call")


@pytest.mark.gpu
def test_cli_check_grad_use_gpu_checks_a_user_layer_file_on_the_gpu(tmp_path, capsys):
    """``sculler check-grad --use_gpu --module my_layer.py`` checks the file's layer on the
    device, and reports a wrong backward there."""
    layer = tmp_path / "scaled_tanh.py"
    layer.write_text(textwrap.dedent('''
        from sculler.backend import get_array_module
        from sculler.core.layer import Layer, register_layer

        @register_layer("cli_scaled_tanh")
        class ScaledTanh(Layer):
            """y = tanh(2 x): dy/dx = 2 (1 - y^2)."""
            error = 1.0

            def forward(self, pass_type):
                super().forward(pass_type)
                x = self.get_input_value(0)
                out = self.reserve_output(x.shape[0], self.size)
                get_array_module(x).tanh(2 * x, out=out)
                self.forward_activation()

            def backward(self, callback=None):
                self.backward_activation()
                y = self.output.value
                self.get_input_grad(0)[...] += self.error * 2 * (1 - y * y) * self.output.grad

        @register_layer("cli_scaled_tanh_wrong")
        class WrongScaledTanh(ScaledTanh):
            error = 1.02
    '''))
    args = ["check-grad", "--use_gpu", "--module", str(layer), "--inputs", "4", "--size", "4"]
    try:
        assert main([*args, "--type", "cli_scaled_tanh"]) == 0
        assert "cli_scaled_tanh: gradient check passed" in capsys.readouterr().out
        assert main([*args, "--type", "cli_scaled_tanh_wrong"]) == 1
        assert capsys.readouterr().out.startswith("FAILED: ")
    finally:
        paddle.init(use_gpu=False)


def _momentum_run(use_gpu: bool, halves: list, save: str | None = None,
                  resume: str | None = None, params_only: str | None = None) -> dict:
    """Train the tiny model with momentum on one device, a pass over each of ``halves`` (two
    lists of batches), and return the parameters (host copies). ``save``: after the first pass
    write a checkpoint there and the parameters to ``save + '.tar'``. ``resume``: start from
    that checkpoint (so only the second pass runs); ``params_only``: from that parameter tar
    alone, with fresh optimizer state."""
    cost = _tiny_model(use_gpu)
    params = paddle.parameters.create(cost)
    trainer = paddle.trainer.SGD(cost=cost, parameters=params,
                                 update_equation=paddle.optimizer.Momentum(
                                     learning_rate=0.5, momentum=0.9))
    if resume is not None:
        trainer.load_checkpoint(resume)
    if params_only is not None:
        with open(params_only, "rb") as f:
            params.init_from_tar(f)
    passes = iter(halves if resume is None and params_only is None else halves[1:])

    def end_of_pass(event):
        if save is not None and isinstance(event, paddle.event.EndPass) and event.pass_id == 0:
            trainer.save_checkpoint(save)
            with open(save + ".tar", "wb") as f:
                params.to_tar(f)

    trainer.train(lambda: iter(next(passes)), num_passes=2 if params_only is None else 1,
                  event_handler=end_of_pass)
    return {name: params.get(name) for name in params.names()}


@pytest.mark.gpu
@pytest.mark.parametrize("written_on, resumed_on", [("gpu", "cpu"), ("cpu", "gpu")])
def test_a_checkpoint_resumes_on_the_other_device(tmp_path, written_on, resumed_on):
    """Training that stops on one device and resumes from its checkpoint on the other ends
    where training on the first device throughout ends (to float32 rounding): the parameters
    and the momentum carried over. Resuming from the parameters alone ends elsewhere."""
    rng = np.random.RandomState(0)
    rows = [(rng.randn(4).tolist(), int(rng.randint(2))) for _ in range(32)]
    batches = [rows[i:i + 4] for i in range(0, 32, 4)]
    halves = [batches[:4], batches[4:]]
    ck = str(tmp_path / "ck")
    try:
        throughout = _momentum_run(written_on == "gpu", halves, save=ck)
        resumed = _momentum_run(resumed_on == "gpu", halves, resume=ck)
        params_only = _momentum_run(resumed_on == "gpu", halves, params_only=ck + ".tar")
    finally:
        paddle.init(use_gpu=False)
    for name, want in throughout.items():
        np.testing.assert_allclose(resumed[name], want, rtol=1e-4, atol=1e-6, err_msg=name)
    assert max(np.abs(params_only[n] - throughout[n]).max() for n in throughout) > 1e-2


@pytest.mark.gpu
def test_sculler_save_stores_a_raw_device_array_as_its_host_copy(tmp_path):
    """A device array in a saved object (an optimizer state kept as raw arrays, say) is
    written as its host copy and loads back with the same values."""
    values = np.arange(6, dtype=np.float32).reshape(2, 3)
    paddle.save({"state": backend.to_gpu(values), "step": 3}, str(tmp_path / "s.pdparams"))
    back = paddle.load(str(tmp_path / "s.pdparams"), return_numpy=True)
    assert back["step"] == 3
    np.testing.assert_array_equal(back["state"], values)


@pytest.mark.gpu
def test_infer_reads_a_device_array_of_samples_as_its_rows():
    """``infer(input=x)`` with ``x`` a CuPy array: its rows are the samples, as for a NumPy
    array (read on the host, where the feeder converts every batch)."""
    paddle.init(use_gpu=True, seed=2)
    try:
        paddle.layer.reset_names()
        x = paddle.layer.data(name="x", type=paddle.data_type.dense_vector(3))
        out = paddle.layer.fc(input=x, size=2, act=paddle.activation.Softmax())
        params = paddle.parameters.create(out)
        rows = np.random.RandomState(0).randn(5, 3).astype(np.float32)
        want = paddle.infer(output_layer=out, parameters=params, input=rows)
        got = paddle.infer(output_layer=out, parameters=params, input=backend.to_gpu(rows))
    finally:
        paddle.init(use_gpu=False)
    assert got.shape == (5, 2)
    np.testing.assert_array_equal(got, want)


@pytest.mark.gpu
def test_array_batches_over_device_arrays_cut_the_same_batches():
    """``array_batches`` over CuPy arrays reads them on the host once and cuts the batches a
    NumPy array gives."""
    from sculler.minibatch import array_batches

    x = np.arange(10.0, dtype=np.float32).reshape(5, 2)
    y = np.arange(5)
    want = [[np.asarray(c) for c in b.columns] for b in array_batches(x, y, batch_size=2)()]
    got = [[np.asarray(c) for c in b.columns]
           for b in array_batches(backend.to_gpu(x), backend.to_gpu(y), batch_size=2)()]
    assert [[c.tolist() for c in b] for b in got] == [[c.tolist() for c in b] for b in want]
