"""Differentiable eager ops on :class:`Tensor`, and the operator methods bound onto it.

Every op computes its forward on arrays, then ``_make`` records a :class:`Node` whose
closure maps the output gradient to input gradients. Elementwise activations reuse the
kernels of ``sculler.math.activation`` (forward ``f`` and ``f_grad``), so eager ops and
the engine's layers share one implementation of the math. Broadcast operands get their
gradient summed back to their own shape (``_unbroadcast``).
"""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from typing import Any

import numpy as np

from sculler.backend import get_array_module, get_default_dtype, is_gpu_array, to_place
from sculler.eager.device import CUDAPlace, check_same_device, wants_gpu
from sculler.eager.engine import STATE, Node
from sculler.eager.tensor import Tensor
from sculler.math import activation as act
from sculler.math import parallel
from sculler.math.workspace import constant_array

_wrap = Tensor._from_array
_ndarray = np.ndarray
_ufunc = np.ufunc


def _ew(ufunc: Any, a: Any, b: Any) -> Any:
    """``ufunc(a, b)``; large same-shaped numpy operands (or one and a scalar) are split over
    threads (:mod:`sculler.math.parallel`), giving the same values."""
    big = parallel.PARALLEL_MIN_ELEMENTS
    if (type(a) is not np.ndarray or a.size < big) and (
            type(b) is not np.ndarray or b.size < big):
        return ufunc(a, b)  # the common small case, decided in two checks
    is_array = [type(v) is np.ndarray for v in (a, b)]
    if not any(is_array) or not all(
            k or isinstance(v, int | float | np.generic) for k, v in zip(is_array, (a, b))):
        return ufunc(a, b)
    arrays = [v for k, v in zip(is_array, (a, b)) if k]
    if not parallel.splittable(arrays):
        return ufunc(a, b)
    out = np.empty(arrays[0].shape, dtype=ufunc(a.flat[0] if a is arrays[0] else a,
                                                b.flat[0] if b is arrays[-1] else b).dtype)
    if len(arrays) == 2:
        parallel.run(lambda x, y, o: ufunc(x, y, out=o), (a, b, out))
    elif a is arrays[0]:
        parallel.run(lambda x, o: ufunc(x, b, out=o), (a, out))
    else:
        parallel.run(lambda y, o: ufunc(a, y, out=o), (b, out))
    return out


_SCALARS: dict = {}


def _typed_scalar(v: int | float, dtype: np.dtype) -> Any:
    """Python number ``v`` as a read-only 0-d array of float ``dtype`` (cached), which NumPy
    combines with an array faster than the number itself and to the same values (a Python
    number takes a float array's dtype); ``v`` itself for other dtypes, zeros (keeping the
    sign of -0.0) and NaN."""
    key = (v, dtype)
    s = _SCALARS.get(key)
    if s is not None:
        return s
    if dtype.kind != "f" or v == 0 or v != v or builtins.abs(v) > 1e30:
        return v
    if len(_SCALARS) > 256:
        _SCALARS.clear()
    s = _SCALARS[key] = np.array(v, dtype=dtype)
    s.flags.writeable = False
    return s


def _make(out: Any, inputs: tuple, fn: Any, owned: tuple | None = None) -> Tensor:
    """Wrap ``out``; record ``fn`` if grad mode is on and an input needs a gradient.

    ``owned`` (one bool per input) tells the engine which of ``fn``'s gradients are new
    arrays it may hand to a leaf without a copy (see :class:`Node`).
    """
    t = _wrap(out)
    if STATE.enabled:
        for x in inputs:
            if x is not None and not x.stop_gradient:
                break
        else:
            return t
        t.stop_gradient = False
        t._node = Node(fn, tuple([x if x is not None and not x.stop_gradient else None
                                  for x in inputs]), 1, owned)
    return t


def _arr(x: Any) -> Any:
    """The array of a Tensor; Python scalars stay scalars (they keep the tensor dtype)."""
    if isinstance(x, Tensor):
        return x._array
    if isinstance(x, int | float | bool):
        return x
    return np.asarray(x)


def _as_tensor(x: Any, what: str = "x") -> Tensor:
    if isinstance(x, Tensor):
        return x
    if is_gpu_array(x):
        return _wrap(x)
    if isinstance(x, np.ndarray | list | tuple | int | float | np.generic):
        return _wrap(np.asarray(x))
    raise TypeError(f"{what} must be a Tensor or array-like, got {type(x).__name__}")


_NUMBERS = frozenset((int, float, bool))


