"""Find where NaN/Inf entered a network, only once something is already non-finite.

The trainer checks one number per batch, the cost (free: it is summed anyway). A non-finite
gradient makes the parameters it updates non-finite, so it shows in the next batch's cost.
Only then does :func:`locate_forward` walk the layers in topological order and name the
first whose output is non-finite: a data layer (the data itself), a layer whose parameters
hold NaN/Inf, or one that overflowed on finite inputs. For diverged parameters it reads the
gradients the previous backward left (the trainer clears them only after the cost check) and
names the first layer, in the order backward ran, whose parameter gradients were non-finite.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from sculler import backend

__all__ = ["NonFiniteError", "locate_forward"]


class NonFiniteError(FloatingPointError):
    """NaN or Inf appeared in training; the message names the first layer where it did."""


def _finite(array: Any) -> bool:
    return array is None or bool(np.isfinite(backend.to_numpy(array)).all())


def _data_note(network: Any) -> str:
    bad = [d.name for d in network.data_layers if not _finite(d.output.value)]
    if bad:
        return (f"the input data itself is non-finite in data layer(s) {bad}: check the "
                "reader")
    return "the input data is finite"


PROBABILITY_COSTS = ("multi-class-cross-entropy",)


def _probability_note(layer: Any) -> str:
    """For a cross-entropy cost fed values that are not probabilities (a softmax forgotten,
    e.g. fc's default Tanh): what the cost expects and how to give it that."""
    if layer.type_name not in PROBABILITY_COSTS or not layer.inputs:
        return ""
    source = layer.inputs[0]
    value = backend.to_numpy(source.output.value)
    if value is None or not value.size or (value.min() >= 0 and value.max() <= 1):
        return ""
    return (f"; classification_cost (cross-entropy) expects probabilities, a softmax output, "
            f"but its input {source.name!r} holds values in [{value.min():.3g}, "
            f"{value.max():.3g}]: give {source.name!r} act=paddle.activation.Softmax() (v1: "
            "act=SoftmaxActivation())")


def _first_bad_backward(network: Any) -> tuple[Any, list[str]] | None:
    """The first layer, in the order backward runs, with a non-finite parameter gradient."""
    for layer in reversed(network.order):
        bad = [p.name for p in layer.parameters if p.grad is not None and not _finite(p.grad)]
        if bad:
            return layer, bad
    return None


def _divergence(network: Any, previous: tuple[int, int] | None) -> str:
    if previous is None:
        return ("they held NaN/Inf before this training run started (set by hand or by an "
                "earlier run)")
    where = f"pass {previous[0]}, batch {previous[1]}"
    found = _first_bad_backward(network)
    if found is None:
        return (f"the gradients of {where} were finite, so the update itself overflowed: "
                "lower the learning rate or clip gradients")
    layer, params = found
    return (f"the backward of {where} made them so: the first layer, in backward order, whose "
            f"gradient is NaN/Inf is {layer.name!r} ({layer.type_name}), for {params}")


def locate_forward(network: Any, pass_id: int, batch_id: int,
                   previous: tuple[int, int] | None = None) -> str:
    """Message naming the first layer (topological order) whose forward output is
    non-finite, why (data, diverged parameters and the backward that diverged them, or the
    layer's own overflow), and whether the data already was. ``previous``: the pass and
    batch of the last backward of this run (None before the first)."""
    where = f"pass {pass_id}, batch {batch_id}"
    for layer in network.order:
        if _finite(layer.output.value):
            continue
        if layer.type_name == "data":
            return (f"non-finite values in {where}, forward: data layer {layer.name!r} "
                    f"received NaN/Inf; {_data_note(network)}")
        bad_params = [p.name for p in layer.parameters if not _finite(p.value)]
        cause = (f"its parameter(s) {bad_params} hold NaN/Inf; {_divergence(network, previous)}"
                 if bad_params else
                 f"its inputs {[i.name for i in layer.inputs]} and parameters are finite, so "
                 "the layer's own computation overflowed or divided by zero")
        probability_note = _probability_note(layer)
        if probability_note and not bad_params:
            cause = (f"its inputs {[i.name for i in layer.inputs]} and parameters are finite"
                     f"{probability_note}")
        return (f"non-finite values in {where}, forward: the first layer with a NaN/Inf "
                f"output is {layer.name!r} ({layer.type_name}); {cause}; {_data_note(network)}")
    return f"the cost is non-finite in {where} but no layer output is"
