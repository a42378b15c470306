"""Pooling types of the v2 API (``paddle.v2.pooling``), used by sequence and image pooling.

``Max`` keeps the largest value, ``Avg`` the mean, ``Sum`` the sum and ``SquareRootN`` the sum
divided by ``sqrt(n)`` over the pooled steps or window.
"""

from __future__ import annotations

__all__ = ["BasePool", "Max", "Avg", "Sum", "SquareRootN", "CudnnMax", "CudnnAvg"]


class BasePool:
    name = "max"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, BasePool) and other.name == self.name

    def __hash__(self) -> int:
        return hash(self.name)

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class Max(BasePool):
    """Maximum; with ``output_max_index=True`` (sequence pooling only) the output is the
    batch row index of each maximum instead of its value."""

    name = "max"

    def __init__(self, output_max_index: bool | None = None):
        self.output_max_index = output_max_index


class Avg(BasePool):
    name = "average"


class Sum(BasePool):
    name = "sum"


class SquareRootN(BasePool):
    name = "squarerootn"


CudnnMax = Max
CudnnAvg = Avg
