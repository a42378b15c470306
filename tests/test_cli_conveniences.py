"""Small things a user of the ``sculler`` command meets: ``python -m sculler``, a config that
imports a module beside it, ``sculler infer ... | head``, check-grad's help, the demos'
``--num_passes``, what a script's ``main()`` result prints, the TensorBoard viewer extra."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import tomllib

from sculler.cli import build_parser, main

ROOT = pathlib.Path(__file__).resolve().parents[1]
ENV = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))

PROVIDER = textwrap.dedent('''
    import numpy as np

    WIDTH = 4

    def train():
        def reader():
            rng = np.random.default_rng(0)
            for i in range(64):
                v = rng.standard_normal(WIDTH).astype(np.float32)
                yield v, int(v[0] > 0)
        return reader
''')

V1_CONFIG = textwrap.dedent('''
    from sculler.config.helpers import *
    from provider import WIDTH

    settings(batch_size=16, learning_rate=0.1 / 16)
    data_sources(train="provider:train")
    x = data_layer(name="x", size=WIDTH)
    y = data_layer(name="y", size=2)
    outputs(classification_cost(input=fc_layer(input=x, size=2, act=SoftmaxActivation()),
                                label=y))
''')

V2_SCRIPT = textwrap.dedent('''
    import sculler as paddle
    from provider import WIDTH, train

    x = paddle.layer.data(name="x", type=paddle.data_type.dense_vector(WIDTH))
    y = paddle.layer.data(name="y", type=paddle.data_type.integer_value(2))
    predict = paddle.layer.fc(input=x, size=2, act=paddle.activation.Softmax())
    cost = paddle.layer.classification_cost(input=predict, label=y)
    optimizer = paddle.optimizer.Momentum(learning_rate=0.01)
    train_reader = train()
    batch_size = 16
''')


def _beside(tmp_path: pathlib.Path, name: str, text: str) -> pathlib.Path:
    (tmp_path / "provider.py").write_text(PROVIDER)
    path = tmp_path / name
    path.write_text(text)
    return path


@pytest.mark.parametrize("name,text", [("v1.py", V1_CONFIG), ("v2.py", V2_SCRIPT)])
def test_a_config_imports_the_module_beside_it(tmp_path, capsys, monkeypatch, name, text):
    monkeypatch.chdir(ROOT)  # not the config's folder: its folder goes on sys.path itself
    config = _beside(tmp_path, name, text)
    path_before = list(sys.path)
    assert main(["train", "--config", str(config), "--num_passes", "1", "--save_dir",
                 str(tmp_path / "out"), "--no_progress"]) == 0, capsys.readouterr().err
    assert (tmp_path / "out" / "params.tar").exists()
    assert sys.path == path_before  # put back once the command ends
    assert "provider" not in sys.modules  # and the folder's modules forgotten


def test_run_config_puts_the_folder_on_the_path_only_while_it_runs(tmp_path):
    from sculler.config.config_parser import parse_config

    config = _beside(tmp_path, "v1.py", V1_CONFIG)
    parsed = parse_config(config)
    assert parsed.model_config.layer("x").size == 4
    assert str(tmp_path) not in sys.path and "provider" not in sys.modules


def test_python_dash_m_sculler_runs_the_command():
    from sculler import __version__

    proc = subprocess.run([sys.executable, "-m", "sculler", "--version"], env=ENV, cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == f"sculler {__version__}"


def test_infer_into_a_closed_pipe_ends_quietly(tmp_path):
    script = _beside(tmp_path, "v2.py", V2_SCRIPT)
    assert main(["train", "--config", str(script), "--num_passes", "1", "--save_dir",
                 str(tmp_path), "--no_progress"]) == 0
    np.save(tmp_path / "rows.npy", np.ones((20000, 4), np.float32))
    command = (f"{sys.executable} -m sculler infer --config {script} --params "
               f"{tmp_path / 'params.tar'} --input {tmp_path / 'rows.npy'} | head -n 2")
    proc = subprocess.run(["bash", "-c", command], env=ENV, cwd=tmp_path, capture_output=True,
                          text=True, timeout=300)
    assert len(proc.stdout.splitlines()) == 2
    assert proc.stderr == ""  # no "Broken pipe", no traceback


def test_every_check_grad_option_has_help(capsys):
    with pytest.raises(SystemExit):
        build_parser().parse_args(["check-grad", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for option in ("--type", "--inputs", "--size", "--act", "--batch_size", "--use_weight",
                   "--module"):
        described = text.split(f"{option} ")[-1]  # the option's entry in the list
        assert not described.startswith("--"), f"{option} has no help text: {text}"
    assert "5,3 gives two inputs of widths 5 and 3" in text


def test_script_main_result_is_printed_as_a_sentence(tmp_path, capsys):
    script = tmp_path / "m.py"
    script.write_text("def main(num_passes=1):\n    return 0.98055123\n")
    assert main(["train", "--config", str(script)]) == 0
    assert capsys.readouterr().out == f"Finished: the main() of {script} returned 0.9806.\n"


@pytest.mark.parametrize("demo", sorted(p.name for p in (ROOT / "demo").glob("*.py")
                                        if "__main__" in p.read_text()))
def test_every_runnable_demo_takes_num_passes(demo):
    proc = subprocess.run([sys.executable, str(ROOT / "demo" / demo), "--help"], env=ENV,
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "--num_passes" in proc.stdout


def test_the_tensorboard_extra_installs_the_viewer_the_docs_name():
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]
    assert any(req.split(">")[0].split("=")[0] == "tensorboard" for req in extras["tensorboard"])
    assert "tensorboard --logdir" in (ROOT / "docs" / "logging.md").read_text()
