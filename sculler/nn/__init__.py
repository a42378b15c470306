"""Eager neural-network modules (Paddle 2.x ``paddle.nn``)."""

from sculler.nn import functional, initializer
from sculler.nn.common import (
    Dropout,
    Embedding,
    Flatten,
    Linear,
    LogSoftmax,
    ReLU,
    Sequential,
    Sigmoid,
    Softmax,
    Softsign,
    Tanh,
)
from sculler.nn.conv import AvgPool2D, Conv2D, MaxPool2D
from sculler.nn.layer import Layer, ParamAttr
from sculler.nn.loss import CrossEntropyLoss, L1Loss, MSELoss

__all__ = [
    "AvgPool2D", "Conv2D", "MaxPool2D", "CrossEntropyLoss", "Dropout", "Embedding", "Flatten",
    "L1Loss", "Layer", "Linear",
    "LogSoftmax", "MSELoss", "ParamAttr", "ReLU", "Sequential", "Sigmoid", "Softmax",
    "Softsign", "Tanh", "functional", "initializer",
]
