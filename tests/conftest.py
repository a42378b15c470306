"""Fixtures shared by the whole suite. The suite leaves nothing in the checkout: a file a test
(or a doc block, demo or CLI run) writes into the repository instead of its ``tmp_path`` fails
the session, naming the file."""

import builtins
import errno
import os
import pathlib
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
CACHES = ("__pycache__", ".pytest_cache", ".ruff_cache", ".egg-info", ".hypothesis")


def _untracked() -> set[str] | None:
    """Files git does not track (ignored ones included), caches left out; None outside git."""
    try:
        out = subprocess.run(["git", "ls-files", "--others", "-z"], cwd=ROOT,
                             capture_output=True, check=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return {p for p in out.decode().split("\0")
            if p and not any(part.endswith(CACHES) for part in pathlib.PurePath(p).parts)}


def pytest_collection_modifyitems(config, items):
    """Tests marked ``gpu`` are skipped with the reason "CUDA/CuPy not available" where CuPy
    sees no CUDA device (every such test, without a skip decorator of its own)."""
    gpu_tests = [item for item in items if item.get_closest_marker("gpu")]
    if not gpu_tests:
        return
    from sculler.backend import gpu_unavailable_reason

    if gpu_unavailable_reason() is not None:
        skip = pytest.mark.skip(reason="CUDA/CuPy not available")
        for item in gpu_tests:
            item.add_marker(skip)


def pytest_runtest_logreport(report):
    """With ``SCULLER_FAILURE_LOG`` set, each failure's report is appended to that file as it
    happens, so a run stopped at a time limit (bench/gpu_check.sh) still leaves its failures."""
    path = os.environ.get("SCULLER_FAILURE_LOG")
    if path and report.failed:
        with open(path, "a") as log:
            log.write(f"== {report.nodeid} ({report.when})\n{report.longreprtext}\n")


@pytest.fixture(scope="session", autouse=True)
def checkout_stays_clean():
    before = _untracked()
    yield
    after = _untracked()
    if before is not None and after is not None:
        stray = sorted(after - before)
        assert not stray, (f"the tests left {stray} in the checkout {ROOT}; write to tmp_path "
                           "instead")


@pytest.fixture
def small_sgd():
    """A factory of fresh ``SGD`` trainers over a 3 -> 2 softmax classifier (seed 1, layer
    names reset): ``small_sgd(momentum=0.0)``."""
    import sculler as paddle

    def make(momentum: float = 0.0):
        paddle.init(seed=1)
        paddle.layer.reset_names()
        x = paddle.layer.data(name="x", type=paddle.data_type.dense_vector(3))
        y = paddle.layer.data(name="y", type=paddle.data_type.integer_value(2))
        out = paddle.layer.fc(input=x, size=2, act=paddle.activation.Softmax())
        cost = paddle.layer.classification_cost(input=out, label=y)
        params = paddle.parameters.create(cost)
        optimizer = paddle.optimizer.Momentum(learning_rate=0.01, momentum=momentum)
        return paddle.trainer.SGD(cost, params, optimizer)

    return make


@pytest.fixture
def read_only_dir(tmp_path, monkeypatch):
    """A directory nothing can be created in: mode 0o500, and where the tests run as root
    (who may write anyway) every open for writing under it fails with EACCES as it would
    for anyone else."""
    ro = tmp_path / "read-only"
    ro.mkdir()
    ro.chmod(0o500)
    if os.access(ro, os.W_OK):
        inside = str(ro) + os.sep
        real_open, real_os_open = builtins.open, os.open

        def refuse(path):
            if os.path.abspath(os.fsdecode(path)).startswith(inside):
                raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), os.fsdecode(path))

        def guarded_open(file, mode="r", *args, **kwargs):
            if isinstance(file, (str, bytes, os.PathLike)) and set(mode) & set("wax+"):
                refuse(file)
            return real_open(file, mode, *args, **kwargs)

        def guarded_os_open(path, flags, *args, **kwargs):
            if flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT):
                refuse(path)
            return real_os_open(path, flags, *args, **kwargs)

        monkeypatch.setattr(builtins, "open", guarded_open)
        monkeypatch.setattr(os, "open", guarded_os_open)
    yield ro
    ro.chmod(0o700)
