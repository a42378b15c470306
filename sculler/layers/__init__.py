"""Built-in layers, one family per module; importing this package registers them all."""

from sculler.layers import (  # noqa: F401
    conv,
    cost,
    data,
    embedding,
    fc,
    image,
    merge,
    norm,
    pool,
    similarity,
)
