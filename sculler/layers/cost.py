"""Cost layers: a per-sample cost column, and its gradient times the incoming one.

Inputs are ``[prediction, label]`` and optionally a per-sample ``weight`` column. The output is
``(batch, 1)``: ``coeff * weight_i * cost_i``. Backward multiplies by the output gradient (the
network seeds it with 1 for cost outputs), so a batch's parameter gradient is the SUM of the
per-sample gradients, as in PaddlePaddle. On the GPU a cost whose gradient goes past a fused
softmax takes that seed without it being written (a launch fewer a batch).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from sculler.backend import einsum_into, get_array_module, is_gpu_array
from sculler.core.expression import (
    LayerOutput,
    as_inputs,
    make_layer,
    no_support,
)
from sculler.core.faces import layer_function
from sculler.core.layer import Layer, first_id_out_of_range, register_layer
from sculler.math import cuda
from sculler.math.activation import row_starts


class CostLayer(Layer):
    is_cost = True
    min_inputs = 2
    max_inputs = 3

    @classmethod
    def infer_size(cls, config, inputs):
        return 1

    def sample_cost(self, x, label_arg, out) -> None:
        """Write each sample's cost into ``out`` (batch,)."""
        raise NotImplementedError

    def sample_grad(self, x, label_arg, dcost, dx) -> None:
        """Add ``dcost_i * d cost_i / d x_i`` into ``dx`` (read ``dcost`` only: it may be the
        output gradient itself)."""
        raise NotImplementedError

    def forward(self, pass_type: str) -> None:
        super().forward(pass_type)
        batch = self.check_same_batch()
        out = self.reserve_output(batch, 1)
        self.sample_cost(self.get_input_value(0), self.get_input(1), out[:, 0])
        coeff = self.attr("coeff", 1.0)
        if coeff != 1.0:
            out *= coeff
        if len(self.inputs) == 3:
            raw = self.scratch("raw_cost", out.shape)
            raw[...] = out
            out *= self._weight_column()
        self.forward_activation()

    def accepts_unit_output_grad(self) -> bool:
        """On the GPU, when nothing but the seed can be in the output gradient and nothing
        scales it (no consumer, linear activation, no clipping or dropout, coeff 1, no weight
        input) and the subclass has a fused gradient (:meth:`write_fused_grad`) to try."""
        return (is_gpu_array(self.output.grad) and not self.consumers
                and self.activation.is_linear and self.output_grad_unchanged()
                and len(self.inputs) == 2
                and self.attr("coeff", 1.0) == 1.0
                and type(self).write_fused_grad is not CostLayer.write_fused_grad)

    def backward(self, callback=None) -> None:
        if self.unit_output_grad:  # the seed 1, not written: the fused gradient, or write it
            self.unit_output_grad = False
            dx = self.get_input_grad(0)
            if dx is None or self.write_fused_grad(dx, None):
                return
            self.output.grad[...] = 1.0
        self.backward_activation()
        self._backward_weight_input()
        dx = self.get_input_grad(0)
        if dx is None:
            return
        dcost = self._scaled_dcost()
        if self.write_fused_grad(dx, dcost):
            return
        if self.first_write and self.input_grad_beta(0) == 0.0:
            dx[...] = 0
        self.sample_grad(self.get_input_value(0), self.get_input(1), dcost[:, 0], dx)

    def write_fused_grad(self, dx, dcost) -> bool:
        """Hook for a cost that can write its input's gradient in one fused step (e.g. past
        a softmax): True when it did, else :meth:`sample_grad` runs. ``dcost`` None: the
        output gradient is 1 (``unit_output_grad``), not written."""
        return False

    def _backward_weight_input(self) -> None:
        """``dL/dw_i = dL/dcost_i * raw cost_i`` for the optional third (weight) input."""
        if len(self.inputs) != 3 or self.get_input_grad(2) is None:
            return
        grad = self.output.grad
        raw = self._bufs["raw_cost"][: grad.size].reshape(grad.shape)
        if self.first_write and self.input_grad_beta(2) == 0.0:
            np.multiply(grad, raw, out=self.get_input_grad(2))
        else:
            self.get_input_grad(2)[...] += grad * raw

    def _scaled_dcost(self):
        """``dL/dcost_i * coeff * w_i``: the output gradient itself when neither changes it
        (``sample_grad`` only reads it), else a scratch buffer."""
        coeff = self.attr("coeff", 1.0)
        weighted = len(self.inputs) == 3
        if coeff == 1.0 and not weighted:
            return self.output.grad
        dcost = self.scratch("dcost", self.output.grad.shape)
        np.multiply(self.output.grad, coeff, out=dcost)
        if weighted:
            dcost *= self._weight_column()
        return dcost

    def _weight_column(self):
        w = self.get_input_value(2)
        if w is None or w.ndim != 2 or w.shape[1] != 1:
            raise ValueError(
                f"layer {self.name!r} ({self.type_name}): the weight input "
                f"({self.inputs[2].name!r}) must be a (batch, 1) dense column"
            )
        return w

    def label_ids(self, label_arg, num_classes: int):
        ids = label_arg.ids
        if ids is None:
            raise ValueError(
                f"layer {self.name!r} ({self.type_name}): label input ({self.inputs[1].name!r}) "
                f"must carry integer ids, got {label_arg.describe()}"
            )
        if label_arg.ids_known_below(num_classes):
            return ids
        bad = first_id_out_of_range(ids, num_classes)
        if bad is not None:
            raise ValueError(
                f"layer {self.name!r} ({self.type_name}): label id {bad} is out of range "
                f"[0, {num_classes}) for input {self.inputs[0].name!r} of width {num_classes}"
            )
        return ids


