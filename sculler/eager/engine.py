"""The tape autograd engine: graph nodes, grad mode and the reverse-mode sweep.

Every op that runs with grad enabled and has an input with ``stop_gradient=False`` creates
one :class:`Node` holding a closure ``fn`` (output gradients -> input gradients) and the
input tensors. ``backward`` walks the nodes reachable from the roots in topological order
(Kahn's algorithm on consumer counts), so each node runs once with its fully summed output
gradient: for ``y = f(x)``, ``dL/dx = sum over consumers of dL/dy * dy/dx``.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from sculler.backend import is_gpu_array


class _GradState:
    __slots__ = ("enabled",)

    def __init__(self) -> None:
        self.enabled = True


STATE = _GradState()


class Node:
    """One recorded op: ``fn(grad)`` returns one gradient (or None) per entry of ``inputs``.

    ``inputs`` holds the input tensors that need a gradient and None for the others;
    ``fn`` receives a single array when ``n_out == 1``, else a list with None for outputs
    no gradient reached. ``fn`` is None once the graph has been freed. ``owned`` (None or
    one bool per input) promises that the gradient ``fn`` returns for input ``i`` is a new
    array that nothing else references: a leaf without a gradient then keeps that array as
    its ``.grad`` instead of a copy of it, and a node with ``fn_inplace`` (None or a
    single-output ``fn`` that may overwrite its gradient argument, e.g. an activation's
    backward) gets such an array through it, when it is the only gradient that node gets.
    """

    __slots__ = ("fn", "inputs", "n_out", "owned", "fn_inplace")

    def __init__(self, fn: Callable, inputs: tuple, n_out: int = 1,
                 owned: tuple | None = None, fn_inplace: Callable | None = None) -> None:
        self.fn = fn
        self.inputs = inputs
        self.n_out = n_out
        self.owned = owned
        self.fn_inplace = fn_inplace

    def free(self) -> None:
        """Drop the closures and inputs (the graph's buffers) after a backward."""
        self.fn = self.fn_inplace = None
        self.inputs = ()


def is_grad_enabled() -> bool:
    """Whether ops currently record the graph for backward."""
    return STATE.enabled


def set_grad_enabled_flag(flag: bool) -> bool:
    old = STATE.enabled
    STATE.enabled = bool(flag)
    return old


class no_grad:  # noqa: N801 - Paddle's name
    """Run ops without recording the graph; a context manager and a decorator.

    Example: ``with sculler.no_grad(): y = x * 2`` gives ``y.stop_gradient == True``.
    """

    def __new__(cls, func: Callable | None = None):
        self = super().__new__(cls)
        self._old = []
        if func is not None:  # used bare as ``@no_grad``
            return self(func)
        return self

    def __init__(self, func: Callable | None = None) -> None:
        pass  # state is set in __new__, which also handles the bare-decorator form

    def __enter__(self) -> None:
        self._old.append(set_grad_enabled_flag(False))

    def __exit__(self, *exc: Any) -> None:
        STATE.enabled = self._old.pop()

    def __call__(self, func: Callable) -> Callable:
        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with self:
                return func(*args, **kwargs)

        return wrapper


class set_grad_enabled:  # noqa: N801 - Paddle's name
    """Enable or disable recording inside a ``with`` block (``mode`` False = no_grad)."""

    def __init__(self, mode: bool) -> None:
        self._old = set_grad_enabled_flag(mode)

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: Any) -> None:
        STATE.enabled = self._old


FREED_MSG = (
    "Trying to run backward through a graph whose buffers were already freed by an "
    "earlier backward(); pass retain_graph=True to the first backward if you need to "
    "backpropagate through the same graph twice."
)


class _Holder:
    __slots__ = ("_spare_grad",)


def _refs_of_spare(t: Any) -> int:
    spare = t._spare_grad
    return sys.getrefcount(spare)


_probe = _Holder()
_probe._spare_grad = np.empty(1)
# references to a spare that only its parameter holds, counted as spare_grad counts them
# (measured rather than assumed: interpreters differ in what a local variable adds)
_SOLE_REFS = _refs_of_spare(_probe)
del _probe


