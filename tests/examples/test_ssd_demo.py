"""The SSD shapes demo (demo/ssd_shapes.py): its data, network shapes, and a shortened run
through priorbox, multibox_loss, detection_output and detection_map."""

import numpy as np
import pytest

DEMO = "ssd_shapes.py"  # loaded by the load_demo fixture (conftest.py)


def test_demo_images_hold_their_rectangles(load_demo):
    demo = load_demo()
    image, truth = demo.make_image(np.random.RandomState(3), size=16)
    assert image.shape == (256,) and 1 <= len(truth) <= 3
    pixels = image.reshape(16, 16)
    for label, x0, y0, x1, y1, difficult in truth:
        assert label in (1, 2) and difficult == 0.0 and 0 <= x0 < x1 <= 1 and 0 <= y0 < y1 <= 1
        inside = pixels[round(y0 * 16):round(y1 * 16), round(x0 * 16):round(x1 * 16)]
        assert inside.size >= 16  # at least 4 x 4 pixels


def test_demo_network_shapes(load_demo):
    import sculler as paddle

    paddle.layer.reset_names()
    cost, detections, label = load_demo().build(image_size=32)
    loss = cost.parents
    priors, conv = loss[0], loss[2]
    assert priors.size == 8 * 8 * 4 * 8  # 8x8 cells, 4 priors, 8 values each
    assert conv.size == 8 * 8 * 4 * 4 and loss[3].size == 8 * 8 * 4 * 3
    assert cost.size == 1 and detections.size == 20 * 7 and label.size == 6


def test_short_demo_run_lowers_the_loss_and_reports_map(load_demo):
    result = load_demo().main(num_passes=3, train_images=96, test_images=24, image_size=16,
                              verbose=False)
    assert result["last_cost"] < 0.8 * result["first_cost"]
    assert 0.0 <= result["map"] <= 100.0


@pytest.mark.slow
def test_full_demo_finds_the_rectangles(load_demo):
    """8 passes over 800 images: the mAP on 200 held-out images clears 60%."""
    assert load_demo().main(verbose=False)["map"] >= 60.0