@register_layer("multi-class-cross-entropy", "multi_class_cross_entropy")
class MultiClassCrossEntropy(CostLayer):
    """``cost_i = -log p_i[label_i]`` for probabilities ``p`` (a softmax output);
    ``dp_i[label_i] = -1 / p_i[label_i]``.

    On a softmax input whose probability underflowed to 0 (logits ``[1e4, -1e4, 0]``, label
    1), ``-log p`` is inf although the cost is finite: those rows are recomputed from the
    softmax's logits ``z`` as ``logsumexp(z_i) - z_i[label_i]`` (20000 there), so a test
    pass reports the true cost and only a truly non-finite cost stops training."""

    first_write = True

    def init(self, layer_map, parameter_map) -> None:
        super().init(layer_map, parameter_map)
        if self._logits_source() is not None:
            self.inputs[0].keep_preact = True

    def _logits_source(self):
        """The input layer when it is a softmax (without dropout) whose logits it can keep."""
        src = self.inputs[0]
        if (src.activation.name == "softmax" and src.config.drop_rate == 0
                and not src.uses_act_inside):
            return src
        return None

    def _kept_logits(self):
        """The logits z of the softmax input (its ``preact``) where it keeps them, else None."""
        src = self._logits_source()
        return src.preact_value() if src is not None and src.keep_preact else None

    def sample_cost(self, x, label_arg, out) -> None:
        ids = self.label_ids(label_arg, x.shape[1])
        if is_gpu_array(x):
            cuda.pick_nll(x, ids, out, self._kept_logits())
            return
        if type(x) is np.ndarray and x.flags.c_contiguous and x.size:
            p = x.ravel().take(row_starts(*x.shape) + ids)
        else:
            p = x[np.arange(x.shape[0]), ids]
        with np.errstate(divide="ignore"):  # log(0) = -inf: recomputed just below
            np.log(p, out=out)
        np.negative(out, out=out)
        if type(out) is np.ndarray and np.isposinf(out).any():
            self._cost_from_logits(ids, out)

    def _cost_from_logits(self, ids, out) -> None:
        """``out_i = logsumexp(z_i) - z_i[label_i]`` (float64) where ``out_i`` is +inf."""
        logits = self._kept_logits()
        if logits is None:
            return
        rows = np.flatnonzero(np.isposinf(out))
        z = logits[rows].astype(np.float64)
        top = z.max(axis=1, keepdims=True)
        lse = top[:, 0] + np.log(np.exp(z - top).sum(axis=1))
        out[rows] = lse - z[np.arange(rows.size), ids[rows]]

    def sample_grad(self, x, label_arg, dcost, dx) -> None:
        ids = label_arg.ids
        if is_gpu_array(x) and cuda.pick_nll_grad(x, ids, dcost, dx):
            return
        rows = get_array_module(x).arange(x.shape[0])
        dx[rows, ids] -= dcost / x[rows, ids]

    def write_fused_grad(self, dx, dcost) -> bool:
        """When the input is a softmax whose only reader this is, write
        ``dL/dz = dcost * (p - onehot(label))`` past the softmax (fused: no ``1/p``, no
        softmax backward; the input layer skips its activation backward for this pass)."""
        x, src = self.get_input_value(0), self.inputs[0]
        on_gpu = is_gpu_array(dx)
        if not (src.activation.name == "softmax" and (on_gpu or type(dx) is np.ndarray)
                and (on_gpu or dcost is not None)
                and x.size and dx.flags.c_contiguous and x.flags.c_contiguous
                and src.preact_grad_writable(self)):
            return False
        self.input_grad_beta(0)  # the first write: overwrite
        if on_gpu:
            cuda.softmax_ce_grad(x, self.get_input(1).ids, dcost, dx)
            src.grad_is_preact = True
            return True
        np.multiply(x, dcost, out=dx)
        flat = dx.ravel()
        flat[row_starts(*x.shape) + self.get_input(1).ids] -= dcost[:, 0]
        src.grad_is_preact = True
        return True


