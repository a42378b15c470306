"""Inputs with chosen sequence layouts, for checking sequence layers (``check_layer_grad``'s
``make_inputs``) and for running one layer on them (:func:`run_layer`).

Example:
    >>> import numpy as np
    >>> rng = np.random.RandomState(0)
    >>> arg = seq_arg(rng, [2, 3], width=4)
    >>> arg.seq_starts.tolist(), arg.value.shape
    ([0, 2, 5], (5, 4))
"""

from __future__ import annotations

import numpy as np

from sculler import backend
from sculler.core.argument import Argument
from sculler.core.layer import PASS_TEST
from sculler.core.network import Network
from sculler.core.parameter import ParameterSet
from sculler.testing.grad_check import TestConfig, build_test_model

__all__ = ["lengths", "starts", "nested_starts", "dense", "seq_arg", "run_layer"]


def lengths(batch: int, rng, mode: str, max_len: int = 4) -> list[int]:
    """Sequence lengths summing to ``batch``: ``many`` (random 1..max_len), ``one`` (a single
    sequence), ``ones`` (all length 1), ``even`` (random even lengths; batch must be even)."""
    if mode == "one":
        return [batch]
    if mode == "ones":
        return [1] * batch
    step = 2 if mode == "even" else 1
    out, left = [], batch
    while left > 0:
        n = min(left, step * int(rng.randint(1, max_len // step + 1)))
        out.append(n)
        left -= n
    return out


def starts(lens) -> np.ndarray:
    return np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)


def nested_starts(lens, rng, max_sub: int = 2) -> np.ndarray:
    """Sub-sequence starts cutting each sequence of ``lens`` into pieces of 1..max_sub rows."""
    subs = [0]
    for n in lens:
        base = subs[-1]
        while subs[-1] < base + n:
            subs.append(min(base + n, subs[-1] + int(rng.randint(1, max_sub + 1))))
    return np.asarray(subs, dtype=np.int64)


def dense(rng, rows: int, width: int, low: float = -1.0, high: float = 1.0):
    return rng.uniform(low, high, size=(rows, width)).astype(backend.get_default_dtype())


def seq_arg(rng, lens, width: int, nested: bool = False, **kw) -> Argument:
    s = starts(lens)
    arg = Argument(value=dense(rng, int(s[-1]), width, **kw), seq_starts=s)
    if nested:
        arg.sub_seq_starts = nested_starts(lens, rng)
    return arg


def run_layer(layer_type: str, settings: dict, inputs: list, args: list[Argument],
              params: dict | None = None) -> Argument:
    """Forward one layer named ``test_layer`` (test mode) on ``args``; ``params`` sets
    parameter values by name."""
    settings = dict(settings)
    config = TestConfig(layer=settings, inputs=inputs, bias=settings.pop("bias", None))
    net = Network(build_test_model(config, layer_type), ParameterSet(seed=1))
    by_name = {p.name: p for p in net.used_parameters}
    for name, value in (params or {}).items():
        by_name[name].value[...] = value
    return net.forward(args, PASS_TEST)[0]
