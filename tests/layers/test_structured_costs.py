"""crf, crf_decoding, ctc and warp_ctc against brute-force enumeration on short sequences, the
coeff / weight / norm_by_times conventions, the v2 wrappers and the ctc_error evaluator."""

import itertools

import numpy as np
import pytest

import sculler as paddle
from sculler import backend
from sculler.core.argument import Argument
from sculler.core.builder import ModelBuilder
from sculler.core.metrics import ctc_best_path, edit_operations
from sculler.core.model_config import InputConfig, LayerConfig
from sculler.core.network import Network
from sculler.core.parameter import ParameterSet

C = 3
LENGTHS = [1, 3, 2, 4, 1]


def _starts(lengths):
    return np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)


def build(layer_type, sizes, attrs=None):
    """A network of data layers ``in0..`` feeding one ``layer_type`` layer named ``out``."""
    b = ModelBuilder()
    names = [f"in{i}" for i in range(len(sizes))]
    for n, s in zip(names, sizes):
        b.add_layer(LayerConfig(n, "data", size=s))
    b.add_layer(LayerConfig("out", layer_type, inputs=[InputConfig(n) for n in names],
                            attrs=dict(attrs or {})))
    return Network(b.build(["out"], input_layer_names=names), ParameterSet(seed=3),
                   data_gradients=True), names


def run(layer_type, args, sizes, attrs=None, weight=None):
    with backend.default_dtype(np.float64):
        net, names = build(layer_type, sizes, attrs)
        if weight is not None:
            net.parameters["_out.w0"].value[...] = weight
        out = net.forward(dict(zip(names, args)), "train")[0]
    return net, out


def path_score(x, tags, weight):
    a, b, w = weight[0], weight[1], weight[2:]
    s = a[tags[0]] + b[tags[-1]] + sum(x[t, k] for t, k in enumerate(tags))
    return s + sum(w[i, j] for i, j in zip(tags[:-1], tags[1:]))


@pytest.fixture
def crf_case():
    rng = np.random.RandomState(0)
    starts = _starts(LENGTHS)
    x = rng.randn(starts[-1], C)
    labels = rng.randint(0, C, starts[-1])
    weight = rng.randn(C + 2, C)
    return x, labels, starts, weight


def test_crf_nll_equals_brute_force_over_all_tag_paths(crf_case):
    x, labels, starts, weight = crf_case
    _, out = run("crf", [Argument(x, seq_starts=starts), Argument(ids=labels)], [C, C],
                 weight=weight)
    assert out.value.shape == (len(LENGTHS), 1) and out.seq_starts is None
    for n, (s, e) in enumerate(zip(starts[:-1], starts[1:])):
        scores = [path_score(x[s:e], p, weight) for p in itertools.product(range(C),
                                                                           repeat=e - s)]
        log_z = np.log(np.sum(np.exp(scores)))
        assert out.value[n, 0] == pytest.approx(log_z - path_score(x[s:e], labels[s:e], weight),
                                                rel=1e-12)


def test_crf_length_one_is_start_plus_emission_plus_end(crf_case):
    x, _, _, weight = crf_case
    _, out = run("crf", [Argument(x[:1], seq_starts=np.array([0, 1])),
                         Argument(ids=np.array([2]))], [C, C], weight=weight)
    s = weight[0] + x[0] + weight[1]
    assert out.value[0, 0] == pytest.approx(np.log(np.exp(s).sum()) - s[2], rel=1e-12)


def test_viterbi_equals_brute_force_and_error_output(crf_case):
    x, labels, starts, weight = crf_case
    _, out = run("crf_decoding", [Argument(x, seq_starts=starts), Argument(ids=labels)],
                 [C, C], weight=weight)
    for s, e in zip(starts[:-1], starts[1:]):
        paths = list(itertools.product(range(C), repeat=e - s))
        best = paths[int(np.argmax([path_score(x[s:e], p, weight) for p in paths]))]
        assert out.ids[s:e].tolist() == list(best)
    np.testing.assert_array_equal(out.value[:, 0], out.ids != labels)
    _, plain = run("crf_decoding", [Argument(x, seq_starts=starts)], [C], weight=weight)
    np.testing.assert_array_equal(plain.ids, out.ids)
    assert plain.value is None and plain.seq_starts.tolist() == starts.tolist()


