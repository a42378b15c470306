"""Gradient-check table of the image layers (conv, pool, norm, maxout, spp, ...)."""

import pytest

from sculler.testing import INPUT_DATA, check_layer_grad

STATIC = {"is_static": True, "initial_mean": 0.0, "initial_std": 0.0}
IMG = dict(channels=2, height=5, width=4)  # 40 values per sample
CONV = dict(IMG, num_filters=3, filter_size=3, filter_size_y=2)


def bn_inputs(size):
    return [INPUT_DATA(size), INPUT_DATA(1, param=STATIC), INPUT_DATA(1, param=STATIC)]


# (layer type, layer settings, inputs, use_weight)
CASES = [
    ("exconv", dict(CONV), [INPUT_DATA(40)], False),
    ("exconv", dict(CONV, bias=False, active_type="tanh"), [INPUT_DATA(40)], False),
    ("exconv", dict(CONV, stride=2, stride_y=1, padding=1, padding_y=2, dilation_y=2),
     [INPUT_DATA(40)], False),
    ("exconv", dict(IMG, num_filters=4, filter_size=2, groups=2, shared_biases=False),
     [INPUT_DATA(40)], False),
    ("exconv", dict(CONV), [INPUT_DATA(40), INPUT_DATA(40)], False),
    # a 17x16 output (> 256 positions): per-sample GEMMs, the bias added inside the GEMM
    ("exconv", dict(channels=1, height=18, width=17, num_filters=2, filter_size=2),
     [INPUT_DATA(306)], False),
    ("conv", dict(channels=3, height=3, width=3, num_filters=2, filter_size=1),
     [INPUT_DATA(27)], False),
    ("exconvt", dict(CONV), [INPUT_DATA(40)], False),
    ("exconvt", dict(CONV, bias=False, stride=2, padding=1), [INPUT_DATA(40)], False),
    ("exconvt", dict(IMG, num_filters=4, filter_size=3, stride=2, groups=2, caffe_mode=False,
                     shared_biases=False), [INPUT_DATA(40)], False),
    ("pool", dict(IMG, pool_size=2, stride=2), [INPUT_DATA(40)], False),
    ("pool", dict(IMG, pool_size=3, pool_size_y=2, stride=2, padding=1, padding_y=0, bias=True),
     [INPUT_DATA(40)], False),
    ("pool", dict(IMG, pool_type="avg-projection", pool_size=3, stride=2, padding=1),
     [INPUT_DATA(40)], False),
    ("pool", dict(IMG, pool_type="avg-projection", pool_size=2, stride=1, exclude_mode=False,
                  ceil_mode=False, bias=True), [INPUT_DATA(40)], False),
    ("batch_norm", dict(IMG), bn_inputs(40), True),
    ("batch_norm", dict(IMG, bias=False, active_type="tanh"), bn_inputs(40), True),
    ("batch_norm", dict(), bn_inputs(6), True),
    ("norm", dict(channels=5, height=2, width=2, norm_size=3, scale=0.5, power=0.75),
     [INPUT_DATA(20)], False),
    ("norm", dict(channels=4, height=3, width=1, norm_size=4, scale=1.0, power=0.5, bias=True),
     [INPUT_DATA(12)], False),
    ("maxout", dict(channels=6, height=2, width=2, groups=3), [INPUT_DATA(24)], False),
    ("maxout", dict(channels=4, height=3, width=1, groups=2, bias=True), [INPUT_DATA(12)],
     False),
    ("spp", dict(channels=2, height=4, width=6, pyramid_height=3), [INPUT_DATA(48)], False),
    ("spp", dict(channels=2, height=3, width=5, pyramid_height=2,
                 pool_type="avg-projection", bias=True), [INPUT_DATA(30)], False),
    ("bilinear_interp", dict(IMG, out_size_x=7, out_size_y=3), [INPUT_DATA(40)], False),
    ("bilinear_interp", dict(IMG, out_size_x=3, out_size_y=1, bias=True), [INPUT_DATA(40)],
     False),
    ("blockexpand", dict(IMG, block_x=2, block_y=3, stride_x=2, stride_y=2),
     [INPUT_DATA(40)], False),
    ("blockexpand", dict(IMG, block_x=3, block_y=2, stride_x=2, padding_x=1, padding_y=1),
     [INPUT_DATA(40)], False),
    ("pad", dict(IMG, pad_c=[1, 0], pad_h=[0, 2], pad_w=[1, 1]), [INPUT_DATA(40)], False),
    ("crop", dict(IMG, axis=2, offset=[1, 1], shape=[3, 2]), [INPUT_DATA(40)], False),
    ("crop", dict(channels=3, height=5, width=4, axis=1, offset=[1, 2, 1]),
     [INPUT_DATA(60), INPUT_DATA(8, attrs=dict(channels=2, height=2, width=2))], False),
]


def _id(case):
    layer_type, settings, inputs, _ = case
    extras = ",".join(f"{k}={v}" for k, v in settings.items() if k not in IMG)
    return f"{layer_type}[{extras}|{len(inputs)}]"


@pytest.mark.parametrize("case", CASES, ids=[_id(c) for c in CASES])
def test_image_layer_gradient(case):
    layer_type, settings, inputs, use_weight = case
    report = check_layer_grad({**settings, "inputs": inputs}, layer_type, 4,
                              use_weight=use_weight)
    assert report.errors, "the check compared no gradient"
    assert report.max_error < 1e-6


@pytest.mark.parametrize("layer_type", ["exconv", "pool", "batch_norm"])
def test_transposed_inputs(layer_type):
    settings = {"exconv": CONV, "pool": dict(IMG, pool_size=2), "batch_norm": IMG}[layer_type]
    inputs = bn_inputs(40) if layer_type == "batch_norm" else [INPUT_DATA(40)]
    report = check_layer_grad({**settings, "inputs": inputs}, layer_type, 3, trans=True,
                              use_weight=True)
    assert report.max_error < 1e-6
