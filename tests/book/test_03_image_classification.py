"""Book chapter 03 (image classification): a VGG with batch-normalised conv groups and a
CIFAR ResNet, on synthetic CIFAR-shaped images (3 x 32 x 32 floats in [0, 1], 10 classes),
shrunk (fewer filters, depth 8) so a few batches run in seconds."""

import numpy as np
import pytest

import sculler as paddle

CLASSES = 10


def cifar_like(n, seed):
    """Reader of (3072 floats, label): a class-coloured square on noise (same record format as
    paddle.dataset.cifar.train10)."""
    rng = np.random.RandomState(seed)
    samples = []
    for _ in range(n):
        label = int(rng.randint(CLASSES))
        img = rng.uniform(0, 0.3, (3, 32, 32)).astype(np.float32)
        channel, offset = label % 3, 4 * (label // 3)
        img[channel, offset:offset + 12, offset:offset + 12] += 0.7
        samples.append((img.reshape(-1), label))
    return lambda: iter(samples)


def vgg_bn_drop(image):
    def conv_block(ipt, num_filter, groups, dropouts, num_channels=None):
        return paddle.networks.img_conv_group(
            input=ipt, num_channels=num_channels, pool_size=2, pool_stride=2,
            conv_num_filter=[num_filter] * groups, conv_filter_size=3,
            conv_act=paddle.activation.Relu(), conv_with_batchnorm=True,
            conv_batchnorm_drop_rate=dropouts, pool_type=paddle.pooling.Max())

    conv1 = conv_block(image, 8, 2, [0.3, 0], 3)
    conv2 = conv_block(conv1, 16, 2, [0.4, 0])
    drop = paddle.layer.dropout(input=conv2, dropout_rate=0.5)
    fc1 = paddle.layer.fc(input=drop, size=32, act=paddle.activation.Linear())
    bn = paddle.layer.batch_norm(input=fc1, act=paddle.activation.Relu(),
                                 layer_attr=paddle.attr.Extra(drop_rate=0.5))
    return paddle.layer.fc(input=bn, size=32, act=paddle.activation.Linear())


def conv_bn_layer(ipt, ch_out, filter_size, stride, padding, act=None, ch_in=None):
    tmp = paddle.layer.img_conv(input=ipt, filter_size=filter_size, num_channels=ch_in,
                                num_filters=ch_out, stride=stride, padding=padding,
                                act=paddle.activation.Linear(), bias_attr=False)
    return paddle.layer.batch_norm(input=tmp, act=act or paddle.activation.Relu())


def shortcut(ipt, ch_in, ch_out, stride):
    if ch_in != ch_out:
        return conv_bn_layer(ipt, ch_out, 1, stride, 0, paddle.activation.Linear())
    return ipt


def basicblock(ipt, ch_in, ch_out, stride):
    tmp = conv_bn_layer(ipt, ch_out, 3, stride, 1)
    tmp = conv_bn_layer(tmp, ch_out, 3, 1, 1, paddle.activation.Linear())
    short = shortcut(ipt, ch_in, ch_out, stride)
    return paddle.layer.addto(input=[tmp, short], act=paddle.activation.Relu())


def layer_warp(block_func, ipt, ch_in, ch_out, count, stride):
    tmp = block_func(ipt, ch_in, ch_out, stride)
    for _ in range(1, count):
        tmp = block_func(tmp, ch_out, ch_out, 1)
    return tmp


def resnet_cifar10(ipt, depth=8, channels=(8, 16, 32)):
    """The book's network (channels 16, 32, 64 there), shrunk by default for a test."""
    assert (depth - 2) % 6 == 0
    n = (depth - 2) // 6
    c1, c2, c3 = channels
    conv1 = conv_bn_layer(ipt, ch_in=3, ch_out=c1, filter_size=3, stride=1, padding=1)
    res1 = layer_warp(basicblock, conv1, c1, c1, n, 1)
    res2 = layer_warp(basicblock, res1, c1, c2, n, 2)
    res3 = layer_warp(basicblock, res2, c2, c3, n, 2)
    return paddle.layer.img_pool(input=res3, pool_size=8, stride=1,
                                 pool_type=paddle.pooling.Avg())


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:divide by zero encountered in log:RuntimeWarning")
@pytest.mark.parametrize("net", [vgg_bn_drop, resnet_cifar10])
def test_chapter03_trains_with_falling_cost(net, book):
    paddle.init(use_gpu=False, trainer_count=1, seed=1)
    image = paddle.layer.data(name="image", type=paddle.data_type.dense_vector(3 * 32 * 32),
                              height=32, width=32)
    out = paddle.layer.fc(input=net(image), size=CLASSES, act=paddle.activation.Softmax())
    lbl = paddle.layer.data(name="label", type=paddle.data_type.integer_value(CLASSES))
    cost = paddle.layer.classification_cost(input=out, label=lbl)
    parameters = paddle.parameters.create(cost)
    momentum_optimizer = paddle.optimizer.Momentum(
        momentum=0.9, regularization=paddle.optimizer.L2Regularization(rate=0.0002 * 16),
        learning_rate=0.1 / 16, learning_rate_decay_a=0.1, learning_rate_decay_b=50000 * 100,
        learning_rate_schedule="discexp")
    trainer = paddle.trainer.SGD(cost=cost, parameters=parameters,
                                 update_equation=momentum_optimizer)
    tests = []
    costs = book.train_costs(trainer, cifar_like(48, 0), batch_size=16, num_passes=3,
                        feeding={"image": 0, "label": 1},
                        on_pass=lambda e: tests.append(trainer.test(
                            reader=paddle.batch(cifar_like(32, 1), batch_size=16),
                            feeding={"image": 0, "label": 1})))
    book.assert_finite_and_falling(costs)
    # (the test cost itself may be inf this early: batch norm's moving statistics have seen
    # nine batches, and a saturated softmax gives log(0))
    assert len(tests) == 3
    assert 0 <= tests[-1].metrics["classification_error_evaluator"] <= 1
    probs = paddle.infer(output_layer=out, parameters=parameters,
                         input=[(x,) for x, _ in list(cifar_like(4, 2)())])
    assert probs.shape == (4, CLASSES) and np.allclose(probs.sum(axis=1), 1, atol=1e-5)
