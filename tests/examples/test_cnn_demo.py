"""The CNN digits demo (demo/cnn_digits.py), shortened to 4 passes."""

import pytest

DEMO = "cnn_digits.py"  # loaded by the load_demo fixture (conftest.py)


def test_cnn_demo_learns_digits(load_demo):
    demo = load_demo()
    acc = demo.main(num_passes=4, verbose=False)
    # an untrained 10-class net is near 0.1
    assert acc > 0.95


@pytest.mark.slow
def test_full_cnn_demo_reaches_99_percent(load_demo):
    """25 passes: 99.4% with seed 1 (the MLP main job: 99.2%)."""
    assert load_demo().main(verbose=False) >= 0.99


def test_cnn_demo_network_shape(load_demo):
    import sculler as paddle

    paddle.layer.reset_names()
    cost, predict = load_demo().build()
    hidden = predict.parents[0]
    assert predict.size == 10 and hidden.size == 128 and hidden.config.drop_rate == 0.5
    assert hidden.parents[0].size == 64 * 2 * 2