def test_viterbi_ties_go_to_the_lowest_index():
    x = np.zeros((3, C))
    _, out = run("crf_decoding", [Argument(x, seq_starts=np.array([0, 3]))], [C],
                 weight=np.zeros((C + 2, C)))
    assert out.ids.tolist() == [0, 0, 0]


def test_crf_weight_scales_cost_and_coeff_only_the_gradient(crf_case):
    x, labels, starts, weight = crf_case
    n = len(LENGTHS)
    w = np.linspace(0.5, 2.0, n)[:, None]
    args = [Argument(x, seq_starts=starts), Argument(ids=labels)]
    plain_net, plain = run("crf", args, [C, C], weight=weight)
    plain_cost = plain.value[:, 0].copy()
    plain_net.backward()
    g_plain = plain_net.data_layers[0].output.grad.copy()
    net, out = run("crf", args + [Argument(w)], [C, C, 1], {"coeff": 2.0}, weight=weight)
    np.testing.assert_allclose(out.value[:, 0], w[:, 0] * plain_cost, rtol=1e-12)
    net.backward()
    rows = np.repeat(w[:, 0], LENGTHS)[:, None]
    np.testing.assert_allclose(net.data_layers[0].output.grad, 2.0 * rows * g_plain, rtol=1e-10)


def collapse(path, blank):
    out, prev = [], None
    for k in path:
        if k != prev and k != blank:
            out.append(k)
        prev = k
    return out


def brute_ctc(probs, label, blank):
    total = 0.0
    for path in itertools.product(range(probs.shape[1]), repeat=probs.shape[0]):
        if collapse(path, blank) == label:
            total += np.prod(probs[np.arange(len(path)), path])
    return -np.log(total) if total else 0.0


CTC_INPUTS = [3, 1, 4, 2, 3, 2]
CTC_LABELS = [[0, 1], [1], [1, 1], [0, 0], [], [0, 1, 0]]


@pytest.mark.parametrize("layer_type,blank", [("ctc", C), ("warp_ctc", 0), ("warp_ctc", 2)])
def test_ctc_equals_brute_force_over_alignments(layer_type, blank):
    rng = np.random.RandomState(1)
    width = C + 1
    starts = _starts(CTC_INPUTS)
    acts = rng.randn(starts[-1], width)
    probs = np.exp(acts) / np.exp(acts).sum(axis=1, keepdims=True)
    labels = [[k if k < blank else k + 1 for k in lab] for lab in CTC_LABELS]
    if layer_type == "ctc":
        labels = CTC_LABELS
    flat = np.array([k for lab in labels for k in lab], dtype=np.int64)
    label_arg = Argument(ids=flat, seq_starts=_starts([len(lab) for lab in labels]))
    x = probs if layer_type == "ctc" else acts
    attrs = {"num_classes": width} | ({"blank": blank} if layer_type == "warp_ctc" else {})
    _, out = run(layer_type, [Argument(x, seq_starts=starts), label_arg], [width, C], attrs)
    for n, (s, e) in enumerate(zip(starts[:-1], starts[1:])):
        assert out.value[n, 0] == pytest.approx(brute_ctc(probs[s:e], labels[n], blank),
                                                rel=1e-10)
    assert out.value[3, 0] == 0.0  # [0, 0] needs 3 frames, has 2: infeasible


@pytest.mark.parametrize("layer_type", ["ctc", "warp_ctc"])
def test_norm_by_times_divides_only_the_gradient(layer_type):
    rng = np.random.RandomState(2)
    starts = _starts([3, 5])
    x = rng.uniform(0.1, 1.0, (8, C + 1))
    label = Argument(ids=np.array([0, 1, 2, 0]), seq_starts=np.array([0, 1, 4]))
    blank = {"blank": C} if layer_type == "warp_ctc" else {}
    results = []
    for norm in (False, True):
        net, out = run(layer_type, [Argument(x, seq_starts=starts), label], [C + 1, C],
                       {"num_classes": C + 1, "norm_by_times": norm, **blank})
        net.backward()
        results.append((out.value.copy(), net.data_layers[0].output.grad.copy()))
    np.testing.assert_array_equal(results[0][0], results[1][0])
    np.testing.assert_allclose(results[1][1], results[0][1] / np.repeat([3, 5], [3, 5])[:, None],
                               rtol=1e-12)


