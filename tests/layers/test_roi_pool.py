"""roi_pool: bins and maxima against a direct NumPy loop, several regions on one image, empty
bins, and the errors (the gradient check is its row in the gradient-check table)."""

import math

import numpy as np
import pytest

import sculler as paddle


def reference(x, rois, ph, pw, scale):
    out = np.zeros((len(rois), x.shape[1], ph, pw))
    for k, (b, *box) in enumerate(rois):
        x1, y1, x2, y2 = (int(round(v * scale)) for v in box)
        rh, rw = max(y2 - y1 + 1, 1), max(x2 - x1 + 1, 1)
        for i in range(ph):
            for j in range(pw):
                r0 = min(max(y1 + math.floor(i * rh / ph), 0), x.shape[2])
                r1 = min(max(y1 + math.ceil((i + 1) * rh / ph), 0), x.shape[2])
                c0 = min(max(x1 + math.floor(j * rw / pw), 0), x.shape[3])
                c1 = min(max(x1 + math.ceil((j + 1) * rw / pw), 0), x.shape[3])
                if r1 > r0 and c1 > c0:
                    out[k, :, i, j] = x[int(b), :, r0:r1, c0:c1].max(axis=(1, 2))
    return out.reshape(len(rois), -1)


def test_regions_are_max_pooled_bin_by_bin():
    rng = np.random.default_rng(0)
    paddle.layer.reset_names()
    img = paddle.layer.data(name="img", type=paddle.data_type.dense_vector(3 * 6 * 7),
                            height=6, width=7)
    rois = paddle.layer.data(name="rois", type=paddle.data_type.dense_vector(5))
    y = paddle.layer.roi_pool(input=img, rois=rois, pooled_width=3, pooled_height=2,
                              spatial_scale=0.5)
    assert (y.name, y.size) == ("__roi_pool_0__", 3 * 2 * 3)
    x = rng.normal(size=(3, 3, 6, 7)).astype(np.float32)
    boxes = np.array([[0, 0, 0, 13, 11], [1, 4, 2, 9, 7], [2, 12, 10, 20, 20]], np.float32)
    out = paddle.infer(output_layer=y, parameters=paddle.parameters.create(y),
                       input=[(a.reshape(-1), b) for a, b in zip(x, boxes)],
                       feeding={"img": 0, "rois": 1})
    np.testing.assert_allclose(out, reference(x, boxes, 2, 3, 0.5), rtol=1e-6)
    assert np.all(out[2].reshape(3, 2, 3)[:, :, 2] == 0)  # bins past the map are empty


def test_region_naming_a_missing_image_is_refused():
    img = paddle.layer.data(name="img", type=paddle.data_type.dense_vector(16), height=4,
                            width=4)
    rois = paddle.layer.data(name="rois", type=paddle.data_type.dense_vector(5))
    y = paddle.layer.roi_pool(input=img, rois=rois, pooled_width=2, pooled_height=2,
                              spatial_scale=1.0)
    with pytest.raises(ValueError, match="names image 3, but the batch has 1 images"):
        paddle.infer(output_layer=y, parameters=paddle.parameters.create(y),
                     input=[(np.zeros(16, np.float32), np.array([3, 0, 0, 1, 1], np.float32))],
                     feeding={"img": 0, "rois": 1})
    small = paddle.layer.data(name="small", type=paddle.data_type.dense_vector(4))
    with pytest.raises(ValueError, match="needs width >= 5, got 4"):
        paddle.layer.roi_pool(input=img, rois=small, pooled_width=2, pooled_height=2,
                              spatial_scale=1.0)
