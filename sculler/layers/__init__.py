"""Built-in layers, one family per module; importing this package registers them all."""

from sculler.layers import cost, data, embedding, fc, merge  # noqa: F401

from . import conv, image, norm, pool  # noqa: F401 - image layers
