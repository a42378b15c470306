"""The LSTM digits demo (demo/lstm_digits.py): row sequences, the network, training."""

import numpy as np
import pytest

DEMO = "lstm_digits.py"  # loaded by the load_demo fixture (conftest.py)


def test_rows_crop_blank_rows(load_demo):
    demo = load_demo()
    image = np.full((8, 8), -1.0, dtype=np.float32)
    image[0, :2] = 0.0  # ink 16: faint
    image[2, :4] = 0.5  # ink 48
    image[5, :2] = 1.0  # ink 32
    image[6, :3] = 0.0  # ink 24: faint
    got = demo.rows(image.reshape(-1))
    assert len(got) == 4 and got[0][:4] == [0.5] * 4 and got[-1][:2] == [1.0] * 2
    lengths = np.bincount([len(r) for r, _ in demo.reader("test")()], minlength=9)
    assert lengths[:3].sum() == 0 and lengths[3:8].sum() > 100 and lengths[8] > 100


def test_lstm_demo_network(load_demo):
    import sculler as paddle

    paddle.layer.reset_names()
    cost, predict = load_demo().build()
    both = predict.parents[0]
    assert (predict.size, both.size, both.name) == (10, 128, "__bidirectional_lstm_0__")


@pytest.mark.slow
def test_lstm_demo_learns_digits(load_demo):
    """12 passes: 98.1% with seed 1; an untrained 10-class net is near 10%."""
    assert load_demo().main(verbose=False) >= 0.97
