"""Packed parameters (ParameterSet.pack) and the fused dense update (Optimizer.update_dense)
give exactly the per-parameter results, state and checkpoints."""

from __future__ import annotations

import numpy as np
import pytest

from sculler import optimizer as O
from sculler.core.model_config import ParameterConfig
from sculler.core.parameter import ParameterSet, Weight

SHAPES = {"a": [3, 4], "b": [1, 4], "c": [5, 2], "d": [2, 2]}


def param_set(lr_c: float = 1.0) -> ParameterSet:
    ps = ParameterSet(seed=0)
    for name, dims in SHAPES.items():
        ps.create(ParameterConfig(name, dims, learning_rate=lr_c if name == "c" else 1.0),
                  dtype=np.float32)
    return ps


def run(make_opt, packed: bool, lr_c: float = 1.0, steps: int = 4, restore_at: int | None = None):
    ps = param_set(lr_c)
    if packed:
        ps.pack()
    opt = make_opt()
    rng = np.random.RandomState(1)
    for step in range(steps):
        if restore_at == step:  # checkpoint round trip into a fresh optimizer
            state = opt.state_dict()
            opt = make_opt()
            opt.load_state_dict(state)
        items = []
        for name in SHAPES:
            p = ps[name]
            p.grad[...] = rng.standard_normal(p.shape)
            items.append((name, p.value, p.grad, p.config))
        if packed:
            opt.update_dense(items)
        else:
            for item in items:
                opt.update(*item)
        opt.finish_batch(8)
    return {n: ps[n].value.copy() for n in SHAPES}, opt.state_dict()


OPTIMIZERS = [
    lambda: O.Momentum(momentum=0.9, learning_rate=0.1),
    lambda: O.Momentum(momentum=0.9, learning_rate=0.1, regularization=O.L2Regularization(0.01),
                       gradient_clipping_threshold=0.5),
    lambda: O.Adam(learning_rate=0.01, regularization=O.L1Regularization(0.001)),
    lambda: O.AdaGrad(learning_rate=0.1),
    lambda: O.RMSProp(learning_rate=0.1),
    lambda: O.DecayedAdaGrad(learning_rate=0.1),
]


@pytest.mark.parametrize("make_opt", OPTIMIZERS)
@pytest.mark.parametrize("lr_c", [1.0, 0.5])
def test_fused_update_equals_per_parameter_update(make_opt, lr_c):
    ref_values, ref_state = run(make_opt, packed=False, lr_c=lr_c)
    values, state = run(make_opt, packed=True, lr_c=lr_c)
    for n in SHAPES:
        np.testing.assert_array_equal(values[n], ref_values[n], err_msg=n)
    assert state.keys() == ref_state.keys()
    for k in ref_state:
        np.testing.assert_array_equal(state[k], ref_state[k], err_msg=k)


@pytest.mark.parametrize("make_opt", OPTIMIZERS[:3])
def test_checkpoint_round_trip_continues_identically(make_opt):
    ref_values, _ = run(make_opt, packed=True, steps=4)
    values, _ = run(make_opt, packed=True, steps=4, restore_at=2)
    for n in SHAPES:
        np.testing.assert_array_equal(values[n], ref_values[n], err_msg=n)


def test_update_dense_fuses_adjacent_runs_only():
    ps = param_set(lr_c=0.5)
    ps.pack()
    opt = O.Momentum(momentum=0.9, learning_rate=0.1)
    items = [(n, ps[n].value, ps[n].grad, ps[n].config) for n in SHAPES]
    runs, singles = opt._flat_runs(items)
    # c has its own learning rate: a and b are one run, c and d (not adjacent to a/b) single
    assert [[it[0] for it in r] for r in runs] == [["a", "b"]]
    assert sorted(it[0] for it in singles) == ["c", "d"]


def test_pack_keeps_contents_and_rebinds_weight_views():
    ps = param_set()
    before = {n: ps[n].value.copy() for n in SHAPES}
    ps["a"].grad[...] = 3.0
    w = Weight(ps["a"], (4, 3))
    ps.pack()
    assert all(ps[n].packed for n in SHAPES)
    assert ps["a"].value.base is ps["d"].value.base
    for n in SHAPES:
        np.testing.assert_array_equal(ps[n].value, before[n])
    assert (ps["a"].grad == 3.0).all()
    ps["a"].value[...] = 7.0
    ps["a"].grad[...] = 2.0
    assert (w.w == 7.0).all() and (w.w_grad == 2.0).all()


def test_eager_step_reads_gradients_in_place_unless_it_must_change_them():
    import sculler as paddle

    w = paddle.to_tensor(np.ones((2, 3), np.float32), stop_gradient=False)
    (w * 3.0).sum().backward()
    grad_before = w.grad.numpy().copy()
    opt = O.Momentum(momentum=0.9, learning_rate=0.1, parameters=[w])
    opt.step()
    assert not any(name == "grad" for _, name in opt._scratch)  # no copy of the gradient
    np.testing.assert_array_equal(w.grad.numpy(), grad_before)
    np.testing.assert_allclose(w.numpy(), 1 - 0.1 * 3.0)
    clipped = O.Momentum(momentum=0.9, learning_rate=0.1, parameters=[w],
                         grad_clip=O.ClipGradByValue(1.0))
    clipped.step()
    assert any(name == "grad" for _, name in clipped._scratch)
    np.testing.assert_array_equal(w.grad.numpy(), grad_before)  # clipped a copy
