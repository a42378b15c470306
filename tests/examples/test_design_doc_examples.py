"""The design doc's two examples: parameter sharing between layers and between topologies."""

import numpy as np
import pytest

import sculler as paddle


@pytest.mark.slow
def test_ranking_model_shares_f_and_infers_with_fa_alone(example):
    ranking = example("ranking/train.py")
    result = ranking.main(num_passes=5)
    assert result["parameters"] == ["embedding", "semantic", "semantic.bias"]
    assert result["vectors"].shape == (20, 8)
    assert result["same_topic"] > result["different_topic"] + 0.3


def test_gan_immutable_d_while_training_d0_and_trained_in_d1(example):
    gan = example("gan/train.py")
    paddle.init(seed=3)
    d0, d1, fake = gan.build()
    parameters = paddle.parameters.create([d0, d1])
    assert sorted(parameters.names()) == ["D", "D.bias", "D.hidden", "D.hidden.bias", "G",
                                          "G.bias"]
    snapshot = {n: parameters.get(n).copy() for n in parameters.names()}
    rng = np.random.RandomState(0)
    paddle.train(d0, parameters, reader=paddle.batch(gan.noise_reader(rng, 64), 16),
                 immutable_parameters=gan.d_parameters(parameters),
                 feeding={"noise": 0, "label": 1}, show_progress=False)
    for name in gan.d_parameters(parameters):
        assert np.array_equal(parameters.get(name), snapshot[name]), name
    assert not np.array_equal(parameters.get("G"), snapshot["G"])
    after_d0 = {n: parameters.get(n).copy() for n in parameters.names()}
    fakes = paddle.infer(output_layer=fake, parameters=parameters,
                         input=[(v,) for v in rng.randn(32, gan.NOISE).astype(np.float32)])
    paddle.train(d1, parameters, reader=paddle.batch(gan.discriminator_reader(rng, fakes), 16),
                 feeding={"x": 0, "label": 1}, show_progress=False)
    for name in gan.d_parameters(parameters):
        assert not np.array_equal(parameters.get(name), after_d0[name]), name
    assert np.array_equal(parameters.get("G"), after_d0["G"])  # d1 does not reach G


@pytest.mark.slow
def test_gan_generator_moves_towards_the_real_data(example):
    gaps = example("gan/train.py").main(rounds=30)
    assert gaps[-1] < 0.5 * gaps[0]