def _unbroadcast(g: Any, shape: tuple) -> Any:
    """Sum ``g`` over the axes that broadcasting added or stretched to reach ``shape``."""
    if g.shape == shape:
        return g
    extra = g.ndim - len(shape)
    if extra > 0:
        g = g.sum(axis=tuple(range(extra)))
    axes = tuple(i for i, s in enumerate(shape) if s == 1 and g.shape[i] != 1)
    if axes:
        g = g.sum(axis=axes, keepdims=True)
    return g.reshape(shape)


def _shape(a: Any) -> tuple:
    return a.shape if hasattr(a, "shape") else ()


def _operand(v: Any) -> tuple[Any, bool]:
    """An operand's array (Python numbers stay numbers) and whether it needs a gradient."""
    if isinstance(v, Tensor):
        return v._array, not v.stop_gradient
    return _arr(v), False


def _binary(op: str, x: Any, y: Any, f: Any, ga: Any, gb: Any,
            fresh: tuple[bool, bool] = (True, True)) -> Tensor:
    """``f(a, b)`` of two operands (Tensors, arrays or Python scalars) with broadcasting.

    ``op`` names the op in errors. ``f`` is a NumPy ufunc (large arrays are split over
    threads, see :func:`_ew`) or any function of two arrays; ``ga(g, a, b, out)`` /
    ``gb(...)`` give the gradients before they are summed back to each operand's shape.
    ``fresh``: whether each returns a new array (not ``g`` itself), which the engine may then
    keep as a leaf's gradient.
    """
    a, rx = _operand(x)
    b, ry = _operand(y)
    ta, tb = type(a), type(b)
    if ta is not tb and ta not in _NUMBERS and tb not in _NUMBERS:
        check_same_device(op, a, b)
    if type(f) is not _ufunc:
        out = f(a, b)
    elif (type(a) is not _ndarray or a.size < parallel.PARALLEL_MIN_ELEMENTS) and (
            type(b) is not _ndarray or b.size < parallel.PARALLEL_MIN_ELEMENTS):
        # small operands: no threads; a Python number meets a small array as a typed scalar
        if type(b) is _ndarray and (type(a) is int or type(a) is float):
            out = f(_typed_scalar(a, b.dtype), b)
        elif type(a) is _ndarray and (type(b) is int or type(b) is float):
            out = f(a, _typed_scalar(b, a.dtype))
        else:
            out = f(a, b)
    else:
        out = _ew(f, a, b)
    if not ((rx or ry) and STATE.enabled):
        return _wrap(out)
    sa, sb = _shape(a), _shape(b)
    so = out.shape

    def fn(g):
        return (_unbroadcast(ga(g, a, b, out), sa) if rx else None,
                _unbroadcast(gb(g, a, b, out), sb) if ry else None)

    t = _wrap(out)
    t.stop_gradient = False
    t._node = Node(fn, (x if rx else None, y if ry else None), 1,
                   (fresh[0] or sa != so, fresh[1] or sb != so))
    return t


def _pass(g: Any, a: Any, b: Any, o: Any) -> Any:
    return g


def _negated(g: Any, a: Any, b: Any, o: Any) -> Any:
    return -g


def _times_b(g: Any, a: Any, b: Any, o: Any) -> Any:
    return _ew(np.multiply, g, b)


def _times_a(g: Any, a: Any, b: Any, o: Any) -> Any:
    return _ew(np.multiply, g, a)


# --- arithmetic ----------------------------------------------------------------------
def add(x: Any, y: Any, name: str | None = None) -> Tensor:
    """Elementwise ``x + y`` with broadcasting."""
    return _binary("add", x, y, np.add, _pass, _pass, (False, False))


def subtract(x: Any, y: Any, name: str | None = None) -> Tensor:
    """Elementwise ``x - y`` with broadcasting."""
    return _binary("subtract", x, y, np.subtract, _pass, _negated, (False, True))


def multiply(x: Any, y: Any, name: str | None = None) -> Tensor:
    """Elementwise ``x * y``; d/dx = y, d/dy = x."""
    return _binary("multiply", x, y, np.multiply, _times_b, _times_a)


def _true_divide(a: Any, b: Any) -> Any:
    out = a / b
    if out.dtype == np.float64 and getattr(a, "dtype", np.dtype("f8")).kind in "iub" and \
            getattr(b, "dtype", np.dtype("f8")).kind in "iub":
        out = out.astype(get_default_dtype())  # int / int gives the default float (Paddle)
    return out


def divide(x: Any, y: Any, name: str | None = None) -> Tensor:
    """Elementwise ``x / y``; d/dx = 1/y, d/dy = -x/y^2."""
    return _binary("divide", x, y, _true_divide, lambda g, a, b, o: g / b,
                   lambda g, a, b, o: -g * o / b)


