"""`import sculler` loads only what building and training a model needs (issue 11: the
import-time target). Modules for downloads, plots, distributed runs, file formats and error
messages and the eager front end load on first use; this test fails when one of them creeps
back into the import."""

import subprocess
import sys

import pytest

DEFERRED = (
    "concurrent.futures", "difflib", "json", "logging", "matplotlib", "ray", "safetensors",
    "scipy", "shlex", "sculler.autograd", "sculler.dataset", "sculler.distributed",
    "sculler.eager.api", "sculler.eager.ops", "sculler.nn", "sculler.plot",
    "sculler.serialization", "subprocess", "tarfile", "tqdm", "urllib.request",
)


@pytest.fixture(scope="module")
def loaded() -> set:
    code = "import sys, sculler; print('\\n'.join(sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    return set(out.split())


@pytest.mark.parametrize("module", DEFERRED)
def test_import_sculler_does_not_load(loaded, module):
    assert module not in loaded, f"`import sculler` loads {module}; import it where it is used"


def test_what_loads_late_still_works():
    """The deferred modules are imported where they are used (json, logging, difflib)."""
    from sculler.core.layer import get_layer_class

    with pytest.raises(ValueError, match="close matches: \\['fc'"):
        get_layer_class("fcc")
    from sculler.core.activation import get_activation

    with pytest.raises(ValueError, match="did you mean \\['relu', "):
        get_activation("relux")
    from sculler.core.model_config import ModelConfig

    assert ModelConfig.from_json(ModelConfig().to_json()) == ModelConfig()


def test_eager_names_load_on_first_use():
    """The eager front end (ops table, nn, autograd) loads at the first eager name read, and
    every eager export is then the eager module's own object."""
    code = """if True:
        import sys, sculler
        assert "sculler.eager.ops" not in sys.modules
        assert "to_tensor" in dir(sculler) or "nn" in dir(sculler)
        t = sculler.to_tensor([1.0, 2.0])
        assert "sculler.eager.ops" in sys.modules
        from sculler.eager import api
        from sculler.nn.layer import ParamAttr
        from sculler.serialization import load
        for name in api.__all__:
            assert getattr(sculler, name) is getattr(api, name), name
        assert sculler.ParamAttr is ParamAttr and sculler.load is load
        assert sculler.autograd.PyLayer is sys.modules["sculler.autograd"].PyLayer
        assert sculler.optimizer is sys.modules["sculler.optimizer"]  # v2 names stay
        from sculler import Tensor, nn
        assert isinstance(t, Tensor) and nn.Linear
        try:
            sculler.no_such_name
        except AttributeError as e:
            assert "no_such_name" in str(e)
        else:
            raise AssertionError("no AttributeError")
        print("ok")
    """
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"
