"""rotate, switch_order and scale_sub_region: values against NumPy, PaddlePaddle's names, and
the errors (the gradient checks are their rows in the gradient-check table)."""

import numpy as np
import pytest

import sculler as paddle


def _image(c=2, h=3, w=4):
    return paddle.layer.data(name="img", type=paddle.data_type.dense_vector(c * h * w),
                             height=h, width=w)


def test_values_names_and_sizes():
    paddle.layer.reset_names()
    img, box = _image(), paddle.layer.data(name="box", type=paddle.data_type.dense_vector(6))
    rot = paddle.layer.rotate(input=img, height=3, width=4)
    nhwc = paddle.layer.switch_order(input=img, reshape_axis=3)
    boxed = paddle.layer.scale_sub_region(input=img, indices=box, value=-3.0)
    assert [rot.name, nhwc.name, boxed.name] == [
        "__rotate_layer_0__", "__switch_order_0__", "__scale_sub_region_0__"]
    x = np.random.default_rng(0).normal(size=(2, 24)).astype(np.float32)
    boxes = np.array([[1, 1, 2, 3, 1, 2], [1, 2, 1, 1, 4, 4]], np.float32)
    out = paddle.infer(output_layer=[rot, nhwc, boxed],
                       parameters=paddle.parameters.create([rot, nhwc, boxed]),
                       input=list(zip(x, boxes)), feeding={"img": 0, "box": 1},
                       flatten_result=False)
    x4 = x.reshape(2, 2, 3, 4)
    np.testing.assert_array_equal(out[0].reshape(2, 2, 4, 3), np.rot90(x4, -1, axes=(2, 3)))
    np.testing.assert_array_equal(out[1].reshape(2, 3, 4, 2), x4.transpose(0, 2, 3, 1))
    want = x4.copy()
    want[0, 0:1, 1:3, 0:2] *= -3
    want[1, 0:2, 0:1, 3:4] *= -3
    np.testing.assert_allclose(out[2].reshape(2, 2, 3, 4), want)


def test_errors_are_named():
    img = _image()
    with pytest.raises(ValueError, match="reshape_axis must be 1, 2 or 3"):
        paddle.layer.switch_order(input=img)
    bad = paddle.layer.data(name="bad", type=paddle.data_type.dense_vector(4))
    with pytest.raises(ValueError, match="its width must be 6, got 4"):
        paddle.layer.scale_sub_region(input=img, indices=bad, value=2.0)
    with pytest.raises(TypeError, match="value must be a number"):
        paddle.layer.scale_sub_region(input=img, indices=img, value="2")
