"""Eager mode on a device: ``set_device``/``get_device``, places, ``to_tensor(place=...)``,
``Tensor.cuda()``/``.cpu()``, ``Layer.to(device)`` and optimizers after a move.

The first part runs anywhere: the CPU side, and the one clear error each GPU request gives
where CuPy is missing (forced by hiding ``cupy``, so these hold on a GPU machine too). The
tests marked ``gpu`` need CUDA through CuPy (bench/gpu_check.sh runs them); elsewhere they
are skipped with the reason "CUDA/CuPy not available" (tests/conftest.py).
"""

import sys

import numpy as np
import pytest

import sculler as paddle
from sculler import backend
from sculler.autograd import PyLayer
from sculler.nn import functional as F

NO_CUPY = r"needs a CUDA GPU through CuPy: CuPy is not installed"


@pytest.fixture(autouse=True)
def back_on_the_cpu():
    yield
    backend.use_gpu(False)


@pytest.fixture
def no_cupy(monkeypatch):
    monkeypatch.setitem(sys.modules, "cupy", None)  # import cupy raises ImportError


# --- set_device / get_device ------------------------------------------------------------
def test_set_device_cpu_returns_the_cpu_place_and_is_the_backend_switch():
    place = paddle.set_device("cpu")
    assert place == paddle.CPUPlace() and repr(place) == "Place(cpu)"
    assert paddle.get_device() == "cpu" and not backend.gpu_enabled()
    assert paddle.set_device("CPU") == paddle.CPUPlace()
    assert paddle.device.set_device("cpu") == place and paddle.device.get_device() == "cpu"
    assert paddle.zeros([2]).place == paddle.CPUPlace()


@pytest.mark.parametrize("device", ["tpu", "cuda", "gpu:", "gpu:x", "gpu:-1", "gpu0", ""])
def test_set_device_names_the_accepted_forms(device):
    with pytest.raises(ValueError, match=r"set_device: device must be 'cpu', 'gpu' or "
                                         rf"'gpu:N' .*got {device!r}"):
        paddle.set_device(device)
    assert paddle.get_device() == "cpu"


@pytest.mark.parametrize("device", [0, None, paddle.CPUPlace()], ids=["int", "None", "place"])
def test_set_device_takes_a_string(device):
    with pytest.raises(TypeError, match="set_device: device must be a string"):
        paddle.set_device(device)


@pytest.mark.parametrize("device", ["gpu", "gpu:0", "GPU:1"])
def test_set_device_gpu_without_cupy_is_the_backend_error_and_changes_nothing(no_cupy,
                                                                               device):
    with pytest.raises(RuntimeError, match=r"set_device needs a CUDA GPU through CuPy: CuPy is "
                                           r"not installed.*sculler\[gpu-cuda12\]"):
        paddle.set_device(device)
    assert paddle.get_device() == "cpu" and not backend.gpu_enabled()
    assert paddle.to_tensor([1.0]).place == paddle.CPUPlace()


def test_is_compiled_with_cuda_follows_the_backend(no_cupy):
    assert paddle.is_compiled_with_cuda() is False


def test_is_compiled_with_cuda_is_true_exactly_where_a_gpu_is_usable():
    assert paddle.is_compiled_with_cuda() is (backend.gpu_unavailable_reason() is None)


# --- places -------------------------------------------------------------------------------
def test_places_print_and_compare_as_paddle():
    assert repr(paddle.CPUPlace()) == str(paddle.CPUPlace()) == "Place(cpu)"
    assert repr(paddle.CUDAPlace(0)) == "Place(gpu:0)"
    assert repr(paddle.CUDAPlace(3)) == "Place(gpu:3)"
    assert repr(paddle.CUDAPinnedPlace()) == "Place(gpu_pinned)"
    assert paddle.CPUPlace() == paddle.CPUPlace()
    assert paddle.CUDAPlace(1) == paddle.CUDAPlace(1)
    assert paddle.CUDAPlace(0) != paddle.CUDAPlace(1)
    assert paddle.CPUPlace() != paddle.CUDAPlace(0)
    assert paddle.CUDAPinnedPlace() != paddle.CPUPlace()
    assert paddle.CPUPlace() != "Place(cpu)"
    assert len({paddle.CPUPlace(), paddle.CPUPlace(), paddle.CUDAPlace(0)}) == 2


