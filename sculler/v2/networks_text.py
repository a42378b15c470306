"""Text network blocks of the v2 API (``paddle.v2.networks``): ``sequence_conv_pool`` and its
alias ``text_conv_pool``, as PaddlePaddle's ``trainer_config_helpers/networks.py`` builds them
(same arguments, layer names and defaults); re-exported by :mod:`sculler.networks`.

Example:
    >>> import sculler as paddle
    >>> words = paddle.layer.data(name="w", type=paddle.data_type.integer_value_sequence(100))
    >>> emb = paddle.layer.embedding(input=words, size=16)
    >>> conv = paddle.networks.sequence_conv_pool(input=emb, context_len=3, hidden_size=32,
    ...                                           name="conv3")
    >>> conv.name, conv.size
    ('conv3', 32)
"""

from __future__ import annotations

from typing import Any

from sculler import activation as A
from sculler import layer as L
from sculler import pooling as P
from sculler.core.expression import LayerOutput, auto_name, make_layer

__all__ = ["sequence_conv_pool", "text_conv_pool"]


def sequence_conv_pool(input: LayerOutput, context_len: int, hidden_size: int,  # noqa: A002
                       name: str | None = None, context_start: int | None = None,
                       pool_type: Any = None, context_proj_layer_name: str | None = None,
                       context_proj_param_attr: Any = False, fc_layer_name: str | None = None,
                       fc_param_attr: Any = None, fc_bias_attr: Any = None, fc_act: Any = None,
                       pool_bias_attr: Any = None, fc_attr: Any = None,
                       context_attr: Any = None, pool_attr: Any = None) -> LayerOutput:
    """A text convolution: ``pool(fc(context_projection(input)))``, one vector per sequence.

    Layers: mixed ``<name>_conv_proj`` (width ``input.size * context_len``, Linear, no bias;
    zero padding unless ``context_proj_param_attr`` asks for trainable padding), fc
    ``<name>_conv_fc`` (``hidden_size``, act ``fc_act`` default Tanh, with bias), pooling
    ``<name>`` (``pool_type`` default Max, over whole sequences). Unnamed blocks are
    ``__sequence_conv_pooling_<n>__``.
    """
    name = name or auto_name("sequence_conv_pooling")
    proj = L.context_projection(input, context_len=context_len, context_start=context_start,
                                padding_attr=context_proj_param_attr)
    conv = L.mixed(name=context_proj_layer_name or f"{name}_conv_proj",
                   size=input.size * int(context_len), input=proj, act=A.Linear(),
                   layer_attr=context_attr)
    fc = make_layer("fc", [conv], name=fc_layer_name or f"{name}_conv_fc", size=hidden_size,
                    act=fc_act, default_act=A.Tanh, param_attr=fc_param_attr,
                    bias_attr=fc_bias_attr, layer_attr=fc_attr)
    return L.pooling(input=fc, name=name, pooling_type=pool_type or P.Max(),
                     bias_attr=pool_bias_attr, layer_attr=pool_attr)


text_conv_pool = sequence_conv_pool
