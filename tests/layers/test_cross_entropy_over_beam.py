"""cross_entropy_over_beam: the cost of hand-traced beams (gold kept to the end, gold falling
off at the last step or at step 0), its gradient by finite differences on the same beams, the v2
and v1 faces, and the errors (the gradient check of the table is its row there)."""

import numpy as np
import pytest

import sculler as paddle
from sculler import backend
from sculler.core.argument import Argument
from sculler.core.builder import ModelBuilder
from sculler.core.layer import PASS_TEST, PASS_TRAIN
from sculler.core.model_config import InputConfig, LayerConfig
from sculler.core.network import Network
from sculler.core.parameter import ParameterSet


def network(steps: int):
    b = ModelBuilder()
    names = []
    for t in range(steps):
        for what, size in (("scores", 1), ("kept", 2), ("gold", 10)):
            b.add_layer(LayerConfig(f"{what}{t}", "data", size=size))
            names.append(f"{what}{t}")
    b.add_layer(LayerConfig("cost", "cross_entropy_over_beam",
                            inputs=[InputConfig(n) for n in names]))
    return Network(b.build(["cost"]), ParameterSet(seed=1), data_gradients=True)


def two_step_feed(s0, s1):
    """Two samples, beam 2. Step 0: sample 0 has 3 candidates (keeps 2, 0; gold 0), sample 1
    has 2 (keeps 1, 0; gold 1). Step 1: one sub-sequence per kept candidate; sample 0's gold
    (id 2 of its second sub-sequence) stays in the beam, sample 1's (id 2 of its first) falls
    off."""
    return {
        "scores0": Argument(value=s0.reshape(-1, 1), seq_starts=np.array([0, 3, 5])),
        "kept0": Argument(value=np.array([[2.0, 0.0], [1.0, 0.0]])),
        "gold0": Argument(ids=np.array([0, 1])),
        "scores1": Argument(value=s1.reshape(-1, 1), seq_starts=np.array([0, 5, 9]),
                            sub_seq_starts=np.array([0, 2, 5, 8, 9])),
        "kept1": Argument(value=np.array([[1.0, 0.0], [2.0, -1.0], [0.0, 1.0], [0.0, -1.0]])),
        "gold1": Argument(ids=np.array([2, 2])),
    }


def reference(s0, s1):
    """The paths traced by hand: ``-log softmax(path scores)[gold]`` per sample."""
    sample0 = np.array([s0[2] + s1[1], s0[2] + s1[0], s0[0] + s1[4]])  # gold: path 2
    sample1 = np.array([s0[4] + s1[5], s0[4] + s1[6], s0[3] + s1[8],
                        s0[4] + s1[7]])  # gold fell off: the extra path 3
    return np.array([np.log(np.exp(p).sum()) - p[g] for p, g in ((sample0, 2), (sample1, 3))])


@pytest.fixture(autouse=True)
def float64():
    with backend.default_dtype(np.float64):
        yield


def test_cost_of_two_search_steps_matches_the_hand_traced_paths():
    rng = np.random.default_rng(0)
    s0, s1 = rng.normal(size=5), rng.normal(size=9)
    net = network(2)
    out = net.forward(two_step_feed(s0, s1), PASS_TEST)[0]
    np.testing.assert_allclose(out.value.reshape(-1), reference(s0, s1), rtol=1e-12)
    assert out.seq_starts is None


def test_gradient_is_softmax_minus_gold_on_every_row_a_path_uses():
    rng = np.random.default_rng(1)
    s0, s1 = rng.normal(size=5), rng.normal(size=9)
    net = network(2)
    feed = two_step_feed(s0, s1)
    net.forward(feed, PASS_TRAIN)
    net.backward()
    got0, got1 = (np.array(net.get_layer(k).output.grad).reshape(-1)
                  for k in ("scores0", "scores1"))
    eps = 1e-6
    for step, got in enumerate((got0, got1)):
        for r in range(got.size):
            moved = []
            for sign in (1, -1):
                scores = [s0.copy(), s1.copy()]
                scores[step][r] += sign * eps
                moved.append(reference(*scores).sum())
            assert got[r] == pytest.approx((moved[0] - moved[1]) / (2 * eps), abs=1e-7)
    assert got1[2] == 0.0 and got1[3] == 0.0  # candidates on no path get nothing


@pytest.mark.parametrize("gold, want_paths, want_gold", [(1, [0, 1], 1), (2, [0, 1, 2], 2)])
def test_one_step_gold_in_the_beam_or_fallen_off(gold, want_paths, want_gold):
    scores = np.array([0.3, -1.2, 2.0])
    net = network(1)
    feed = {"scores0": Argument(value=scores.reshape(-1, 1), seq_starts=np.array([0, 3])),
            "kept0": Argument(value=np.array([[0.0, 1.0]])),
            "gold0": Argument(ids=np.array([gold]))}
    cost = net.forward(feed, PASS_TEST)[0].value[0, 0]
    paths = scores[want_paths]
    assert cost == pytest.approx(np.log(np.exp(paths).sum()) - paths[want_gold], rel=1e-12)