def pow(x: Any, y: Any, name: str | None = None) -> Tensor:  # noqa: A001 - Paddle's name
    """Elementwise ``x ** y``; d/dx = y x^(y-1), d/dy = x^y log x."""
    xp = get_array_module(_arr(x))
    return _binary("pow", x, y, lambda a, b: a ** b, lambda g, a, b, o: g * b * a ** (b - 1),
                   lambda g, a, b, o: g * o * xp.log(a))


def maximum(x: Any, y: Any, name: str | None = None) -> Tensor:
    """Elementwise max; the gradient goes to x where x >= y, else to y."""
    xp = get_array_module(_arr(x), _arr(y))
    return _binary("maximum", x, y, xp.maximum, lambda g, a, b, o: g * (a >= b),
                   lambda g, a, b, o: g * (a < b))


def minimum(x: Any, y: Any, name: str | None = None) -> Tensor:
    """Elementwise min; the gradient goes to x where x <= y, else to y."""
    xp = get_array_module(_arr(x), _arr(y))
    return _binary("minimum", x, y, xp.minimum, lambda g, a, b, o: g * (a <= b),
                   lambda g, a, b, o: g * (a > b))


def neg(x: Tensor) -> Tensor:
    a = x._array
    return _make(-a, (x,), lambda g: (-g,))


def scale(x: Tensor, scale: float = 1.0, bias: float = 0.0,
          bias_after_scale: bool = True) -> Tensor:
    """``scale * x + bias`` (or ``scale * (x + bias)``)."""
    a = x._array
    out = a * scale + bias if bias_after_scale else (a + bias) * scale
    return _make(out, (x,), lambda g: (g * scale,))


def _compare(kind: str, f: Any) -> Any:
    def op(x: Any, y: Any, name: str | None = None) -> Tensor:
        a, b = _arr(x), _arr(y)
        ta, tb = type(a), type(b)
        if ta is not tb and ta not in _NUMBERS and tb not in _NUMBERS:
            check_same_device(kind, a, b)
        return _wrap(f(a, b))

    op.__name__ = op.__qualname__ = kind
    return op


equal = _compare("equal", lambda a, b: a == b)
not_equal = _compare("not_equal", lambda a, b: a != b)
less_than = _compare("less_than", lambda a, b: a < b)
less_equal = _compare("less_equal", lambda a, b: a <= b)
greater_than = _compare("greater_than", lambda a, b: a > b)
greater_equal = _compare("greater_equal", lambda a, b: a >= b)


# --- activations (kernels from sculler.math.activation) ---------------------------------
# the NumPy ufunc each kernel below applies to a NumPy array (same values, one call less);
# arrays from PARALLEL_MIN_ELEMENTS on take the kernel's threaded path instead


def _np_relu(a: np.ndarray) -> np.ndarray:
    """``max(a, 0)`` against a cached read-only row of zeros: NumPy vectorises ``maximum``
    of two arrays but not of an array and a scalar (about 3x faster; same values, a -0.0
    input may come out as +0.0)."""
    n = a.shape[-1] if a.ndim else 0
    if not 0 < n <= 65536:
        return np.maximum(a, 0)
    return np.maximum(a, constant_array(("zeros", n, a.dtype.char), np.zeros, n, a.dtype))


_SMALL_FORWARD = {"tanh": np.tanh, "exp": np.exp, "log": np.log, "sqrt": np.sqrt,
                  "abs": np.abs, "square": np.square, "relu": _np_relu}
_OWNED = (True,)  # every activation gradient below is a new array


def _relu_grad_into(y: Any, g: Any) -> None:
    """``g <- g * (y > 0)`` in place through a bool mask (a quarter of the float mask's
    bytes that ``act.relu_grad_`` writes: 17 against 29 us on 128x512 float32)."""
    np.multiply(g, np.greater(y, 0), out=g)


_GRAD_INTO = {**act.GRAD_INPLACE, "relu": _relu_grad_into}  # in place on NumPy arrays


