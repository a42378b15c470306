"""Costs over many classes or ranked lists: noise-contrastive estimation (``nce``), the
hierarchical sigmoid (``hsigmoid``) and LambdaRank (``lambda_cost``), as PaddlePaddle's
NCELayer, HierarchicalSigmoidLayer and LambdaCost compute them.
"""

from __future__ import annotations

import math
import zlib
from typing import Any

import numpy as np

from sculler.backend import get_array_module, to_device_of, to_numpy
from sculler.core.expression import (
    LayerOutput,
    as_inputs,
    make_layer,
)
from sculler.core.faces import layer_function
from sculler.core.layer import PASS_GC, Layer, register_layer
from sculler.math.sparse import CsrMatrix


def _num_classes(config, inputs, label_index: int) -> int:
    n = int(config.attrs.get("num_classes") or inputs[label_index].size)
    if n < 2:
        raise ValueError(f"layer {config.name!r} ({config.type}): num_classes must be >= 2, "
                         f"got {n}")
    return n


def _dense_features(layer: Layer, count: int) -> list:
    values = []
    for i in range(count):
        v = layer.get_input_value(i)
        if v is None or isinstance(v, CsrMatrix):
            raise ValueError(f"layer {layer.name!r} ({layer.type_name}): feature input {i} "
                             f"({layer.inputs[i].name!r}) must be dense, got "
                             f"{layer.get_input(i).describe()}")
        values.append(v)
    return values