def test_place_queries():
    cpu, gpu, pinned = paddle.CPUPlace(), paddle.CUDAPlace(2), paddle.CUDAPinnedPlace()
    assert cpu.is_cpu_place() and not cpu.is_gpu_place() and cpu.gpu_device_id() == -1
    assert gpu.is_gpu_place() and not gpu.is_cpu_place() and gpu.gpu_device_id() == 2
    assert pinned.is_cuda_pinned_place() and not pinned.is_gpu_place()


@pytest.mark.parametrize("bad, error", [("0", TypeError), (1.0, TypeError), (True, TypeError),
                                        (-1, ValueError)])
def test_cuda_place_takes_a_device_index(bad, error):
    with pytest.raises(error, match="CUDAPlace: id must be"):
        paddle.CUDAPlace(bad)


def test_a_host_tensor_is_on_the_cpu_place():
    x = paddle.to_tensor([[1.0, 2.0]])
    assert x.place == paddle.CPUPlace() and x.place.is_cpu_place()
    assert "place=Place(cpu)" in repr(x)


# --- to_tensor(place=...) ------------------------------------------------------------------
@pytest.mark.parametrize("place", [paddle.CPUPlace(), "cpu", "CPU"], ids=repr)
def test_to_tensor_on_the_cpu_place_copies_to_the_host(place):
    data = np.arange(6.0).reshape(2, 3)
    x = paddle.to_tensor(data, place=place, stop_gradient=False)
    assert x.place == paddle.CPUPlace() and type(x._array) is np.ndarray
    assert x.dtype == np.float64 and not x.stop_gradient
    data[0, 0] = 99.0
    np.testing.assert_array_equal(x.numpy(), np.arange(6.0).reshape(2, 3))


@pytest.mark.parametrize("place", [paddle.CUDAPlace(0), "gpu", "gpu:0"], ids=repr)
def test_to_tensor_on_a_cuda_place_without_cupy_is_the_backend_error(no_cupy, place):
    with pytest.raises(RuntimeError, match=r"to_tensor\(place=...\) " + NO_CUPY):
        paddle.to_tensor([1.0, 2.0], place=place)


@pytest.mark.parametrize("place, error, message", [
    (3, TypeError, r"to_tensor\(place=...\): expected a place .* got int 3"),
    (np.float32, TypeError, r"to_tensor\(place=...\): expected a place"),
    ("tpu", ValueError, r"to_tensor\(place=...\): device must be 'cpu', 'gpu' or 'gpu:N'"),
    (paddle.CUDAPinnedPlace(), ValueError, r"CUDAPinnedPlace\(\) is not a place tensors can"),
], ids=["int", "dtype", "unknown string", "pinned"])
def test_to_tensor_refuses_an_unknown_place(place, error, message):
    with pytest.raises(error, match=message):
        paddle.to_tensor([1.0], place=place)


# --- Tensor.cpu() / .cuda() ----------------------------------------------------------------
def test_cpu_of_a_host_tensor_is_the_tensor_itself():
    x = paddle.to_tensor([1.0, -2.0], stop_gradient=False)
    assert x.cpu() is x
    (x.cpu() * x).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [2.0, -4.0])


def test_numpy_of_a_host_tensor_is_a_numpy_array():
    x = paddle.to_tensor([1.0, 2.0])
    assert type(x.numpy()) is np.ndarray


def test_cuda_without_cupy_is_the_backend_error(no_cupy):
    x = paddle.to_tensor([1.0])
    with pytest.raises(RuntimeError, match=r"Tensor.cuda\(\) " + NO_CUPY):
        x.cuda()
    with pytest.raises(RuntimeError, match=r"Tensor.cuda\(\) " + NO_CUPY):
        x.cuda(0)


@pytest.mark.parametrize("kwargs, message", [
    ({"device_id": "0"}, "CUDAPlace: id must be an int"),
    ({"blocking": "yes"}, r"Tensor.cuda\(\): blocking must be a bool"),
])
def test_cuda_checks_its_arguments(kwargs, message):
    with pytest.raises(TypeError, match=message):
        paddle.to_tensor([1.0]).cuda(**kwargs)


# --- Layer.to ------------------------------------------------------------------------------
def _model():
    paddle.seed(3)
    return paddle.nn.Sequential(paddle.nn.Linear(4, 5), paddle.nn.ReLU(),
                                paddle.nn.Linear(5, 2))


