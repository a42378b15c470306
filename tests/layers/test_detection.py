"""SSD's layers and evaluator against boxes computed by hand: priorbox on a 2x2 map, the
matching and loss of multibox_loss on one image with 2 ground-truth boxes, non-maximum
suppression of detection_output on 4 hand-placed boxes, and detection_map's AP."""

from __future__ import annotations

import math

import numpy as np
import pytest

import sculler as paddle
from sculler.core.argument import Argument
from sculler.core.evaluator import create_evaluator
from sculler.math import bbox

VAR = [0.1, 0.1, 0.2, 0.2]
dt = paddle.data_type


def softmax(x):
    e = np.exp(np.asarray(x, np.float64) - np.max(x, axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def test_priorbox_of_a_2x2_map_on_an_8x8_image():
    paddle.layer.reset_names()
    img = paddle.layer.data(name="img", type=dt.dense_vector(64), height=8, width=8)
    feat = paddle.layer.data(name="feat", type=dt.dense_vector(2 * 2 * 2), height=2, width=2)
    pb = paddle.layer.priorbox(input=feat, image=img, aspect_ratio=[2.0], variance=VAR,
                               min_size=[4], max_size=[9])
    assert (pb.name, pb.size) == ("__priorbox_0__", 2 * 2 * 4 * 8)
    out = paddle.infer(output_layer=pb, parameters=paddle.parameters.create(pb),
                       input=[(np.zeros(64, np.float32), np.zeros(8, np.float32))],
                       feeding={"img": 0, "feat": 1})
    rows = out.reshape(-1, 8)
    assert np.allclose(rows[:, 4:], VAR)
    r2 = math.sqrt(2)
    # cell (row 0, column 0): centre (2, 2) px; steps of 4 px
    expected = [[0, 0, 4 / 8, 4 / 8],                       # 4 x 4 square
                [0, 0, 5 / 8, 5 / 8],                       # sqrt(4 * 9) = 6: 2 -+ 3, clipped
                [0, (2 - r2) / 8, (2 + 2 * r2) / 8, (2 + r2) / 8],   # ratio 2: 4r2 x 2r2
                [(2 - r2) / 8, 0, (2 + r2) / 8, (2 + 2 * r2) / 8]]   # ratio 1/2
    np.testing.assert_allclose(rows[:4, :4], expected, atol=1e-6)
    # cell (row 0, column 1): centre (6, 2); cell (row 1, column 1): centre (6, 6)
    np.testing.assert_allclose(rows[4, :4], [4 / 8, 0, 1, 4 / 8], atol=1e-6)
    np.testing.assert_allclose(rows[12, :4], [4 / 8, 4 / 8, 1, 1], atol=1e-6)
    np.testing.assert_allclose(rows[13, :4], [3 / 8, 3 / 8, 1, 1], atol=1e-6)


def test_priorbox_refuses_settings_paddle_cannot_lay_out():
    img = paddle.layer.data(name="img", type=dt.dense_vector(64), height=8, width=8)
    feat = paddle.layer.data(name="feat", type=dt.dense_vector(8), height=2, width=2)
    with pytest.raises(ValueError, match="aspect_ratio values must be > 0 and not 1"):
        paddle.layer.priorbox(input=feat, image=img, aspect_ratio=[1.0], variance=VAR,
                              min_size=[4])
    with pytest.raises(ValueError, match="one min_size and at most one max_size"):
        paddle.layer.priorbox(input=feat, image=img, aspect_ratio=[2.0], variance=VAR,
                              min_size=[4, 5])
    with pytest.raises(ValueError, match="min_size must be an int, got 4.5"):
        paddle.layer.priorbox(input=feat, image=img, aspect_ratio=[2.0], variance=VAR,
                              min_size=[4.5])
    with pytest.raises(ValueError, match="variance must be 4 positive numbers"):
        paddle.layer.priorbox(input=feat, image=img, aspect_ratio=[2.0], variance=[0.1],
                              min_size=[4])


# 4 priors (one 1x1 cell, 4 per cell), 3 classes
PRIORS = np.array([[0.1, 0.1, 0.5, 0.5],      # matches ground truth 0
                   [0.5, 0.5, 0.9, 0.9],      # matches ground truth 1
                   [0.1, 0.5, 0.5, 0.9],      # overlaps nothing: a negative
                   [0.15, 0.1, 0.55, 0.5]])   # overlaps gt 0 by 0.69 (>= 0.5): matched too
TRUTH = [[1, 0.1, 0.1, 0.5, 0.45, 0], [2, 0.5, 0.55, 0.9, 0.9, 0]]


def _ssd_net(num_priors: int = 4):
    paddle.layer.reset_names()
    pri = paddle.layer.data(name="pri", type=dt.dense_vector(num_priors * 8))
    lab = paddle.layer.data(name="lab", type=dt.dense_vector_sequence(6))
    loc = paddle.layer.data(name="loc", type=dt.dense_vector(num_priors * 4), height=1,
                            width=1)
    conf = paddle.layer.data(name="conf", type=dt.dense_vector(num_priors * 3), height=1,
                             width=1)
    return pri, lab, loc, conf


def _prior_row(priors):
    return np.concatenate([priors, np.tile(VAR, (len(priors), 1))], axis=1).reshape(-1)


def test_matching_of_one_image_with_two_boxes():
    matched, overlap = bbox.match(PRIORS, np.array(TRUTH)[:, 1:5], 0.5)
    assert matched.tolist() == [0, 1, -1, 0]
    # prior 3 against gt 0: intersection 0.35 x 0.35, union 0.16 + 0.14 - 0.1225
    assert overlap[3] == pytest.approx(0.1225 / (0.16 + 0.14 - 0.1225))
    assert overlap[2] == 0.0


def test_multibox_loss_on_one_image_with_two_boxes():
    pri, lab, loc, conf = _ssd_net()
    cost = paddle.layer.multibox_loss(input_loc=loc, input_conf=conf, priorbox=pri, label=lab,
                                      num_classes=3)
    assert (cost.name, cost.size) == ("__multibox_loss_0__", 1)
    loc_v = np.array([[0.1, -0.2, 0.3, 0.0], [1.5, 0.2, -0.1, 0.4], [0.0, 0.0, 0.0, 0.0],
                      [-0.3, 0.1, 0.2, 2.0]])
    conf_v = np.array([[0.2, 1.0, -0.5], [0.1, 0.0, 0.3], [0.5, 1.5, -1.0], [1.0, 0.2, 0.1]])
    out = paddle.infer(output_layer=cost, parameters=paddle.parameters.create(cost),
                       input=[(_prior_row(PRIORS), TRUTH, loc_v.reshape(-1),
                               conf_v.reshape(-1))],
                       feeding={"pri": 0, "lab": 1, "loc": 2, "conf": 3})

    def target(prior, gt):  # encode by hand: centre offsets over size and variance, log sizes
        pw, ph = prior[2] - prior[0], prior[3] - prior[1]
        gw, gh = gt[2] - gt[0], gt[3] - gt[1]
        return [((gt[0] + gt[2]) / 2 - (prior[0] + prior[2]) / 2) / pw / 0.1,
                ((gt[1] + gt[3]) / 2 - (prior[1] + prior[3]) / 2) / ph / 0.1,
                math.log(gw / pw) / 0.2, math.log(gh / ph) / 0.2]

    def smooth(d):
        return sum(0.5 * x * x if abs(x) < 1 else abs(x) - 0.5 for x in d)

    gts = [t[1:5] for t in TRUTH]
    loc_loss = sum(smooth(np.array(loc_v[i]) - target(PRIORS[i], gts[g]))
                   for i, g in [(0, 0), (1, 1), (3, 0)])
    prob = softmax(conf_v)
    # 3 matches: classes 1, 2, 1; up to 9 negatives, but only prior 2 is one (label 0)
    conf_loss = -(math.log(prob[0, 1]) + math.log(prob[1, 2]) + math.log(prob[3, 1])
                  + math.log(prob[2, 0]))
    assert out[0, 0] == pytest.approx((loc_loss + conf_loss) / 3, rel=1e-5)


def test_multibox_loss_mines_the_most_confident_negatives():
    """Two images; image 1 has no ground truth. One match in image 0 at ratio 1 mines the
    negative with the highest non-background probability: its cross entropy joins the loss."""
    pri, lab, loc, conf = _ssd_net()
    cost = paddle.layer.multibox_loss(input_loc=loc, input_conf=conf, priorbox=pri, label=lab,
                                      num_classes=3, neg_pos_ratio=1.0)
    truth = [[2, 0.5, 0.5, 0.9, 0.9, 0]]  # only prior 1 overlaps it
    conf_v = np.array([[0.0, 0.0, 0.0], [0.0, 0.0, 1.0], [0.0, 2.0, 0.0], [0.0, 0.5, 0.0]])
    zeros = np.zeros(16)
    samples = [(_prior_row(PRIORS), truth, zeros, conf_v.reshape(-1)),
               (_prior_row(PRIORS), [], zeros, conf_v.reshape(-1))]
    out = paddle.infer(output_layer=cost, parameters=paddle.parameters.create(cost),
                       input=samples, feeding={"pri": 0, "lab": 1, "loc": 2, "conf": 3})
    prob = softmax(conf_v)
    # the gt is prior 1 itself and the offsets are 0: no location loss
    expected = -math.log(prob[1, 2]) - math.log(prob[2, 0])  # prior 2 has the top score
    np.testing.assert_allclose(out[:, 0], [expected, 0.0], rtol=1e-5)


def test_multibox_loss_refuses_mismatched_inputs():
    pri, lab, loc, conf = _ssd_net()
    with pytest.raises(ValueError, match="input_loc and input_conf must list as many"):
        paddle.layer.multibox_loss(input_loc=[loc, loc], input_conf=conf, priorbox=pri,
                                   label=lab, num_classes=3)
    with pytest.raises(ValueError, match="background_id must be < num_classes"):
        paddle.layer.multibox_loss(input_loc=loc, input_conf=conf, priorbox=pri, label=lab,
                                   num_classes=3, background_id=3)
    with pytest.raises(ValueError, match="must have width 6"):
        paddle.layer.multibox_loss(input_loc=loc, input_conf=conf, priorbox=pri, label=loc,
                                   num_classes=3)


def test_nms_keeps_the_best_of_overlapping_boxes():
    boxes = np.array([[0.1, 0.1, 0.5, 0.5], [0.12, 0.1, 0.52, 0.5], [0.6, 0.6, 0.9, 0.9],
                      [0.1, 0.3, 0.5, 0.7]])
    # box 1 overlaps box 0 by 0.38 x 0.4 / (0.16 + 0.16 - 0.152) = 0.905, box 3 by
    # 0.38 x 0.2 / (0.32 - 0.076) = 0.31
    scores = np.array([0.8, 0.9, 0.5, 0.6])
    assert bbox.nms(boxes, scores, 0.01, 0.45, 0) == [1, 3, 2]
    assert bbox.nms(boxes, scores, 0.01, 0.3, 0) == [1, 2]  # 0.31 > 0.3: box 3 goes too
    assert bbox.nms(boxes, scores, 0.55, 0.45, 0) == [1, 3]  # box 2 scores below 0.55
    assert bbox.nms(boxes, scores, 0.01, 0.45, 2) == [1]  # only the 2 best enter


def test_detection_output_on_four_hand_placed_boxes():
    pri, _, loc, conf = _ssd_net()
    det = paddle.layer.detection_output(input_loc=loc, input_conf=conf, priorbox=pri,
                                        num_classes=3, confidence_threshold=0.3)
    assert (det.name, det.size) == ("__detection_output_0__", 200 * 7)
    boxes = np.array([[0.1, 0.1, 0.5, 0.5], [0.12, 0.1, 0.52, 0.5], [0.6, 0.6, 0.9, 0.9],
                      [0.1, 0.3, 0.5, 0.7]])
    loc_v = np.zeros((4, 4))
    loc_v[2] = [1.0, 0.0, 0.0, 0.0]  # box 2 moves right by 0.1 * 1.0 * its width 0.3
    conf_v = np.array([[0.0, 2.0, 0.0], [0.0, 2.5, 0.5], [0.0, 0.2, 1.5], [0.0, 1.5, 0.0]])
    out = paddle.infer(output_layer=det, parameters=paddle.parameters.create(det),
                       input=[(_prior_row(boxes), loc_v.reshape(-1), conf_v.reshape(-1))],
                       feeding={"pri": 0, "loc": 1, "conf": 2})
    prob = softmax(conf_v)
    moved = [0.63, 0.6, 0.93, 0.9]
    expected = [  # class 1: boxes 1 (best) and 3 kept, 0 suppressed by 1, 2 below 0.3
        [0, 1, prob[1, 1], *boxes[1]], [0, 1, prob[3, 1], *boxes[3]],
        [0, 2, prob[2, 2], *moved]]  # class 2: only box 2 scores above 0.3
    assert prob[2, 1] < 0.3 and prob[1, 2] < 0.3 and prob[0, 2] < 0.3
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-6)


def test_detection_output_keeps_the_best_keep_top_k():
    pri, _, loc, conf = _ssd_net()
    det = paddle.layer.detection_output(input_loc=loc, input_conf=conf, priorbox=pri,
                                        num_classes=3, keep_top_k=1)
    boxes = np.array([[0.0, 0.0, 0.2, 0.2], [0.3, 0.3, 0.5, 0.5], [0.6, 0.6, 0.8, 0.8],
                      [0.0, 0.6, 0.2, 0.8]])
    conf_v = np.array([[0.0, 1.0, 0.0], [0.0, 0.0, 3.0], [0.0, 2.0, 0.0], [0.0, 0.0, 0.0]])
    out = paddle.infer(output_layer=det, parameters=paddle.parameters.create(det),
                       input=[(_prior_row(boxes), np.zeros(16), conf_v.reshape(-1))],
                       feeding={"pri": 0, "loc": 1, "conf": 2})
    np.testing.assert_allclose(out, [[0, 2, softmax(conf_v[1])[2], *boxes[1]]], rtol=1e-5)


def _map(detections, truth, **attrs):
    config = paddle.evaluator.detection_map(
        input=paddle.layer.data(name="d", type=dt.dense_vector(7)),
        label=paddle.layer.data(name="t", type=dt.dense_vector_sequence(6)), **attrs)
    ev = create_evaluator(config)
    rows = [r for image in truth for r in image]
    starts = np.cumsum([0] + [len(image) for image in truth])

    class Holder:
        def __init__(self, arg):
            self.output = arg

    ev.eval_batch({"d": Holder(Argument(value=np.array(detections, np.float64))),
                   "t": Holder(Argument(value=np.array(rows, np.float64).reshape(-1, 6),
                                        seq_starts=starts))})
    return ev.value()


def test_detection_map_11point_and_integral():
    truth = [[[1, 0.0, 0.0, 0.4, 0.4, 0], [1, 0.5, 0.5, 0.9, 0.9, 0]],
             [[1, 0.1, 0.1, 0.3, 0.3, 0], [2, 0.6, 0.6, 0.8, 0.8, 0]]]
    detections = [[0, 1, 0.9, 0.0, 0.0, 0.4, 0.4],    # hit
                  [0, 1, 0.8, 0.0, 0.0, 0.4, 0.41],   # a second hit on a taken box: false
                  [0, 1, 0.7, 0.5, 0.5, 0.9, 0.9],    # hit
                  [1, 1, 0.6, 0.6, 0.6, 0.8, 0.8],    # misses (that box is class 2)
                  [1, 2, 0.5, 0.6, 0.6, 0.8, 0.8]]    # hit
    # class 1, by score: hit, false, hit, false; 3 positives
    # precision 1, 1/2, 2/3, 2/4; recall 1/3, 1/3, 2/3, 2/3
    # 11-point: recall >= 0..0.3 -> 1; 0.4..0.6 -> 2/3; 0.7..1 -> 0 => (4 + 3 * 2/3) / 11
    # integral: 1 * 1/3 + 2/3 * 1/3; class 2: AP 1
    ap1_11, ap1_int = (4 + 2) / 11, 1 / 3 + 2 / 9
    assert _map(detections, truth) == pytest.approx(100 * (ap1_11 + 1) / 2)
    assert _map(detections, truth, ap_type="Integral") == pytest.approx(100 * (ap1_int + 1) / 2)


def test_detection_map_ignores_difficult_boxes_unless_asked():
    truth = [[[1, 0.0, 0.0, 0.4, 0.4, 1], [1, 0.5, 0.5, 0.9, 0.9, 0]]]
    detections = [[0, 1, 0.9, 0.0, 0.0, 0.4, 0.4], [0, 1, 0.8, 0.5, 0.5, 0.9, 0.9]]
    assert _map(detections, truth) == pytest.approx(100.0)  # the difficult hit is skipped
    assert _map(detections, truth, evaluate_difficult=True) == pytest.approx(100.0)
    with pytest.raises(ValueError, match="ap_type must be one of"):
        _map(detections, truth, ap_type="voc")


V1_CONFIG = """
from sculler.trainer_config_helpers import *
settings(batch_size=4, learning_rate=1e-3)
img = data_layer(name="image", size=3 * 16 * 16, height=16, width=16)
lab = data_layer(name="label", size=6)
conv = img_conv_layer(input=img, filter_size=3, num_filters=8, num_channels=3, padding=1,
                      stride=4)
pb = priorbox_layer(input=conv, image=img, aspect_ratio=[2.0], variance=[0.1, 0.1, 0.2, 0.2],
                    min_size=[4], max_size=[8])
loc = img_conv_layer(input=conv, filter_size=1, num_filters=16, act=LinearActivation())
conf = img_conv_layer(input=conv, filter_size=1, num_filters=12, act=LinearActivation())
cost = multibox_loss_layer(input_loc=loc, input_conf=conf, priorbox=pb, label=lab,
                           num_classes=3)
det = detection_output_layer(input_loc=loc, input_conf=conf, priorbox=pb, num_classes=3)
detection_map_evaluator(input=det, label=lab)
outputs(cost)
"""


def test_v1_config_names_and_sizes_are_paddles(tmp_path):
    from sculler.config.config_parser import parse_config

    path = tmp_path / "ssd_config.py"
    path.write_text(V1_CONFIG)
    model = parse_config(str(path)).model_config
    layers = {lc.name: (lc.type, lc.size) for lc in model.layers}
    assert layers["__priorbox_0__"] == ("priorbox", 4 * 4 * 4 * 8)
    assert layers["__multibox_loss_0__"] == ("multibox_loss", 1)
    assert layers["__detection_output_0__"] == ("detection_output", 200 * 7)
    (evaluator,) = model.evaluators
    assert evaluator.name == "__detection_map_evaluator_0__"
    assert evaluator.input_layers == ["__detection_output_0__", "label", "label"]


def test_onnx_export_refuses_the_ssd_layers_by_name(tmp_path):
    pytest.importorskip("onnx")
    from sculler.onnx import UnsupportedLayerError, export

    paddle.layer.reset_names()
    img = paddle.layer.data(name="img", type=dt.dense_vector(64), height=8, width=8)
    conv = paddle.layer.img_conv(input=img, filter_size=3, num_filters=4, num_channels=1,
                                 padding=1, stride=4)
    pb = paddle.layer.priorbox(input=conv, image=img, aspect_ratio=[2.0], variance=VAR,
                               min_size=[4])
    loc = paddle.layer.img_conv(input=conv, filter_size=1, num_filters=12)
    conf = paddle.layer.img_conv(input=conv, filter_size=1, num_filters=9)
    det = paddle.layer.detection_output(input_loc=loc, input_conf=conf, priorbox=pb,
                                        num_classes=3)
    with pytest.raises(UnsupportedLayerError) as info:
        export(det, paddle.parameters.create(det), tmp_path / "ssd.onnx")
    assert "(type priorbox)" in str(info.value)
    assert "(type detection_output)" in str(info.value)


def test_paddle_model_protobuf_carries_the_ssd_settings(tmp_path):
    pytest.importorskip("google.protobuf")
    from sculler.config.config_parser import parse_config
    from sculler.proto.convert import from_proto, to_proto

    path = tmp_path / "ssd_config.py"
    path.write_text(V1_CONFIG)
    model = parse_config(str(path)).model_config
    message = to_proto(model)
    layers = {pl.name: pl for pl in message.layers}
    prior_conf = layers["__priorbox_0__"].inputs[0].priorbox_conf
    assert (list(prior_conf.min_size), list(prior_conf.max_size)) == ([4], [8])
    assert layers["__multibox_loss_0__"].inputs[0].multibox_loss_conf.input_num == 1
    assert layers["__detection_output_0__"].inputs[0].detection_output_conf.keep_top_k == 200
    back = {lc.name: lc for lc in from_proto(message).layers}
    for name in ("__priorbox_0__", "__multibox_loss_0__", "__detection_output_0__"):
        original = next(lc for lc in model.layers if lc.name == name)
        assert back[name].attrs.keys() == original.attrs.keys()
        for key, value in original.attrs.items():
            assert back[name].attrs[key] == pytest.approx(value, rel=1e-6)


def test_heads_that_disagree_with_the_priors_are_named():
    pri, _, loc, _ = _ssd_net()
    conf = paddle.layer.data(name="conf3", type=dt.dense_vector(9), height=1, width=1)
    det = paddle.layer.detection_output(input_loc=loc, input_conf=conf, priorbox=pri,
                                        num_classes=3)
    with pytest.raises(ValueError, match=r"inputs \['conf3'\] hold 3 priors of width 3, but "
                                         r"the priorbox input 'pri' has 4"):
        paddle.infer(output_layer=det, parameters=paddle.parameters.create(det),
                     input=[(_prior_row(PRIORS), np.zeros(16), np.zeros(9))],
                     feeding={"pri": 0, "loc": 1, "conf3": 2})
