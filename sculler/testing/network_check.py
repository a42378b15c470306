"""``check_network_grad``: finite differences over a whole v2 topology, in float64.

Every data layer gets random input of its declared type (dense values in [-1, 1], ids, plain
or nested sequences of random lengths) unless given; every parameter is drawn at random. The
objective is ``J = sum_o sum(w_o * y_o)`` over the output layers (``w_o = 1`` for costs, random
in [0.1, 1] otherwise). The gradient of J by backward w.r.t. every parameter and every dense
data input is compared with central differences element by element (at most
``max_elements`` random elements per tensor).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from sculler import backend
from sculler.core.argument import Argument
from sculler.core.layer import PASS_GC
from sculler.core.network import Network
from sculler.core.parameter import ParameterSet
from sculler.data_type import DataType, InputType
from sculler.testing.grad_check import GradCheckReport, GradientCheckError
from sculler.testing.numeric import numeric_grad


def _lengths(rng, n: int, low: int, high: int) -> np.ndarray:
    return rng.randint(low, high + 1, size=n)


def random_argument(dt: InputType, num_samples: int, rng: np.random.RandomState,
                    max_len: int = 4) -> Argument:
    """Random data of type ``dt`` for ``num_samples`` samples (float64 values)."""
    arg = Argument()
    if dt.seq_type == 0:
        rows = num_samples
    elif dt.seq_type == 1:
        lens = _lengths(rng, num_samples, 1, max_len)
        arg.seq_starts = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
        rows = int(lens.sum())
    else:
        subs_per = _lengths(rng, num_samples, 1, 3)
        sub_lens = _lengths(rng, int(subs_per.sum()), 1, 3)
        arg.sub_seq_starts = np.concatenate([[0], np.cumsum(sub_lens)]).astype(np.int64)
        arg.seq_starts = arg.sub_seq_starts[np.concatenate([[0], np.cumsum(subs_per)])]
        rows = int(sub_lens.sum())
    if dt.type == DataType.Index:
        arg.ids = rng.randint(0, dt.dim, size=rows).astype(np.int64)
    elif dt.type == DataType.Dense:
        arg.value = rng.uniform(-1.0, 1.0, size=(rows, dt.dim))
    else:
        raise NotImplementedError(f"check_network_grad: random sparse input ({dt.kind}) is not "
                                  "supported; pass it in `inputs`")
    return arg


def check_network_grad(output: Any, inputs: Mapping[str, Argument] | None = None,
                       num_samples: int = 3, seed: int = 1, eps: float = 1e-6,
                       rtol: float = 1e-5, max_elements: int = 30,
                       parameter_values: Mapping[str, np.ndarray] | None = None
                       ) -> GradCheckReport:
    """Check backward of the network ending in ``output`` against finite differences.

    Args:
        output: a cost (or any) layer, a list of layers, or a :class:`~sculler.topology.Topology`.
        inputs: data layer name -> Argument, overriding the random data of those layers.
        num_samples: samples per random input.
        parameter_values: name -> array, overriding the random parameters.
        eps, rtol, max_elements: as in :func:`~sculler.testing.check_layer_grad`.

    Returns a report of the worst relative error per parameter (``"parameter <name>"``) and
    data input (``"input <name>"``); raises :class:`GradientCheckError` above ``rtol``.
    """
    from sculler.topology import Topology

    topo = output if isinstance(output, Topology) else Topology(output)
    rng = np.random.RandomState(seed)
    with backend.default_dtype(np.float64):
        model = topo.proto()
        params = ParameterSet(seed=seed)
        net = Network(model, params, data_gradients=True)
        for name, value in (parameter_values or {}).items():
            params[name].value[...] = value
        args = {}
        for name, dt in topo.data_type():
            given = (inputs or {}).get(name)
            args[name] = given if given is not None else random_argument(dt, num_samples, rng)
        outs = net.forward(args, PASS_GC)
        weights = {layer.name: (np.ones_like(o.value) if layer.is_cost else
                                rng.uniform(0.1, 1.0, size=o.value.shape))
                   for layer, o in zip(net.output_layers, outs)}

        def objective() -> float:
            res = net.forward(args, PASS_GC)
            return float(sum(np.sum(o.value * weights[layer.name])
                             for layer, o in zip(net.output_layers, res)))

        objective()
        net.zero_grad()
        net.backward(output_grads={n: w for n, w in weights.items()
                                   if net.get_layer(n).output.grad is not None})
        analytic = {f"parameter {p.name}": (p.value, p.grad.copy())
                    for p in net.used_parameters}
        for d in net.data_layers:
            if d.output.grad is not None:
                analytic[f"input {d.name}"] = (d.output.value, d.output.grad.copy())
        errors = {}
        for key, (value, grad) in analytic.items():
            n = value.size
            picks = np.arange(n) if n <= max_elements else rng.choice(n, max_elements,
                                                                     replace=False)
            numeric = numeric_grad(objective, value, eps, picks)
            got = grad.reshape(-1)[picks]
            errs = np.abs(got - numeric) / np.maximum(
                np.maximum(np.abs(got), np.abs(numeric)), 1e-3)
            k = int(errs.argmax()) if errs.size else 0
            errors[key] = float(errs[k]) if errs.size else 0.0
            if errors[key] > rtol:
                idx = np.unravel_index(int(picks[k]), value.shape)
                raise GradientCheckError(
                    f"network gradient of {key} is wrong at index "
                    f"{tuple(int(i) for i in idx)}: backward gives {got[k]:.10g}, finite "
                    f"differences give {numeric[k]:.10g} (relative error {errors[key]:.3g} > "
                    f"{rtol:g})")
    return GradCheckReport("network", errors)