def test_layer_to_cpu_keeps_the_arrays_and_casts_with_dtype():
    model = _model()
    model.register_buffer("steps", paddle.zeros([3]))
    before = [p._array for p in model.parameters()]
    assert model.to("cpu") is model and model.to(paddle.CPUPlace(), blocking=True) is model
    assert all(p._array is a for p, a in zip(model.parameters(), before))
    (model(paddle.ones([2, 4])).sum()).backward()
    model.to(device="cpu", dtype="float64")
    for p, a in zip(model.parameters(), before):
        assert p.dtype == np.float64 and p.grad.dtype == np.float64
        np.testing.assert_array_equal(p.numpy(), a)
    assert model.steps.dtype == np.float64


def test_layer_to_gpu_without_cupy_moves_nothing(no_cupy):
    model = _model()
    before = [p._array for p in model.parameters()]
    with pytest.raises(RuntimeError, match=r"Sequential.to " + NO_CUPY):
        model.to("gpu", dtype="float64")
    assert all(p._array is a and p.dtype == np.float32
               for p, a in zip(model.parameters(), before))


@pytest.mark.parametrize("kwargs, error, message", [
    ({"device": 3}, TypeError, r"Sequential.to: expected a place .* got int 3"),
    ({"device": "tpu"}, ValueError, "Sequential.to: device must be 'cpu', 'gpu' or 'gpu:N'"),
    ({"blocking": "no"}, TypeError, "Sequential.to: blocking must be a bool or None"),
    ({"dtype": "int32"}, TypeError, "Sequential.to: dtype must be a float type, got int32"),
], ids=["int device", "unknown device", "blocking", "int dtype"])
def test_layer_to_checks_its_arguments(kwargs, error, message):
    with pytest.raises(error, match=message):
        _model().to(**kwargs)


# --- on a CUDA device ------------------------------------------------------------------------
def _cupy():
    import cupy

    return cupy


def _gpu_place():
    return paddle.CUDAPlace(backend.current_gpu())


@pytest.mark.gpu
def test_set_device_gpu_creates_tensors_and_parameters_on_the_gpu():
    cupy = _cupy()
    place = paddle.set_device("gpu")
    assert place == _gpu_place() and paddle.get_device() == f"gpu:{backend.current_gpu()}"
    assert backend.gpu_enabled()
    for t in (paddle.to_tensor([1.0, 2.0]), paddle.zeros([2]), paddle.ones([2]),
              paddle.randn([2]), paddle.arange(3), paddle.nn.Linear(2, 3).weight):
        assert isinstance(t._array, cupy.ndarray) and t.place == place
    assert "place=Place(gpu:" in repr(paddle.ones([1]))
    assert paddle.set_device(f"gpu:{backend.current_gpu()}") == place
    assert paddle.set_device("cpu") == paddle.CPUPlace()
    assert type(paddle.zeros([2])._array) is np.ndarray


@pytest.mark.gpu
def test_a_device_index_other_than_the_current_one_is_refused():
    other = backend.current_gpu() + 1
    with pytest.raises(ValueError, match=rf"set_device: Place\(gpu:{other}\) is not the "
                                         "current CUDA device"):
        paddle.set_device(f"gpu:{other}")
    with pytest.raises(ValueError, match="is not the current CUDA device"):
        paddle.to_tensor([1.0], place=paddle.CUDAPlace(other))
    assert paddle.get_device() == "cpu"


@pytest.mark.gpu
@pytest.mark.parametrize("place", ["gpu", "gpu:0", "cuda_place"])
def test_to_tensor_puts_the_copy_on_the_gpu(place):
    cupy = _cupy()
    place = _gpu_place() if place == "cuda_place" else place
    data = np.arange(4.0)
    x = paddle.to_tensor(data, place=place)
    assert isinstance(x._array, cupy.ndarray) and x.place == _gpu_place()
    data[0] = 7.0
    assert type(x.numpy()) is np.ndarray
    np.testing.assert_array_equal(x.numpy(), np.arange(4.0))
    back = paddle.to_tensor(x, place="cpu")
    assert type(back._array) is np.ndarray and back.place == paddle.CPUPlace()