def test_ctc_rejects_blank_labels_and_mismatched_sequences():
    x = Argument(np.full((3, 3), 1 / 3), seq_starts=np.array([0, 3]))
    with pytest.raises(ValueError, match="blank"):
        run("ctc", [x, Argument(ids=np.array([2]), seq_starts=np.array([0, 1]))], [3, 3])
    with pytest.raises(ValueError, match="1 input sequences but 2 label"):
        run("ctc", [x, Argument(ids=np.array([0, 1]), seq_starts=np.array([0, 1, 2]))], [3, 2])


def test_crf_needs_sequences_and_matching_labels():
    with pytest.raises(ValueError, match="dense sequence"):
        run("crf", [Argument(np.zeros((2, C))), Argument(ids=np.array([0, 1]))], [C, C])
    with pytest.raises(ValueError, match="must carry 2 integer ids"):
        run("crf", [Argument(np.zeros((2, C)), seq_starts=np.array([0, 2])),
                    Argument(ids=np.array([0]))], [C, C])


def test_v2_wrappers_names_sizes_and_shared_parameter():
    paddle.layer.reset_names()
    x = paddle.layer.data(name="x", type=paddle.data_type.dense_vector_sequence(4))
    y = paddle.layer.data(name="y", type=paddle.data_type.integer_value_sequence(4))
    cost = paddle.layer.crf(input=x, label=y, param_attr=paddle.attr.Param(name="crfw"))
    dec = paddle.layer.crf_decoding(input=x, size=4, param_attr=paddle.attr.Param(name="crfw"))
    assert (cost.name, dec.name, cost.size) == ("__crf_layer_0__", "__crf_decoding_layer_0__", 4)
    params = paddle.parameters.create([cost, dec])
    assert params.get_shape("crfw") == (6, 4)
    with pytest.raises(ValueError, match="size=5"):
        paddle.layer.crf_decoding(input=x, size=5)
    z = paddle.layer.data(name="z", type=paddle.data_type.integer_value_sequence(3))
    assert paddle.layer.ctc(input=x, label=z).name == "__ctc_layer_0__"
    assert paddle.layer.warp_ctc(input=x, label=z, blank=3).name == "__warp_ctc_layer_0__"
    with pytest.raises(ValueError, match="size=6 must equal"):
        paddle.layer.ctc(input=x, label=y, size=6)
    # input width 4, size 5: PaddlePaddle's CTCLayer reads its classes from the input width
    assert paddle.layer.ctc(input=x, label=y).layer_type == "ctc"
    with pytest.raises(ValueError, match="blank 4"):
        paddle.layer.warp_ctc(input=x, label=z, blank=4)
    # blank 0: the label ids reach size - 1, so the label type may declare all `size` ids
    full = paddle.layer.data(name="full", type=paddle.data_type.integer_value_sequence(4))
    assert paddle.layer.warp_ctc(input=x, label=full, size=4).size == 4  # classes, as Paddle
    with pytest.raises(ValueError, match="size=4 must equal"):
        paddle.layer.ctc(input=x, label=full, size=4)
    soft = paddle.layer.fc(input=x, size=4, act=paddle.activation.Softmax())
    with pytest.raises(ValueError, match="linear activation"):
        paddle.layer.warp_ctc(input=soft, label=z)


def test_ctc_error_evaluator_counts_edit_operations():
    assert ctc_best_path(np.eye(4)[[0, 0, 3, 0, 1, 1, 3]], blank=3) == [0, 0, 1]
    assert edit_operations([0, 1, 2], [0, 2]) == (0, 1, 0)
    assert edit_operations([0, 1], [2, 1, 1]) == (1, 0, 1)
    from sculler.core.evaluator import create_evaluator
    from sculler.core.model_config import EvaluatorConfig

    class Holder:
        def __init__(self, arg):
            self.output = arg

    probs = np.eye(3)[[0, 2, 1, 1, 0, 0]]  # decodes to [0, 1] and [0]
    layers = {"p": Holder(Argument(probs, seq_starts=np.array([0, 4, 6]))),
              "l": Holder(Argument(ids=np.array([0, 1, 1, 0]), seq_starts=np.array([0, 2, 4])))}
    ev = create_evaluator(EvaluatorConfig("e", "ctc_edit_distance", ["p", "l"], {}))
    ev.eval_batch(layers)
    values = ev.values()
    assert values["error"] == pytest.approx((0 + 1 / 2) / 2)
    assert values["deletion_error"] == pytest.approx(0.25)
    assert values["sequence_error"] == pytest.approx(0.5)


