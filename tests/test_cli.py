"""The command line: the main job trains the digits MLP; check-grad passes and fails."""

import pathlib
import re
import textwrap

import pytest

from sculler.cli import main
from sculler.parameters import Parameters

ROOT = pathlib.Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_main_job_trains_digits_mlp_above_95_percent(tmp_path, capsys):
    assert main(["train", "--config", str(ROOT / "demo" / "mlp_digits.py"),
                 "--save_dir", str(tmp_path), "--no_progress"]) == 0
    out = capsys.readouterr().out
    assert len(re.findall(r"^Pass \d+: train cost", out, flags=re.M)) == 30
    accuracy = float(re.search(r"Test accuracy: ([0-9.]+)%", out).group(1))
    assert accuracy >= 95.0
    with open(tmp_path / "params.tar", "rb") as f:
        params = Parameters.from_tar(f)
    assert params.get("___fc_layer_0__.w0").shape == (64, 128)
    assert (tmp_path / "pass-00029.tar").exists()


@pytest.mark.slow
def test_v2_script_trains_through_the_cli(tmp_path, capsys):
    assert main(["train", "--config", str(ROOT / "demo" / "recognize_digits.py"),
                 "--save_dir", str(tmp_path), "--no_progress"]) == 0
    out = capsys.readouterr().out
    assert float(re.search(r"Test accuracy: ([0-9.]+)%", out).group(1)) >= 95.0


def test_file_that_is_neither_v1_nor_v2_is_explained(tmp_path, capsys):
    script = tmp_path / "s.py"
    script.write_text("import sculler as paddle\nx = 1\n")
    assert main(["train", "--config", str(script), "--save_dir", str(tmp_path)]) == 2
    assert "missing; a v2 script defines cost, optimizer" in capsys.readouterr().err


def test_config_args_and_num_passes(tmp_path, capsys):
    main(["train", "--config", str(ROOT / "demo" / "mlp_digits.py"), "--config_args",
          "hidden=16", "--num_passes", "2", "--save_dir", str(tmp_path), "--no_progress"])
    out = capsys.readouterr().out
    assert len(re.findall(r"^Pass \d+:", out, flags=re.M)) == 2
    with open(tmp_path / "params.tar", "rb") as f:
        assert Parameters.from_tar(f).get("___fc_layer_0__.w0").shape == (64, 16)


def test_config_without_data_sources_is_explained(tmp_path, capsys):
    conf = tmp_path / "c.py"
    conf.write_text("from sculler.config.helpers import *\n"
                    "x = data_layer(name='x', size=3)\noutputs(fc_layer(input=x, size=2))\n")
    assert main(["train", "--config", str(conf), "--save_dir", str(tmp_path)]) == 2
    assert "data_sources" in capsys.readouterr().err


def test_check_grad_command(tmp_path, capsys):
    layer_file = tmp_path / "my_layer.py"
    layer_file.write_text(textwrap.dedent("""
        from sculler.layers.fc import FCLayer
        from sculler.core.layer import register_layer

        @register_layer("cli_fc")
        class CliFC(FCLayer):
            pass

        @register_layer("cli_broken_fc")
        class CliBrokenFC(FCLayer):
            def backward_activation(self):
                pass
    """))
    assert main(["check-grad", "--module", str(layer_file), "--type", "cli_fc",
                 "--inputs", "5,3", "--act", "tanh"]) == 0
    assert "gradient check passed" in capsys.readouterr().out
    assert main(["check-grad", "--type", "cli_broken_fc", "--inputs", "5",
                 "--act", "tanh"]) == 1
    assert "FAILED: layer test_layer (cli_broken_fc)" in capsys.readouterr().out