def test_v2_and_v1_faces_build_the_triples():
    paddle.layer.reset_names()
    ints = paddle.data_type.integer_value(10)
    scores = paddle.layer.data("scores", paddle.data_type.dense_vector_sequence(1))
    kept = paddle.layer.kmax_seq_score(input=scores, beam_size=2)
    gold = paddle.layer.data("gold", ints)
    cost = paddle.layer.cross_entropy_over_beam(
        input=paddle.layer.BeamInput(candidate_scores=scores, selected_candidates=kept,
                                     gold=gold))
    assert cost.name == "__cross_entropy_over_beam_0__"
    assert cost.config.input_layer_names == ["scores", kept.name, "gold"]
    assert cost.size == 1


def test_bad_inputs_are_refused_by_name():
    scores = paddle.layer.data("s", paddle.data_type.dense_vector_sequence(2))
    kept = paddle.layer.data("k", paddle.data_type.dense_vector(2))
    gold = paddle.layer.data("g", paddle.data_type.integer_value(3))
    with pytest.raises(ValueError, match=r"candidate_scores 's' must have width 1 \(one score"):
        paddle.layer.BeamInput(candidate_scores=scores, selected_candidates=kept, gold=gold)
    with pytest.raises(TypeError, match="input must be a BeamInput or a non-empty list"):
        paddle.layer.cross_entropy_over_beam(input=[scores])
    net = network(1)
    feed = {"scores0": Argument(value=np.zeros((3, 1)), seq_starts=np.array([0, 3])),
            "kept0": Argument(value=np.array([[0.0, 1.0]])),
            "gold0": Argument(ids=np.array([5]))}
    with pytest.raises(ValueError, match="step 0 gold id 5 is outside its sub-sequence of 3"):
        net.forward(feed, PASS_TEST)
    feed["scores0"] = Argument(value=np.zeros((3, 1)))
    with pytest.raises(ValueError, match="input 0 .* must be a sequence"):
        net.forward(feed, PASS_TEST)


def test_learning_to_search_program_trains_its_scores_towards_the_gold_path():
    """Paddle's use: kmax_seq_score picks the beam, sub_nested_seq keeps the chosen sentences,
    an fc scores their words, and the cost over both steps trains the fc."""
    paddle.layer.reset_names()
    states = paddle.layer.data("states", paddle.data_type.dense_vector_sub_sequence(3))
    sentence_scores = paddle.layer.data("sentence_scores",
                                        paddle.data_type.dense_vector_sequence(1))
    gold_sentence = paddle.layer.data("gold_sentence", paddle.data_type.integer_value(4))
    gold_word = paddle.layer.data("gold_word", paddle.data_type.integer_value(4))
    kept_sentences = paddle.layer.kmax_seq_score(input=sentence_scores, beam_size=2)
    chosen = paddle.layer.sub_nested_seq(input=states, selected_indices=kept_sentences)
    word_scores = paddle.layer.fc(input=chosen, size=1, act=paddle.activation.Linear())
    kept_words = paddle.layer.kmax_seq_score(input=word_scores, beam_size=2)
    cost = paddle.layer.cross_entropy_over_beam(input=[
        paddle.layer.BeamInput(sentence_scores, kept_sentences, gold_sentence),
        paddle.layer.BeamInput(word_scores, kept_words, gold_word)])
    rng = np.random.default_rng(3)
    samples = []
    for _ in range(8):
        sentences = [rng.normal(size=(int(rng.integers(2, 4)), 3)).astype(np.float32)
                     for _ in range(3)]
        sentences[0][1, 0] = 3.0  # the gold word (1 of sentence 0) carries a mark to learn
        scores = np.array([[2.0], [1.0], [-1.0]], np.float32)  # sentences 0 and 1 kept
        samples.append(([s.tolist() for s in sentences], scores.tolist(), 0, 1))
    feeding = {"states": 0, "sentence_scores": 1, "gold_sentence": 2, "gold_word": 3}
    params = paddle.parameters.create(cost)
    before = paddle.infer(output_layer=cost, parameters=params,
                          input=samples, feeding=feeding).mean()
    trainer = paddle.trainer.SGD(cost=cost, parameters=params,
                                 update_equation=paddle.optimizer.Adam(learning_rate=0.05))
    trainer.train(paddle.batch(lambda: iter(samples), 4), num_passes=30, feeding=feeding)
    after = paddle.infer(output_layer=cost, parameters=params,
                         input=samples, feeding=feeding).mean()
    assert after < 0.5 * before
