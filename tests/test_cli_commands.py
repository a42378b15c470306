"""The ``sculler`` command line run as a user runs it (subprocesses): --version, train (v2
script, a script's main(), checkpoints, TensorBoard logs), infer, export, summary, and the
one-line errors (exit status 2) with --debug showing the traceback."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
import textwrap

import numpy as np
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]

TINY = textwrap.dedent('''
    import numpy as np
    import sculler as paddle

    x = paddle.layer.data(name="x", type=paddle.data_type.dense_vector(4))
    y = paddle.layer.data(name="y", type=paddle.data_type.integer_value(2))
    predict = paddle.layer.fc(input=x, size=2, act=paddle.activation.Softmax())
    cost = paddle.layer.classification_cost(input=predict, label=y)
    optimizer = paddle.optimizer.Momentum(learning_rate=0.05, momentum=0.9)
    batch_size = 16
    num_passes = 2

    def train_reader():
        rng = np.random.RandomState(0)
        for _ in range(64):
            v = rng.randn(4).astype("float32")
            yield v, int(v[0] > 0)

    test_reader = train_reader
''')


def run_cli(*args: str, cwd: pathlib.Path = ROOT) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT),
                                                       os.environ.get("PYTHONPATH", "")]))
    return subprocess.run([sys.executable, "-m", "sculler.cli", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


@pytest.fixture
def tiny(tmp_path):
    script = tmp_path / "tiny.py"
    script.write_text(TINY)
    return script


def test_version():
    from sculler import __version__

    proc = run_cli("--version")
    assert proc.returncode == 0 and proc.stdout.strip() == f"sculler {__version__}"


def test_train_help_says_it_takes_v1_configs_and_v2_scripts():
    out = " ".join(run_cli("train", "--help").stdout.split())
    assert "v1 config" in out and "v2 script" in out and "main()" in out
    assert "--checkpoint" in out and "--logdir" in out


@pytest.mark.parametrize("content,expected", [
    (None, "config file"),
    ("from sculler.config.config_parser import Layer\nLayer(name='x', type='data', size=3)\n"
     "Layer(name='y', type='fcc', size=3, inputs=['x'])\n", "unknown layer type 'fcc'"),
    ("import sculler as paddle\nx = ", "SyntaxError"),
], ids=["missing", "unknown-layer", "syntax"])
def test_user_errors_are_one_line_with_exit_status_2(tmp_path, content, expected):
    config = tmp_path / "conf.py"
    if content is not None:
        config.write_text(content)
    proc = run_cli("summary", "--config", str(config))
    assert proc.returncode == 2 and proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("sculler: error: ") and expected in lines[0]


def test_debug_shows_the_traceback(tmp_path):
    config = tmp_path / "conf.py"
    config.write_text("import sculler as paddle\npaddle.layer.make_layer('fcc', [], size=1)\n")
    proc = run_cli("--debug", "summary", "--config", str(config))
    assert proc.returncode == 1 and "Traceback (most recent call last)" in proc.stderr
    assert "unknown layer type 'fcc'" in proc.stderr


def test_summary_of_a_v2_script_and_a_v1_config():
    proc = run_cli("summary", "--config", "demo/recognize_digits.py")
    assert proc.returncode == 0, proc.stderr
    assert "___fc_layer_0__.w0 [64, 128]" in proc.stdout
    assert proc.stdout.strip().splitlines()[-1].startswith("total parameters: 17,226 in 6")
    v1 = run_cli("summary", "--config", "demo/mlp_digits.py", "--config_args", "hidden=16")
    assert v1.returncode == 0 and "___fc_layer_0__.w0 [64, 16]" in v1.stdout


@pytest.mark.slow
def test_train_checkpoint_resumes_and_logdir_gets_events(tiny, tmp_path):
    ckpt, logdir, out = tmp_path / "run.ckpt", tmp_path / "logs", tmp_path / "out"
    common = ["train", "--config", str(tiny), "--save_dir", str(out), "--checkpoint", str(ckpt),
              "--no_progress"]
    first = run_cli(*common, "--num_passes", "2", "--logdir", str(logdir))
    assert first.returncode == 0, first.stderr
    assert [ln.split(":")[0] for ln in first.stdout.splitlines() if ln.startswith("Pass")] == [
        "Pass 0", "Pass 1"]
    assert ckpt.exists() and list(logdir.glob("events.out.tfevents.*"))
    second = run_cli(*common, "--num_passes", "3")
    assert second.returncode == 0, second.stderr
    assert "Resuming from" in second.stdout and "at pass 2" in second.stdout
    assert [ln.split(":")[0] for ln in second.stdout.splitlines() if ln.startswith("Pass")] == [
        "Pass 2"]
    assert (out / "pass-00002.tar").exists()


def test_a_script_main_gets_the_options_its_signature_takes(tmp_path):
    script = tmp_path / "m.py"
    script.write_text("def main(num_passes=7, checkpoint=None):\n"
                      "    print('ran', num_passes, checkpoint)\n    return 0.5\n")
    proc = run_cli("train", "--config", str(script), "--num_passes", "3", "--seed", "4")
    assert proc.returncode == 0, proc.stderr
    assert "ran 3 None" in proc.stdout
    assert f"Finished: the main() of {script} returned 0.5." in proc.stdout.splitlines()
    assert "sculler: warning:" in proc.stderr and "does not accept --seed; ignored" in proc.stderr
    refused = run_cli("train", "--config", str(script), "--logdir", str(tmp_path))
    assert refused.returncode == 2 and "does not accept --logdir" in refused.stderr


def test_infer_prints_or_saves_what_infer_gives(tiny, tmp_path):
    import runpy

    import sculler as paddle

    assert run_cli("train", "--config", str(tiny), "--save_dir", str(tmp_path),
                   "--no_progress").returncode == 0
    rows = np.random.RandomState(1).randn(5, 4).astype(np.float32)
    np.save(tmp_path / "in.npy", rows)
    np.savetxt(tmp_path / "in.csv", rows, delimiter=",", fmt="%.9g")
    params = str(tmp_path / "params.tar")
    printed = run_cli("infer", "--config", str(tiny), "--params", params,
                      "--input", str(tmp_path / "in.csv"))
    assert printed.returncode == 0, printed.stderr
    saved = run_cli("infer", "--config", str(tiny), "--params", params,
                    "--input", str(tmp_path / "in.npy"), "--output", str(tmp_path / "o.npy"))
    assert saved.returncode == 0, saved.stderr
    with open(params, "rb") as f:
        parameters = paddle.parameters.Parameters.from_tar(f)
    paddle.layer.reset_names()  # the layer names the CLI's run gave
    names = runpy.run_path(str(tiny))
    expected = paddle.infer(output_layer=names["predict"], parameters=parameters,
                            input=[(r,) for r in rows])
    np.testing.assert_allclose(np.load(tmp_path / "o.npy"), expected, rtol=1e-6)
    np.testing.assert_allclose(np.loadtxt(printed.stdout.splitlines(), delimiter=","),
                               expected, rtol=1e-5)
    wrong = run_cli("infer", "--config", str(tiny), "--params", params,
                    "--input", str(tmp_path / "nope.npy"))
    assert wrong.returncode == 2 and "not found" in wrong.stderr


@pytest.mark.slow
@pytest.mark.parametrize("script", sorted(str(p.relative_to(ROOT)) for p in
                                          (ROOT / "examples").glob("*/train.py")))
def test_every_example_runs_through_sculler_train(script, tmp_path):
    proc = run_cli("train", "--config", script, "--save_dir", str(tmp_path))
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr


@pytest.mark.slow
@pytest.mark.parametrize("script", sorted(str(p.relative_to(ROOT)) for p in
                                          (ROOT / "demo").glob("*.py")))
def test_every_demo_runs_through_sculler_train(script, tmp_path):
    proc = run_cli("train", "--config", script, "--num_passes", "1", "--save_dir",
                   str(tmp_path))
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr


@pytest.mark.slow
def test_demo_main_script_takes_checkpoint_and_logdir(tmp_path):
    ckpt, logdir = tmp_path / "cnn.ckpt", tmp_path / "logs"
    proc = run_cli("train", "--config", "demo/cnn_digits.py", "--num_passes", "1",
                   "--checkpoint", str(ckpt), "--logdir", str(logdir))
    assert proc.returncode == 0, proc.stderr
    assert "pass 0: test cost" in proc.stdout
    assert "Finished: the main() of demo/cnn_digits.py returned 0." in proc.stdout
    assert ckpt.exists() and list(logdir.glob("events.out.tfevents.*"))


def test_export_writes_an_onnx_model_that_matches_infer(tiny, tmp_path):
    ort = pytest.importorskip("onnxruntime")
    import runpy

    import sculler as paddle

    assert run_cli("train", "--config", str(tiny), "--save_dir", str(tmp_path),
                   "--no_progress", "--num_passes", "1").returncode == 0
    params, model = str(tmp_path / "params.tar"), tmp_path / "m.onnx"
    proc = run_cli("export", "--config", str(tiny), "--params", params, "--onnx", str(model))
    assert proc.returncode == 0, proc.stderr
    assert "__fc_layer_0__" in proc.stdout
    rows = np.random.RandomState(2).randn(6, 4).astype(np.float32)
    got = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"]).run(
        None, {"x": rows})[0]
    with open(params, "rb") as f:
        parameters = paddle.parameters.Parameters.from_tar(f)
    paddle.layer.reset_names()  # the layer names the CLI's run gave
    want = paddle.infer(output_layer=runpy.run_path(str(tiny))["predict"],
                        parameters=parameters, input=[(r,) for r in rows])
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    missing = run_cli("export", "--config", str(tiny), "--params", str(tmp_path / "no.tar"),
                      "--onnx", str(model))
    assert missing.returncode == 2 and "parameter file" in missing.stderr


def test_ctrl_c_is_one_line_and_a_resumed_run_counts_only_its_passes(tmp_path):
    marker, ckpt = tmp_path / "interrupted", tmp_path / "run.ckpt"
    script = tmp_path / "tiny.py"
    script.write_text(TINY + textwrap.dedent(f'''
        import os

        whole_reader, calls = train_reader, [0]

        def train_reader():  # Ctrl-C while the third pass reads its data, in the first run
            calls[0] += 1
            if calls[0] == 3 and not os.path.exists({str(marker)!r}):
                open({str(marker)!r}, "w").close()
                raise KeyboardInterrupt
            yield from whole_reader()
    '''))
    args = ["train", "--config", str(script), "--num_passes", "4", "--checkpoint", str(ckpt),
            "--save_dir", str(tmp_path / "out"), "--no_progress"]
    first = run_cli(*args)
    assert first.returncode == 130
    assert first.stderr == (f"training interrupted before pass 2, batch 0; to resume at pass "
                            f"2, batch 0, run the same train(..., checkpoint={str(ckpt)!r}) "
                            f"or sculler train --checkpoint {ckpt} again\n")
    second = run_cli(*args)
    assert second.returncode == 0, second.stderr
    assert [ln.split(":")[0] for ln in second.stdout.splitlines() if ln.startswith("Pass")] == [
        "Pass 2", "Pass 3"]
    assert "Trained 2 passes (passes 2-3 of 4) in " in second.stdout