def _unary(kernel: str) -> Any:
    f = getattr(act, kernel)
    f_grad = getattr(act, kernel + "_grad")
    f_into = kernel in act.FORWARD_INPLACE  # f(x, out=...) is elementwise
    df_inplace = act.GRAD_INPLACE.get(kernel)
    df_into = _GRAD_INTO.get(kernel)
    if kernel == "square":
        def f(a):  # noqa: F811 - the threaded form of act.square
            return _ew(np.multiply, a, a)

    def forward(a: Any) -> Any:
        if f_into and a.size >= parallel.PARALLEL_MIN_ELEMENTS and parallel.splittable((a,)):
            y = np.empty_like(a)
            parallel.run(lambda s, d: f(s, out=d), (a, y))
            return y
        return f(a)

    def grad(a: Any, y: Any, g: Any) -> Any:
        if df_inplace is not None and g.size >= parallel.PARALLEL_MIN_ELEMENTS and (
                parallel.splittable((y, g))):
            out = np.empty_like(g)

            def piece(yp: Any, gp: Any, op: Any) -> None:
                op[...] = gp
                df_inplace(yp, op)

            parallel.run(piece, (y, g, out))
            return out
        return f_grad(a, y, g)

    def grad_into(y: Any, g: Any) -> Any:
        """The gradient written into ``g`` (an array the engine owns) where that gives the
        values of ``grad``: a NumPy array of y's shape and dtype below the thread-split
        size; else ``grad``'s new array."""
        if (type(g) is np.ndarray and g.shape == y.shape and g.dtype == y.dtype
                and g.size < parallel.PARALLEL_MIN_ELEMENTS and g.flags.writeable):
            df_into(y, g)
            return g
        return grad(None, y, g)

    small = _SMALL_FORWARD.get(kernel, f)
    needs_input = kernel in act.NEEDS_INPUT
    has_inplace = df_into is not None and not needs_input

    def op(x: Tensor, name: str | None = None) -> Tensor:
        a = x._array
        if type(a) is np.ndarray and a.size < parallel.PARALLEL_MIN_ELEMENTS:
            y = small(a)
        else:
            y = forward(a)
        t = _wrap(y)
        if STATE.enabled and not x.stop_gradient:
            t.stop_gradient = False
            if has_inplace:
                t._node = Node(lambda g: (grad(None, y, g),), (x,), 1, _OWNED,
                               lambda g: (grad_into(y, g),))
            else:
                ys = None if needs_input else y
                t._node = Node(lambda g: (grad(a, ys, g),), (x,), 1, _OWNED)
        return t

    op.__name__ = op.__qualname__ = kernel
    op.__doc__ = (f"Elementwise ``{kernel}`` (kernel ``sculler.math.activation.{kernel}``, "
                  f"gradient ``{kernel}_grad``).")
    return op


tanh = _unary("tanh")
sigmoid = _unary("sigmoid")
relu = _unary("relu")
exp = _unary("exp")
log = _unary("log")
sqrt = _unary("sqrt")
square = _unary("square")
abs = _unary("abs")  # noqa: A001 - Paddle's name
reciprocal = _unary("reciprocal")
softsign = _unary("softsign")


def softmax(x: Tensor, axis: int = -1, dtype: Any = None, name: str | None = None) -> Tensor:
    """``exp(x) / sum(exp(x))`` along ``axis``; dx = y * (dy - sum(dy * y))."""
    a = x._array if dtype is None else x._array.astype(dtype)
    xp = get_array_module(a)
    last = axis in (-1, a.ndim - 1)
    y = act.softmax(a if last else xp.moveaxis(a, axis, -1))

    def fn(g):
        if last:
            return (act.softmax_grad(None, y, g),)
        return (xp.moveaxis(act.softmax_grad(None, y, xp.moveaxis(g, axis, -1)), -1, axis),)

    return _make(y if last else xp.moveaxis(y, -1, axis), (x,), fn)


def log_softmax(x: Tensor, axis: int = -1, dtype: Any = None,
                name: str | None = None) -> Tensor:
    """``x - logsumexp(x)`` along ``axis``; dx = dy - softmax(x) * sum(dy)."""
    a = x._array if dtype is None else x._array.astype(dtype)
    xp = get_array_module(a)
    shifted = a - a.max(axis=axis, keepdims=True)
    y = shifted - xp.log(xp.exp(shifted).sum(axis=axis, keepdims=True))
    return _make(y, (x,), lambda g: (g - xp.exp(y) * g.sum(axis=axis, keepdims=True),))


def clip(x: Tensor, min: float | None = None, max: float | None = None,  # noqa: A002
         name: str | None = None) -> Tensor:
    """Clamp to [min, max]; the gradient passes where min <= x <= max."""
    a = x._array
    xp = get_array_module(a)
    out = xp.clip(a, min, max)
    lo = -np.inf if min is None else min
    hi = np.inf if max is None else max
    return _make(out, (x,), lambda g: (g * ((a >= lo) & (a <= hi)),))


