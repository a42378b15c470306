"""Forward values of the mixed and dense layers against hand formulas (engine level)."""

import numpy as np
import pytest

from sculler import backend
from sculler.core.argument import Argument
from sculler.core.builder import ModelBuilder
from sculler.core.layer import PASS_TEST
from sculler.core.model_config import InputConfig, LayerConfig
from sculler.core.network import Network
from sculler.core.parameter import ParameterSet
from sculler.math.sparse import CsrMatrix

RNG = np.random.RandomState(0)


@pytest.fixture(autouse=True)
def float64():
    with backend.default_dtype(np.float64):
        yield


def run(layer_type, args, widths, size=0, attrs=None, in_attrs=None, bias=None, params=None,
        act="linear"):
    """Forward one ``layer_type`` layer over data inputs ``args`` (Arguments) of ``widths``;
    ``params`` sets parameter values by name. Returns (output Argument, network)."""
    b = ModelBuilder()
    names = [f"in{i}" for i in range(len(args))]
    for n, w in zip(names, widths):
        b.add_layer(LayerConfig(n, "data", size=w))
    in_attrs = in_attrs or [{}] * len(args)
    b.add_layer(LayerConfig("out", layer_type, size=size, active_type=act, attrs=attrs or {},
                            inputs=[InputConfig(n, attrs=a) for n, a in zip(names, in_attrs)]),
                bias_attr=bias)
    net = Network(b.build(["out"], names), ParameterSet(seed=3))
    for name, value in (params or {}).items():
        p = [q for q in net.get_layer("out").parameters if q.name == name][0]
        p.value[...] = value
    out = net.forward(args, PASS_TEST)[0]
    return out, net


def dense(*shape, low=-1.0, high=1.0):
    return Argument(value=RNG.uniform(low, high, size=shape))


def test_mixed_sums_projections_and_bias():
    x, y, ids = dense(4, 3), dense(4, 2), Argument(ids=np.array([0, 2, 1, 2]))
    w0, w1, t = RNG.randn(3, 2), RNG.randn(2, 2), RNG.randn(3, 2)
    bias = np.array([[0.5, -0.5]])
    out, _ = run("mixed", [x, y, ids, y], [3, 2, 3, 2], size=2,
                 in_attrs=[{"proj": "full_matrix"}, {"proj": "trans_full_matrix"},
                           {"proj": "table"}, {"proj": "identity"}], bias=True,
                 params={"_out.w0": w0, "_out.w1": w1, "_out.w2": t, "_out.wbias": bias})
    want = x.value @ w0 + y.value @ w1.T + t[ids.ids] + y.value + bias
    np.testing.assert_allclose(out.value, want, rtol=1e-6)


def test_mixed_identity_offset_window_and_placement():
    x = dense(3, 5)
    out, _ = run("mixed", [x], [5], size=2, in_attrs=[{"proj": "identity", "offset": 1}])
    np.testing.assert_allclose(out.value, x.value[:, 1:3])
    y = dense(3, 2)
    out, _ = run("mixed", [y], [2], size=5, in_attrs=[{"proj": "identity", "offset": 3}])
    want = np.zeros((3, 5))
    want[:, 3:] = y.value
    np.testing.assert_allclose(out.value, want)


def test_mixed_dotmul_scaling_and_operator():
    a, b = dense(3, 4), dense(3, 4)
    w = RNG.randn(1, 4)
    out, _ = run("mixed", [a, a, b, b], [4, 4, 4, 4],
                 in_attrs=[{"proj": "dotmul"}, {"proj": "dotmul_operator", "scale": 3.0},
                           {"proj": "operand"}, {"proj": "scaling"}],
                 params={"_out.w0": w, "_out.w3": [[0.5]]})
    want = a.value * w + 3.0 * a.value * b.value + 0.5 * b.value
    np.testing.assert_allclose(out.value, want, rtol=1e-6)


