"""beam_search: beam_size=1 equals greedy decoding, larger beams return the best paths of an
exhaustive search (scored by the training-time group on the same parameters), and the
``infer(field=['prob', 'id'])`` layout decodes as the book does."""

import itertools

import numpy as np
import pytest

import sculler as paddle

D = paddle.data_type
V, BOS, EOS, CTX = 4, 0, 1, 3


@pytest.fixture(autouse=True)
def fresh_names():
    paddle.layer.reset_names()


def step(ctx, word):
    h_prev = paddle.layer.memory(name="h", size=5)
    h = paddle.layer.fc(input=[word, ctx, h_prev], size=5, act=paddle.activation.Tanh(),
                        name="h")
    return paddle.layer.fc(input=h, size=V, act=paddle.activation.Softmax(), name="prob")


def build(beam_size, max_length, num_results=None):
    ctx = paddle.layer.data(name="ctx", type=D.dense_vector(CTX))
    trg = paddle.layer.data(name="trg", type=D.integer_value_sequence(V))
    emb = paddle.layer.embedding(input=trg, size=3, param_attr=paddle.attr.Param(name="emb"))
    train = paddle.layer.recurrent_group(step=step, name="dec",
                                         input=[paddle.layer.StaticInput(ctx), emb])
    gen = paddle.layer.beam_search(
        step=step, name="dec", bos_id=BOS, eos_id=EOS, beam_size=beam_size,
        max_length=max_length, num_results_per_sample=num_results,
        input=[paddle.layer.StaticInput(ctx), paddle.layer.GeneratedInput(
            size=V, embedding_name="emb", embedding_size=3)])
    paddle.init(seed=11)
    params = paddle.parameters.create([paddle.topology.Topology(train),
                                       paddle.topology.Topology(gen)])
    for name in params.names():  # sharper distributions make ties unlikely
        params.set(name, params.get(name) * 3.0)
    return train, gen, params


def path_scores(train, params, ctx, paths):
    """Total log-probability of each (sample, ids) path under the training group."""
    samples = [(ctx[s], [BOS] + list(p[:-1])) for s, p in paths]
    probs = paddle.infer(output_layer=train, parameters=params, input=samples,
                         feeding={"ctx": 0, "trg": 1})
    out, row = [], 0
    for _, p in paths:
        out.append(float(sum(np.log(probs[row + t, w]) for t, w in enumerate(p))))
        row += len(p)
    return out


def all_paths(max_length):
    for n in range(1, max_length + 1):
        for p in itertools.product(range(V), repeat=n):
            if EOS not in p[:-1] and (n == max_length or p[-1] == EOS):
                yield p


def decode(prob, ids, num_samples, num_results):
    """The book's reading of infer's output: [len, ids..., -1] per result."""
    ends = np.where(ids == -1)[0]
    assert len(ends) == num_samples * num_results
    start, out = 1, []
    for i in range(num_samples):
        for j in range(num_results):
            end = ends[i * num_results + j]
            assert ids[start - 1] == end - start
            out.append((i, tuple(int(w) for w in ids[start:end]), float(prob[i][j])))
            start = end + 2
    return out


def test_beam_size_one_is_greedy():
    train, gen, params = build(beam_size=1, max_length=5)
    ctx = np.random.RandomState(0).uniform(-1, 1, (4, CTX))
    prob, ids = paddle.infer(output_layer=gen, parameters=params, input=[(c,) for c in ctx],
                             field=["prob", "id"])
    assert prob.shape == (4, 1)
    got, start = [], 0
    for s in range(4):
        prefix = []
        while len(prefix) < 5 and (not prefix or prefix[-1] != EOS):
            p = paddle.infer(output_layer=train, parameters=params,
                             input=[(ctx[s], [BOS] + prefix)], feeding={"ctx": 0, "trg": 1})
            prefix.append(int(p[-1].argmax()))
        n = len(prefix)
        got.append(list(ids[start:start + n]))
        start += n
        assert got[-1] == prefix
        np.testing.assert_allclose(prob[s, 0], path_scores(train, params, ctx, [(s, prefix)])[0],
                                   rtol=1e-5)
    assert start == ids.size


def test_wide_beam_equals_exhaustive_search():
    max_length, results = 3, 5
    train, gen, params = build(beam_size=V ** (max_length - 1), max_length=max_length,
                               num_results=results)
    ctx = np.random.RandomState(1).uniform(-1, 1, (3, CTX))
    prob, ids = paddle.infer(output_layer=gen, parameters=params, input=[(c,) for c in ctx],
                             field=["prob", "id"])
    found = decode(prob, ids, 3, results)
    paths = [(s, p) for s in range(3) for p in all_paths(max_length)]
    scores = path_scores(train, params, ctx, paths)
    for s in range(3):
        ranked = sorted(((sc, p) for (t, p), sc in zip(paths, scores) if t == s),
                        key=lambda e: -e[0])[:results]
        mine = [(p, sc) for i, p, sc in found if i == s]
        assert [p for p in mine] == [(p, pytest.approx(sc, rel=1e-5)) for sc, p in ranked]


