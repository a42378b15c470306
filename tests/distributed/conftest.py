"""One real local Ray cluster for the whole test session (``ray_cluster``), with HOME and
Ray's temp dir inside a temporary directory (Ray writes an auth token under HOME)."""

import os
import shutil
import tempfile

import pytest

import sculler


@pytest.fixture(scope="session")
def ray_cluster():
    ray = pytest.importorskip("ray", reason="Ray is not installed (pip install sculler[dist])")
    root = tempfile.mkdtemp(prefix="sculler-ray-")
    saved = {k: os.environ.get(k) for k in ("HOME", "PYTHONPATH", "RAY_ADDRESS")}
    os.environ["HOME"] = root
    os.environ.pop("RAY_ADDRESS", None)
    # workers must import this checkout's sculler, as the test process does
    src = os.path.dirname(os.path.dirname(os.path.abspath(sculler.__file__)))
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (src, saved["PYTHONPATH"]) if p)
    ray.init(num_cpus=2, include_dashboard=False, object_store_memory=1024 * 2**20,
             _temp_dir=os.path.join(root, "ray"), logging_level="WARNING",
             log_to_driver=False)
    try:
        yield ray
    finally:
        ray.shutdown()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        shutil.rmtree(root, ignore_errors=True)
