"""Multi-head attention of the v2 API (``paddle.v2.networks.multi_head_attention``), built
from layers exactly as PaddlePaddle's ``trainer_config_helpers/networks.py`` builds it.

For each sample, ``query`` (one vector) attends over the sequence ``key`` / ``value``: the
three are projected (``<name>_query_proj``, ``<name>_key_proj``, ``<name>_value_proj``, no
bias), the query projection expanded over the key's steps, and the projections cut into
``head_num`` heads. Head ``i`` scores each step (``dot-product attention``:
``q.k / sqrt(key_proj_size)``; ``additive attention``: ``tanh(q + k)`` then a width-1 fc),
normalises the scores over the sequence (``<name>_softmax_<i>``, SequenceSoftmax), weights
the value steps (``<name>_scaling_<i>``) and sums them (``<name>_pooling_<i>``); the heads are
concatenated.

Example:
    >>> import sculler as paddle
    >>> q = paddle.layer.data(name="q", type=paddle.data_type.dense_vector(6))
    >>> kv = paddle.layer.data(name="kv", type=paddle.data_type.dense_vector_sequence(6))
    >>> att = paddle.networks.multi_head_attention(
    ...     query=q, key=kv, value=kv, key_proj_size=4, value_proj_size=3, head_num=2,
    ...     attention_type="dot-product attention", name="att")
    >>> att.size
    6
"""

from __future__ import annotations

import math
from typing import Any

from sculler import activation as A
from sculler import layer as L
from sculler import pooling as P
from sculler.core.expression import LayerOutput, auto_name
from sculler.validate import integer

__all__ = ["multi_head_attention"]

ATTENTION_TYPES = ("dot-product attention", "additive attention")


def multi_head_attention(query: LayerOutput, key: LayerOutput, value: LayerOutput,
                         key_proj_size: int, value_proj_size: int, head_num: int,
                         attention_type: str, softmax_param_attr: Any = None,
                         name: str | None = None) -> LayerOutput:
    """``head_num`` attention heads of ``query`` over the sequence ``key``/``value``,
    concatenated: width ``value_proj_size * head_num``."""
    if attention_type not in ATTENTION_TYPES:
        raise ValueError(f"multi_head_attention: attention_type must be one of "
                         f"{ATTENTION_TYPES}, got {attention_type!r}")
    kp = integer(key_proj_size, "multi_head_attention: key_proj_size", minimum=1)
    vp = integer(value_proj_size, "multi_head_attention: value_proj_size", minimum=1)
    heads = integer(head_num, "multi_head_attention: head_num", minimum=1)
    name = name or auto_name("multi_head_attention")

    def project(x: LayerOutput, size: int, what: str) -> LayerOutput:
        return L.mixed(size=size, input=L.full_matrix_projection(input=x),
                       name=f"{name}_{what}_proj")

    query_proj = L.expand(input=project(query, kp * heads, "query"), expand_as=key)
    key_proj = project(key, kp * heads, "key")
    value_proj = project(value, vp * heads, "value")

    def window(x: LayerOutput, size: int, i: int) -> LayerOutput:
        return L.mixed(size=size, input=L.identity_projection(input=x, offset=size * i,
                                                              size=size))

    head_list = []
    for i in range(heads):
        sub_query, sub_key = window(query_proj, kp, i), window(key_proj, kp, i)
        sub_value = window(value_proj, vp, i)
        if attention_type == "dot-product attention":
            m = L.dot_prod(input1=sub_query, input2=sub_key, name=f"{name}_dot-product_{i}")
            m = L.slope_intercept(input=m, slope=math.sqrt(1.0 / kp),
                                  name=f"{name}_dot-product_scaling_{i}")
        else:
            m = L.mixed(size=kp, act=A.Tanh(), name=f"{name}_combine_{i}",
                        input=[L.identity_projection(input=sub_query),
                               L.identity_projection(input=sub_key)])
        weight = L.fc(input=m, size=1, act=A.SequenceSoftmax(), param_attr=softmax_param_attr,
                      name=f"{name}_softmax_{i}", bias_attr=False)
        scaled = L.scaling(weight=weight, input=sub_value, name=f"{name}_scaling_{i}")
        head_list.append(L.pooling(input=scaled, pooling_type=P.Sum(),
                                   name=f"{name}_pooling_{i}"))
    return L.concat(input=head_list)
