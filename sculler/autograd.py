"""``PyLayer``: user-defined ops with a hand-written backward, as ``paddle.autograd.PyLayer``.

A subclass defines static ``forward(ctx, *args, **kwargs)`` and ``backward(ctx, *grads)``
and is run with ``apply``. The forward runs without recording; one graph node links the
output tensors to the input tensors. For outputs ``y_k`` of inputs ``x_i``, backward gets
``dL/dy_k`` (one per output tensor) and returns ``dL/dx_i`` (one per input tensor).

Example::

    class CusTanh(PyLayer):
        @staticmethod
        def forward(ctx, x):
            y = sculler.tanh(x)
            ctx.save_for_backward(y)
            return y

        @staticmethod
        def backward(ctx, dy):
            (y,) = ctx.saved_tensor()
            return dy * (1 - sculler.square(y))
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sculler.eager.engine import STATE, Node, run_backward
from sculler.eager.tensor import Tensor

__all__ = ["PyLayer", "PyLayerContext", "backward"]

_wrap = Tensor._from_array


class PyLayerContext:
    """What forward hands to backward: saved tensors, flags and any attribute you set."""

    # defaults live on the class, so creating a context per call sets nothing
    _saved: tuple = ()
    _non_diff: tuple = ()
    _not_inplace: tuple = ()
    _materialize = True

    def save_for_backward(self, *tensors: Any) -> None:
        """Keep ``tensors`` for backward (read them back with :meth:`saved_tensor`)."""
        self._saved = tensors

    def saved_tensor(self) -> tuple:
        """The tensors given to :meth:`save_for_backward`, in order."""
        return self._saved

    def mark_non_differentiable(self, *tensors: Tensor) -> None:
        """Outputs that get no gradient: they have ``stop_gradient=True`` and backward
        receives zeros for them."""
        self._non_diff = tensors

    def mark_not_inplace(self, *tensors: Tensor) -> None:
        """Inputs that forward may return unchanged: each comes back as a new tensor over the
        same values, linked to the input by this op (otherwise returning an input leaf that
        needs a gradient is an error)."""
        self._not_inplace = tensors

    def set_materialize_grads(self, value: bool) -> None:
        """True (default): unused outputs get zero gradients in backward; False: None."""
        self._materialize = bool(value)


def _tensors_in(values: Any, groups: list | None = None) -> list[Tensor]:
    """Tensors among ``values`` and inside list/tuple values (one level), in order.

    ``groups`` receives, per tensor-bearing value, None for a Tensor or the number of
    tensors in a list: backward returns one entry per value (a list for a list).
    """
    found = []
    for v in values:
        if isinstance(v, Tensor):
            found.append(v)
            if groups is not None:
                groups.append(None)
        elif isinstance(v, list | tuple):
            inner = [e for e in v if isinstance(e, Tensor)]
            if inner:
                found.extend(inner)
                if groups is not None:
                    groups.append(len(inner))
    return found


def _rebuild(out: Any, mapping: dict) -> Any:
    if isinstance(out, Tensor):
        return mapping.get(id(out), out)
    return type(out)(_rebuild(e, mapping) if isinstance(e, Tensor | list | tuple) else e
                     for e in out)


class PyLayer:
    """Base class of user-defined ops; see the module docstring for the contract."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError(f"{type(self).__name__} is a PyLayer: call {type(self).__name__}"
                        f".apply(...) rather than {type(self).__name__}(...)")

    @staticmethod
    def forward(ctx: PyLayerContext, *args: Any, **kwargs: Any) -> Any:
        """Compute the outputs (tensors, possibly mixed with other values)."""
        raise NotImplementedError

    @staticmethod
    def backward(ctx: PyLayerContext, *args: Any) -> Any:
        """Map one gradient per output tensor to one gradient per input tensor."""
        raise NotImplementedError

    @classmethod
    def apply(cls, *args: Any, **kwargs: Any) -> Any:
        """Run ``forward`` without recording and link its output tensors to its inputs."""
        forward = cls.forward
        if forward is _BASE_FORWARD:
            raise NotImplementedError(
                f"PyLayer {cls.__name__} does not define forward(ctx, *args); add a "
                "@staticmethod forward")
        ctx = PyLayerContext()
        groups = None  # None: every tensor input is a positional Tensor argument
        for a in args:
            if not isinstance(a, Tensor):
                groups = []
                break
        if kwargs and groups is None:
            groups = []
        if groups is None:
            ins = args
        else:
            ins = _tensors_in(args, groups)
            if kwargs:
                ins += _tensors_in(kwargs.values(), groups)
        state = STATE
        enabled = state.enabled
        state.enabled = False
        try:
            out = forward(ctx, *args, **kwargs)
        finally:
            state.enabled = enabled
        if isinstance(out, Tensor):
            if not enabled:
                return out
            needed = 0
            for x in ins:
                if not x.stop_gradient:
                    needed += 1
            if not needed:
                return out
            if out.stop_gradient and out._node is None and not ctx._non_diff:
                for x in ins:
                    if x is out:
                        break
                else:  # one new output tensor: link it directly
                    out.stop_gradient = False
                    out._node = Node(
                        _make_backward(cls, ctx, [out], _DIFFERENTIABLE, ins, groups),
                        ins if needed == len(ins) and groups is None else tuple(
                            [None if x.stop_gradient else x for x in ins]))
                    return out
            outs = [out]
        elif isinstance(out, list | tuple):
            outs = _tensors_in(out)
        else:
            outs = []
        if not outs:
            raise ValueError(
                f"{cls.__name__}.forward returned {_describe(out)}; it must return at least "
                "one Tensor (alone or in a tuple/list with other values)")
        if not enabled:
            return out
        for x in ins:
            if not x.stop_gradient:
                break
        else:
            return out
        mapping = {}
        in_ids = {id(x) for x in ins}
        marked = {id(x) for x in ctx._not_inplace}
        for i, o in enumerate(outs):
            if id(o) in in_ids or o._node is not None or not o.stop_gradient:
                if (o._node is None and not o.stop_gradient and id(o) in in_ids
                        and id(o) not in marked):
                    raise ValueError(
                        f"{cls.__name__}.forward returned its input leaf tensor {o.name} "
                        "(stop_gradient=False) unchanged; call ctx.mark_not_inplace(x) in "
                        "forward to return it as a new tensor, or return x.clone()")
                new = _wrap(o._array)
                mapping[id(o)] = new
                outs[i] = new
        if mapping:
            out = _rebuild(out, mapping)
        non_diff = {id(mapping.get(id(t), t)) for t in ctx._non_diff}
        nd_flags = [id(o) in non_diff for o in outs]
        node = Node(_make_backward(cls, ctx, outs, nd_flags, ins, groups),
                    tuple(None if x.stop_gradient else x for x in ins), len(outs))
        for i, o in enumerate(outs):
            if not nd_flags[i]:
                o.stop_gradient = False
                o._node = node
                o._out_idx = i
        return out