# --- matmul --------------------------------------------------------------------------
def matmul(x: Tensor, y: Tensor, transpose_x: bool = False, transpose_y: bool = False,
           name: str | None = None) -> Tensor:
    """Batched matrix product ``op(x) @ op(y)`` (op = transpose of the last two axes).

    dx = dout @ y^T, dy = x^T @ dout, with batch axes summed back to each input's shape.
    """
    a0, b0 = _arr(x), _arr(y)
    if type(a0) is not type(b0):
        check_same_device("matmul", a0, b0)
    a = a0.swapaxes(-1, -2) if transpose_x and a0.ndim > 1 else a0
    b = b0.swapaxes(-1, -2) if transpose_y and b0.ndim > 1 else b0
    if a.shape[-1] != b.shape[-2 if b.ndim > 1 else 0]:
        raise ValueError(
            f"matmul: inner dimensions differ, x {list(a0.shape)} (transpose_x={transpose_x})"
            f" and y {list(b0.shape)} (transpose_y={transpose_y})")
    out = a @ b
    rx = isinstance(x, Tensor) and not x.stop_gradient
    ry = isinstance(y, Tensor) and not y.stop_gradient
    if not (STATE.enabled and (rx or ry)):
        return _wrap(out)

    def fn(g):
        a2 = a if a.ndim > 1 else a[None, :]
        b2 = b if b.ndim > 1 else b[:, None]
        g2 = g.reshape(g.shape[:-1] + (1,) + g.shape[-1:]) if a.ndim == 1 and b.ndim > 1 \
            else g
        if b.ndim == 1:
            g2 = g2[..., None]
        gx = gy = None
        if rx:
            gx = _unbroadcast(g2 @ b2.swapaxes(-1, -2), a2.shape).reshape(a.shape)
            if transpose_x and a0.ndim > 1:
                gx = gx.swapaxes(-1, -2)
        if ry:
            gy = _unbroadcast(a2.swapaxes(-1, -2) @ g2, b2.shape).reshape(b.shape)
            if transpose_y and b0.ndim > 1:
                gy = gy.swapaxes(-1, -2)
        return gx, gy

    return _make(out, (x if rx else None, y if ry else None), fn)


def mm(x: Tensor, y: Tensor, name: str | None = None) -> Tensor:
    return matmul(x, y)


# --- reductions ----------------------------------------------------------------------
def _axes(axis: Any, ndim: int) -> tuple | None:
    if axis is None:
        return None
    if isinstance(axis, Tensor):
        axis = axis.tolist()
    if isinstance(axis, int):
        axis = (axis,)
    out = []
    for ax in axis:
        if not -ndim <= ax < builtins.max(ndim, 1):
            raise ValueError(f"axis {ax} is out of range for a tensor with {ndim} dims")
        out.append(ax % builtins.max(ndim, 1))
    return tuple(out)


def _expand(g: Any, axes: tuple | None, keepdim: bool, shape: tuple) -> Any:
    xp = get_array_module(g)
    if axes is not None and not keepdim:
        g = xp.expand_dims(g, axes)
    return xp.broadcast_to(g, shape)


def sum(x: Tensor, axis: Any = None, dtype: Any = None, keepdim: bool = False,  # noqa: A001
        name: str | None = None) -> Tensor:
    """Sum over ``axis`` (all when None); the gradient broadcasts back."""
    a = x._array
    xp = get_array_module(a)
    axes = _axes(axis, a.ndim)
    out = xp.asarray(a.sum(axis=axes, keepdims=keepdim, dtype=dtype))
    return _make(out, (x,), lambda g: (_expand(g, axes, keepdim, a.shape),))


def mean(x: Tensor, axis: Any = None, keepdim: bool = False, name: str | None = None) -> Tensor:
    """Mean over ``axis``; d/dx = 1/count."""
    a = x._array
    xp = get_array_module(a)
    axes = _axes(axis, a.ndim)
    out = xp.asarray(a.mean(axis=axes, keepdims=keepdim))
    count = a.size // builtins.max(out.size, 1) if a.size else 1
    return _make(out, (x,), lambda g: (_expand(g / count, axes, keepdim, a.shape),))


def _extreme(kind: str) -> Any:
    def op(x: Tensor, axis: Any = None, keepdim: bool = False,
           name: str | None = None) -> Tensor:
        a = x._array
        xp = get_array_module(a)
        axes = _axes(axis, a.ndim)
        out = xp.asarray(getattr(a, kind)(axis=axes, keepdims=keepdim))

        def fn(g):
            mask = a == _expand(out, axes, keepdim, a.shape)
            share = mask / mask.sum(axis=axes, keepdims=True)
            return (_expand(g, axes, keepdim, a.shape) * share,)

        return _make(out, (x,), fn)

    op.__name__ = kind
    op.__doc__ = (f"``{kind}`` over ``axis``; the gradient is split evenly between tied "
                  "extreme elements.")
    return op


max = _extreme("max")  # noqa: A001
min = _extreme("min")  # noqa: A001


