"""A large-margin softmax layer (after Liu et al. 2016, simplified as in the seed blog post).

Forward is an fc layer whose true-class logit is shrunk during training:

    f_ij = x_i . W_j                    (j != y_i, or f_iy <= 0, or at test time)
    f_iy = k * x_i . W_y                (training, when x_i . W_y > 0; 0 < k < 1)

so the true class must win by a margin. Backward is fc's with the same factor:
``dx_i = sum_j dz_ij W_j`` and ``dW_j = sum_i dz_ij x_i`` with ``dz_iy`` scaled by ``k`` on
the shrunk entries. Inputs: [features (dense), label (ids)]; the weight is (dim, num_classes).
"""

from __future__ import annotations

import numpy as np

from sculler.core.layer import PASS_TEST, Layer, register_layer


@register_layer("lsoftmax")
class LargeMarginSoftmaxLayer(Layer):
    min_inputs = 2
    max_inputs = 2
    config_attrs = ("k",)  # the setting it reads: Layer(type="lsoftmax", k=0.3) in v1 configs

    @classmethod
    def weight_dims(cls, config, inputs):
        return {0: (inputs[0].size, config.size)}

    def forward(self, pass_type: str) -> None:
        super().forward(pass_type)
        batch = self.check_same_batch()
        self.check_input_width(0, self.weights[0].w.shape[0])
        out = self.reserve_output(batch, self.size)
        np.matmul(self.get_input_value(0), self.weights[0].w, out=out)
        self.shrunk = np.zeros(batch, dtype=bool)
        if pass_type != PASS_TEST:
            rows = np.arange(batch)
            labels = self.get_input(1).ids
            self.shrunk = out[rows, labels] > 0
            out[rows[self.shrunk], labels[self.shrunk]] *= self.attr("k", 0.5)
        self.forward_activation()

    def backward(self, callback=None) -> None:
        self.backward_activation()
        dz = self.scratch("dz", self.output.grad.shape)
        dz[...] = self.output.grad
        rows = np.flatnonzero(self.shrunk)
        dz[rows, self.get_input(1).ids[rows]] *= self.attr("k", 0.5)
        weight = self.weights[0]
        if weight.w_grad is not None:
            weight.w_grad += self.get_input_value(0).T @ dz
        in_grad = self.get_input_grad(0)
        if in_grad is not None:
            in_grad += dz @ weight.w.T
        if weight.w_grad is not None:
            weight.parameter.inc_update(callback)