_BASE_FORWARD = PyLayer.forward
_DIFFERENTIABLE = (False,)  # the non-differentiable flags of one plain output


def _describe(out: Any) -> str:
    if isinstance(out, list | tuple):
        return f"{type(out).__name__} of ({', '.join(type(e).__name__ for e in out)})"
    return type(out).__name__


def _run_backward(cls: type, ctx: PyLayerContext, grads: Any) -> Any:
    """``cls.backward(ctx, *grads)`` without recording."""
    state = STATE
    enabled = state.enabled
    state.enabled = False
    try:
        return cls.backward(ctx, *grads)
    finally:
        state.enabled = enabled


def _check_grads(cls: type, res: Any, ins: Sequence[Tensor], groups: list | None) -> list:
    """The arrays of what ``cls.backward`` returned: one gradient (or None) per input value,
    a list of them for a list argument, each of its input's shape."""
    n_args = len(ins) if groups is None else len(groups)
    if res is None or isinstance(res, Tensor):
        res = (res,)
    elif not isinstance(res, list | tuple):
        raise ValueError(
            f"{cls.__name__}.backward returned a {type(res).__name__}; it must return a "
            f"Tensor, or a tuple/list of {n_args} gradients (one per input tensor, a list "
            "for a list of tensors, None for no gradient)")
    if (isinstance(res, list) and n_args == 1 and groups is not None
            and groups[0] is not None):
        res = (res,)  # as Paddle: a list is one value, here the one list argument's
    if len(res) != n_args:
        raise ValueError(
            f"{cls.__name__}.backward returned {len(res)} gradients but forward received "
            f"{n_args} tensor inputs; return exactly one gradient (or None) per input (a "
            "list for a list of tensors)")
    if groups is not None:
        flat = []
        for i, (r, k) in enumerate(zip(res, groups)):
            if k is None:
                flat.append(r)
            elif r is None:
                flat.extend([None] * k)
            elif isinstance(r, list | tuple) and len(r) == k:
                flat.extend(r)
            else:
                raise ValueError(
                    f"{cls.__name__}.backward: input {i} is a list of {k} tensors, so "
                    f"its gradient must be a list of {k} gradients, got {_describe(r)}")
        res = flat
    arrays = []
    for i, r in enumerate(res):
        if r is None:
            arrays.append(None)
        elif isinstance(r, Tensor):
            if r._array.shape != ins[i]._array.shape:
                raise ValueError(
                    f"{cls.__name__}.backward: gradient {i} has shape {r.shape}, "
                    f"expected the input's shape {ins[i].shape}")
            arrays.append(r._array)
        else:
            raise ValueError(
                f"{cls.__name__}.backward: gradient {i} is a {type(r).__name__}; "
                "expected a Tensor or None")
    return arrays