@register_layer("nce")
class NCELayer(Layer):
    """Noise-contrastive estimation: each sample's true class(es) against ``num_neg_samples``
    classes drawn from ``q`` (``neg_distribution``, uniform by default). With
    ``o = sigmoid(b_c + sum_l x_l . W_l[c])`` and ``k = num_neg_samples * q(c)``:
    ``cost_i = w_i * (sum_true -log(o/(o+k)) + sum_noise -log(k/(o+k)))``.

    Inputs: feature layers (each with a (num_classes, width) weight), the label (ids, or a
    sparse multi-hot value), and the per-sample ``weight`` column when attr ``with_weight``.
    Draws come from a generator seeded by the layer name (reproducible across processes) and
    are reseeded identically on every PASS_GC forward so gradient checks see one sample.
    """

    is_cost = True
    default_bias = True
    min_inputs = 2

    def __init__(self, config):
        super().__init__(config)
        self._noise: np.random.RandomState | None = None

    @classmethod
    def _num_features(cls, config) -> int:
        return len(config.inputs) - 1 - int(bool(config.attrs.get("with_weight", False)))

    @classmethod
    def infer_size(cls, config, inputs):
        return 1

    @classmethod
    def weight_dims(cls, config, inputs):
        n = _num_classes(config, inputs, cls._num_features(config))
        return {i: (n, inputs[i].size) for i in range(cls._num_features(config))}

    @classmethod
    def bias_dims(cls, config, inputs):
        return (1, _num_classes(config, inputs, cls._num_features(config)))

    @classmethod
    def check_config(cls, config, inputs):
        super().check_config(config, inputs)
        if cls._num_features(config) < 1:
            raise ValueError(f"layer {config.name!r} (nce) needs at least one feature input "
                             f"before the label, got inputs {config.input_layer_names}")
        n = _num_classes(config, inputs, cls._num_features(config))
        dist = config.attrs.get("neg_distribution")
        if dist is not None and (len(dist) != n or abs(sum(dist) - 1.0) > 1e-6
                                 or min(dist) < 0):
            raise ValueError(f"layer {config.name!r} (nce): neg_distribution must hold "
                             f"{n} non-negative probabilities summing to 1, got {dist!r}")

    def _samples(self, batch: int, n: int):
        """Rows, classes and true/noise flags of every (sample, class) pair of this batch, and
        ``k q(class)``; drawn on the host (the same noise on every device)."""
        label = self.get_input(self._num_features(self.config))
        if label.ids is not None:
            true_rows, true_cls = np.arange(batch), to_numpy(label.ids)
        elif isinstance(label.value, CsrMatrix):
            true_rows, true_cls = to_numpy(label.value.row_ids), to_numpy(label.value.indices)
        else:
            raise ValueError(f"layer {self.name!r} (nce): the label must be ids or a sparse "
                             f"multi-hot value, got {label.describe()}")
        if true_cls.size and (true_cls.min() < 0 or true_cls.max() >= n):
            raise ValueError(f"layer {self.name!r} (nce): label ids must be in [0, {n})")
        k = int(self.attr("num_neg_samples", 10))
        if self._noise is None or self.pass_type == PASS_GC:
            self._noise = np.random.RandomState(zlib.crc32(self.name.encode()))
        rng = self._noise
        dist = self.attr("neg_distribution")
        noise = (rng.choice(n, size=(batch, k), p=np.asarray(dist)) if dist is not None
                 else rng.randint(0, n, size=(batch, k)))
        rows = np.concatenate([true_rows, np.repeat(np.arange(batch), k)])
        cls = np.concatenate([true_cls, noise.reshape(-1)]).astype(np.int64)
        target = np.arange(rows.size) < true_rows.size
        q = np.full(rows.size, 1.0 / n) if dist is None else np.asarray(dist)[cls]
        return rows, cls, target, k * q

    def forward(self, pass_type: str) -> None:
        super().forward(pass_type)
        nf = self._num_features(self.config)
        xs = _dense_features(self, nf)
        batch = xs[0].shape[0]
        n = self.weights[0].w.shape[0]
        host_rows, *picks = self._samples(batch, n)
        rows, cls, target, b = (to_device_of(a, xs[0]) for a in (host_rows, *picks))
        z = (self.bias.w[0, cls].copy() if self.bias is not None
             else get_array_module(xs[0]).zeros(rows.size))
        for x, wt in zip(xs, self.weights):
            z += np.einsum("ij,ij->i", x[rows], wt.w[cls])
        o = 1.0 / (1.0 + np.exp(-z))
        cost = np.where(target, -np.log(o / (o + b)), -np.log(b / (o + b)))
        # summed on the host: a device bincount adds in a varying order (not deterministic)
        raw = to_device_of(np.bincount(host_rows, weights=to_numpy(cost), minlength=batch),
                           cost)
        self._saved = (rows, cls, target, b, o, raw)
        out = self.reserve_output(batch, 1)
        out[:, 0] = raw * self._weight_column()[:, 0] if self.attr("with_weight") else raw
        self.forward_activation()

    def _weight_column(self):
        return self.get_input_value(len(self.inputs) - 1)

    def backward(self, callback=None) -> None:
        self.backward_activation()
        rows, cls, target, b, o, raw = self._saved
        dout = self.output.grad[:, 0].copy()
        if self.attr("with_weight"):
            wgrad = self.get_input_grad(len(self.inputs) - 1)
            if wgrad is not None:
                wgrad[:, 0] += dout * raw
            dout *= self._weight_column()[:, 0]
        # d cost / d o, then through the sigmoid
        do = np.where(target, -b / (o * (o + b)), 1.0 / (o + b)) * dout[rows]
        dz = do * o * (1.0 - o)
        if self.bias is not None and self.bias.w_grad is not None:
            np.add.at(self.bias.w_grad[0], cls, dz)
            self.bias.parameter.inc_update(callback)
        for i, wt in enumerate(self.weights[: self._num_features(self.config)]):
            x = self.get_input_value(i)
            if wt.w_grad is not None:
                np.add.at(wt.w_grad, cls, dz[:, None] * x[rows])
                wt.parameter.inc_update(callback)
            dx = self.get_input_grad(i)
            if dx is not None:
                np.add.at(dx, rows, dz[:, None] * wt.w[cls])