@register_layer("square_error")
class SquareError(CostLayer):
    """``cost_i = sum_j (x_ij - y_ij)^2`` (PaddlePaddle's sum of squares, no 1/2);
    ``dx = 2 (x - y)``."""

    def _target(self, label_arg, x):
        y = label_arg.value
        if y is None or y.shape != x.shape:
            got = label_arg.describe()
            raise ValueError(
                f"layer {self.name!r} (square_error): label ({self.inputs[1].name!r}) must be "
                f"dense with shape {tuple(x.shape)}, got {got}"
            )
        return y

    def sample_cost(self, x, label_arg, out) -> None:
        diff = self.scratch("diff", x.shape)
        np.subtract(x, self._target(label_arg, x), out=diff)
        einsum_into("ij,ij->i", diff, diff, out=out)

    def sample_grad(self, x, label_arg, dcost, dx) -> None:
        diff = self.scratch("diff", x.shape)
        np.subtract(x, self._target(label_arg, x), out=diff)
        diff *= (2.0 * dcost)[:, None]
        dx += diff


def _cost(layer_type: str, prefix: str, inputs: list, weight: Any, name: Any, coeff: float,
          layer_attr: Any, fn: str, **unsupported: Any) -> LayerOutput:
    no_support(fn, **unsupported)
    if weight is not None:
        inputs = inputs + [weight]
    return make_layer(layer_type, as_inputs(inputs, fn), name=name, name_prefix=prefix,
                      layer_attr=layer_attr, attrs={"coeff": float(coeff)})


@layer_function(v1="classification_cost", types=("multi-class-cross-entropy",), prefix="cost")
def classification_cost(input: LayerOutput, label: LayerOutput, weight: Any = None,  # noqa: A002
                        name: str | None = None, evaluator: Any = "default",
                        layer_attr: Any = None, coeff: float = 1.0, act: Any = None,
                        param_attr: Any = None, bias_attr: Any = None,
                        parameter_name: str | None = None) -> LayerOutput:
    """Cross entropy ``-coeff * log p[label]`` of a softmax output; attaches a
    ``classification_error`` evaluator named ``classification_error_evaluator``."""
    out = _cost("multi-class-cross-entropy", "cost", [input, label], weight, name, coeff,
                layer_attr, "classification_cost", act=act, param_attr=param_attr,
                bias_attr=bias_attr, parameter_name=parameter_name)
    if evaluator == "default":
        from sculler.evaluator import classification_error

        evaluator = classification_error
    for ev in (evaluator if isinstance(evaluator, (list, tuple)) else [evaluator]):
        if ev is None:
            continue
        if not callable(ev):
            raise TypeError(f"classification_cost: evaluator must be an evaluator function, "
                            f"got {ev!r}")
        ev_name = getattr(ev, "evaluator_name", None) or f"{ev.__name__}_evaluator"
        ev(input=input, label=label, name=ev_name, weight=weight)
    return out


@layer_function(v1="cross_entropy", types=("multi-class-cross-entropy",))
def cross_entropy_cost(input: LayerOutput, label: LayerOutput, name: str | None = None,  # noqa: A002
                       coeff: float = 1.0, weight: Any = None, layer_attr: Any = None,
                       **kw: Any) -> LayerOutput:
    """``-coeff * log p[label]`` without an attached evaluator."""
    return _cost("multi-class-cross-entropy", "cross_entropy", [input, label], weight, name,
                 coeff, layer_attr, "cross_entropy_cost", **kw)


@layer_function(v1=("square_error_cost", "regression_cost", "mse_cost"), types=("square_error",))
def square_error_cost(input: LayerOutput, label: LayerOutput, weight: Any = None,  # noqa: A002
                      name: str | None = None, coeff: float = 1.0, layer_attr: Any = None,
                      **kw: Any) -> LayerOutput:
    """``coeff * sum_j (x_j - y_j)^2`` per sample (PaddlePaddle's, no 1/2)."""
    return _cost("square_error", "square_error_cost", [input, label], weight, name, coeff,
                 layer_attr, "square_error_cost", **kw)


def cost_layer(layer_type: str, prefix: str, inputs: list, name: str | None, coeff: float,
            layer_attr: Any, fn: str, **attrs: Any) -> LayerOutput:
    return make_layer(layer_type, as_inputs(inputs, fn), name=name, name_prefix=prefix,
                      layer_attr=layer_attr, attrs={"coeff": float(coeff), **attrs})