def _make_backward(cls: type, ctx: PyLayerContext, outs: list, nd_flags: list,
                   ins: Sequence[Tensor], groups: list | None) -> Any:
    """The node function of one ``apply``: wrap the output gradients, run ``cls.backward``
    without recording, check what it returned (:func:`_check_grads`) and hand the arrays to
    the engine. ``groups`` is None when every input value is a single Tensor."""
    if len(outs) == 1 and groups is None and len(ins) == 1:
        shape = ins[0]._array.shape

        def fn_one(g: Any) -> Any:  # one tensor in, one out: the common case, checked inline
            res = _run_backward(cls, ctx, (_wrap(g),))
            if isinstance(res, Tensor) and res._array.shape == shape:
                return (res._array,)
            return _check_grads(cls, res, ins, groups)

        return fn_one

    def fn(gs: Any) -> list:
        if len(outs) == 1:
            gs = (gs,)
        grads = []
        for g, o, nd in zip(gs, outs, nd_flags):
            if g is None:
                if nd or ctx._materialize:
                    grads.append(_wrap(o._array * 0))
                else:
                    grads.append(None)
            else:
                grads.append(_wrap(g))
        return _check_grads(cls, _run_backward(cls, ctx, grads), ins, groups)

    return fn


def backward(tensors: Sequence[Tensor] | Tensor, grad_tensors: Any = None,
             retain_graph: bool = False) -> None:
    """Backpropagate from several tensors at once (``grad_tensors`` default to ones)."""
    ts = [tensors] if isinstance(tensors, Tensor) else list(tensors)
    if grad_tensors is None:
        gts = [None] * len(ts)
    else:
        gts = [grad_tensors] if isinstance(grad_tensors, Tensor) else list(grad_tensors)
    if len(gts) != len(ts):
        raise ValueError(f"grad_tensors has {len(gts)} entries, expected {len(ts)}")
    for t in ts:
        if not isinstance(t, Tensor) or t.stop_gradient:
            raise ValueError("backward: every tensor must be a Tensor with "
                             "stop_gradient=False")
    garrs = [t._array * 0 + 1 if g is None else (g._array if isinstance(g, Tensor) else g)
             for t, g in zip(ts, gts)]
    run_backward(ts, garrs, retain_graph)