def argmax(x: Tensor, axis: int | None = None, keepdim: bool = False, dtype: Any = "int64",
           name: str | None = None) -> Tensor:
    a = x._array
    out = a.argmax(axis=axis, keepdims=keepdim) if axis is not None else a.argmax()
    return _wrap(get_array_module(a).asarray(out).astype(dtype))


def argmin(x: Tensor, axis: int | None = None, keepdim: bool = False, dtype: Any = "int64",
           name: str | None = None) -> Tensor:
    a = x._array
    out = a.argmin(axis=axis, keepdims=keepdim) if axis is not None else a.argmin()
    return _wrap(get_array_module(a).asarray(out).astype(dtype))


# --- shape ops -----------------------------------------------------------------------
def reshape(x: Tensor, shape: Sequence[int], name: str | None = None) -> Tensor:
    """Same data, new shape; a 0 copies the input's dim, one -1 is inferred (as Paddle)."""
    a = x._array
    if isinstance(shape, Tensor):
        shape = shape.tolist()
    new = tuple(a.shape[i] if s == 0 else int(s) for i, s in enumerate(shape))
    try:
        out = a.reshape(new)
    except ValueError:
        raise ValueError(f"cannot reshape a tensor of shape {list(a.shape)} "
                         f"({a.size} elements) to {list(shape)}") from None
    return _make(out, (x,), lambda g: (g.reshape(a.shape),))


def transpose(x: Tensor, perm: Sequence[int], name: str | None = None) -> Tensor:
    """Permute axes; the gradient is permuted back with the inverse permutation."""
    a = x._array
    if sorted(p % builtins.max(a.ndim, 1) for p in perm) != list(range(a.ndim)):
        raise ValueError(f"perm {list(perm)} is not a permutation of the {a.ndim} axes "
                         f"of a tensor of shape {list(a.shape)}")
    inv = tuple(np.argsort([p % a.ndim for p in perm]))
    return _make(a.transpose(perm), (x,), lambda g: (g.transpose(inv),))


def t(x: Tensor, name: str | None = None) -> Tensor:
    """Transpose of a tensor with at most 2 dims."""
    return transpose(x, list(range(x.ndim))[::-1])


def unsqueeze(x: Tensor, axis: Any, name: str | None = None) -> Tensor:
    axes = [axis] if isinstance(axis, int) else list(axis)
    shape = list(x._array.shape)
    for ax in axes:
        shape.insert(ax if ax >= 0 else len(shape) + ax + 1, 1)
    return reshape(x, shape)


def squeeze(x: Tensor, axis: Any = None, name: str | None = None) -> Tensor:
    shape = x._array.shape
    axes = range(len(shape)) if axis is None else _axes(axis, len(shape))
    drop = {i for i in axes if shape[i] == 1}
    return reshape(x, [s for i, s in enumerate(shape) if i not in drop])


def flatten(x: Tensor, start_axis: int = 0, stop_axis: int = -1,
            name: str | None = None) -> Tensor:
    shape = list(x._array.shape)
    if not shape:
        return reshape(x, [1])
    s, e = start_axis % len(shape), stop_axis % len(shape)
    return reshape(x, shape[:s] + [int(np.prod(shape[s:e + 1]))] + shape[e + 1:])


def concat(x: Sequence[Tensor], axis: int = 0, name: str | None = None) -> Tensor:
    """Join tensors along ``axis``; each input gets its slice of the gradient."""
    xs = [_as_tensor(v) for v in x]
    arrays = [v._array for v in xs]
    check_same_device("concat", *arrays)
    xp = get_array_module(*arrays)
    out = xp.concatenate(arrays, axis=axis)
    bounds = np.cumsum([a.shape[axis] for a in arrays])[:-1]
    return _make(out, tuple(xs), lambda g: tuple(xp.split(g, bounds, axis=axis)))


def stack(x: Sequence[Tensor], axis: int = 0, name: str | None = None) -> Tensor:
    """Stack equal-shaped tensors along a new ``axis``."""
    xs = [_as_tensor(v) for v in x]
    check_same_device("stack", *[v._array for v in xs])
    xp = get_array_module(*[v._array for v in xs])
    out = xp.stack([v._array for v in xs], axis=axis)
    n = len(xs)
    return _make(out, tuple(xs), lambda g: tuple(
        xp.take(g, i, axis=axis) for i in range(n)))


