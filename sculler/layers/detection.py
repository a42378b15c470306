"""SSD detection (PaddlePaddle's ``priorbox``, ``multibox_loss`` and ``detection_output``;
PriorBox.cpp, MultiBoxLossLayer.cpp, DetectionOutputLayer.cpp). docs/detection.md walks
through a whole detector.

- ``priorbox`` lays default boxes over a feature map: at each cell centre
  ``((w + 1/2) W_img / W, (h + 1/2) H_img / H)`` a square of side ``min_size``, one of side
  ``sqrt(min_size max_size)``, then for each aspect ratio ``r`` (and ``1/r``) a box
  ``min_size sqrt(r)`` wide and ``min_size / sqrt(r)`` high; normalised by the image size and
  clipped to [0, 1], each followed by the 4 variances. One output row of ``8 * priors``.
- ``multibox_loss`` matches priors to ground-truth boxes, then
  ``L = (sum_matched smoothL1(loc - encode(gt)) + sum_(matched + mined) xent(softmax(conf)))
  / N_matched``; mined negatives are the unmatched priors (overlap < ``neg_overlap``) with the
  highest non-background probability, ``neg_pos_ratio`` per match.
- ``detection_output`` decodes the predicted boxes, applies per-class non-maximum suppression
  and writes one row ``[image, label, score, xmin, ymin, xmax, ymax]`` per kept detection.

``input_loc``/``input_conf`` are conv outputs (channels = priors per cell x 4, or x classes);
several pairs (feature maps of several scales) are concatenated prior by prior, in the order
the ``priorbox`` layer that describes them lists its priors.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from sculler.backend import get_array_module, to_numpy
from sculler.core.expression import LayerOutput, as_inputs, make_layer
from sculler.core.faces import layer_function
from sculler.core.layer import Layer, register_layer
from sculler.layers.image import image_geometry
from sculler.math import bbox
from sculler.math.activation import softmax
from sculler.validate import integer, number

LABEL_WIDTH = 6  # a ground-truth row: [label, xmin, ymin, xmax, ymax, difficult]
DETECTION_WIDTH = 7  # a detection row: [image, label, score, xmin, ymin, xmax, ymax]


def priors_per_cell(config) -> int:
    """``1 + len(max_size) + 2 len(aspect_ratio)`` (each ratio and its inverse)."""
    return 1 + len(config.attrs["max_size"]) + 2 * len(config.attrs["aspect_ratio"])


@register_layer("priorbox")
class PriorBoxLayer(Layer):
    """Default boxes of a feature map (input 0) over an image (input 1, a data layer with
    height and width); attrs ``min_size``, ``max_size``, ``aspect_ratio``, ``variance``.
    No gradient."""

    min_inputs = max_inputs = 2

    @classmethod
    def infer_size(cls, config, inputs):
        _, h, w = image_geometry(config, inputs, 0)
        image_geometry(config, inputs, 1)
        return h * w * priors_per_cell(config) * 8

    def boxes(self) -> np.ndarray:
        """The (priors, 8) prior rows, cell by cell (row-major), then prior by prior."""
        configs = [layer.config for layer in self.inputs]
        _, h, w = image_geometry(self.config, configs, 0)
        _, img_h, img_w = image_geometry(self.config, configs, 1)
        min_size = float(self.attr("min_size")[0])
        sides = [(min_size, min_size)]
        sides += [(float(np.sqrt(min_size * m)),) * 2 for m in self.attr("max_size")]
        for ratio in self.attr("aspect_ratio"):
            for r in (ratio, 1.0 / ratio):
                sides.append((min_size * np.sqrt(r), min_size / np.sqrt(r)))
        half = np.array(sides) / 2  # (k, 2): half width, half height
        cy, cx = np.meshgrid((np.arange(h) + 0.5) * img_h / h, (np.arange(w) + 0.5) * img_w / w,
                             indexing="ij")
        centre = np.stack([cx.ravel(), cy.ravel()], axis=1)[:, None, :]  # (cells, 1, 2)
        scale = np.array([img_w, img_h], dtype=np.float64)
        lo, hi = (centre - half) / scale, (centre + half) / scale
        corners = np.clip(np.concatenate([lo, hi], axis=2), 0.0, 1.0)
        variance = np.broadcast_to(np.asarray(self.attr("variance"), np.float64),
                                   corners.shape)
        return np.concatenate([corners, variance], axis=2).reshape(-1, 8)

    def forward(self, pass_type: str) -> None:
        super().forward(pass_type)
        out = self.reserve_output(1, self.size)
        self.output.seq_starts = self.output.sub_seq_starts = None
        out[...] = get_array_module(out).asarray(self.boxes().reshape(1, -1), dtype=out.dtype)
        self.forward_activation()


def check_input_count(config, inputs, leading: int) -> None:
    """``leading`` inputs (priorbox, label), then ``input_num`` locations and as many scores."""
    pairs = int(config.attrs["input_num"])
    if len(inputs) != leading + 2 * pairs:
        raise ValueError(f"layer {config.name!r} ({config.type}): input_num {pairs} needs "
                         f"{leading + 2 * pairs} inputs, got {len(inputs)}")


class PriorInputs:
    """The inputs ``[priorbox, (label,) loc..., conf...]`` of multibox_loss and
    detection_output, read prior by prior."""

    def __init__(self, layer: Layer, first_loc: int):
        self.layer, self.first_loc = layer, first_loc
        self.pairs = int(layer.attr("input_num"))
        self.classes = int(layer.attr("num_classes"))
        configs = [inp.config for inp in layer.inputs]
        self.locs = list(range(first_loc, first_loc + self.pairs))
        self.confs = list(range(first_loc + self.pairs, first_loc + 2 * self.pairs))
        self.geometry = {i: image_geometry(layer.config, configs, i)
                         for i in self.locs + self.confs}

    def priors(self) -> tuple[np.ndarray, np.ndarray]:
        """Prior boxes (p, 4) and their variances (p, 4), from the priorbox input's row (a
        data layer standing in for it may repeat that row once per sample)."""
        value = to_numpy(self.layer.get_input_value(0)).astype(np.float64)
        if value.shape[1] % 8 or np.any(value != value[:1]):
            raise ValueError(f"layer {self.layer.name!r} ({self.layer.type_name}): input 0 "
                             f"{self.layer.inputs[0].name!r} must be priorbox's row of 8 values "
                             f"per prior (repeated rows equal), got shape {value.shape}")
        rows = value[0].reshape(-1, 8)
        return rows[:, :4], rows[:, 4:]

    def gather(self, indices: list[int], width: int, n_priors: int) -> np.ndarray:
        """The inputs ``indices`` as (batch, priors, width), concatenated prior by prior."""
        for i in indices:
            if self.geometry[i][0] % width:
                raise ValueError(f"layer {self.layer.name!r} ({self.layer.type_name}): input "
                                 f"{i} {self.layer.inputs[i].name!r} has {self.geometry[i][0]} "
                                 f"channels, not a multiple of {width} per prior")
        parts = [bbox.per_prior(to_numpy(self.layer.get_input_value(i)).astype(np.float64),
                                *self.geometry[i], width) for i in indices]
        out = np.concatenate(parts, axis=1)
        if out.shape[1] != n_priors:
            names = [self.layer.inputs[i].name for i in indices]
            raise ValueError(f"layer {self.layer.name!r} ({self.layer.type_name}): inputs "
                             f"{names} hold {out.shape[1]} priors of width {width}, but the "
                             f"priorbox input {self.layer.inputs[0].name!r} has {n_priors}")
        return out

    def scatter(self, indices: list[int], grad: np.ndarray) -> None:
        """Add (batch, priors, width) gradients back into the inputs ``indices``."""
        start = 0
        for i in indices:
            gx = self.layer.get_input_grad(i)
            c, h, w = self.geometry[i]
            count = h * w * c // grad.shape[2]
            part = grad[:, start:start + count]
            start += count
            if gx is not None:
                gx += get_array_module(gx).asarray(bbox.from_per_prior(part, c, h, w),
                                                    dtype=gx.dtype)


@register_layer("multibox_loss")
class MultiBoxLossLayer(Layer):
    """SSD's loss. Inputs ``[priorbox, label, loc..., conf...]``; the label is a sequence per
    image of ``[label, xmin, ymin, xmax, ymax, difficult]`` rows. Output row ``n`` is image
    ``n``'s share ``(loc_n + conf_n) / N_matched`` (N over the batch), so the rows sum to
    PaddlePaddle's loss (which it writes into every row) and, with the network's gradient of
    1 per row, backward is PaddlePaddle's: ``clip(loc - t, -1, 1) / N`` for the matched
    locations, ``(softmax(conf) - onehot) / N`` for the matched and mined confidences."""

    is_cost = True
    min_inputs = 4

    @classmethod
    def infer_size(cls, config, inputs):
        check_input_count(config, inputs, leading=2)
        if inputs[1].size != LABEL_WIDTH:
            raise ValueError(f"layer {config.name!r} (multibox_loss): the label input "
                             f"{inputs[1].name!r} must have width {LABEL_WIDTH} ([label, xmin, "
                             f"ymin, xmax, ymax, difficult]), got {inputs[1].size}")
        return 1

    def _truths(self, batch: int) -> list[np.ndarray]:
        """Per image, its (g, 6) ground-truth rows (none past the label's last sequence)."""
        label = self.get_input(1)
        rows = to_numpy(label.value).astype(np.float64)
        if label.seq_starts is None:
            raise ValueError(f"layer {self.name!r} (multibox_loss): the label input "
                             f"{self.inputs[1].name!r} must be a sequence per image (rows "
                             "[label, xmin, ymin, xmax, ymax, difficult])")
        starts = to_numpy(label.seq_starts).astype(np.int64)
        if len(starts) - 1 > batch:
            raise ValueError(f"layer {self.name!r} (multibox_loss): the label holds "
                             f"{len(starts) - 1} images, the predictions {batch}")
        empty = np.zeros((0, LABEL_WIDTH))
        return [rows[starts[n]:starts[n + 1]] if n + 1 < len(starts) else empty
                for n in range(batch)]

    def forward(self, pass_type: str) -> None:
        super().forward(pass_type)
        ins = PriorInputs(self, first_loc=2)
        priors, variances = ins.priors()
        loc = ins.gather(ins.locs, 4, len(priors))
        conf = ins.gather(ins.confs, ins.classes, len(priors))
        batch = loc.shape[0]
        background = int(self.attr("background_id"))
        prob = softmax(conf.reshape(-1, ins.classes)).reshape(conf.shape)
        foreground = np.delete(prob, background, axis=2).max(axis=2)
        ratio = int(float(self.attr("neg_pos_ratio")))  # Paddle truncates it to an integer
        self._matches, self._targets, self._confs = [], [], []
        for n, truth in enumerate(self._truths(batch)):
            if len(truth) == 0:
                matched = np.full(len(priors), -1)
                negatives = np.zeros(0, dtype=np.int64)
            else:
                matched, overlap = bbox.match(priors, truth[:, 1:5],
                                              float(self.attr("overlap_threshold")))
                pool = np.flatnonzero((matched == -1)
                                      & (overlap < float(self.attr("neg_overlap"))))
                pool = pool[np.argsort(-foreground[n, pool], kind="stable")]
                negatives = pool[:min(int((matched >= 0).sum()) * ratio, len(pool))]
            pos = np.flatnonzero(matched >= 0)
            self._matches.append(pos)
            self._targets.append(bbox.encode(priors[pos], variances[pos],
                                             truth[matched[pos], 1:5]))
            labels = np.concatenate([truth[matched[pos], 0].astype(np.int64),
                                     np.full(len(negatives), background)])
            self._confs.append((np.concatenate([pos, negatives]), labels))
        self._loc, self._prob = loc, prob
        self._n_matched = sum(len(p) for p in self._matches)
        out = self.reserve_output(batch, 1)
        costs = np.zeros(batch)
        if self._n_matched:
            for n in range(batch):
                pos, (rows, labels) = self._matches[n], self._confs[n]
                if labels.size and (labels.min() < 0 or labels.max() >= ins.classes):
                    raise ValueError(f"layer {self.name!r} (multibox_loss): image {n} has a "
                                     f"class label outside [0, {ins.classes})")
                loc_cost = bbox.smooth_l1(loc[n, pos] - self._targets[n]).sum()
                conf_cost = -np.log(prob[n, rows, labels]).sum()
                costs[n] = (loc_cost + conf_cost) / self._n_matched
        out[...] = get_array_module(out).asarray(costs[:, None], dtype=out.dtype)
        self.forward_activation()

    def backward(self, callback=None) -> None:
        self.backward_activation()
        if not self._n_matched:
            return
        ins = PriorInputs(self, first_loc=2)
        dcost = to_numpy(self.output.grad).astype(np.float64)[:, 0] / self._n_matched
        dloc, dconf = np.zeros_like(self._loc), np.zeros_like(self._prob)
        for n, pos in enumerate(self._matches):
            dloc[n, pos] = dcost[n] * bbox.smooth_l1_grad(self._loc[n, pos] - self._targets[n])
            rows, labels = self._confs[n]
            g = self._prob[n, rows].copy()
            g[np.arange(len(rows)), labels] -= 1.0
            dconf[n, rows] = dcost[n] * g
        ins.scatter(ins.locs, dloc)
        ins.scatter(ins.confs, dconf)


@register_layer("detection_output")
class DetectionOutputLayer(Layer):
    """Detections of SSD's predictions. Inputs ``[priorbox, loc..., conf...]``; per image and
    class but the background: the decoded boxes whose softmax score exceeds
    ``confidence_threshold``, at most ``nms_top_k`` of them, through non-maximum suppression
    at ``nms_threshold``; then the ``keep_top_k`` best of the image. Output: one row
    ``[image, label, score, xmin, ymin, xmax, ymax]`` (box clipped to [0, 1]) per detection,
    by image, then class, then score; no rows when nothing is detected. No gradient."""

    min_inputs = 3

    @classmethod
    def infer_size(cls, config, inputs):
        check_input_count(config, inputs, leading=1)
        return int(config.attrs["keep_top_k"]) * DETECTION_WIDTH

    def detections(self) -> np.ndarray:
        """The (detections, 7) rows of this batch."""
        ins = PriorInputs(self, first_loc=1)
        priors, variances = ins.priors()
        loc = ins.gather(ins.locs, 4, len(priors))
        conf = ins.gather(ins.confs, ins.classes, len(priors))
        prob = softmax(conf.reshape(-1, ins.classes)).reshape(conf.shape)
        background, keep_top_k = int(self.attr("background_id")), int(self.attr("keep_top_k"))
        rows = []
        for n in range(loc.shape[0]):
            boxes = bbox.decode(priors, variances, loc[n])
            kept = []  # (score, class, prior)
            for c in range(ins.classes):
                if c == background:
                    continue
                for i in bbox.nms(boxes, prob[n, :, c], float(self.attr("confidence_threshold")),
                                  float(self.attr("nms_threshold")),
                                  int(self.attr("nms_top_k"))):
                    kept.append((prob[n, i, c], c, i))
            if 0 < keep_top_k < len(kept):
                best = sorted(range(len(kept)), key=lambda k: -kept[k][0])[:keep_top_k]
                kept = [kept[k] for k in sorted(best)]  # back to class order, score order
            for score, c, i in kept:
                rows.append([n, c, score, *np.clip(boxes[i], 0.0, 1.0)])
        return np.asarray(rows, dtype=np.float64).reshape(-1, DETECTION_WIDTH)

    def forward(self, pass_type: str) -> None:
        super().forward(pass_type)
        rows = self.detections()
        out = self.reserve_output(len(rows), DETECTION_WIDTH)
        self.output.seq_starts = self.output.sub_seq_starts = None
        out[...] = get_array_module(out).asarray(rows, dtype=out.dtype)
        self.forward_activation()


def _layers(value: Any, what: str, fn: str) -> list[LayerOutput]:
    return as_inputs(value, f"{fn}: {what}")


def _loc_conf(input_loc: Any, input_conf: Any, fn: str) -> tuple[list, list]:
    locs, confs = _layers(input_loc, "input_loc", fn), _layers(input_conf, "input_conf", fn)
    if len(locs) != len(confs):
        raise ValueError(f"{fn}: input_loc and input_conf must list as many layers (one pair "
                         f"per feature map), got {len(locs)} and {len(confs)}")
    return locs, confs


def _classes(num_classes: Any, background_id: Any, fn: str) -> dict[str, int]:
    classes = integer(num_classes, f"{fn}: num_classes", minimum=2)
    background = integer(background_id, f"{fn}: background_id", minimum=0)
    if background >= classes:
        raise ValueError(f"{fn}: background_id must be < num_classes ({classes}), got "
                         f"{background}")
    return {"num_classes": classes, "background_id": background}


def _numbers(values: Sequence[Any] | Any, what: str, fn: str) -> list[float]:
    values = list(values) if isinstance(values, (list, tuple)) else [values]
    return [number(v, f"{fn}: {what}", low=0.0) for v in values]


def _pixels(values: Sequence[Any] | Any, what: str, fn: str) -> list[int]:
    """Box sides in whole pixels, as PaddlePaddle stores them."""
    values = list(values) if isinstance(values, (list, tuple)) else [values]
    return [integer(v, f"{fn}: {what}", minimum=1) for v in values]


@layer_function(v1="priorbox_layer", types=("priorbox",), prefix="priorbox")
def priorbox(input: LayerOutput, image: LayerOutput, aspect_ratio: Sequence[float],  # noqa: A002
             variance: Sequence[float], min_size: Sequence[float] | float,
             max_size: Sequence[float] | float = (), name: str | None = None) -> LayerOutput:
    """SSD's default boxes over the feature map ``input`` of the image data layer ``image``
    (which sets height and width), sides in pixels (ints, as PaddlePaddle stores them):
    ``1 + len(max_size) + 2 len(aspect_ratio)`` boxes per cell,
    each ``[xmin, ymin, xmax, ymax]`` (0..1) and the 4 ``variance`` values."""
    fn = "priorbox"
    mins, maxs = _pixels(min_size, "min_size", fn), _pixels(max_size, "max_size", fn)
    if len(mins) != 1 or len(maxs) > 1:
        raise ValueError(f"{fn}: takes one min_size and at most one max_size (PaddlePaddle's "
                         f"box count assumes so), got min_size={mins}, max_size={maxs}")
    if maxs and maxs[0] < mins[0]:
        raise ValueError(f"{fn}: needs min_size <= max_size, got min_size={mins[0]}, "
                         f"max_size={maxs[0]}")
    ratios = _numbers(aspect_ratio, "aspect_ratio", fn)
    if any(r <= 0 or r == 1.0 for r in ratios):
        raise ValueError(f"{fn}: aspect_ratio values must be > 0 and not 1 (the square box is "
                         f"always laid; each ratio r adds r and 1/r), got {ratios}")
    variances = _numbers(variance, "variance", fn)
    if len(variances) != 4 or min(variances) <= 0:
        raise ValueError(f"{fn}: variance must be 4 positive numbers, got {variances}")
    return make_layer("priorbox", as_inputs([input, image], fn), name=name, bias_attr=False,
                      attrs={"min_size": mins, "max_size": maxs, "aspect_ratio": ratios,
                             "variance": variances})


@layer_function(v1="multibox_loss_layer", types=("multibox_loss",), prefix="multibox_loss")
def multibox_loss(input_loc: LayerOutput | Sequence[LayerOutput],
                  input_conf: LayerOutput | Sequence[LayerOutput], priorbox: LayerOutput,
                  label: LayerOutput, num_classes: int, overlap_threshold: float = 0.5,
                  neg_pos_ratio: float = 3.0, neg_overlap: float = 0.5, background_id: int = 0,
                  name: str | None = None) -> LayerOutput:
    """SSD's loss: smooth L1 of the matched priors' box offsets plus the softmax cross
    entropy of the matched and hard-mined negative priors, over the number of matches.
    ``label``: a sequence per image of ``[label, xmin, ymin, xmax, ymax, difficult]``."""
    fn = "multibox_loss"
    locs, confs = _loc_conf(input_loc, input_conf, fn)
    attrs = {"input_num": len(locs), **_classes(num_classes, background_id, fn),
             "overlap_threshold": number(overlap_threshold, f"{fn}: overlap_threshold", 0, 1),
             "neg_pos_ratio": number(neg_pos_ratio, f"{fn}: neg_pos_ratio", low=0.0),
             "neg_overlap": number(neg_overlap, f"{fn}: neg_overlap", 0, 1)}
    inputs = [*as_inputs([priorbox, label], fn), *locs, *confs]
    return make_layer("multibox_loss", inputs, name=name, size=1, bias_attr=False, attrs=attrs)


@layer_function(v1="detection_output_layer", types=("detection_output",),
                prefix="detection_output")
def detection_output(input_loc: LayerOutput | Sequence[LayerOutput],
                     input_conf: LayerOutput | Sequence[LayerOutput], priorbox: LayerOutput,
                     num_classes: int, nms_threshold: float = 0.45, nms_top_k: int = 400,
                     keep_top_k: int = 200, confidence_threshold: float = 0.01,
                     background_id: int = 0, name: str | None = None) -> LayerOutput:
    """SSD's detections: decoded boxes, per-class non-maximum suppression, the best
    ``keep_top_k`` per image; rows ``[image, label, score, xmin, ymin, xmax, ymax]``."""
    fn = "detection_output"
    locs, confs = _loc_conf(input_loc, input_conf, fn)
    attrs = {"input_num": len(locs), **_classes(num_classes, background_id, fn),
             "nms_threshold": number(nms_threshold, f"{fn}: nms_threshold", 0, 1),
             "nms_top_k": integer(nms_top_k, f"{fn}: nms_top_k", minimum=0),
             "keep_top_k": integer(keep_top_k, f"{fn}: keep_top_k", minimum=1),
             "confidence_threshold": number(confidence_threshold,
                                            f"{fn}: confidence_threshold", 0, 1)}
    inputs = [*as_inputs([priorbox], fn), *locs, *confs]
    return make_layer("detection_output", inputs, name=name,
                      size=attrs["keep_top_k"] * DETECTION_WIDTH, bias_attr=False, attrs=attrs)
