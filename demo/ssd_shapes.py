"""A tiny SSD detector that learns to find rectangles on noise images, written against the v2
API (docs/detection.md explains each step).

The demo draws its own data: 32x32 grey images of Gaussian noise holding 1-3 filled
rectangles (sides 8-16 px), bright ones of class 1 and dark ones of class 2 (class 0 is the
background). A small CNN (``32x32x1 -> 16x16x16 -> 8x8x32``, stride 4) predicts, at each of
the 8x8 cells, 4 default boxes (``priorbox``: min_size 10, max_size 16, aspect ratio 2 and
1/2): 4 box offsets and 3 class scores each. ``multibox_loss`` trains it;
``detection_output`` decodes and suppresses the boxes, and the ``detection_map`` evaluator
scores the detections on held-out images (11-point mAP, percent).

8 passes over 800 images reach 84.3%, 89.9% and 89.5% mAP on 200 held-out images with seeds
1, 2 and 3, in 15-40 s of training on 2 shared CPU cores.

Run: ``PYTHONPATH=. python demo/ssd_shapes.py [--num_passes N]``
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import sculler as paddle

IMAGE_SIZE = 32
NUM_CLASSES = 3  # background, bright rectangle, dark rectangle
VARIANCE = [0.1, 0.1, 0.2, 0.2]


def make_image(rng: np.random.RandomState, size: int = IMAGE_SIZE
               ) -> tuple[np.ndarray, list[list[float]]]:
    """One noise image with 1-3 rectangles, and its ground truth rows
    ``[label, xmin, ymin, xmax, ymax, difficult]`` (coordinates in 0..1)."""
    image = rng.normal(0.0, 0.3, size=(size, size))
    boxes: list[list[float]] = []
    for _ in range(rng.randint(1, 4)):
        w, h = rng.randint(size // 4, size // 2 + 1, size=2)
        x, y = rng.randint(0, size - w + 1), rng.randint(0, size - h + 1)
        label = rng.randint(1, NUM_CLASSES)
        image[y:y + h, x:x + w] += 1.0 if label == 1 else -1.0
        boxes.append([int(label), *(float(v) / size for v in (x, y, x + w, y + h)), 0.0])
    return image.astype(np.float32).reshape(-1), boxes


def reader(count: int, seed: int, image_size: int = IMAGE_SIZE):
    """``count`` (image, boxes) samples, the same ones on every call."""
    def read():
        rng = np.random.RandomState(seed)
        for _ in range(count):
            yield make_image(rng, image_size)
    return read


def build(image_size: int = IMAGE_SIZE):
    """The network: returns ``(cost, detections, label)``."""
    relu = paddle.activation.Relu()
    image = paddle.layer.data(name="image",
                              type=paddle.data_type.dense_vector(image_size * image_size),
                              height=image_size, width=image_size)
    label = paddle.layer.data(name="label", type=paddle.data_type.dense_vector_sequence(6))
    h = paddle.networks.simple_img_conv_pool(input=image, filter_size=3, num_filters=16,
                                             num_channel=1, conv_padding=1, pool_size=2,
                                             pool_stride=2, act=relu)
    h = paddle.networks.simple_img_conv_pool(input=h, filter_size=3, num_filters=32,
                                             conv_padding=1, pool_size=2, pool_stride=2,
                                             act=relu)
    h = paddle.layer.img_conv(input=h, filter_size=3, num_filters=32, padding=1, act=relu)
    priors = paddle.layer.priorbox(input=h, image=image, aspect_ratio=[2.0], variance=VARIANCE,
                                   min_size=[image_size * 10 // 32],
                                   max_size=[image_size * 16 // 32])
    per_cell = 4  # min_size, max_size, ratio 2 and 1/2
    linear = paddle.activation.Linear()
    loc = paddle.layer.img_conv(input=h, filter_size=3, num_filters=per_cell * 4, padding=1,
                                act=linear)
    conf = paddle.layer.img_conv(input=h, filter_size=3, num_filters=per_cell * NUM_CLASSES,
                                 padding=1, act=linear)
    cost = paddle.layer.multibox_loss(input_loc=loc, input_conf=conf, priorbox=priors,
                                      label=label, num_classes=NUM_CLASSES)
    detections = paddle.layer.detection_output(input_loc=loc, input_conf=conf, priorbox=priors,
                                               num_classes=NUM_CLASSES, keep_top_k=20,
                                               confidence_threshold=0.05)
    paddle.evaluator.detection_map(input=detections, label=label)
    return cost, detections, label


def main(num_passes: int = 8, train_images: int = 800, test_images: int = 200,
         batch_size: int = 32, seed: int = 1, image_size: int = IMAGE_SIZE,
         verbose: bool = True) -> dict[str, float]:
    """Train and return ``{"map": test mAP (percent), "first_cost", "last_cost", "seconds"}``
    (the costs: mean multibox loss per image of the first and the last pass)."""
    paddle.init(use_gpu=False, trainer_count=1, seed=seed)
    paddle.layer.reset_names()
    cost, detections, _ = build(image_size)
    parameters = paddle.parameters.create(cost)
    optimizer = paddle.optimizer.Adam(learning_rate=2e-3)
    trainer = paddle.trainer.SGD(cost=cost, parameters=parameters, update_equation=optimizer,
                                 extra_layers=[detections])
    feeding = {"image": 0, "label": 1}
    pass_costs: list[float] = []
    batch_costs: list[float] = []

    def handler(event):
        if isinstance(event, paddle.event.EndIteration):
            batch_costs.append(event.cost)
        if isinstance(event, paddle.event.EndPass):
            pass_costs.append(float(np.mean(batch_costs)))
            batch_costs.clear()
            if verbose:
                print(f"pass {event.pass_id}: multibox loss {pass_costs[-1]:.4f}", flush=True)

    start = time.time()
    train = paddle.reader.shuffle(reader(train_images, seed, image_size), 512)
    trainer.train(reader=paddle.batch(train, batch_size),
                  num_passes=num_passes, event_handler=handler, feeding=feeding)
    seconds = time.time() - start
    result = trainer.test(reader=paddle.batch(reader(test_images, seed + 1000, image_size), 50),
                          feeding=feeding)
    mean_ap = float(result.metrics["detection_map_evaluator"])
    if verbose:
        print(f"test detection mAP (11-point): {mean_ap:.1f}% after {seconds:.0f} s of training")
    return {"map": mean_ap, "first_cost": pass_costs[0], "last_cost": pass_costs[-1],
            "seconds": seconds}


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--num_passes", type=int, default=8)
    parser.add_argument("--train_images", type=int, default=800)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    main(num_passes=args.num_passes, train_images=args.train_images, seed=args.seed)
