"""Fully connected layer: ``y = f(sum_i x_i W_i + b)`` over one or more inputs."""

from __future__ import annotations

from typing import Any

import numpy as np

from sculler import activation as A
from sculler.core.expression import (
    LayerOutput,
    as_inputs,
    make_layer,
)
from sculler.core.faces import layer_function, onnx_converter
from sculler.core.layer import Layer, register_layer
from sculler.core.model_config import LayerConfig
from sculler.math.blas import gemm
from sculler.math.segment import add_to_rows
from sculler.math.sparse import csr_matmul, csr_t_matmul_rows


@register_layer("fc")
class FCLayer(Layer):
    """Each input ``i`` (dense or CSR, width ``D_i``) has its own weight ``W_i`` (``D_i x size``).

    Backward: ``dW_i += x_i^T dz``, ``dx_i += dz W_i^T``, ``db += sum_rows(dz)``. For a sparse
    input only the rows of ``W_i`` it touches get gradient (and are what ``prefetch`` returns).
    """

    default_bias = True
    first_write = True
    row_wise = True

    @classmethod
    def weight_dims(cls, config, inputs):
        return {i: (inp.size, config.size) for i, inp in enumerate(inputs)}

    def forward(self, pass_type: str) -> None:
        super().forward(pass_type)
        if len(self.weights) == 1:  # one dense numpy input of the right width: checks done
            x = self.inputs[0].output.value
            w = self.weights[0].w
            if type(x) is np.ndarray and x.ndim == 2 and x.shape[1] == w.shape[0]:
                np.matmul(x, w, out=self.reserve_output(x.shape[0], self.size))
                self.add_bias_and_activate()
                return
        batch = self.check_same_batch()
        out = self.reserve_output(batch, self.size)
        for i, weight in enumerate(self.weights):
            x = self.get_input_value(i)
            self.check_input_width(i, weight.w.shape[0])
            beta = 0.0 if i == 0 else 1.0
            if self.get_input(i).is_sparse:
                csr_matmul(x, weight.w, out, beta=beta)
            else:
                gemm(x, weight.w, out, beta, self.scratch("prod", out.shape))
        self.add_bias_and_activate()

    def backward(self, callback=None) -> None:
        self.backward_activation_and_bias(callback)
        dz = self.output.grad
        for i, weight in enumerate(self.weights):
            arg = self.inputs[i].output
            if weight.w_grad is not None:
                if type(arg.value) is not np.ndarray and arg.is_sparse:
                    if self.param_grad_beta(weight) == 0.0:
                        weight.w_grad[...] = 0
                    rows, grad_rows = csr_t_matmul_rows(arg.value, dz)
                    add_to_rows(weight.w_grad, rows, grad_rows)
                    weight.parameter.touched_rows.append(rows)
                else:
                    beta = self.param_grad_beta(weight)
                    dw = self.scratch(f"dw{i}", weight.w.shape) if beta else None
                    gemm(arg.value.T, dz, weight.w_grad, beta, dw)
            in_grad = arg.grad
            if in_grad is not None:
                beta = self.input_grad_beta(i)
                dx = self.scratch("dx", in_grad.shape) if beta else None
                gemm(dz, weight.w.T, in_grad, beta, dx)
            if weight.w_grad is not None:
                weight.parameter.inc_update(callback)

    def prefetch(self) -> dict[str, np.ndarray]:
        rows = {}
        for i, weight in enumerate(self.weights):
            arg = self.get_input(i)
            if arg.is_sparse and weight.parameter.config.sparse_remote_update:
                rows[weight.parameter.name] = arg.table_rows()
        return rows


@layer_function(v1="fc_layer", types=("fc",))
def fc(input: Any, size: int, act: Any = None, name: str | None = None,  # noqa: A002
       param_attr: Any = None, bias_attr: Any = None, layer_attr: Any = None,
       parameter_name: str | None = None) -> LayerOutput:
    """Fully connected: ``y = act(sum_i x_i W_i + b)``; default act Tanh, with bias."""
    return make_layer("fc", as_inputs(input, "fc"), name=name, name_prefix="fc_layer",
                      size=size, act=act, default_act=A.Tanh, param_attr=param_attr,
                      bias_attr=bias_attr, layer_attr=layer_attr, parameter_name=parameter_name)


@onnx_converter("fc")
def fc_to_onnx(g: Any, lc: LayerConfig, ins: list[str], ctx: Any) -> str:
    """``y = sum_i x_i W_i + b``."""
    parts = []
    for i, (ic, x) in enumerate(zip(lc.inputs, ins)):
        ctx.require_dense(lc, i, x)
        w = g.const(f"{lc.name}/w{i}", ctx.weight(ic.input_parameter_name))
        parts.append(g.op("MatMul", [x, w], lc.name))
    y = parts[0] if len(parts) == 1 else g.op("Sum", parts, lc.name)
    return ctx.bias(g, lc, y)