def test_narrow_beam_returns_sorted_valid_paths():
    train, gen, params = build(beam_size=2, max_length=4)
    ctx = np.random.RandomState(2).uniform(-1, 1, (3, CTX))
    prob, ids = paddle.infer(output_layer=gen, parameters=params, input=[(c,) for c in ctx],
                             field=["prob", "id"])
    found = decode(prob, ids, 3, 2)
    rescored = path_scores(train, params, ctx, [(s, p) for s, p, _ in found])
    for (_, p, sc), again in zip(found, rescored):
        assert len(p) == 4 or p[-1] == EOS
        assert sc == pytest.approx(again, rel=1e-5)
    assert np.all(np.diff(prob, axis=1) <= 0)


def test_beam_search_errors():
    ctx = paddle.layer.data(name="ctx", type=D.dense_vector(CTX))
    gi = paddle.layer.GeneratedInput(size=V, embedding_name="emb", embedding_size=3)
    with pytest.raises(ValueError, match="exactly one GeneratedInput"):
        paddle.layer.beam_search(step=step, input=[paddle.layer.StaticInput(ctx)], bos_id=0,
                                 eos_id=1, beam_size=2)
    with pytest.raises(ValueError, match="num_results_per_sample"):
        paddle.layer.beam_search(step=step, input=[paddle.layer.StaticInput(ctx), gi],
                                 bos_id=0, eos_id=1, beam_size=2, num_results_per_sample=3)


def test_generator_survives_inference_file_round_trip(tmp_path):
    train, gen, params = build(beam_size=2, max_length=4)
    ctx = [(c,) for c in np.random.RandomState(4).uniform(-1, 1, (2, CTX))]
    want = paddle.infer(output_layer=gen, parameters=params, input=ctx, field=["prob", "id"])
    path = tmp_path / "gen.tar"
    paddle.topology.Topology(gen).serialize_for_inference(str(path), params)
    got = paddle.inference.Inference(fileobj=str(path)).infer(ctx, field=["prob", "id"])
    np.testing.assert_array_equal(got[1], want[1])
    np.testing.assert_allclose(got[0], want[0])


def reference_beam_search(train, params, ctx_row, beam, max_length, results):
    """PaddlePaddle's beam search written path by path (RecurrentGradientMachine: expand,
    finish eos/max_length candidates at once, keep the beam best live ones, prune finished
    paths below the worst live one and stop a sample whose finished paths beat its best)."""
    paths, finals, min_final = [([], 0.0)], [], 0.0
    for _ in range(max_length):
        cands = []
        for ids, score in paths:
            p = paddle.infer(output_layer=train, parameters=params,
                             input=[(ctx_row, [BOS] + ids)], feeding={"ctx": 0, "trg": 1})[-1]
            for w in np.argsort(-p, kind="stable")[:min(beam, V)]:
                new = (ids + [int(w)], score + float(np.log(p[w])))
                (finals if w == EOS or len(new[0]) >= max_length else cands).append(new)
        if not cands:
            break
        kept = sorted(cands, key=lambda c: -c[1])[:beam]
        finals = [f for f in finals if f[1] >= kept[-1][1]]
        min_final = min([min_final] + [f[1] for f in finals])
        if len(finals) >= beam and min_final >= kept[0][1]:
            kept = []
        paths = kept
        if not paths:
            break
    return sorted(finals, key=lambda f: -f[1])[:results]


@pytest.mark.parametrize("beam", [2, 3])
def test_batched_search_equals_path_by_path_reference(beam):
    train, gen, params = build(beam_size=beam, max_length=4)
    ctx = np.random.RandomState(5).uniform(-1, 1, (3, CTX))
    prob, ids = paddle.infer(output_layer=gen, parameters=params, input=[(c,) for c in ctx],
                             field=["prob", "id"])
    found = decode(prob, ids, 3, beam)
    for s in range(3):
        want = reference_beam_search(train, params, ctx[s], beam, 4, beam)
        got = [(list(p), sc) for i, p, sc in found if i == s]
        assert [p for p, _ in got] == [p for p, _ in want]
        np.testing.assert_allclose([sc for _, sc in got], [sc for _, sc in want], rtol=1e-5)
