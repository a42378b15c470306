"""The design doc's GAN: two topologies sharing parameters, trained alternately.

    d0 = cost(D(G(noise)), "real")    trains G; D's parameters are immutable here
    d1 = cost(D(x), real-or-fake)     trains D on real samples and G's samples

``parameters.create([d0, d1])`` creates G's and D's parameters once for both topologies. The
real data are 2-D points around (2, -1); G is linear in 4-D noise, D a small MLP. Both
topologies are trained with ``paddle.train``; ``immutable_parameters`` freezes D in d0.
"""

from __future__ import annotations

import numpy as np

import sculler as paddle

NOISE, REAL_MEAN, REAL_STD = 4, np.array([2.0, -1.0], np.float32), 0.3
REAL, FAKE = 1, 0


def G(z):  # noqa: N802 - the design doc's name
    return paddle.layer.fc(input=z, size=2, act=paddle.activation.Linear(),
                           parameter_name="G", bias_attr=paddle.attr.Param(name="G.bias"))


def D(x):  # noqa: N802
    hidden = paddle.layer.fc(input=x, size=16, act=paddle.activation.Tanh(),
                             parameter_name="D.hidden",
                             bias_attr=paddle.attr.Param(name="D.hidden.bias"))
    return paddle.layer.fc(input=hidden, size=2, act=paddle.activation.Softmax(),
                           parameter_name="D", bias_attr=paddle.attr.Param(name="D.bias"))


def build():
    paddle.layer.reset_names()
    noise = paddle.layer.data(name="noise", type=paddle.data_type.dense_vector(NOISE))
    x = paddle.layer.data(name="x", type=paddle.data_type.dense_vector(2))
    label = paddle.layer.data(name="label", type=paddle.data_type.integer_value(2))
    fake = G(noise)
    d0 = paddle.layer.classification_cost(input=D(fake), label=label)
    d1 = paddle.layer.classification_cost(input=D(x), label=label)
    return d0, d1, fake


def noise_reader(rng, n):
    def read():
        for _ in range(n):
            yield rng.randn(NOISE).astype(np.float32), REAL
    return read


def discriminator_reader(rng, fakes):
    def read():
        for point in fakes:
            real = (REAL_MEAN + REAL_STD * rng.randn(2)).astype(np.float32)
            yield real, REAL
            yield point.astype(np.float32), FAKE
    return read


def d_parameters(parameters) -> set[str]:
    return {n for n in parameters.names() if n.startswith("D")}


def train_round(d0, d1, fake, parameters, rng, batch=32):
    """One round: G against a frozen D on d0, then D on real and G's samples on d1."""
    paddle.train(d0, parameters, reader=paddle.batch(noise_reader(rng, 256), batch),
                 immutable_parameters=d_parameters(parameters),
                 update_equation=paddle.optimizer.Adam(learning_rate=0.01),
                 feeding={"noise": 0, "label": 1}, show_progress=False)
    z = rng.randn(128, NOISE).astype(np.float32)
    fakes = paddle.infer(output_layer=fake, parameters=parameters, input=[(v,) for v in z])
    paddle.train(d1, parameters, reader=paddle.batch(discriminator_reader(rng, fakes), batch),
                 update_equation=paddle.optimizer.Adam(learning_rate=0.01),
                 feeding={"x": 0, "label": 1}, show_progress=False)
    return fakes


def main(rounds: int = 30, seed: int = 1) -> list[float]:
    """Train; returns the distance of G's sample mean from the real mean after each round."""
    paddle.init(seed=seed)
    d0, d1, fake = build()
    parameters = paddle.parameters.create([d0, d1])
    rng = np.random.RandomState(seed)
    return [float(np.linalg.norm(train_round(d0, d1, fake, parameters, rng).mean(0) - REAL_MEAN))
            for _ in range(rounds)]


if __name__ == "__main__":
    gaps = main()
    print("distance of G's sample mean from the real mean, by round:")
    print(" ".join(f"{g:.2f}" for g in gaps))
