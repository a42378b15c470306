"""Values of the extra cost layers against formulas computed by hand, and their errors."""

import math

import numpy as np
import pytest

from sculler import backend
from sculler.core.argument import Argument
from sculler.core.builder import ModelBuilder
from sculler.core.model_config import InputConfig, LayerConfig
from sculler.core.network import Network
from sculler.core.parameter import ParameterSet
from sculler.math.sparse import CsrMatrix


def run_cost(layer_type, args, attrs=None, sizes=None, bias=None, weight_attrs=None):
    """Forward a cost layer fed directly by data layers; returns (network, cost column)."""
    with backend.default_dtype(np.float64):
        b = ModelBuilder()
        names = []
        for i, arg in enumerate(args):
            width = arg.value.shape[1] if arg.value is not None else args[0].value.shape[1]
            size = sizes[i] if sizes else width
            names.append(f"in{i}")
            b.add_layer(LayerConfig(f"in{i}", "data", size=size))
        b.add_layer(LayerConfig("cost", layer_type, inputs=[InputConfig(n) for n in names],
                                attrs=dict(attrs or {})), weight_attrs=weight_attrs,
                    bias_attr=bias)
        net = Network(b.build(["cost"]), ParameterSet(seed=1), data_gradients=True)
        out = net.forward(dict(zip(names, args)), "test")[0].value[:, 0].copy()
    return net, out


def test_selfnorm_cost_adds_log_partition_and_its_square():
    x = np.array([[0.5, 1.0, 1.5], [0.2, 0.2, 0.6]])
    _, out = run_cost("multi_class_cross_entropy_with_selfnorm",
                      [Argument(x), Argument(ids=np.array([2, 0]))],
                      {"softmax_selfnorm_alpha": 0.25})
    z0 = 3.0  # second row: Z = 1, so log Z = 0
    expect = [-math.log(1.5) + math.log(z0) + 0.25 * math.log(z0) ** 2, -math.log(0.2)]
    np.testing.assert_allclose(out, expect, rtol=1e-12)


def test_multi_binary_sparse_dense_and_id_labels_agree():
    p = np.array([[0.9, 0.2, 0.6], [0.3, 0.8, 0.1]])
    expect = [-(math.log(0.9) + math.log(0.8) + math.log(0.6)),
              -(math.log(0.7) + math.log(0.8) + math.log(0.9))]
    sparse = CsrMatrix.from_rows([[0, 2], [1]], 3, False, dtype=np.float64)
    dense = np.array([[1.0, 0.0, 1.0], [0.0, 1.0, 0.0]])
    for label in (Argument(sparse), Argument(dense)):
        _, out = run_cost("multi_binary_label_cross_entropy", [Argument(p), label])
        np.testing.assert_allclose(out, expect, rtol=1e-12)
    _, out = run_cost("multi_binary_label_cross_entropy",
                      [Argument(p), Argument(ids=np.array([0, 1]))], sizes=[3, 3])
    np.testing.assert_allclose(out[1], expect[1], rtol=1e-12)
    np.testing.assert_allclose(out[0], -(math.log(0.9) + math.log(0.8) + math.log(0.4)))


def test_soft_binary_cross_entropy():
    p = np.array([[0.25, 0.5]])
    y = np.array([[0.1, 1.0]])
    _, out = run_cost("soft_binary_class_cross_entropy", [Argument(p), Argument(y)])
    expect = -(0.1 * math.log(0.25) + 0.9 * math.log(0.75) + math.log(0.5))
    np.testing.assert_allclose(out, [expect], rtol=1e-12)


def test_huber_regression_quadratic_then_linear():
    x = np.array([[0.0, 3.0, -1.0]])
    y = np.array([[0.5, 0.0, 1.0]])
    _, out = run_cost("huber_regression", [Argument(x), Argument(y)], {"delta": 1.0})
    # |a| = 0.5 -> 0.125; 3 -> 1*(3 - 0.5) = 2.5; 2 -> 1.5
    np.testing.assert_allclose(out, [0.125 + 2.5 + 1.5])
    net, out = run_cost("huber_regression", [Argument(x), Argument(y)], {"delta": 2.0})
    np.testing.assert_allclose(out, [0.125 + 2 * (3 - 1) + 2.0])
    net.backward()
    np.testing.assert_allclose(net.data_layers[0].output.grad, [[-0.5, 2.0, -2.0]])


def test_huber_classification_three_pieces():
    f = np.array([[-2.0], [0.5], [1.5], [0.5]])
    ids = np.array([1, 1, 1, 0])
    net, out = run_cost("huber_classification", [Argument(f), Argument(ids=ids)],
                        sizes=[1, 2])
    # y f = -2 -> 8; 0.5 -> 0.25; 1.5 -> 0; label 0: y f = -0.5 -> 2.25
    np.testing.assert_allclose(out, [8.0, 0.25, 0.0, 2.25])
    net.backward()
    np.testing.assert_allclose(net.data_layers[0].output.grad[:, 0], [-4.0, -1.0, 0.0, 3.0])


def test_smooth_l1_and_coefficient_and_weight():
    x = np.array([[0.5, 2.0], [0.0, -0.2]])
    y = np.zeros((2, 2))
    w = np.array([[1.0], [3.0]])
    _, out = run_cost("smooth_l1", [Argument(x), Argument(y), Argument(w)], {"coeff": 2.0})
    np.testing.assert_allclose(out, [2 * (0.125 + 1.5), 2 * 3 * 0.02])