@register_layer("hsigmoid")
class HierarchicalSigmoidLayer(Layer):
    """Hierarchical sigmoid over Paddle's implicit binary code tree: class ``c`` has code
    ``m = c + num_classes``; its ``L = bitlen(m) - 1`` decisions use node ``(m >> (j+1)) - 1``
    and bit ``(m >> j) & 1``. With ``z_j = b[node_j] + sum_l x_l . W_l[node_j]`` clipped to
    [-40, 40]: ``cost = sum_{j<C} log(1 + e^{z_j}) - sum_{j<L} bit_j z_j`` where
    ``C = bitlen(num_classes - 1)`` and ``z_j = 0`` for ``L <= j < C`` (so shorter codes add
    ``log 2`` each, as in Paddle); ``dz_j = sigmoid(z_j) - bit_j`` for ``j < L``.

    Inputs: feature layers (each with a (num_classes - 1, width) weight), then the label ids.
    """

    is_cost = True
    default_bias = True
    min_inputs = 2

    @classmethod
    def infer_size(cls, config, inputs):
        return 1

    @classmethod
    def weight_dims(cls, config, inputs):
        n = _num_classes(config, inputs, len(inputs) - 1)
        return {i: (n - 1, inputs[i].size) for i in range(len(inputs) - 1)}

    @classmethod
    def bias_dims(cls, config, inputs):
        return (1, _num_classes(config, inputs, len(inputs) - 1) - 1)

    def _codes(self, n: int):
        label = self.get_input(len(self.inputs) - 1)
        ids = label.ids
        if ids is None or (ids.size and (ids.min() < 0 or ids.max() >= n)):
            raise ValueError(f"layer {self.name!r} (hsigmoid): the label must be ids in "
                             f"[0, {n}), got {label.describe()}")
        code = to_numpy(ids).astype(np.int64) + n
        width = int(n - 1).bit_length()
        length = np.floor(np.log2(code)).astype(np.int64)
        j = np.arange(width)
        mask = j[None, :] < length[:, None]
        node = np.where(mask, (code[:, None] >> (j + 1)) - 1, 0)
        bit = np.where(mask, (code[:, None] >> j) & 1, 0).astype(self.dtype)
        like = self.weights[0].w
        return to_device_of(node, like), to_device_of(bit, like), to_device_of(mask, like)

    def forward(self, pass_type: str) -> None:
        super().forward(pass_type)
        xs = _dense_features(self, len(self.inputs) - 1)
        n = self.weights[0].w.shape[0] + 1
        node, bit, mask = self._codes(n)
        z = (self.bias.w[0, node].copy() if self.bias is not None
             else get_array_module(node).zeros(node.shape))
        for x, wt in zip(xs, self.weights):
            z += np.einsum("id,ijd->ij", x, wt.w[node])
        z *= mask
        np.clip(z, -40.0, 40.0, out=z)
        self._saved = (node, bit, mask, z)
        out = self.reserve_output(xs[0].shape[0], 1)
        out[:, 0] = np.logaddexp(0.0, z).sum(axis=1) - (bit * z).sum(axis=1)
        self.forward_activation()

    def backward(self, callback=None) -> None:
        self.backward_activation()
        node, bit, mask, z = self._saved
        dz = (1.0 / (1.0 + np.exp(-z)) - bit) * mask * self.output.grad[:, :1]
        if self.bias is not None and self.bias.w_grad is not None:
            np.add.at(self.bias.w_grad[0], node[mask], dz[mask])
            self.bias.parameter.inc_update(callback)
        for i, wt in enumerate(self.weights[:-1]):
            x = self.get_input_value(i)
            if wt.w_grad is not None:
                rows = np.nonzero(mask)[0]
                np.add.at(wt.w_grad, node[mask], dz[mask][:, None] * x[rows])
                wt.parameter.inc_update(callback)
            dx = self.get_input_grad(i)
            if dx is not None:
                dx += np.einsum("ij,ijd->id", dz, wt.w[node])


def _dcg(relevance) -> float:
    """``sum_i (2^rel_i - 1) / ln(i + 2)`` over the given ranked relevances."""
    rel = np.asarray(relevance, dtype=np.float64)
    return float(((2.0 ** rel - 1.0) / np.log(np.arange(rel.size) + 2.0)).sum())