@pytest.mark.gpu
def test_cuda_and_cpu_round_trip_keeps_gradients_on_each_side():
    cupy = _cupy()
    x = paddle.to_tensor([1.0, -2.0, 3.0], dtype="float64", stop_gradient=False)
    xg = x.cuda()
    assert isinstance(xg._array, cupy.ndarray) and xg.place == _gpu_place()
    assert xg.cuda() is xg and not xg.stop_gradient
    back = (xg * xg).cpu()
    assert type(back._array) is np.ndarray and back.cpu() is back
    (back * 3.0).sum().backward()
    assert type(x.grad._array) is np.ndarray
    np.testing.assert_allclose(x.grad.numpy(), 6.0 * np.array([1.0, -2.0, 3.0]), rtol=1e-12)
    w = paddle.to_tensor([0.5, 0.25], place="gpu", stop_gradient=False)
    (w.cpu() * paddle.to_tensor([2.0, 4.0])).sum().backward()
    assert isinstance(w.grad._array, cupy.ndarray)
    np.testing.assert_allclose(w.grad.numpy(), [2.0, 4.0])


@pytest.mark.gpu
def test_ops_on_two_devices_are_one_clear_error():
    host = paddle.to_tensor([[1.0, 2.0]])
    gpu = paddle.to_tensor([[1.0], [2.0]], place="gpu")
    with pytest.raises(ValueError, match=r"add: the inputs are on different devices \(input 0 "
                                         r"on Place\(cpu\), input 1 on Place\(gpu:\d\)\)"):
        host + gpu
    with pytest.raises(ValueError, match=r"matmul: the inputs are on different devices"):
        paddle.matmul(host, gpu)
    with pytest.raises(ValueError, match=r"concat: the inputs are on different devices"):
        paddle.concat([host, gpu.t()])
    labels = paddle.to_tensor([1])
    with pytest.raises(ValueError, match=r"cross_entropy: the inputs are on different"):
        F.cross_entropy(gpu.t(), labels)
    layer = paddle.nn.Linear(2, 1)
    with pytest.raises(ValueError, match=r"linear: the inputs are on different devices"):
        layer(gpu.t())
    assert (gpu * 2.0).place == _gpu_place()  # Python numbers go with either device


