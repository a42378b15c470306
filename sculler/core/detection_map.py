"""The ``detection_map`` evaluator: mean average precision of SSD detections over a pass, as
PaddlePaddle's DetectionMAPEvaluator.cpp computes it.

Inputs: ``detection_output``'s rows ``[image, label, score, xmin, ymin, xmax, ymax]`` and the
ground truth, a sequence per image of ``[label, xmin, ymin, xmax, ymax, difficult]``. Per
image and class, detections are taken best score first; one is a true positive when its best
overlap with a ground-truth box of its class exceeds ``overlap_threshold`` and that box is not
taken yet (a match to a difficult box counts neither way unless ``evaluate_difficult``). Per
class, precision ``tp / (tp + fp)`` and recall ``tp / positives`` along the score order give

- ``11point`` (VOC2007): ``AP = sum_{t=0,0.1..1} max_{recall >= t} precision / 11``;
- ``Integral``: ``AP = sum_i precision_i (recall_i - recall_{i-1})``.

The value is the mean AP over classes with ground truth and detections, in percent (x 100).
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from sculler.backend import to_numpy
from sculler.core.evaluator_base import Evaluator, register_evaluator
from sculler.math.bbox import iou_matrix

AP_TYPES = ("11point", "Integral")


def average_precision(scored_hits: list[tuple[float, int]], positives: int, ap_type: str) -> float:
    """AP of one class from its (score, 1 if true positive else 0) pairs."""
    order = sorted(scored_hits, key=lambda pair: -pair[0])
    tp = np.cumsum([hit for _, hit in order])
    fp = np.cumsum([1 - hit for _, hit in order])
    precision, recall = tp / np.maximum(tp + fp, 1), tp / positives
    if ap_type == "Integral":
        steps = np.diff(np.concatenate([[0.0], recall]))
        return float(np.sum(np.where(np.abs(steps) > 1e-6, precision * np.abs(steps), 0.0)))
    best = [precision[recall >= t / 10].max(initial=0.0) for t in range(11)]
    return float(np.sum(best) / 11)


@register_evaluator("detection_map")
class DetectionMAP(Evaluator):
    """Mean average precision of detections (attrs ``overlap_threshold``,
    ``background_id``, ``evaluate_difficult``, ``ap_type``); ``value()`` in percent."""

    def start(self) -> None:
        super().start()
        self.hits: dict[int, list[tuple[float, int]]] = defaultdict(list)
        self.positives: dict[int, int] = defaultdict(int)

    def eval_batch(self, layers: dict) -> None:
        names = self.config.input_layers
        detections = to_numpy(layers[names[0]].output.value)
        label = layers[names[1]].output
        if label.seq_starts is None:
            raise ValueError(f"evaluator {self.name!r} (detection_map): the label "
                             f"{names[1]!r} must be a sequence per image of [label, xmin, ymin, "
                             "xmax, ymax, difficult] rows")
        truth = to_numpy(label.value).astype(np.float64)
        starts = to_numpy(label.seq_starts).astype(np.int64)
        detections = (np.zeros((0, 7)) if detections is None or detections.size == 0
                      else detections.astype(np.float64).reshape(-1, 7))
        difficult_counts = bool(self.config.attrs.get("evaluate_difficult", False))
        for n in range(len(starts) - 1):
            gts = truth[starts[n]:starts[n + 1]]
            for c in np.unique(gts[:, 0]).astype(int):
                mine = gts[gts[:, 0] == c]
                self.positives[c] += int(len(mine) if difficult_counts
                                         else (np.abs(mine[:, 5]) < 1e-6).sum())
            dets = detections[detections[:, 0] == n]
            for c in np.unique(dets[:, 1]).astype(int):
                self._match(dets[dets[:, 1] == c], gts[gts[:, 0] == c], c, difficult_counts)
        self.count += len(starts) - 1

    def _match(self, dets: np.ndarray, gts: np.ndarray, c: int, difficult_counts: bool) -> None:
        """Mark one image's detections of class ``c`` true or false positives."""
        dets = dets[np.argsort(-dets[:, 2], kind="stable")]
        taken = np.zeros(len(gts), dtype=bool)
        overlaps = iou_matrix(dets[:, 3:7], gts[:, 1:5]) if len(gts) else None
        threshold = float(self.config.attrs.get("overlap_threshold", 0.5))
        for k, score in enumerate(dets[:, 2]):
            if overlaps is None or overlaps[k].max() <= threshold:
                self.hits[c].append((score, 0))
                continue
            j = int(overlaps[k].argmax())
            if not difficult_counts and abs(gts[j, 5]) >= 1e-6:
                continue  # a difficult box: neither a hit nor a miss
            self.hits[c].append((score, 0 if taken[j] else 1))
            taken[j] = True

    def value(self) -> float:
        ap_type = self.config.attrs.get("ap_type", "11point")
        aps = [average_precision(self.hits[c], positives, ap_type)
               for c, positives in sorted(self.positives.items())
               if positives > 0 and self.hits.get(c)]
        return 100.0 * float(np.mean(aps)) if aps else 0.0