@register_layer("lambda_cost")
class LambdaCost(Layer):
    """LambdaRank for lists (one sequence per query). Inputs: the model's scores ``o`` and the
    true relevances ``s``, both width 1. Forward writes each list's NDCG@k
    (``k = NDCG_num``; ``DCG(rank by o) / DCG(rank by s)`` with ``DCG = sum_{i<k}
    (2^s - 1)/ln(i+2)``) on every row of the list. Backward is Paddle's LambdaRank
    approximation, not the derivative of NDCG: for pairs ``(i, j)`` in true order,
    ``lambda = -|dDCG_ij| / (1 + exp(o_i - o_j)) / maxDCG`` is added to ``o_i`` and taken from
    ``o_j`` (``max_sort_size`` bounds the sorted head; -1 sorts all). The incoming gradient
    is ignored, as in Paddle.
    """

    is_cost = True
    min_inputs = 2
    max_inputs = 2

    @classmethod
    def infer_size(cls, config, inputs):
        k, m = int(config.attrs.get("NDCG_num", 5)), int(config.attrs.get("max_sort_size", -1))
        if m != -1 and m < k:
            raise ValueError(f"layer {config.name!r} (lambda_cost): max_sort_size ({m}) must "
                             f"be -1 or >= NDCG_num ({k})")
        return 1

    def _lists(self):
        starts = self.get_input(0).seq_starts
        if starts is None:
            raise ValueError(f"layer {self.name!r} (lambda_cost): input "
                             f"{self.inputs[0].name!r} must be a sequence (one list per query)")
        k = int(self.attr("NDCG_num", 5))
        for s, e in zip(starts[:-1], starts[1:]):
            if e - s < k:
                raise ValueError(f"layer {self.name!r} (lambda_cost): a list has {e - s} "
                                 f"items, fewer than NDCG_num={k}")
            yield int(s), int(e)

    def forward(self, pass_type: str) -> None:
        super().forward(pass_type)
        self.check_same_batch()
        for i in range(2):
            # Checked when run, not in the config: PaddlePaddle parses a wider input and its
            # LambdaCost then reads the matrix's first values as if it were one column.
            if self.get_input_value(i).shape[1] != 1:
                raise ValueError(f"layer {self.name!r} (lambda_cost): input "
                                 f"{self.inputs[i].name!r} has width "
                                 f"{self.get_input_value(i).shape[1]}; scores and relevances "
                                 "need width 1 (PaddlePaddle would read the first values of "
                                 "the matrix as one column, a meaningless cost)")
        o, s = self.get_input_value(0)[:, 0], self.get_input_value(1)[:, 0]
        k = int(self.attr("NDCG_num", 5))
        out = self.reserve_output(o.shape[0], 1)
        for b, e in self._lists():
            by_output = np.argsort(-o[b:e], kind="stable")[:k]
            ideal = _dcg(np.sort(s[b:e])[::-1][:k])
            if ideal <= 0:
                raise ValueError(f"layer {self.name!r} (lambda_cost): a list's best DCG is 0 "
                                 "(no positive relevance in its top NDCG_num)")
            out[b:e, 0] = _dcg(s[b:e][by_output]) / ideal
        self.forward_activation()

    def backward(self, callback=None) -> None:
        dx = self.get_input_grad(0)
        if dx is None:
            return
        o, s = self.get_input_value(0)[:, 0], self.get_input_value(1)[:, 0]
        k, m = int(self.attr("NDCG_num", 5)), int(self.attr("max_sort_size", -1))
        for b, e in self._lists():
            dx[b:e, 0] += lambda_gradient(o[b:e], s[b:e], k, m)


def lambda_gradient(o, s, k: int, max_sort_size: int = -1) -> np.ndarray:
    """Paddle's LambdaRank gradient of one list (scores ``o``, relevances ``s``)."""
    size = o.size
    sort = size if max_sort_size == -1 else min(max_sort_size, size)
    order = np.argsort(-s, kind="stable")
    max_dcg = _dcg(s[order[:k]])
    grad = np.zeros(size)
    log_pos = np.log(np.arange(size) + 2.0)
    for a in range(sort):
        i = order[a]
        for c in range(a + 1, size):
            j = order[c]
            gain = 2.0 ** s[i] - 2.0 ** s[j]
            denom = log_pos[a] - log_pos[c] if c < sort else log_pos[a]
            lam = -abs(gain / denom) / (1.0 + math.exp(o[i] - o[j])) / max_dcg
            grad[i] += lam
            grad[j] -= lam
    return grad