class Cube(PyLayer):
    """y = x^3, dy/dx = 3 x^2, written with the array module of its input."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x * x

    @staticmethod
    def backward(ctx, dy):
        x, = ctx.saved_tensor()
        return dy * 3.0 * x * x


@pytest.mark.gpu
def test_a_pylayer_runs_on_gpu_tensors():
    cupy = _cupy()
    values = np.array([0.5, -1.5, 2.0])
    grads = []
    for place in ("cpu", "gpu"):
        x = paddle.to_tensor(values, place=place, stop_gradient=False)
        y = Cube.apply(x)
        assert y.place == x.place
        y.sum().backward()
        grads.append(x.grad)
    assert isinstance(grads[1]._array, cupy.ndarray)
    np.testing.assert_allclose(grads[1].numpy(), grads[0].numpy(), rtol=1e-12)
    np.testing.assert_allclose(grads[0].numpy(), 3 * values ** 2, rtol=1e-12)


def _train_mlp(device, make_optimizer, steps=5, move_after=None):
    """Float64 MLP trained ``steps`` steps on ``device``; with ``move_after`` the model is
    built on the CPU and moved to ``device`` after that many steps (Layer.to)."""
    paddle.set_device("cpu" if move_after is not None else device)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((16, 8))
    y = rng.integers(0, 3, 16)
    with backend.default_dtype("float64"):
        model = _model_64()
        opt = make_optimizer(model.parameters())
        losses = []
        for step in range(steps):
            if step == move_after:
                model.to(device)
            here = "cpu" if move_after is not None and step < move_after else device
            loss = F.cross_entropy(model(paddle.to_tensor(x, place=here)),
                                   paddle.to_tensor(y, place=here))
            loss.backward()
            opt.step()
            opt.clear_grad()
            losses.append(float(loss))
    paddle.set_device("cpu")
    return [p.numpy() for p in model.parameters()], losses, model


def _model_64():
    paddle.seed(11)
    return paddle.nn.Sequential(paddle.nn.Linear(8, 16), paddle.nn.ReLU(),
                                paddle.nn.Linear(16, 3))


OPTIMIZERS = [
    lambda ps: paddle.optimizer.Momentum(learning_rate=0.1, momentum=0.9, parameters=ps),
    lambda ps: paddle.optimizer.Adam(learning_rate=0.01, parameters=ps),
]


@pytest.mark.gpu
@pytest.mark.parametrize("make_optimizer", OPTIMIZERS, ids=["momentum", "adam"])
def test_mlp_trained_on_the_gpu_equals_the_cpu_run(make_optimizer):
    cpu_params, cpu_losses, _ = _train_mlp("cpu", make_optimizer)
    gpu_params, gpu_losses, model = _train_mlp("gpu", make_optimizer)
    assert all(p.place == _gpu_place() for p in model.parameters())
    np.testing.assert_allclose(gpu_losses, cpu_losses, rtol=1e-10)
    for g, c in zip(gpu_params, cpu_params):
        np.testing.assert_allclose(g, c, rtol=1e-10, atol=1e-12)


@pytest.mark.gpu
@pytest.mark.parametrize("make_optimizer", OPTIMIZERS, ids=["momentum", "adam"])
def test_layer_to_gpu_mid_training_moves_parameters_and_optimizer_state(make_optimizer):
    cupy = _cupy()
    cpu_params, cpu_losses, _ = _train_mlp("cpu", make_optimizer)
    moved_params, moved_losses, model = _train_mlp("gpu", make_optimizer, move_after=2)
    assert all(isinstance(p._array, cupy.ndarray) for p in model.parameters())
    np.testing.assert_allclose(moved_losses, cpu_losses, rtol=1e-10)
    for g, c in zip(moved_params, cpu_params):
        np.testing.assert_allclose(g, c, rtol=1e-10, atol=1e-12)
    model.to("cpu")
    assert all(type(p._array) is np.ndarray for p in model.parameters())


@pytest.mark.gpu
def test_like_creation_follows_the_tensor_and_host_data_is_copied_onto_its_device():
    cupy = _cupy()
    x = paddle.to_tensor([[1.0, 2.0]], place="gpu", stop_gradient=False)  # device: cpu
    for t in (paddle.zeros_like(x), paddle.ones_like(x), paddle.full_like(x, 3.0),
              paddle.randn_like(x), paddle.rand_like(x)):
        assert isinstance(t._array, cupy.ndarray) and t.shape == [1, 2]
    (x * 2.0).backward(np.array([[1.0, 3.0]]))
    assert isinstance(x.grad._array, cupy.ndarray)
    np.testing.assert_allclose(x.grad.numpy(), [[2.0, 6.0]])
    with pytest.raises(ValueError, match=r"backward: the inputs are on different devices"):
        (x * 2.0).backward(paddle.to_tensor([[1.0, 1.0]]))
    y = paddle.to_tensor([0.0, 0.0], place="gpu")
    y.set_value(np.array([4.0, 5.0]))
    assert isinstance(y._array, cupy.ndarray)
    np.testing.assert_array_equal(y.numpy(), [4.0, 5.0])
    model = _model().to("gpu")
    host_state = {k: v.numpy() * 0 + 1 for k, v in model.state_dict().items()}
    model.set_state_dict(host_state)
    assert all(isinstance(p._array, cupy.ndarray) and float(p.numpy().min()) == 1.0
               for p in model.parameters())


@pytest.mark.gpu
def test_ops_and_gradients_of_a_gpu_tensor_stay_on_the_gpu():
    """On the GPU a reflected power (its gradient promotes to float64 and is cast back), a
    split (a list of views) and the tensors downstream stay on the device, and their
    gradients equal the CPU's."""
    def grads(device: str):
        paddle.set_device(device)
        x = paddle.to_tensor([[1.0, -2.0, 3.0, -4.0]], stop_gradient=False)
        left, right = paddle.split(2 ** x, 2, axis=1)
        y = (left * 3).sum() + right.sum()
        places = {t.place for t in (left, right, y)}
        y.backward()
        return places, x.grad
    places, on_gpu = grads("gpu")
    assert places == {paddle.CUDAPlace(0)} and on_gpu.place == paddle.CUDAPlace(0)
    assert on_gpu.dtype == np.float32
    _, on_cpu = grads("cpu")
    np.testing.assert_allclose(on_gpu.numpy(), on_cpu.numpy(), rtol=1e-6)