def test_context_projection_zero_and_trainable_padding():
    x = Argument(value=np.arange(5.0).reshape(5, 1) + 1, seq_starts=np.array([0, 3, 5]))
    attrs = {"proj": "context", "context_len": 3, "context_start": -1}
    out, _ = run("mixed", [x], [1], in_attrs=[attrs])
    want = [[0, 1, 2], [1, 2, 3], [2, 3, 0], [0, 4, 5], [4, 5, 0]]
    np.testing.assert_allclose(out.value, want)
    pad = np.array([[-1.0], [-2.0]])  # row 0: before the start, row 1: after the end
    out, _ = run("mixed", [x], [1], in_attrs=[{**attrs, "trainable_padding": True}],
                 params={"_out.w0": pad})
    want = [[-1, 1, 2], [1, 2, 3], [2, 3, -2], [-1, 4, 5], [4, 5, -2]]
    np.testing.assert_allclose(out.value, want)


def test_mixed_config_errors():
    with pytest.raises(ValueError, match="operand"):
        run("mixed", [dense(2, 3)], [3], in_attrs=[{"proj": "dotmul_operator"}])
    with pytest.raises(ValueError, match="expected one of"):
        run("mixed", [dense(2, 3)], [3], size=3, in_attrs=[{"proj": "nope"}])
    with pytest.raises(ValueError, match="gives width 3, layer size is 4"):
        run("mixed", [dense(2, 3)], [3], size=4, in_attrs=[{"proj": "identity"}])
    with pytest.raises(ValueError, match="must be a sequence"):
        run("mixed", [dense(2, 3)], [3], in_attrs=[{"proj": "context", "context_len": 2}])


@pytest.mark.parametrize("layer_type, attrs, formula", [
    ("slope_intercept", {"slope": 2.0, "intercept": 1.0}, lambda x: 2 * x + 1),
    ("clip", {"min": -0.2, "max": 0.3}, lambda x: np.clip(x, -0.2, 0.3)),
    ("sum_to_one_norm", {}, lambda x: x / x.sum(1, keepdims=True)),
    ("row_l2_norm", {}, lambda x: x / np.linalg.norm(x, axis=1, keepdims=True)),
    ("trans", {}, lambda x: x.T),
    ("featmap_expand", {"num_filters": 2}, lambda x: np.hstack([x, x])),
    ("featmap_expand", {"num_filters": 2, "as_row_vector": False},
     lambda x: np.repeat(x, 2, axis=1)),
])
def test_unary_values(layer_type, attrs, formula):
    x = dense(4, 3, low=0.1, high=1.0)
    out, _ = run(layer_type, [x], [3], attrs=attrs)
    np.testing.assert_allclose(out.value, formula(x.value), rtol=1e-6)


def test_resize_and_trans_drop_sequence_layout():
    x = Argument(value=np.arange(12.0).reshape(3, 4), seq_starts=np.array([0, 1, 3]))
    out, _ = run("resize", [x], [4], size=6)
    np.testing.assert_allclose(out.value, np.arange(12.0).reshape(2, 6))
    assert out.seq_starts is None
    with pytest.raises(ValueError, match="rows of width 5"):
        run("resize", [x], [4], size=5)


def test_scale_shift_and_prelu():
    x = dense(4, 6)
    out, _ = run("scale_shift", [x], [6], params={"_out.w0": [[2.0]], "_out.wbias": [[0.5]]})
    np.testing.assert_allclose(out.value, 2 * x.value + 0.5)
    slopes = np.array([[0.1, 0.2, 0.3]])
    out, _ = run("prelu", [x], [6], attrs={"partial_sum": 2}, params={"_out.w0": slopes})
    a = np.repeat(slopes, 2, axis=1)
    np.testing.assert_allclose(out.value, np.where(x.value > 0, x.value, a * x.value))
    with pytest.raises(ValueError, match="partial_sum 4"):
        run("prelu", [x], [6], attrs={"partial_sum": 4})


