"""Loss modules wrapping ``nn.functional`` (``CrossEntropyLoss``, ``MSELoss``, ``L1Loss``)."""

from __future__ import annotations

from typing import Any

from sculler.eager.tensor import Tensor
from sculler.nn import functional as F
from sculler.nn.layer import Layer


class CrossEntropyLoss(Layer):
    """Softmax + negative log-likelihood of int labels (see ``F.cross_entropy``)."""

    def __init__(self, weight: Any = None, ignore_index: int = -100, reduction: str = "mean",
                 soft_label: bool = False, axis: int = -1, use_softmax: bool = True,
                 name: str | None = None) -> None:
        super().__init__()
        F._check_reduction(reduction)
        self.weight, self.ignore_index, self.reduction = weight, ignore_index, reduction
        self.soft_label, self.axis, self.use_softmax = soft_label, axis, use_softmax

    def forward(self, input: Tensor, label: Tensor) -> Tensor:  # noqa: A002
        return F.cross_entropy(input, label, self.weight, self.ignore_index, self.reduction,
                               self.soft_label, self.axis, self.use_softmax)


class MSELoss(Layer):
    """Mean squared error ``mean((input - label)^2)``."""

    def __init__(self, reduction: str = "mean") -> None:
        super().__init__()
        F._check_reduction(reduction)
        self.reduction = reduction

    def forward(self, input: Tensor, label: Tensor) -> Tensor:  # noqa: A002
        return F.mse_loss(input, label, self.reduction)


class L1Loss(MSELoss):
    """Mean absolute error ``mean(|input - label|)``."""

    def forward(self, input: Tensor, label: Tensor) -> Tensor:  # noqa: A002
        return F.l1_loss(input, label, self.reduction)