@layer_function(v1="lambda_cost", types=("lambda_cost",))
def lambda_cost(input: LayerOutput, score: LayerOutput, name: str | None = None,  # noqa: A002
                NDCG_num: int = 5, max_sort_size: int = -1,  # noqa: N803
                layer_attr: Any = None) -> LayerOutput:
    """LambdaRank over lists (sequences): forward gives each list's NDCG@``NDCG_num`` of the
    model scores ``input`` against relevances ``score``; backward is LambdaRank's gradient."""
    for key, val in (("NDCG_num", NDCG_num), ("max_sort_size", max_sort_size)):
        if isinstance(val, bool) or not isinstance(val, int):
            raise TypeError(f"lambda_cost: {key} must be an int, got {val!r}")
    if NDCG_num < 1:
        raise ValueError(f"lambda_cost: NDCG_num must be >= 1, got {NDCG_num}")
    return make_layer("lambda_cost", as_inputs([input, score], "lambda_cost"), name=name,
                      name_prefix="lambda_cost", layer_attr=layer_attr,
                      attrs={"NDCG_num": NDCG_num, "max_sort_size": max_sort_size})


@layer_function(v1="nce_layer", types=("nce",))
def nce(input: Any, label: LayerOutput, num_classes: int | None = None,  # noqa: A002
        param_attr: Any = None, weight: LayerOutput | None = None, num_neg_samples: int = 10,
        neg_distribution: list[float] | None = None, name: str | None = None,
        bias_attr: Any = None, layer_attr: Any = None) -> LayerOutput:
    """Noise-contrastive estimation cost: the true class against ``num_neg_samples`` classes
    drawn from ``neg_distribution`` (uniform by default), one (num_classes x width) weight
    per input and a bias. ``num_classes`` defaults to the label layer's size."""
    feats = as_inputs(input, "nce")
    n = int(num_classes if num_classes is not None else label.size)
    if neg_distribution is not None:
        neg_distribution = [float(p) for p in neg_distribution]
        if len(neg_distribution) != n or abs(sum(neg_distribution) - 1.0) > 1e-6:
            raise ValueError(f"nce: neg_distribution must have num_classes={n} probabilities "
                             f"summing to 1, got {len(neg_distribution)} summing to "
                             f"{sum(neg_distribution):.6g}")
    if isinstance(num_neg_samples, bool) or not isinstance(num_neg_samples, int) or (
            num_neg_samples < 1):
        raise ValueError(f"nce: num_neg_samples must be a positive int, got "
                         f"{num_neg_samples!r}")
    inputs = feats + [label] + ([weight] if weight is not None else [])
    pattrs = param_attr
    if isinstance(param_attr, (list, tuple)):
        pattrs = list(param_attr) + [None] * (len(inputs) - len(param_attr))
    elif param_attr is not None:
        pattrs = [param_attr] * len(feats) + [None] * (len(inputs) - len(feats))
    return make_layer("nce", as_inputs(inputs, "nce"), name=name, name_prefix="nce_layer",
                      param_attr=pattrs, bias_attr=bias_attr, layer_attr=layer_attr,
                      attrs={"num_classes": n, "num_neg_samples": num_neg_samples,
                             "neg_distribution": neg_distribution,
                             "with_weight": weight is not None})


@layer_function(v1="hsigmoid", types=("hsigmoid",))
def hsigmoid(input: Any, label: LayerOutput, num_classes: int | None = None,  # noqa: A002
             name: str | None = None, bias_attr: Any = None, param_attr: Any = None,
             layer_attr: Any = None) -> LayerOutput:
    """Hierarchical sigmoid cost over Paddle's binary code tree of ``num_classes`` leaves
    (default: the label layer's size); one (num_classes - 1) x width weight per input."""
    feats = as_inputs(input, "hsigmoid")
    n = int(num_classes if num_classes is not None else label.size)
    if n < 2:
        raise ValueError(f"hsigmoid: num_classes must be >= 2, got {n}")
    pattrs = param_attr
    if isinstance(param_attr, (list, tuple)):
        pattrs = list(param_attr) + [None]
    elif param_attr is not None:
        pattrs = [param_attr] * len(feats) + [None]
    return make_layer("hsigmoid", as_inputs(feats + [label], "hsigmoid"), name=name,
                      name_prefix="hsigmoid", param_attr=pattrs, bias_attr=bias_attr,
                      layer_attr=layer_attr, attrs={"num_classes": n})
