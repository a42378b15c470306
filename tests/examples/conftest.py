"""Load example and demo modules by path (examples/ and demo/ are not packages)."""

import importlib.util
import pathlib
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"


def load_example(relpath: str):
    path = EXAMPLES / relpath
    name = "example_" + relpath.replace("/", "_").removesuffix(".py")
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def example():
    return load_example


@pytest.fixture
def load_demo(request):
    """A loader of the test module's ``DEMO`` script (``demo/<DEMO>``), or of ``demo/<name>``,
    a fresh module per call (a demo builds its network at import: each load starts from clean
    state)."""

    def load(name: str | None = None):
        path = ROOT / "demo" / (name or request.module.DEMO)
        spec = importlib.util.spec_from_file_location(f"demo_{path.stem}", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module

    return load
