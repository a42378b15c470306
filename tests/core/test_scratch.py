"""Layer.scratch: named grow-only buffers, the same view for a repeated request."""

import numpy as np

from sculler.core.layer import Layer
from sculler.core.model_config import LayerConfig


def test_scratch_reuses_memory_and_respects_dtype_and_shape():
    layer = Layer(LayerConfig("a", "fc", size=3))
    a = layer.scratch("buf", (4, 3))
    assert a.dtype == layer.dtype and layer.scratch("buf", (4, 3)) is a
    small = layer.scratch("buf", (2, 3))  # a smaller batch: a view of the same memory
    assert small.shape == (2, 3) and np.shares_memory(small, a)
    mask = layer.scratch("buf", (2, 3), bool)
    assert mask.dtype == bool
    again = layer.scratch("buf", (2, 3))  # default dtype again: not the bool view
    assert again.dtype == layer.dtype and again is not mask
    big = layer.scratch("buf", (8, 3))  # grows
    assert big.shape == (8, 3) and layer.scratch("buf", (8, 3)) is big
