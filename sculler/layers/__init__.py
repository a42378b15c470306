"""Built-in layers, one family per module; importing this package registers them all."""

from sculler.layers import (  # noqa: F401
    conv,
    cost,
    cost_extra,
    cost_sampled,
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
    recurrent_group,
    recurrent_step,
    similarity,
)