def test_sum_cost_sums_rows_and_passes_gradient_one():
    x = np.array([[1.0, 2.0, 3.0], [-1.0, 0.5, 0.0]])
    net, out = run_cost("sum_cost", [Argument(x)])
    np.testing.assert_allclose(out, [6.0, -0.5])
    net.backward()
    np.testing.assert_array_equal(net.data_layers[0].output.grad, np.ones((2, 3)))


def test_label_mismatch_errors_name_the_layer():
    with pytest.raises(ValueError, match="must be a dense value of shape"):
        run_cost("smooth_l1", [Argument(np.zeros((2, 3))), Argument(np.zeros((2, 2)))])
    with pytest.raises(ValueError, match="width 1"):
        run_cost("huber_classification", [Argument(np.zeros((2, 3))),
                                          Argument(ids=np.array([0, 1]))], sizes=[3, 2])
    with pytest.raises(ValueError, match="out of range"):
        run_cost("huber_classification", [Argument(np.zeros((2, 1))),
                                          Argument(ids=np.array([0, 2]))], sizes=[1, 2])


def _softplus(z):
    return math.log1p(math.exp(z))


def test_hsigmoid_matches_the_code_tree_by_hand():
    # num_classes = 3: codes 3 (0b11) and 4 (0b100); code width C = bitlen(2) = 2
    x = np.array([[1.0, 2.0], [0.5, -1.0]])
    net, _ = run_cost("hsigmoid", [Argument(x), Argument(ids=np.array([0, 1]))],
                      {"num_classes": 3}, sizes=[2, 3])
    w = net.get_layer("cost").weights[0].w
    b = net.get_layer("cost").bias.w[0]
    w[...] = [[0.1, -0.2], [0.3, 0.4]]
    b[...] = [0.05, -0.1]
    out = net.forward({"in0": Argument(x), "in1": Argument(ids=np.array([0, 1]))},
                      "test")[0].value[:, 0]
    # class 0: code 3 = 0b11, length 1: node (3>>1)-1 = 0, bit 1; position 1 unused -> log 2
    z = b[0] + x[0] @ w[0]
    expect0 = _softplus(z) - z + math.log(2.0)
    # class 1: code 4 = 0b100, length 2: nodes (4>>1)-1 = 1 (bit 0), (4>>2)-1 = 0 (bit 0)
    z0, z1 = b[1] + x[1] @ w[1], b[0] + x[1] @ w[0]
    expect1 = _softplus(z0) + _softplus(z1)
    np.testing.assert_allclose(out, [expect0, expect1], rtol=1e-12)


def test_nce_cost_formula_with_a_fixed_draw():
    x = np.array([[1.0, -1.0]])
    args = [Argument(x), Argument(ids=np.array([2]))]
    net, _ = run_cost("nce", args, {"num_classes": 4, "num_neg_samples": 2}, sizes=[2, 4])
    layer = net.get_layer("cost")
    with backend.default_dtype(np.float64):
        out = net.forward(dict(zip(["in0", "in1"], args)), "gc")[0].value[0, 0]
    rows, cls, target, k, o, _ = layer._saved
    assert list(target) == [True, False, False] and cls[0] == 2 and np.all(k == 0.5)
    z = layer.bias.w[0, cls] + layer.weights[0].w[cls] @ x[0]
    sig = 1 / (1 + np.exp(-z))
    expect = -math.log(sig[0] / (sig[0] + 0.5)) - sum(math.log(0.5 / (s + 0.5)) for s in sig[1:])
    assert out == pytest.approx(expect, rel=1e-12)


def _ndcg(o, s, k):
    def dcg(rel):
        return sum((2 ** r - 1) / math.log(i + 2) for i, r in enumerate(rel[:k]))
    ranked = [s[i] for i in sorted(range(len(o)), key=lambda i: -o[i])]
    return dcg(ranked) / dcg(sorted(s, reverse=True))


def test_lambda_cost_ndcg_and_lambda_gradient_against_direct_loops():
    o = np.array([0.3, 0.9, 0.1, 0.5, 0.2, 0.8, 0.4])
    s = np.array([2.0, 0.0, 1.0, 3.0, 1.0, 0.0, 2.0])
    starts = np.array([0, 4, 7])
    args = [Argument(o[:, None], seq_starts=starts), Argument(s[:, None], seq_starts=starts)]
    net, out = run_cost("lambda_cost", args, {"NDCG_num": 2})
    ndcg = [_ndcg(o[:4], s[:4], 2), _ndcg(o[4:], s[4:], 2)]
    np.testing.assert_allclose(out, [ndcg[0]] * 4 + [ndcg[1]] * 3, rtol=1e-12)
    net.backward()
    grad = net.data_layers[0].output.grad[:, 0]
    # direct LambdaRank: pairs (a, c) in true order, |delta DCG| over the position logs
    for lo, hi in ((0, 4), (4, 7)):
        oo, ss = o[lo:hi], s[lo:hi]
        order = sorted(range(len(ss)), key=lambda i: -ss[i])
        best = sum((2 ** ss[i] - 1) / math.log(r + 2) for r, i in enumerate(order[:2]))
        expect = np.zeros(len(ss))
        for a in range(len(ss)):
            for c in range(a + 1, len(ss)):
                i, j = order[a], order[c]
                d = (2 ** ss[i] - 2 ** ss[j]) / (math.log(a + 2) - math.log(c + 2))
                lam = -abs(d) / (1 + math.exp(oo[i] - oo[j])) / best
                expect[i] += lam
                expect[j] -= lam
        np.testing.assert_allclose(grad[lo:hi], expect, rtol=1e-12)
    with pytest.raises(ValueError, match="fewer than NDCG_num"):
        run_cost("lambda_cost", args, {"NDCG_num": 4})
