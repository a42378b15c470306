"""Built-in layers, one family per module; importing this package registers them all.

``sculler/__init__.py`` imports it first, so every built-in type is registered before any
lookup (``sculler.core.layer.get_layer_class``). Imports run one way: this package ->
families -> core; core never imports it."""

from sculler.layers import (  # noqa: F401
    beam_search,
    concat2,
    conv,
    cost,
    cost_extra,
    cost_sampled,
    crf,
    ctc,
    data,
    dense,
    dense_pair,
    dense_select,
    embedding,
    fc,
    image,
    merge,
    mixed,
    norm,
    pool,
    recurrent,
    recurrent_group,
    recurrent_step,
    sequence,
    sequence_select,
    sequence_shape,
    similarity,
)
