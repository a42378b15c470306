"""Image network blocks of the v2 API (``paddle.v2.networks``): conv + pool groups and VGG.

Each helper strings together the v2 layers (``img_conv``, ``img_pool``, ``fc``,
``dropout``) the way PaddlePaddle's ``trainer_config_helpers/networks.py`` does, with the same
arguments and layer names (``simple_img_conv_pool(name="c")`` builds ``c_conv`` and
``c_pool``; unnamed groups are ``__conv_pool_<n>__``). Sequence networks (``simple_lstm``,
...) are not provided here.

Example:
    >>> import sculler as paddle
    >>> img = paddle.layer.data(name="img", type=paddle.data_type.dense_vector(64),
    ...                         height=8, width=8)
    >>> paddle.networks.simple_img_conv_pool(input=img, filter_size=3, num_filters=8,
    ...                                      pool_size=2, pool_stride=2).size  # 8 x 3 x 3
    72
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sculler import activation as A
from sculler import layer as L
from sculler import pooling as P
from sculler.attr import ExtraLayerAttribute
from sculler.core.expression import LayerOutput, auto_name

__all__ = ["simple_img_conv_pool", "img_separable_conv", "img_conv_bn_pool", "img_conv_group",
           "small_vgg", "vgg_16_network"]


def simple_img_conv_pool(input: LayerOutput, filter_size: Any, num_filters: int,  # noqa: A002
                         pool_size: int, name: str | None = None, pool_type: Any = None,
                         act: Any = None, groups: int = 1, conv_stride: int = 1,
                         conv_padding: int = 0, bias_attr: Any = None,
                         num_channel: int | None = None, param_attr: Any = None,
                         shared_bias: bool = True, conv_layer_attr: Any = None,
                         pool_stride: int = 1, pool_padding: int = 0,
                         pool_layer_attr: Any = None) -> LayerOutput:
    """``img_pool(img_conv(input))``: a convolution (default act Relu) then pooling (Max);
    layers ``<name>_conv`` and ``<name>_pool``."""
    name = name or auto_name("conv_pool")
    conv = L.img_conv(input=input, filter_size=filter_size, num_filters=num_filters,
                      name=f"{name}_conv", num_channels=num_channel, act=act, groups=groups,
                      stride=conv_stride, padding=conv_padding, bias_attr=bias_attr,
                      param_attr=param_attr, shared_biases=shared_bias,
                      layer_attr=conv_layer_attr)
    return L.img_pool(input=conv, pool_size=pool_size, name=f"{name}_pool",
                      pool_type=pool_type, stride=pool_stride, padding=pool_padding,
                      layer_attr=pool_layer_attr)


def img_separable_conv(input: LayerOutput, num_channels: int, num_out_channels: int,  # noqa: A002
                       filter_size: Any, stride: Any = 1, padding: Any = 0,
                       depth_multiplier: int = 1, act: Any = None, bias_attr: Any = None,
                       param_attr: Any = None, shared_bias: bool = True,
                       layer_type: str | None = None, name: str | None = None) -> LayerOutput:
    """Xception's separable convolution: a depthwise convolution (``groups=num_channels``,
    ``num_channels * depth_multiplier`` filters, linear) ``<name>_depthwise_conv``, then a
    1 x 1 pointwise convolution ``<name>_pointwise_conv`` to ``num_out_channels`` (act
    ``act``, default Relu), as PaddlePaddle's networks.py builds it (default name
    ``__separable_conv_<n>__``)."""
    name = name or auto_name("separable_conv")
    depthwise = L.img_conv(input=input, name=f"{name}_depthwise_conv",
                           num_channels=num_channels,
                           num_filters=num_channels * depth_multiplier, groups=num_channels,
                           filter_size=filter_size, stride=stride, padding=padding,
                           act=A.Linear(), bias_attr=bias_attr, param_attr=param_attr,
                           shared_biases=shared_bias, layer_type=layer_type)
    return L.img_conv(input=depthwise, name=f"{name}_pointwise_conv",
                      num_channels=num_channels * depth_multiplier,
                      num_filters=num_out_channels, filter_size=1, stride=1, padding=0,
                      act=act, bias_attr=bias_attr, param_attr=param_attr,
                      shared_biases=shared_bias, layer_type=layer_type)


def img_conv_bn_pool(input: LayerOutput, filter_size: Any, num_filters: int,  # noqa: A002
                     pool_size: int, name: str | None = None, pool_type: Any = None,
                     act: Any = None, groups: int = 1, conv_stride: int = 1,
                     conv_padding: int = 0, conv_bias_attr: Any = None,
                     num_channel: int | None = None, conv_param_attr: Any = None,
                     shared_bias: bool = True, conv_layer_attr: Any = None,
                     bn_param_attr: Any = None, bn_bias_attr: Any = None,
                     bn_layer_attr: Any = None, pool_stride: int = 1, pool_padding: int = 0,
                     pool_layer_attr: Any = None) -> LayerOutput:
    """Linear convolution, batch norm with ``act`` (default Relu), then pooling; layers
    ``<name>_conv``, ``<name>_bn``, ``<name>_pool``."""
    name = name or auto_name("conv_bn_pool")
    conv = L.img_conv(input=input, filter_size=filter_size, num_filters=num_filters,
                      name=f"{name}_conv", num_channels=num_channel, act=A.Linear(),
                      groups=groups, stride=conv_stride, padding=conv_padding,
                      bias_attr=conv_bias_attr, param_attr=conv_param_attr,
                      shared_biases=shared_bias, layer_attr=conv_layer_attr)
    bn = L.batch_norm(input=conv, name=f"{name}_bn", act=act, bias_attr=bn_bias_attr,
                      param_attr=bn_param_attr, layer_attr=bn_layer_attr)
    return L.img_pool(input=bn, pool_size=pool_size, name=f"{name}_pool", pool_type=pool_type,
                      stride=pool_stride, padding=pool_padding, layer_attr=pool_layer_attr)


def _per_conv(value: Any, n: int, what: str) -> list:
    if isinstance(value, (list, tuple)):
        if len(value) != n:
            raise ValueError(f"img_conv_group: {what} has {len(value)} entries for {n} "
                             "convolutions")
        return list(value)
    return [value] * n


def img_conv_group(input: LayerOutput, conv_num_filter: Sequence[int],  # noqa: A002
                   pool_size: int, num_channels: int | None = None, conv_padding: Any = 1,
                   conv_filter_size: Any = 3, conv_act: Any = None,
                   conv_with_batchnorm: Any = False, conv_batchnorm_drop_rate: Any = 0,
                   pool_stride: int = 1, pool_type: Any = None,
                   param_attr: Any = None) -> LayerOutput:
    """VGG block: ``len(conv_num_filter)`` convolutions (each optionally followed by batch
    norm, the activation then moving to the batch norm, with dropout
    ``conv_batchnorm_drop_rate``), then one pooling. Per-conv arguments are a value or a list.
    """
    if not isinstance(conv_num_filter, (list, tuple)) or not conv_num_filter:
        raise TypeError(f"img_conv_group: conv_num_filter must be a non-empty list of ints, "
                        f"got {conv_num_filter!r}")
    n = len(conv_num_filter)
    pads = _per_conv(conv_padding, n, "conv_padding")
    sizes = _per_conv(conv_filter_size, n, "conv_filter_size")
    acts = _per_conv(conv_act if conv_act is not None else A.Relu(), n, "conv_act")
    bns = _per_conv(conv_with_batchnorm, n, "conv_with_batchnorm")
    drops = _per_conv(conv_batchnorm_drop_rate, n, "conv_batchnorm_drop_rate")
    tmp = input
    for i in range(n):
        tmp = L.img_conv(input=tmp, filter_size=sizes[i], num_filters=conv_num_filter[i],
                         padding=pads[i], num_channels=num_channels if i == 0 else None,
                         act=A.Linear() if bns[i] else acts[i], param_attr=param_attr)
        if bns[i]:
            extra = ExtraLayerAttribute(drop_rate=drops[i]) if abs(drops[i]) >= 1e-5 else None
            tmp = L.batch_norm(input=tmp, act=acts[i], layer_attr=extra)
    return L.img_pool(input=tmp, pool_size=pool_size, stride=pool_stride,
                      pool_type=pool_type or P.Max())


def small_vgg(input_image: LayerOutput, num_channels: int, num_classes: int) -> LayerOutput:
    """The CIFAR VGG of Paddle's demos: conv groups of 64x2, 128x2, 256x3, 512x3 (3x3, batch
    norm, dropout), pooling, dropout, fc 512 + batch norm, softmax fc ``num_classes``."""

    def block(ipt, nf, times, drops, channels=None):
        return img_conv_group(input=ipt, num_channels=channels, pool_size=2, pool_stride=2,
                              conv_num_filter=[nf] * times, conv_filter_size=3,
                              conv_act=A.Relu(), conv_with_batchnorm=True,
                              conv_batchnorm_drop_rate=drops, pool_type=P.Max())

    tmp = block(input_image, 64, 2, [0.3, 0], num_channels)
    tmp = block(tmp, 128, 2, [0.4, 0])
    tmp = block(tmp, 256, 3, [0.4, 0.4, 0])
    tmp = block(tmp, 512, 3, [0.4, 0.4, 0])
    tmp = L.img_pool(input=tmp, stride=2, pool_size=2, pool_type=P.Max())
    tmp = L.dropout(input=tmp, dropout_rate=0.5)
    tmp = L.fc(input=tmp, size=512, layer_attr=ExtraLayerAttribute(drop_rate=0.5),
               act=A.Linear())
    tmp = L.batch_norm(input=tmp, act=A.Relu())
    return L.fc(input=tmp, size=num_classes, act=A.Softmax())


def vgg_16_network(input_image: LayerOutput, num_channels: int,
                   num_classes: int = 1000) -> LayerOutput:
    """VGG-16 (Simonyan & Zisserman): five 3x3 conv groups (64x2, 128x2, 256x3, 512x3,
    512x3) each with 2x2 max pooling, two fc 4096 relu with dropout 0.5, softmax fc."""
    tmp = input_image
    for i, filters in enumerate(([64] * 2, [128] * 2, [256] * 3, [512] * 3, [512] * 3)):
        tmp = img_conv_group(input=tmp, num_channels=num_channels if i == 0 else None,
                             conv_padding=1, conv_num_filter=filters, conv_filter_size=3,
                             conv_act=A.Relu(), pool_size=2, pool_stride=2, pool_type=P.Max())
    for _ in range(2):
        tmp = L.fc(input=tmp, size=4096, act=A.Relu(),
                   layer_attr=ExtraLayerAttribute(drop_rate=0.5))
    return L.fc(input=tmp, size=num_classes, act=A.Softmax())


from sculler.v2 import (  # noqa: E402
    networks_attention,
    networks_group,
    networks_rnn,
    networks_text,
)
from sculler.v2.networks_attention import *  # noqa: E402,F401,F403
from sculler.v2.networks_group import *  # noqa: E402,F401,F403
from sculler.v2.networks_rnn import *  # noqa: E402,F401,F403
from sculler.v2.networks_text import *  # noqa: E402,F401,F403

__all__ += [*networks_attention.__all__, *networks_group.__all__, *networks_rnn.__all__,
            *networks_text.__all__]
