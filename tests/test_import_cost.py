"""`import sculler` loads only what building and training a model needs (issue 11: the
import-time target). Modules for downloads, plots, distributed runs, file formats and error
messages load on first use; this test fails when one of them creeps back into the import."""

import subprocess
import sys

import pytest

DEFERRED = (
    "concurrent.futures", "difflib", "json", "logging", "matplotlib", "ray", "safetensors",
    "scipy", "shlex", "sculler.dataset", "sculler.distributed", "sculler.plot", "subprocess",
    "tarfile", "tqdm", "urllib.request",
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
