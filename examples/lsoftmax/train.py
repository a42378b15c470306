"""Train the large-margin softmax layer on the offline digits data beside a plain softmax.

Both models are the same MLP (64 -> 64 tanh -> 10) with the same seed and settings; only the
output layer differs. Prints both test accuracies. Run: ``python examples/lsoftmax/train.py``.
"""

from __future__ import annotations

import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

import lsoftmax_layer  # noqa: E402,F401 - registers the "lsoftmax" layer type

import sculler as paddle  # noqa: E402
from sculler.layer import make_layer  # noqa: E402


def build(output: str, k: float = 0.5):
    paddle.layer.reset_names()
    pixel = paddle.layer.data(name="pixel", type=paddle.data_type.dense_vector(64))
    label = paddle.layer.data(name="label", type=paddle.data_type.integer_value(10))
    hidden = paddle.layer.fc(input=pixel, size=64, act=paddle.activation.Tanh())
    if output == "lsoftmax":
        predict = make_layer("lsoftmax", [hidden, label], size=10, name="predict",
                             act=paddle.activation.Softmax(), attrs={"k": k})
    else:
        predict = paddle.layer.fc(input=hidden, size=10, name="predict",
                                  act=paddle.activation.Softmax(), bias_attr=False)
    return paddle.layer.classification_cost(input=predict, label=label)


def train(output: str, num_passes: int = 30, seed: int = 1) -> float:
    """Train one model; returns its test accuracy."""
    paddle.init(seed=seed)
    cost = build(output)
    parameters = paddle.parameters.create(cost)
    optimizer = paddle.optimizer.Momentum(momentum=0.9, learning_rate=0.1 / 128)
    trainer = paddle.trainer.SGD(cost=cost, parameters=parameters, update_equation=optimizer)
    digits = paddle.dataset.digits
    trainer.train(
        reader=paddle.batch(paddle.reader.shuffle(digits.train(), buf_size=2048), 64),
        num_passes=num_passes, show_progress=False,
    )
    result = trainer.test(reader=paddle.batch(digits.test(), 128))
    return 1.0 - result.metrics["classification_error_evaluator"]


def main() -> None:
    plain = train("softmax")
    margin = train("lsoftmax")
    print(f"plain softmax test accuracy:        {plain:.2%}")
    print(f"large-margin softmax test accuracy: {margin:.2%}")


if __name__ == "__main__":
    main()
