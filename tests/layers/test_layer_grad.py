"""Every row of the gradient-check table (tests/layers/grad_table.py) through one harness, and
a check that every registered layer type has a row there. Under the ``gpu`` marker every row
also runs on the GPU and in CPU/GPU comparison mode (float64 and float32); elsewhere those are
skipped with the reason "CUDA/CuPy not available".

That the check catches a wrong backward (a missing activation derivative, a weight gradient
off by 1%, a transposed weight gradient) is tested in tests/core/test_broken_layer.py.
"""

import importlib.util
import pathlib
import sys

import numpy as np
import pytest

import sculler.core.layer as layer_module
from sculler import backend
from sculler.core.layer import Layer, get_layer_class, layer_types, register_layer


def _load_table():
    """grad_table.py by path (test modules are not importable as a package here)."""
    path = pathlib.Path(__file__).with_name("grad_table.py")
    spec = importlib.util.spec_from_file_location("grad_table", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["grad_table"] = module
    spec.loader.exec_module(module)
    return module


table = sys.modules.get("grad_table") or _load_table()
WHERE = ("add a row to CASES in tests/layers/grad_table.py (Row(layer_type, settings, inputs)), "
         "or, if the type cannot be checked as one layer fed by data layers, an entry with the "
         "reason to NOT_CHECKED_AS_ONE_LAYER there")


@pytest.mark.parametrize("row", table.CASES, ids=[row.id for row in table.CASES])
def test_layer_gradient(row):
    report = table.run_row(row)
    assert report.errors, "the check compared no gradient"
    if row.compared is not None:
        assert len(report.errors) == row.compared, sorted(report.errors)
    assert report.max_error < table.RTOL


NO_GPU = backend.gpu_unavailable_reason() is not None
needs_gpu = pytest.mark.skipif(NO_GPU, reason="CUDA/CuPy not available")


@pytest.mark.gpu
@needs_gpu
@pytest.mark.parametrize("row", table.CASES, ids=[row.id for row in table.CASES])
def test_layer_gradient_on_gpu(row):
    report = table.run_row(row, use_gpu=True)
    assert report.errors, "the check compared no gradient"
    assert report.max_error < table.RTOL


@pytest.mark.gpu
@needs_gpu
@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["float64", "float32"])
@pytest.mark.parametrize("row", table.CASES, ids=[row.id for row in table.CASES])
def test_layer_same_on_gpu_and_cpu(row, dtype):
    report = table.compare_row(row, dtype)
    assert "output" in report.errors and len(report.errors) > 1, sorted(report.errors)


def built_in_layer_types() -> list[str]:
    """Registered types whose class is Sculler's own (not a test's or an example's)."""
    return [t for t in layer_types() if get_layer_class(t).__module__.startswith("sculler.")]


def types_without_row(rows) -> list[str]:
    covered = {row.layer_type for row in rows}
    return [t for t in built_in_layer_types()
            if t not in covered and t not in table.NOT_CHECKED_AS_ONE_LAYER]


def test_every_layer_type_has_a_row():
    missing = types_without_row(table.CASES)
    assert not missing, f"layer types with no gradient-check row: {missing}; {WHERE}"


def test_every_exemption_is_a_registered_type_without_a_row():
    covered = {row.layer_type for row in table.CASES}
    types = set(built_in_layer_types())
    for name, reason in table.NOT_CHECKED_AS_ONE_LAYER.items():
        assert name in types, f"NOT_CHECKED_AS_ONE_LAYER names {name!r}, not a registered type"
        assert name not in covered, f"{name!r} has a row; drop it from NOT_CHECKED_AS_ONE_LAYER"
        assert reason.strip(), f"NOT_CHECKED_AS_ONE_LAYER[{name!r}] gives no reason"


def test_a_new_layer_type_without_a_row_is_named(monkeypatch):
    monkeypatch.setattr(layer_module, "_REGISTRY", dict(layer_module._REGISTRY))

    @register_layer("brand_new_layer")
    class BrandNewLayer(Layer):
        pass

    BrandNewLayer.__module__ = "sculler.layers.brand_new"  # as if it were a built-in file
    assert types_without_row(table.CASES) == ["brand_new_layer"]
    assert types_without_row(table.CASES + [table.Row("brand_new_layer", {}, [])]) == []


def test_row_ids_are_unique():
    ids = [row.id for row in table.CASES]
    assert len(ids) == len(set(ids)), sorted({i for i in ids if ids.count(i) > 1})