def test_pair_values():
    w, x, y = dense(4, 1, low=0.1), dense(4, 3, low=0.5, high=2.0), dense(4, 3)
    np.testing.assert_allclose(run("scaling", [w, x], [1, 3])[0].value, w.value * x.value)
    np.testing.assert_allclose(run("power", [w, x], [1, 3])[0].value, x.value ** w.value)
    np.testing.assert_allclose(run("interpolation", [w, x, y], [1, 3, 3])[0].value,
                               w.value * x.value + (1 - w.value) * y.value)
    np.testing.assert_allclose(run("dot_prod", [x, y], [3, 3])[0].value[:, 0],
                               (x.value * y.value).sum(1))
    np.testing.assert_allclose(run("l2_distance", [x, y], [3, 3])[0].value[:, 0],
                               np.linalg.norm(x.value - y.value, axis=1))
    op = run("out_prod", [x, w], [3, 1])[0].value
    np.testing.assert_allclose(op, x.value * w.value)
    v = dense(4, 6)
    got = run("convex_comb", [x, v], [3, 6], size=2)[0].value
    want = np.einsum("im,imn->in", x.value, v.value.reshape(4, 3, 2))
    np.testing.assert_allclose(got, want)


def test_tensor_layer_bilinear_form():
    a, b = dense(3, 2), dense(3, 4)
    w = RNG.randn(2, 4 * 3)
    out, _ = run("tensor", [a, b], [2, 4], size=3, bias=False, params={"_out.w0": w})
    blocks = w.reshape(3, 2, 4)
    want = np.stack([[a.value[i] @ blocks[k] @ b.value[i] for k in range(3)] for i in range(3)])
    np.testing.assert_allclose(out.value, want, rtol=1e-6)


def test_multiplex_picks_rows():
    idx = Argument(ids=np.array([1, 0, 1]))
    x0, x1 = dense(3, 2), dense(3, 2)
    out, _ = run("multiplex", [idx, x0, x1], [2, 2, 2])
    np.testing.assert_allclose(out.value, [x1.value[0], x0.value[1], x1.value[2]])
    with pytest.raises(ValueError, match=r"ids must be in \[0, 2\)"):
        run("multiplex", [Argument(ids=np.array([2, 0, 0])), x0, x1], [3, 2, 2])


def test_maxid_and_sampling_id():
    x = Argument(value=np.array([[0.1, 0.7, 0.2], [0.5, 0.1, 0.4]]))
    out, _ = run("maxid", [x], [3])
    np.testing.assert_array_equal(out.ids, [1, 0])
    np.testing.assert_allclose(out.value[:, 0], [0.7, 0.5])
    out, _ = run("maxid", [x], [3], attrs={"beam_size": 2})
    np.testing.assert_array_equal(out.ids, [1, 2, 0, 2])
    onehot = Argument(value=np.array([[0.0, 1.0, 0.0], [0.0, 0.0, 1.0]] * 50))
    out, _ = run("sampling_id", [onehot], [3])
    np.testing.assert_array_equal(out.ids, [1, 2] * 50)
    probs = Argument(value=np.tile([[0.2, 0.8]], (4000, 1)))
    out, _ = run("sampling_id", [probs], [2])
    assert abs(out.ids.mean() - 0.8) < 0.03


def test_selective_fc_computes_selected_columns_only():
    x = dense(2, 3)
    w = RNG.randn(4, 3)  # stored (size, input width)
    sel = Argument(value=CsrMatrix.from_rows([[0, 2], [3]], 4, False, dtype=np.float64))
    out, _ = run("selective_fc", [x, sel], [3, 4], size=4, attrs={"has_select": True},
                 bias=False, params={"_out.w0": w})
    full = x.value @ w.T
    want = np.zeros((2, 4))
    want[0, [0, 2]] = full[0, [0, 2]]
    want[1, 3] = full[1, 3]
    np.testing.assert_allclose(out.value, want, rtol=1e-6)
    out, _ = run("selective_fc", [x], [3], size=4, bias=False, params={"_out.w0": w})
    np.testing.assert_allclose(out.value, full, rtol=1e-6)