def spare_grad(t: Any, like: Any) -> Any:
    """The array of the gradient ``t.clear_grad()`` dropped last, handed over (once) to be
    overwritten by t's next first gradient instead of allocating one; None unless ``t`` has no
    gradient now and the spare is a writable C-contiguous NumPy array of ``like``'s shape and
    dtype that nothing but ``t`` references (``sys.getrefcount``: a gradient or view of it
    that a caller kept is never overwritten)."""
    spare = getattr(t, "_spare_grad", None)
    if spare is None or t.grad is not None:
        return None
    if (sys.getrefcount(spare) != _SOLE_REFS or type(spare) is not np.ndarray
            or type(like) is not np.ndarray or spare.shape != like.shape
            or spare.dtype != like.dtype or not spare.flags.c_contiguous
            or not spare.flags.writeable):
        return None
    t._spare_grad = None
    return spare


def _accumulate_leaf(t: Any, g: Any, owned: bool = False) -> None:
    """dL/dt += g for a leaf tensor.

    The first gradient becomes ``t.grad``: ``g`` itself when it is ``owned`` (a new array
    nothing else references, see :class:`Node`) of t's dtype, shape and C order, else a copy
    (into t's :func:`spare_grad` when it has one, so t never shares memory with another
    tensor's data or gradient).
    """
    cur = t.grad
    if cur is not None:
        cur._array += g
        return
    a = t._array
    if type(g) is type(a) and (g.dtype is a.dtype or g.dtype == a.dtype) and (
            g.shape == a.shape):
        if not owned or not g.flags.c_contiguous:
            spare = spare_grad(t, a)
            if spare is None:
                g = g.copy()
            else:
                np.copyto(spare, g)
                g = spare
    elif not is_gpu_array(g):
        g = np.array(g, dtype=a.dtype, copy=True).reshape(a.shape)
    else:
        g = g.astype(a.dtype, copy=True).reshape(a.shape)
    t.grad = t._from_array(g)


def single_node_backward(t: Any, g: Any, retain_graph: bool) -> bool:
    """The backward of a root whose node reads only leaves (one op on leaves, e.g. a PyLayer
    applied to parameters): run it and accumulate, without the graph walk. False (nothing
    done) for any other graph."""
    n = t._node
    if n is None:
        return False
    inputs = n.inputs
    for x in inputs:
        if x is not None and x._node is not None:
            return False
    fn = n.fn
    if fn is None:
        raise RuntimeError(FREED_MSG)
    if n.n_out == 1:
        in_grads = fn(g)
    else:
        buf = [None] * n.n_out
        buf[t._out_idx] = g
        in_grads = fn(buf)
    if not retain_graph:  # n.free() inline
        n.fn = n.fn_inplace = None
        n.inputs = ()
    owned = n.owned
    if len(inputs) == 1:
        x, gx = inputs[0], in_grads[0]
        if x is not None and gx is not None and not x.stop_gradient:
            _accumulate_leaf(x, gx, owned is not None and owned[0])
        return True
    for i, (x, gx) in enumerate(zip(inputs, in_grads)):
        if x is not None and gx is not None and not x.stop_gradient:
            _accumulate_leaf(x, gx, owned is not None and owned[i])
    return True


def chain_backward(t: Any, g: Any, retain_graph: bool) -> bool:
    """The backward of a root whose graph is a chain (every node single-output with at most
    one input that has a node, so each node has one consumer: an MLP's layers, a loss on
    them): run the nodes in order, each one's gradient handed straight to the next (through
    its ``fn_inplace`` when the producer owns it, see :class:`Node`), without the
    dependency count of :func:`run_backward`. False (nothing done) for any other graph."""
    nodes = []
    n = t._node
    while n is not None:
        if n.n_out != 1 or n.fn is None:
            return False
        nodes.append(n)
        nxt = None
        for x in n.inputs:
            if x is not None and x._node is not None:
                if nxt is not None:
                    return False
                nxt = x._node
        n = nxt
    if not nodes:
        return False
    g_owned = False
    for n in nodes:
        inputs, owned = n.inputs, n.owned
        if g is None:  # no gradient reached this part of the chain
            if not retain_graph:
                n.free()
            continue
        fn = n.fn_inplace if g_owned and n.fn_inplace is not None else n.fn
        in_grads = fn(g)
        if not retain_graph:
            n.free()
        g = None
        for i, (x, gx) in enumerate(zip(inputs, in_grads)):
            if x is None:
                continue
            if x._node is not None:
                g, g_owned = gx, owned is not None and owned[i]
            elif gx is not None and not x.stop_gradient:
                _accumulate_leaf(x, gx, owned is not None and owned[i])
    return True


