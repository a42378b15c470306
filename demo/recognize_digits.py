"""recognize_digits (PaddlePaddle book, chapter 2) as a v2 program, on the offline 8x8 digits.

Runs on its own (``python demo/recognize_digits.py``) and under the CLI
(``sculler train --config demo/recognize_digits.py``), which reads the module-level ``cost``,
``optimizer``, ``train_reader``, ``test_reader``, ``batch_size`` and ``num_passes``.
"""

import sculler as paddle

batch_size = 128
num_passes = 30
train_reader = paddle.dataset.digits.train()
test_reader = paddle.dataset.digits.test()

images = paddle.layer.data(name="pixel", type=paddle.data_type.dense_vector(64))
label = paddle.layer.data(name="label", type=paddle.data_type.integer_value(10))
hidden1 = paddle.layer.fc(input=images, size=128, act=paddle.activation.Relu())
hidden2 = paddle.layer.fc(input=hidden1, size=64, act=paddle.activation.Relu())
predict = paddle.layer.fc(input=hidden2, size=10, act=paddle.activation.Softmax())
cost = paddle.layer.classification_cost(input=predict, label=label)

optimizer = paddle.optimizer.Momentum(
    learning_rate=0.1 / 128.0,
    momentum=0.9,
    regularization=paddle.optimizer.L2Regularization(rate=0.0005 * 128),
)


def main(num_passes: int = num_passes, use_gpu: bool = False) -> float:
    """Train, print each pass's test figures and 5 predictions; return the test accuracy."""
    paddle.init(use_gpu=use_gpu, trainer_count=1, seed=1)
    accuracy = [0.0]
    parameters = paddle.parameters.create(cost)
    trainer = paddle.trainer.SGD(cost=cost, parameters=parameters, update_equation=optimizer)

    def event_handler(event):
        if isinstance(event, paddle.event.EndPass):
            result = trainer.test(reader=paddle.batch(test_reader, batch_size=batch_size))
            accuracy[0] = 1.0 - result.metrics["classification_error_evaluator"]
            print(f"Pass {event.pass_id}, test cost {result.cost:.4f}, "
                  f"error {result.metrics['classification_error_evaluator']:.4f}")

    trainer.train(
        reader=paddle.batch(paddle.reader.shuffle(train_reader, buf_size=8192),
                            batch_size=batch_size),
        event_handler=event_handler, num_passes=num_passes,
    )
    probs = paddle.infer(output_layer=predict, parameters=parameters,
                         input=[(x,) for x, _ in list(test_reader())[:5]])
    print("predicted labels of 5 test digits:", probs.argmax(axis=1))
    return accuracy[0]


if __name__ == "__main__":
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--num_passes", type=int, default=num_passes,
                    help=f"passes (default {num_passes})")
    main(ap.parse_args().num_passes)