def split(x: Tensor, num_or_sections: Any, axis: int = 0,
          name: str | None = None) -> list[Tensor]:
    """Split along ``axis`` into equal parts (an int) or the given sizes (one may be -1)."""
    a = x._array
    xp = get_array_module(a)
    dim = a.shape[axis]
    if isinstance(num_or_sections, int):
        if dim % num_or_sections:
            raise ValueError(f"split: axis {axis} of size {dim} is not divisible into "
                             f"{num_or_sections} equal parts")
        sizes = [dim // num_or_sections] * num_or_sections
    else:
        sizes = list(num_or_sections)
        if sizes.count(-1) == 1:
            sizes[sizes.index(-1)] = dim - builtins.sum(s for s in sizes if s != -1)
        if builtins.sum(sizes) != dim:
            raise ValueError(f"split: sections {list(num_or_sections)} do not add up to "
                             f"the size {dim} of axis {axis}")
    bounds = np.cumsum(sizes)[:-1]
    parts = xp.split(a, bounds, axis=axis)
    outs = [_wrap(p) for p in parts]
    if STATE.enabled and not x.stop_gradient:
        def fn(gs):
            return (xp.concatenate(
                [xp.zeros_like(p) if g is None else g for g, p in zip(gs, parts)],
                axis=axis),)
        node = Node(fn, (x,), len(outs))
        for i, o in enumerate(outs):
            o.stop_gradient = False
            o._node = node
            o._out_idx = i
    return outs


def where(condition: Any, x: Any, y: Any, name: str | None = None) -> Tensor:
    """Pick ``x`` where ``condition`` else ``y``; each gets the gradient where it was picked."""
    c = _arr(condition).astype(bool)
    check_same_device("where", c, _arr(x), _arr(y))
    return _binary("where", x, y, lambda a, b: get_array_module(c).where(c, a, b),
                   lambda g, a, b, o: g * c, lambda g, a, b, o: g * ~c)


def gather(x: Tensor, index: Any, axis: int = 0, name: str | None = None) -> Tensor:
    """Rows (entries along ``axis``) selected by ``index``; repeated rows sum gradients."""
    a = x._array
    xp = get_array_module(a)
    idx = _arr(index).astype(np.int64)
    ax = axis % a.ndim
    out = xp.take(a, idx, axis=ax)

    def fn(g):
        gx = xp.zeros_like(a)
        xp.add.at(gx, (slice(None),) * ax + (idx,), g)
        return (gx,)

    return _make(out, (x,), fn)


def _is_basic(idx: Any) -> bool:
    items = idx if isinstance(idx, tuple) else (idx,)
    return builtins.all(isinstance(i, int | slice | type(None)) or i is Ellipsis
                        for i in items)


def getitem(x: Tensor, idx: Any) -> Tensor:
    """``x[idx]`` with gradients; advanced (array) indices accumulate repeated entries."""
    if isinstance(idx, Tensor):
        idx = idx._array
    elif isinstance(idx, tuple):
        idx = tuple(i._array if isinstance(i, Tensor) else i for i in idx)
    a = x._array
    xp = get_array_module(a)
    out = a[idx]
    basic = _is_basic(idx)

    def fn(g):
        gx = xp.zeros_like(a)
        if basic:
            gx[idx] = g
        else:
            xp.add.at(gx, idx, g)
        return (gx,)

    return _make(xp.asarray(out), (x,), fn)


def setitem(x: Tensor, idx: Any, value: Any) -> None:
    """In-place ``x[idx] = value``; only for tensors outside a recorded graph."""
    if STATE.enabled and not x.stop_gradient:
        raise RuntimeError(
            f"in-place assignment to tensor {x.name}, which needs a gradient, is not "
            "supported; wrap it in sculler.no_grad() or build a new tensor with where/concat")
    if isinstance(idx, Tensor):
        idx = idx._array
    x._array[idx] = _arr(value)


def cast(x: Tensor, dtype: Any) -> Tensor:
    """Convert the dtype; float gradients are cast back to the input dtype."""
    from sculler.eager.creation import convert_dtype

    a = x._array
    dt = convert_dtype(dtype)
    out = a.astype(dt)
    if dt.kind != "f":
        return _wrap(out)
    return _make(out, (x,), lambda g: (g.astype(a.dtype),))


def clone(x: Tensor, name: str | None = None) -> Tensor:
    """A copy of the data that stays in the graph (the gradient passes through)."""
    return _make(x._array.copy(), (x,), lambda g: (g,))


def assign(x: Any, output: Tensor | None = None) -> Tensor:
    """Copy ``x`` (into ``output`` in place when given)."""
    a = _arr(x)
    if output is None:
        return clone(_as_tensor(x))
    output._array[...] = a
    return output


# --- devices -------------------------------------------------------------------------
def _copy_across(x: Tensor, gpu: bool, what: str) -> Tensor:
    """A copy of x's data on the GPU (``gpu``) or the host that stays in the graph: the
    gradient flows back across the copy, converted to x's device (d copy(x)/dx = I)."""
    return _make(to_place(x._array, gpu, what), (x,), lambda g: (to_place(g, not gpu, what),),
                 _OWNED_ONE)


_OWNED_ONE = (True,)  # a copy across devices is a new array


def cpu(x: Tensor) -> Tensor:
    """x on the host: x itself when it is there, else a copy that stays in the graph."""
    if not is_gpu_array(x._array):
        return x
    return _copy_across(x, False, "Tensor.cpu()")


def cuda(x: Tensor, device_id: int | None = None, blocking: bool = True) -> Tensor:
    """x on the current CUDA device (``device_id`` must name it when given): x itself when
    it is there, else a copy that stays in the graph. ``blocking`` is accepted as Paddle's
    (CuPy's host-to-device copies are ordered on the current stream either way)."""
    if not isinstance(blocking, bool):
        raise TypeError(f"Tensor.cuda(): blocking must be a bool, got {type(blocking).__name__}")
    wants_gpu("gpu" if device_id is None else CUDAPlace(device_id), "Tensor.cuda()")
    if is_gpu_array(x._array):
        return x
    return _copy_across(x, True, "Tensor.cuda()")


# --- binding onto Tensor ------------------------------------------------------------
def _operator(name: str, ufunc: Any, op: Any, reflected: bool = False) -> Any:
    """The operator method (``__mul__``, ``__rsub__``, ...) of the elementwise ``op``.

    Operands that need nothing recorded (grad mode off, or no operand needs a gradient) and
    are small NumPy arrays or Python numbers are combined here, as ``op`` would combine
    them (``ufunc`` of the arrays; a number as a cached 0-d array of the array's float
    dtype); every other case, and anything to record, goes to ``op`` itself.
    """
    def method(self: Tensor, other: Any) -> Tensor:
        a = self._array
        if type(a) is _ndarray and a.size < parallel.PARALLEL_MIN_ELEMENTS and (
                self.stop_gradient or not STATE.enabled):
            kind = type(other)
            if kind is Tensor:
                b = other._array
                if type(b) is _ndarray and b.size < parallel.PARALLEL_MIN_ELEMENTS and (
                        other.stop_gradient or not STATE.enabled):
                    return _wrap(ufunc(b, a) if reflected else ufunc(a, b))
            elif kind is int or kind is float:
                b = _typed_scalar(other, a.dtype)
                return _wrap(ufunc(b, a) if reflected else ufunc(a, b))
        return op(other, self) if reflected else op(self, other)

    method.__name__ = method.__qualname__ = f"__r{name}__" if reflected else f"__{name}__"
    return method


def _bind() -> None:
    T = Tensor

    def swap(f: Any) -> Any:
        return lambda self, other: f(other, self)

    T.__add__ = _operator("add", np.add, add)
    T.__radd__ = _operator("add", np.add, add, reflected=True)
    T.__sub__ = _operator("sub", np.subtract, subtract)
    T.__rsub__ = _operator("sub", np.subtract, subtract, reflected=True)
    T.__mul__ = _operator("mul", np.multiply, multiply)
    T.__rmul__ = _operator("mul", np.multiply, multiply, reflected=True)
    T.__truediv__ = divide
    T.__rtruediv__ = swap(divide)
    T.__pow__ = pow
    T.__rpow__ = swap(pow)
    T.__matmul__ = matmul
    T.__rmatmul__ = swap(matmul)
    T.__neg__ = neg
    T.__eq__ = equal
    T.__ne__ = not_equal
    T.__lt__ = less_than
    T.__le__ = less_equal
    T.__gt__ = greater_than
    T.__ge__ = greater_equal
    T.__getitem__ = getitem
    T.__setitem__ = setitem
    T.__abs__ = abs
    for name in ("add", "subtract", "multiply", "divide", "pow", "matmul", "maximum",
                 "minimum", "tanh", "sigmoid", "relu", "exp", "log", "sqrt", "square",
                 "reciprocal", "sum", "mean", "max", "min", "argmax", "argmin", "reshape",
                 "transpose", "unsqueeze", "squeeze", "flatten", "clip", "cast", "clone",
                 "split", "gather", "scale", "equal", "not_equal", "less_than",
                 "less_equal", "greater_than", "greater_equal", "abs", "neg", "t"):
        setattr(T, name, globals()[name])
    T.astype = cast
    T.softmax = softmax
    T.cpu = cpu
    T.cuda = cuda
    T.T = property(lambda self: transpose(self, list(range(self.ndim))[::-1]))


_bind()