def test_v1_helpers_build_the_structured_costs(tmp_path):
    from sculler.config.config_parser import parse_config

    path = tmp_path / "conf.py"
    path.write_text(
        "from sculler.config.helpers import *\n"
        "x = data_layer(name='x', size=4)\n"
        "y = data_layer(name='y', size=4)\n"
        "z = data_layer(name='z', size=3)\n"
        "c = crf_layer(input=x, label=y, param_attr=ParamAttr(name='crfw'))\n"
        "d = crf_decoding_layer(input=x, size=4, param_attr=ParamAttr(name='crfw'))\n"
        "e = ctc_layer(input=x, label=z, norm_by_times=True)\n"
        "f = warp_ctc_layer(input=x, label=z, blank=1)\n"
        "outputs(c, e, f)\n")
    model = parse_config(str(path)).model_config
    assert [model.layer(n).type for n in ("__crf_layer_0__", "__crf_decoding_layer_0__",
                                          "__ctc_layer_0__", "__warp_ctc_layer_0__")] == [
        "crf", "crf_decoding", "ctc", "warp_ctc"]
    assert [p.name for p in model.parameters] == ["crfw"]
    assert model.parameter("crfw").dims == [6, 4]
    assert model.layer("__ctc_layer_0__").attrs["norm_by_times"] is True
    assert model.layer("__warp_ctc_layer_0__").attrs["blank"] == 1


def test_warp_ctc_equals_torch_ctc_loss_on_longer_sequences():
    torch = pytest.importorskip("torch")
    rng = np.random.RandomState(4)
    width, blank = 6, 2
    in_lengths = [12, 7, 20, 9, 15]
    labels = [rng.choice([k for k in range(width) if k != blank], size=n).tolist()
              for n in (5, 3, 8, 4, 0)]
    labels[2][3] = labels[2][2]  # a repeat
    starts = _starts(in_lengths)
    acts = rng.randn(starts[-1], width)
    flat = np.array([k for lab in labels for k in lab], dtype=np.int64)
    label_arg = Argument(ids=flat, seq_starts=_starts([len(lab) for lab in labels]))
    net, out = run("warp_ctc", [Argument(acts, seq_starts=starts), label_arg], [width, width],
                   {"num_classes": width, "blank": blank})
    net.backward()
    padded = torch.full((max(in_lengths), len(in_lengths), width), 0.0, dtype=torch.float64)
    for n, (s, e) in enumerate(zip(starts[:-1], starts[1:])):
        padded[: e - s, n] = torch.from_numpy(acts[s:e])
    padded.requires_grad_(True)
    loss = torch.nn.functional.ctc_loss(
        padded.log_softmax(2), torch.from_numpy(flat), torch.tensor(in_lengths),
        torch.tensor([len(lab) for lab in labels]), blank=blank, reduction="none")
    np.testing.assert_allclose(out.value[:, 0], loss.detach().numpy(), rtol=1e-10)
    loss.sum().backward()
    grad = net.data_layers[0].output.grad
    for n, (s, e) in enumerate(zip(starts[:-1], starts[1:])):
        np.testing.assert_allclose(grad[s:e], padded.grad[: e - s, n].numpy(), atol=1e-10)


def test_chunk_evaluator_reads_crf_decoding_output_without_label():
    from sculler.core.evaluator import create_evaluator
    from sculler.core.model_config import EvaluatorConfig

    # emissions that make Viterbi (zero transitions) pick their arg-max: B I O B | O B I
    tags = np.array([0, 1, 2, 0, 2, 0, 1])
    x = np.eye(C)[tags] * 5.0
    starts = np.array([0, 4, 7])
    _, out = run("crf_decoding", [Argument(x, seq_starts=starts)], [C],
                 weight=np.zeros((C + 2, C)))
    assert out.ids.tolist() == tags.tolist()

    class Holder:
        def __init__(self, arg):
            self.output = arg

    truth = Argument(ids=np.array([0, 1, 2, 2, 2, 0, 1]), seq_starts=starts)
    ev = create_evaluator(EvaluatorConfig("chunk", "chunk", ["dec", "lab"],
                                          {"chunk_scheme": "IOB", "num_chunk_types": 1}))
    ev.eval_batch({"dec": Holder(out), "lab": Holder(truth)})
    # predicted chunks (0,1), (3,3), (5,6); true (0,1), (5,6): P = 2/3, R = 1
    assert ev.values()["precision"] == pytest.approx(2 / 3)
    assert ev.value() == pytest.approx(0.8)