def run_backward(
    roots: Sequence[Any],
    root_grads: Sequence[Any],
    retain_graph: bool = False,
    capture: dict | None = None,
) -> None:
    """Backpropagate ``root_grads`` from ``roots`` through the recorded graph.

    Without ``capture`` the gradients of leaves with ``stop_gradient=False`` accumulate into
    their ``.grad``. With ``capture`` (``{id(tensor): [tensor, grad]}``, used by
    :func:`grad`) only the captured tensors' gradients are summed there; ``.grad`` is left
    untouched. Unless ``retain_graph`` the visited nodes are freed.
    """
    if capture is None and len(roots) == 1 and (
            single_node_backward(roots[0], root_grads[0], retain_graph)
            or chain_backward(roots[0], root_grads[0], retain_graph)):
        return
    node_grads: dict[Node, list] = {}
    roots_nodes: list[Node] = []
    cap_nodes: dict[Node, list] = {}
    if capture:
        for entry in capture.values():
            n = entry[0]._node
            if n is not None:
                cap_nodes.setdefault(n, []).append(entry)
    for t, g in zip(roots, root_grads):
        n = t._node
        if n is None:
            if capture is not None:
                entry = capture.get(id(t))
                if entry is not None:
                    entry[1] = g if entry[1] is None else entry[1] + g
            elif not t.stop_gradient:
                _accumulate_leaf(t, g)
            continue
        if n.fn is None:
            raise RuntimeError(FREED_MSG)
        buf = node_grads.get(n)
        if buf is None:
            buf = node_grads[n] = [None] * n.n_out
            roots_nodes.append(n)
        i = t._out_idx
        buf[i] = g if buf[i] is None else buf[i] + g

    deps: dict[Node, int] = {}
    stack = list(roots_nodes)
    while stack:
        n = stack.pop()
        for x in n.inputs:
            if x is not None:
                m = x._node
                if m is not None:
                    c = deps.get(m)
                    if c is None:
                        deps[m] = 1
                        stack.append(m)
                    else:
                        deps[m] = c + 1

    ready = [n for n in roots_nodes if n not in deps]
    while ready:
        n = ready.pop()
        buf = node_grads.pop(n, None)
        fn = n.fn
        inputs = n.inputs
        if fn is None:
            raise RuntimeError(FREED_MSG)
        if cap_nodes and n in cap_nodes:
            for entry in cap_nodes[n]:
                g = buf[entry[0]._out_idx] if buf is not None else None
                if g is not None:
                    entry[1] = g if entry[1] is None else entry[1] + g
        if buf is None or (n.n_out == 1 and buf[0] is None):
            in_grads = (None,) * len(inputs)
        elif n.n_out == 1:
            in_grads = fn(buf[0])
        else:
            in_grads = fn(buf)
        if not retain_graph:
            n.free()
        owned = n.owned
        for i, (x, g) in enumerate(zip(inputs, in_grads)):
            if x is None:
                continue
            m = x._node
            if m is None:
                if g is None:
                    continue
                if capture is not None:
                    entry = capture.get(id(x))
                    if entry is not None:
                        entry[1] = g if entry[1] is None else entry[1] + g
                elif not x.stop_gradient:
                    _accumulate_leaf(x, g, owned is not None and owned[i])
                continue
            if g is not None:
                b = node_grads.get(m)
                if b is None:
                    b = node_grads[m] = [None] * m.n_out
                i = x._out_idx
                b[i] = g if b[i] is None else b[i] + g
            c = deps[m] - 1
            deps[m] = c
            if c == 0:
                ready.append(m)
