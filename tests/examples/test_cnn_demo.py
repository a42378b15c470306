"""The CNN digits demo (demo/cnn_digits.py), shortened to 4 passes."""

import importlib.util
import pathlib

DEMO = pathlib.Path(__file__).resolve().parents[2] / "demo" / "cnn_digits.py"


def load_demo():
    spec = importlib.util.spec_from_file_location("demo_cnn_digits", DEMO)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_cnn_demo_learns_digits():
    demo = load_demo()
    acc = demo.main(num_passes=4, verbose=False)
    # an untrained 10-class net is near 0.1; the full 10-pass run reaches ~0.98
    assert acc > 0.95


def test_cnn_demo_network_shape():
    import sculler as paddle

    paddle.layer.reset_names()
    cost, predict = load_demo().build()
    assert predict.size == 10 and predict.parents[0].size == 32 * 2 * 2
