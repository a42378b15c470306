"""CuPy kernels for the GPU paths of the training loop.

Each fuses what NumPy does in several passes (and CuPy would launch as several kernels, each
costing 10-30 us of host time) into one launch: the classification cost and its gradient past
the softmax, the optimizers' updates, activations and segment reductions, LSTM and GRU time
steps forward and backward, and the convolution's unfold and fold and max pooling (gathering
kernels, one thread an output element: no atomics, deterministic). A kernel is built on first
use for its configuration (activations, which optional terms) and cached; these functions are
only called with CuPy arrays. Their NumPy twins are the reference: the tests marked ``gpu``
compare the two. Kernels that walk whole sequences (the recurrences, CRF, CTC) are in
:mod:`sculler.math.cuda_sequences`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from sculler.backend import cached_on_gpu, is_gpu_array

_kernels: dict[tuple, Any] = {}

# f(x) and f'(x) written in terms of y = f(x), for the cell activations of sculler.math.rnn
# (sigmoid's argument clamped to [-40, 13] as there). Comparisons, not min/max: the same text
# compiles in ElementwiseKernels, in RawKernels (sculler.math.cuda_sequences, which have no
# CuPy preamble) and with the stand-in's g++, and a NaN stays NaN as in NumPy
_ACTIVATION = {
    "sigmoid": "((T)1 / ((T)1 + exp(-(({x}) < (T)-40 ? (T)-40 : (({x}) > (T)13 ? (T)13"
               " : ({x}))))))",
    "tanh": "tanh({x})",
    "relu": "(({x}) < (T)0 ? (T)0 : ({x}))",
    "linear": "({x})",
}
_DERIVATIVE = {
    "sigmoid": "({y} * ((T)1 - {y}))",
    "tanh": "((T)1 - {y} * {y})",
    "relu": "({y} > (T)0 ? (T)1 : (T)0)",
    "linear": "((T)1)",
}


def _elementwise(key: tuple, make: Callable[[], tuple[str, str, str]]) -> Any:
    """The cached ``cupy.ElementwiseKernel`` for ``key``; ``make()`` gives its input
    parameters, output parameters and body."""
    kernel = _kernels.get(key)
    if kernel is None:
        import cupy

        ins, outs, body = make()
        name = "sculler_" + "_".join(str(k) for k in key)
        kernel = _kernels[key] = cupy.ElementwiseKernel(ins, outs, body, name)
    return kernel


_C_TYPE = {np.dtype(np.float32): "float", np.dtype(np.float64): "double"}
_raw_kernels: dict[tuple, Any] = {}


def _raw(key: tuple, dtype: np.dtype, make: Callable[[str], str]) -> Any:
    """The cached ``cupy.RawKernel`` for ``key`` and ``dtype``: ``make(name)`` gives the CUDA
    source of ``extern "C" __global__ void name(...)``, which may use ``T`` for the dtype."""
    key = (*key, np.dtype(dtype).str)
    kernel = _raw_kernels.get(key)
    if kernel is None:
        import cupy

        name = "sculler_" + "_".join(str(k).strip("<>|") for k in key)
        source = f"typedef {_C_TYPE[np.dtype(dtype)]} T;\n" + make(name)
        kernel = _raw_kernels[key] = cupy.RawKernel(source, name)
    return kernel


def _block_tree_sum(threads: int, *shared: str) -> str:
    """CUDA that adds up, over a block of ``threads`` (a power of two) with thread index
    ``t``, each ``__shared__ double name[threads]`` of ``shared`` into ``name[0]``, in a
    fixed tree order (the same sums on every run); each thread has stored its own term."""
    adds = " ".join(f"{name}[t] += {name}[t + h];" for name in shared)
    return f"""  __syncthreads();
  for (int h = {threads} / 2; h > 0; h >>= 1) {{
    if (t < h) {{ {adds} }}
    __syncthreads();
  }}"""


def _contiguous(a: Any) -> Any:
    import cupy

    return cupy.ascontiguousarray(a)


def device_int64(index: Any) -> Any:
    """Segment offsets or row numbers (host or device) as the device int64 array the kernels
    index; host ones are copied once per distinct content
    (:func:`sculler.backend.cached_on_gpu`)."""
    import cupy

    if is_gpu_array(index):
        return cupy.asarray(index, dtype=np.int64)
    return cached_on_gpu(np.asarray(index, dtype=np.int64))


def _scalar(like: Any, value: float) -> Any:
    """``value`` as a scalar of ``like``'s dtype (a kernel's ``T`` argument)."""
    return like.dtype.type(value)


ROW_SOFTMAX_MAX_WIDTH = 256  # wider rows: CuPy's reductions (one thread a row loops)


ZERO_TOGETHER = 32  # buffers one launch of zero_together clears


def zero_together(arrays: list) -> None:
    """Clear device ``arrays`` with one launch for every ``ZERO_TOGETHER`` of them (a clearing
    each is a launch each: the frames of a recurrent group reserve about 5 gradients each,
    all cleared at the end of the network's forward pass). Each C-contiguous one is passed as
    an address and a count of 4-byte words, cleared by its own grid-stride loop (no array of
    addresses: no local memory); any other is cleared alone."""
    lanes = []
    for a in arrays:
        if a.size and a.flags.c_contiguous and a.nbytes % 4 == 0:
            lanes.append((np.uint64(a.data.ptr), np.int64(a.nbytes // 4)))
        elif a.size:
            a[...] = 0
    for k in range(0, len(lanes), ZERO_TOGETHER):
        group = lanes[k:k + ZERO_TOGETHER]
        most = max(int(n) for _, n in group)
        group += [(np.uint64(0), np.int64(0))] * (ZERO_TOGETHER - len(group))
        kernel = _raw(("zero_together", ZERO_TOGETHER), np.float32, lambda name: (
            f'extern "C" __global__ void {name}('
            + ", ".join(f"unsigned long long p{j}, long long n{j}" for j in range(ZERO_TOGETHER))
            + ") {\n"
            "  const long long first = (long long)blockIdx.x * blockDim.x + threadIdx.x;\n"
            "  const long long step = (long long)blockDim.x * gridDim.x;\n"
            + "".join(f"  for (long long i = first; i < n{j}; i += step) "
                      f"((unsigned int*)p{j})[i] = 0u;\n" for j in range(ZERO_TOGETHER))
            + "}\n"))
        threads = 256
        blocks = min(max(-(-most // threads), 1), 1024)
        kernel((blocks,), (threads,), tuple(v for lane in group for v in lane))


# y = f(v) of the elementwise activations a kernel applies itself, in the operation order of
# sculler.math.activation (relu keeps a NaN, as maximum does)
ACTIVATIONS = {"linear": "v", "tanh": "tanh(v)", "sigmoid": "(tanh(v * (T)0.5) + (T)1) * (T)0.5",
               "relu": "v < (T)0 ? (T)0 : v"}


def activate(y: Any, name: str, bias: Any | None = None) -> None:
    """``y <- f(y + bias)`` in place for one of ``ACTIVATIONS`` (``bias`` a (1, d) row added
    to every row of the 2-D ``y``, or None): one launch where the bias add and the
    activation are two (a sigmoid alone four)."""
    with_bias = bias is not None
    kernel = _elementwise(("activate", name, with_bias), lambda: (
        "raw T b, int64 d" if with_bias else "", "T y",
        ("T v = y + b[i % d];" if with_bias else "T v = y;") + f"y = {ACTIVATIONS[name]};"))
    if with_bias:
        kernel(_contiguous(bias), y.shape[-1], y)
    else:
        kernel(y)


def sum_and_activate(a: Any, b: Any, out: Any, name: str, bias: Any | None = None) -> None:
    """``out = f(a + b (+ bias))`` for one of ``ACTIVATIONS`` (``a``, ``b``, ``out`` of one
    2-D shape, any strides; ``bias`` a (1, d) row): a layer summing two inputs then
    activating, in one launch where the sum, the bias and the activation are up to three."""
    with_bias = bias is not None
    kernel = _elementwise(("sum_and_activate", name, with_bias), lambda: (
        "T a, T c" + (", raw T b, int64 d" if with_bias else ""), "T y",
        "T v = a + c" + (" + b[i % d];" if with_bias else ";") + f"y = {ACTIVATIONS[name]};"))
    if with_bias:
        kernel(a, b, _contiguous(bias), out.shape[-1], out)
    else:
        kernel(a, b, out)


# dy <- dL/dv from the output y of those activations, in the operation order of
# sculler.math.activation's in-place gradients
ACTIVATION_GRADS = {"relu": "if (!(y > (T)0)) dy = (T)0;", "sigmoid": "dy = dy * y * ((T)1 - y);",
                    "tanh": "dy = dy * ((T)1 - y * y);", "linear": ""}


def activation_grad(name: str, y: Any, dy: Any, add_to: tuple = ()) -> None:
    """``dy`` (dL/dy) replaced by dL/dv in place for one of ``ACTIVATION_GRADS``, from the
    activation's output ``y``, and added into each array of ``add_to`` (up to two, dy's shape,
    any strides: the gradients of inputs the layer summed): one launch where the host forms
    take up to three and a temporary, and each add another."""
    adds = len(add_to)
    kernel = _elementwise(("activation_grad", name, adds), lambda: (
        "T y", ", ".join(["T dy"] + [f"T g{k}" for k in range(adds)]),
        ACTIVATION_GRADS[name] + "".join(f"g{k} += dy;" for k in range(adds))))
    kernel(y, dy, *add_to)


BIAS_GRAD_COLUMNS, BIAS_GRAD_GROUPS = 32, 16  # a block: 32 columns x 16 groups of rows
# taller gradients (a layer over every step of a batch of sequences) keep the GEMV: a thread
# would add more than 128 rows one after another
BIAS_GRAD_MAX_ROWS = 128 * BIAS_GRAD_GROUPS


def activation_and_bias_grad(name: str, y: Any, dy: Any, db: Any, beta: float) -> bool:
    """:func:`activation_grad` on a 2-D C-contiguous ``dy`` (in place, from the output ``y``)
    and, in the same launch, the bias gradient ``db = sum over rows of dy + beta db`` (``db``
    contiguous, one entry a column; with ``beta`` 0 its old values are not read): one
    launch where the activation's gradient and the bias's GEMV are two. A block takes 32
    columns (coalesced rows) and 16 groups of rows; each thread adds its rows in order in
    float64, then one thread a column adds the groups in order, so the sums do not depend
    on the run. False (nothing done) for an activation of no kernel here, a dtype or a
    layout other than that, or more than ``BIAS_GRAD_MAX_ROWS`` rows."""
    rows, cols = dy.shape if dy.ndim == 2 else (0, 0)
    if name not in ACTIVATION_GRADS or name == "linear" or np.dtype(dy.dtype) not in _C_TYPE \
            or not 0 < rows <= BIAS_GRAD_MAX_ROWS or y.shape != dy.shape \
            or y.dtype != dy.dtype or db.dtype != dy.dtype or db.size != cols \
            or not (dy.flags.c_contiguous and y.flags.c_contiguous and db.flags.c_contiguous):
        return False
    columns, groups = BIAS_GRAD_COLUMNS, BIAS_GRAD_GROUPS
    step = ACTIVATION_GRADS[name].replace("dy", "v")

    def make(kernel_name: str) -> str:
        return f"""extern "C" __global__ void {kernel_name}(const T* __restrict__ y_, T* dy,
                                         T* db, long long rows, long long cols, T beta) {{
  __shared__ double part[{groups}][{columns}];
  const int tx = threadIdx.x % {columns}, g = threadIdx.x / {columns};
  const long long c = (long long)blockIdx.x * {columns} + tx;
  double a = 0;
  if (c < cols) {{
    #pragma unroll 4
    for (long long r = g; r < rows; r += {groups}) {{
      const long long at = r * cols + c;
      const T y = y_[at];
      T v = dy[at];
      {step}
      dy[at] = v;
      a += (double)v;
    }}
  }}
  part[g][tx] = a;
  __syncthreads();
  if (g == 0 && c < cols) {{
    double sum = 0;
    for (int k = 0; k < {groups}; ++k) sum += part[k][tx];
    db[c] = beta == (T)0 ? (T)sum : (T)sum + beta * db[c];
  }}
}}
"""

    kernel = _raw(("activation_and_bias_grad", name), dy.dtype, make)
    kernel(((cols + columns - 1) // columns,), (columns * groups,),
           (y, dy, db, np.int64(rows), np.int64(cols), _scalar(dy, beta)))
    return True


DY_COLUMNS_THREADS = 512  # a block a channel


def dy_columns_and_channel_sums(dy: Any, out: Any, batch_last: bool, sums: Any,
                                beta: float) -> bool:
    """A convolution's output gradient ``dy`` (N, F, oh, ow) as the ``(F, N*oh*ow)`` matrix
    its backward GEMMs read, columns ordered ``(oy, ox, n)`` when ``batch_last`` else
    ``(n, oy, ox)``, written into the C-contiguous ``out``; and in the same launch the shared
    bias's gradient ``sums[f] = sum of dy[:, f] + beta sums[f]`` (with ``beta`` 0 its old
    values are not read). A block a channel: each thread adds its elements in order in
    float64, then the block adds the threads' sums in a fixed tree, so the sums do not
    depend on the run. One launch where the transposing copy and the bias's GEMV are two.
    False (nothing done) for another dtype or layout."""
    n, f = dy.shape[:2]
    if dy.ndim != 4 or np.dtype(dy.dtype) not in _C_TYPE or out.dtype != dy.dtype \
            or sums.dtype != dy.dtype or out.size != dy.size or sums.size != f or not n \
            or not (dy.flags.c_contiguous and out.flags.c_contiguous
                    and sums.flags.c_contiguous):
        return False
    threads = DY_COLUMNS_THREADS
    order = ("const long long q = e / N, m = e - q * N;" if batch_last else
             "const long long m = e / P, q = e - m * P;")

    def make(name: str) -> str:
        return f"""extern "C" __global__ void {name}(const T* __restrict__ dy, T* out, T* sums,
                                  long long N, long long F, long long P, T beta) {{
  __shared__ double part[{threads}];
  const long long c = blockIdx.x, cols = N * P;
  const int t = threadIdx.x;
  double a = 0;
  #pragma unroll 4
  for (long long e = t; e < cols; e += {threads}) {{
    {order}
    const T v = dy[(m * F + c) * P + q];
    out[c * cols + e] = v;
    a += (double)v;
  }}
  part[t] = a;
{_block_tree_sum(threads, "part")}
  if (t == 0) sums[c] = beta == (T)0 ? (T)part[0] : (T)part[0] + beta * sums[c];
}}
"""

    kernel = _raw(("dy_columns_and_channel_sums", batch_last), dy.dtype, make)
    kernel((f,), (threads,), (dy, out, sums, np.int64(n), np.int64(f),
                              np.int64(dy.shape[2] * dy.shape[3]), _scalar(dy, beta)))
    return True


def softmax_rows(x: Any, out: Any, bias: Any | None = None, logits: Any | None = None) -> Any:
    """Row-wise softmax of a 2-D ``x`` (plus the ``(w,)`` row ``bias``) into ``out`` (which
    may be ``x``), one thread a row: one launch where the bias add, max, shift, exp, sum and
    division would be six. ``logits`` (x's shape, another array) also gets ``x + bias``, the
    values before the softmax a cost may keep: no copy of its own."""
    add = " + b[j]" if bias is not None else ""
    keep = logits is not None
    kernel = _elementwise(("softmax_rows", bias is not None, keep), lambda: (
        "raw T x, int64 w" + (", raw T b" if bias is not None else ""),
        "raw T y" + (", raw T z" if keep else ""),
        "ptrdiff_t at = i * w; ptrdiff_t j = 0;"
        f"T m = x[at]{add};"
        + (f"z[at] = m; for (j = 1; j < w; ++j) {{ T v = x[at + j]{add}; z[at + j] = v;"
           " m = max(m, v); }" if keep else
           f"for (j = 1; j < w; ++j) m = max(m, (T)(x[at + j]{add}));") +
        "T s = 0;"
        f"for (j = 0; j < w; ++j) {{ T e = exp((T)(x[at + j]{add}) - m); y[at + j] = e; s += e; }}"
        "for (j = 0; j < w; ++j) y[at + j] /= s;"))
    args = (x, x.shape[1]) + ((_contiguous(bias.reshape(-1)),) if bias is not None else ())
    kernel(*args, out, *((logits,) if keep else ()), size=x.shape[0])
    return out


def scaling_backward(w: Any, x: Any, dy: Any, dw: Any | None, dx: Any | None) -> None:
    """The gradients of ``y_i = w_i x_i`` (``w`` (n, 1), ``x`` (n, d)): ``dw_i += <x_i, dy_i>``
    and ``dx_i += w_i dy_i`` (either may be None), one thread a row: one launch where a
    product, a row sum and two adds are five."""
    outs = [name for name, g in (("dw", dw), ("dx", dx)) if g is not None]
    if not outs:
        return
    body = "ptrdiff_t at = i * d; T acc = 0;"
    if dx is not None:
        body += "for (ptrdiff_t j = 0; j < d; ++j) { acc += x[at + j] * dy[at + j];" \
                " dx[at + j] += w[i] * dy[at + j]; }"
    else:
        body += "for (ptrdiff_t j = 0; j < d; ++j) acc += x[at + j] * dy[at + j];"
    if dw is not None:
        body += "dw[i] += acc;"
    kernel = _elementwise(("scaling_backward", *outs), lambda: (
        "raw T w, raw T x, raw T dy, int64 d", ", ".join(f"raw T {o}" for o in outs), body))
    grads = [g for g in (dw, dx) if g is not None]
    kernel(_contiguous(w), _contiguous(x), _contiguous(dy), x.shape[1], *grads,
           size=x.shape[0])


def columns_to_nchw(prod: Any, bias: Any | None, batch_last: bool, out: Any) -> None:
    """``out[n, f, p] = prod[f, column of (n, p)] (+ bias[f])``: a convolution's GEMM result
    ``(F, N*P)`` written in NCHW order with its bias in one launch (a transposing copy and a
    bias add are two). Columns are ordered ``(p, n)`` with ``batch_last``, else ``(n, p)``."""
    n, f = out.shape[:2]
    p = out.size // max(n * f, 1)
    with_bias = bias is not None
    kernel = _elementwise(("columns_to_nchw", batch_last, with_bias), lambda: (
        "raw T prod, int64 F, int64 P, int64 N" + (", raw T b" if with_bias else ""), "T out",
        "ptrdiff_t p = i % P, f = (i / P) % F, n = i / (P * F);"
        + ("ptrdiff_t col = p * N + n;" if batch_last else "ptrdiff_t col = n * P + p;")
        + "out = prod[f * P * N + col]" + (" + b[f];" if with_bias else ";")))
    args = (_contiguous(prod), f, p, n) + ((_contiguous(bias.reshape(-1)),) if with_bias else ())
    kernel(*args, out)


def segment_sum(x: Any, starts: Any, out: Any, add: bool = False) -> None:
    """``out[k] = sum of the rows starts[k] .. starts[k+1] of x`` (2-D; zero for an empty
    segment; with ``add``, ``out[k] +=`` that sum), one thread per (segment, column), in row
    order: deterministic, and one upload of the (host) ``starts`` instead of a round trip of
    ``x`` through the host."""
    kernel = _elementwise(("segment_sum", add), lambda: (
        "raw T x, raw int64 starts, int64 d", "T out",
        "ptrdiff_t k = i / d, col = i - k * d; T s = 0;"
        "for (ptrdiff_t r = starts[k]; r < starts[k + 1]; ++r) s += x[r * d + col];"
        + ("out += s;" if add else "out = s;")))
    kernel(_contiguous(x), device_int64(starts), x.shape[1], out)


def add_to_rows(dst: Any, rows: Any, src: Any) -> None:
    """``dst[rows[r]] += src[r]`` for distinct ``rows`` (int64 on the device), one thread an
    element: where CuPy's ``dst[rows] += src`` is a gather, an add and a scatter. ``dst``
    2-D (a view too: a raw array's flat index counts its own elements), ``src``
    ``(len(rows), d)``."""
    if src.size == 0:
        return
    kernel = _elementwise(("add_to_rows",), lambda: (
        "raw T src, raw int64 rows, int64 d", "raw T dst",
        "ptrdiff_t r = i / d; dst[rows[r] * d + (i - r * d)] += src[i];"))
    kernel(_contiguous(src), rows, src.shape[1], dst, size=src.size)


def add_grouped_rows(dst: Any, src: Any, order: Any, starts: Any, dest: Any) -> None:
    """``dst[dest[k]] += sum of src[order[r]] for r in starts[k] .. starts[k+1]``: a row
    gather's gradient (an embedding's) in one launch, one thread per (group, column) adding
    its group's rows in order; the destinations are distinct, so no two threads write one
    element. Where a gather, :func:`segment_sum` into a temporary and an indexed add would be
    three launches and two temporaries as large as the batch's rows. ``dst`` and ``src``
    C-contiguous 2-D of one width; ``order``, ``starts`` (groups + 1) and ``dest`` int64 on
    the device."""
    groups, width = dest.size, src.shape[1]
    if groups == 0 or width == 0:
        return
    kernel = _elementwise(("add_grouped_rows",), lambda: (
        "raw T src, raw int64 order, raw int64 starts, raw int64 dest, int64 d", "raw T dst",
        "ptrdiff_t k = i / d, col = i - k * d; T s = 0;"
        "for (ptrdiff_t r = starts[k]; r < starts[k + 1]; ++r) s += src[order[r] * d + col];"
        "dst[dest[k] * d + col] += s;"))
    kernel(src, order, starts, dest, width, dst, size=groups * width)


def add_segment_rows(dst: Any, src: Any, segment_of_row: Any, scale: Any | None) -> None:
    """``dst[r] += src[k] * scale[k]`` for the segment ``k = segment_of_row[r]`` of every row
    (no ``scale``: times 1): the backward of a sequence sum or average in one launch, where a
    scaling, a gather and an add are three."""
    scaled = scale is not None
    kernel = _elementwise(("add_segment_rows", scaled), lambda: (
        "raw T src, raw int64 seg, int64 d" + (", raw T scale" if scaled else ""), "T dst",
        "ptrdiff_t r = i / d, k = seg[r];"
        "dst += src[k * d + (i - r * d)]" + (" * scale[k];" if scaled else ";")))
    args = (_contiguous(src), segment_of_row, src.shape[1]) + ((scale,) if scaled else ())
    kernel(*args, dst)


LSTM_BIAS_LANES = 8  # rows each output's sum is split over (then added in lane order)


def lstm_bias_grads(dgates: Any, c: Any, prev: Any, first: int, dbias: Any) -> None:
    """An LSTM's bias (and peephole) gradients in one launch, as
    :func:`sculler.math.rnn.lstm_param_grads` forms them in about ten: ``dbias[:4H] += sum_r
    dg[:, r]``; with peepholes (``dbias`` 7H) ``dbias[4H:5H] += sum_r dg_i[r] c[prev[r]]``,
    ``dbias[5H:6H]`` the same with ``dg_f`` (rows ``first ..``, whose previous step's rows are
    ``prev``), ``dbias[6H:] += sum_r dg_o[r] c[r]``. ``dgates`` (4, R, H) and ``c`` (R, H)
    C-contiguous. A block sums 32 outputs, each over ``LSTM_BIAS_LANES`` interleaved row
    lanes added in a fixed order: deterministic, no atomics."""
    rows, hs = c.shape
    width = dbias.size
    lanes = LSTM_BIAS_LANES
    kernel = _raw(("lstm_bias_grads",), dbias.dtype, lambda name: f"""
extern "C" __global__ void {name}(const T* __restrict__ dg, const T* __restrict__ c,
                                  const long long* __restrict__ prev, T* dbias, long long R,
                                  long long H, long long first, long long width) {{
  __shared__ T part[{lanes}][32];
  const int col = threadIdx.x % 32, lane = threadIdx.x / 32;
  const long long q = (long long)blockIdx.x * 32 + col, plane = R * H;
  T s = 0;
  if (q < 4 * H) {{
    const T* g = dg + (q / H) * plane + q % H;
    for (long long r = lane; r < R; r += {lanes}) s += g[r * H];
  }} else if (q < 6 * H && q < width) {{
    const long long k = q < 5 * H ? 1 : 2, j = q - (3 + k) * H;
    const T* g = dg + k * plane + j;
    for (long long r = first + lane; r < R; r += {lanes})
      s += g[r * H] * c[prev[r - first] * H + j];
  }} else if (q < width) {{
    const long long j = q - 6 * H;
    const T* g = dg + 3 * plane + j;
    for (long long r = lane; r < R; r += {lanes}) s += g[r * H] * c[r * H + j];
  }}
  part[lane][col] = s;
  __syncthreads();
  if (lane == 0 && q < width) {{
    T total = part[0][col];
    for (int l = 1; l < {lanes}; ++l) total += part[l][col];
    dbias[q] += total;
  }}
}}
""")
    kernel((-(-width // 32),), (32 * lanes,),
           (dgates, c, prev, dbias, np.int64(rows), np.int64(hs), np.int64(first),
            np.int64(width)))


def segment_max(x: Any, starts: Any, out: Any, argmax: Any | None) -> None:
    """``out[k, j] = max over the rows of segment k of x[:, j]`` and, with ``argmax`` ((n, d)
    int), the absolute row of the first maximum, one thread per (segment, column), as
    :func:`sculler.math.segment.segment_max` (a NaN makes the maximum NaN and its row
    ``T``, the number of rows, as there). Every segment must be non-empty."""
    want = argmax is not None
    kernel = _elementwise(("segment_max", want), lambda: (
        "raw T x, raw int64 starts, int64 d, int64 rows", "T out" + (", I arg" if want else ""),
        "ptrdiff_t k = i / d, col = i - k * d, r0 = starts[k];"
        "T best = x[r0 * d + col], odd = best; ptrdiff_t at = r0;"
        "for (ptrdiff_t r = r0 + 1; r < starts[k + 1]; ++r) {"
        "  T v = x[r * d + col];"
        "  if (v != v) odd = v; else if (v > best) { best = v; at = r; }"
        "}"
        "if (odd != odd) { best = odd; at = rows; }"
        "out = best;" + ("arg = at;" if want else "")))
    args = [_contiguous(x), device_int64(starts), x.shape[1], x.shape[0], out]
    kernel(*args, *([argmax] if want else []))


def segment_softmax(x: Any, starts: Any, out: Any) -> None:
    """Softmax over each segment ``starts[k] .. starts[k+1]`` of a column ``x`` (T,) into
    ``out``, one thread a segment (short segments: attention over a source sentence): one
    upload of the (host) ``starts`` and one launch, where the NumPy path makes a round trip
    through the host and seven more launches. ``out`` may be ``x`` itself (the same object,
    which CuPy does not copy first): each row is read before it is written."""
    kernel = _elementwise(("segment_softmax",), lambda: (
        "raw T x, raw int64 starts", "raw T y",
        "ptrdiff_t lo = starts[i], hi = starts[i + 1];"
        "if (lo < hi) {"
        "  T m = x[lo];"
        "  for (ptrdiff_t r = lo + 1; r < hi; ++r) m = max(m, (T)x[r]);"
        "  T s = 0;"
        "  for (ptrdiff_t r = lo; r < hi; ++r) { T e = exp((T)x[r] - m); y[r] = e; s += e; }"
        "  for (ptrdiff_t r = lo; r < hi; ++r) y[r] /= s;"
        "}"))
    kernel(_contiguous(x), device_int64(starts), out, size=len(starts) - 1)


def segment_softmax_grad(y: Any, dy: Any, starts: Any, out: Any) -> None:
    """``out = y (dy - sum over the segment of dy y)`` per segment of the columns ``y``,
    ``dy`` (T,), one thread a segment: the backward of :func:`segment_softmax`. ``out`` may
    be ``dy`` itself."""
    kernel = _elementwise(("segment_softmax_grad",), lambda: (
        "raw T y, raw T dy, raw int64 starts", "raw T dx",
        "ptrdiff_t lo = starts[i], hi = starts[i + 1]; T d = 0;"
        "for (ptrdiff_t r = lo; r < hi; ++r) d += dy[r] * y[r];"
        "for (ptrdiff_t r = lo; r < hi; ++r) dx[r] = y[r] * (dy[r] - d);"))
    kernel(_contiguous(y), _contiguous(dy), device_int64(starts), out, size=len(starts) - 1)


def pick_nll(x: Any, labels: Any, out: Any, logits: Any | None = None) -> None:
    """``out[r] = -log x[r, labels[r]]``: the classification cost of probabilities ``x``.
    With the softmax's ``logits`` z, a row whose probability underflowed to 0 costs
    ``logsumexp(z_r) - z_r[label]`` instead of inf, in float64 as on the host
    (:class:`sculler.layers.cost.MultiClassCrossEntropy`)."""
    x = _contiguous(x)
    keep = logits is not None
    body = "cost = -log(x[i * width + label]);"
    if keep:
        body = ("const T p = x[i * width + label];"
                "if (p > (T)0) { cost = -log(p); } else {"
                "  const ptrdiff_t at = i * width; double top = z[at], s = 0;"
                "  for (ptrdiff_t j = 1; j < width; ++j) top = max(top, (double)z[at + j]);"
                "  for (ptrdiff_t j = 0; j < width; ++j) s += exp((double)z[at + j] - top);"
                "  const double c = top + log(s) - (double)z[at + label];"
                "  cost = p == p ? (T)c : -log(p); }")
    kernel = _elementwise(("pick_nll", keep), lambda: (
        "raw T x, I label, int64 width" + (", raw T z" if keep else ""), "T cost", body))
    kernel(x, labels, x.shape[1], *((_contiguous(logits),) if keep else ()), out)


def pick_nll_grad(x: Any, labels: Any, dcost: Any, dx: Any) -> bool:
    """``dx[r, labels[r]] -= dcost[r] / x[r, labels[r]]``: the gradient of :func:`pick_nll`
    added into a C-contiguous ``dx``, a thread a row (one launch where the index, gather,
    division and scatter are five). False (nothing done) for another layout of ``dx``."""
    if dx.ndim != 2 or not dx.flags.c_contiguous or dx.shape != x.shape:
        return False
    kernel = _elementwise(("pick_nll_grad",), lambda: (
        "raw T x, I label, T dcost, int64 width", "raw T dx",
        "const ptrdiff_t at = i * width + label; dx[at] -= dcost / x[at];"))
    kernel(_contiguous(x), labels, dcost, x.shape[1], dx)
    return True


def softmax_ce_grad(p: Any, labels: Any, dcost: Any | None, dz: Any) -> None:
    """``dz[r, j] = dcost[r] * (p[r, j] - [j == labels[r]])``: the gradient of the
    classification cost past a softmax, for the softmax's pre-activations (``dcost`` None:
    1 for every row, not read)."""
    if dcost is None:
        kernel = _elementwise(("softmax_ce_grad_unit",), lambda: (
            "T p, raw I label, int64 width", "T dz",
            "ptrdiff_t r = i / width;"
            "dz = p - ((i - r * width) == label[r] ? (T)1 : (T)0);"))
        kernel(p, _contiguous(labels), p.shape[1], dz)
        return
    kernel = _elementwise(("softmax_ce_grad",), lambda: (
        "T p, raw I label, raw T dcost, int64 width", "T dz",
        "ptrdiff_t r = i / width;"
        "dz = dcost[r] * (p - ((i - r * width) == label[r] ? (T)1 : (T)0));"))
    kernel(p, _contiguous(labels), _contiguous(dcost), p.shape[1], dz)


_LABEL_C_TYPE = {**_C_TYPE, np.dtype(np.int64): "long long", np.dtype(np.int32): "int"}
MISSES_THREADS = 256  # one block; its sums are added in a fixed tree order


def classification_misses(x: Any, labels: Any, weights: Any | None, threshold: float,
                          out: Any) -> bool:
    """``out = [sum of the weights of the rows predicted wrong, sum of the weights]`` (float64,
    weights 1 without ``weights``) in one launch, where an arg-max, a comparison and a sum
    (and a product and another sum with weights) are three to five. A row of ``x`` (n, C) is
    wrong when its first largest value (NumPy's ``argmax``: the first NaN if any) is not
    at ``labels[r]``; with one column, when ``x[r] > threshold`` differs from
    ``labels[r] > 0.5``. One block: each thread sums its rows in order, then the block adds
    the threads' sums in a fixed tree, so the result does not depend on the run. False
    (nothing done) for labels of a type it does not read."""
    label_type = _LABEL_C_TYPE.get(np.dtype(labels.dtype))
    if label_type is None:
        return False
    weighted = weights is not None
    threads = MISSES_THREADS

    def make(name: str) -> str:
        weight = "const double* __restrict__ w, " if weighted else ""
        return f"""typedef {label_type} L;
extern "C" __global__ void {name}(const T* __restrict__ x, const L* __restrict__ label,
                                  {weight}long long rows, long long width, T threshold,
                                  double* out) {{
  __shared__ double missed[{threads}], total[{threads}];
  const int t = threadIdx.x;
  double m = 0, s = 0;
  for (long long r = t; r < rows; r += {threads}) {{
    bool wrong;
    if (width == 1) {{
      wrong = (x[r] > threshold) != ((double)label[r] > 0.5);
    }} else {{
      const long long at = r * width;
      T best = x[at];
      long long arg = 0;
      if (best == best) {{
        for (long long j = 1; j < width; ++j) {{
          const T v = x[at + j];
          if (v != v) {{ arg = j; break; }}
          if (v > best) {{ best = v; arg = j; }}
        }}
      }}
      wrong = arg != (long long)label[r];
    }}
    const double weight = {"w[r]" if weighted else "1.0"};
    if (wrong) m += weight;
    s += weight;
  }}
  missed[t] = m; total[t] = s;
{_block_tree_sum(threads, "missed", "total")}
  if (t == 0) {{ out[0] = missed[0]; out[1] = total[0]; }}
}}
"""

    kernel = _raw(("classification_misses", label_type.replace(" ", "_"), weighted), x.dtype,
                  make)
    args = (_contiguous(x), _contiguous(labels)) + ((_contiguous(weights),) if weighted else ())
    kernel((1,), (threads,), (*args, np.int64(x.shape[0]), np.int64(x.shape[1]),
                              _scalar(x, threshold), out))
    return True


READ_BACK_THREADS = 256  # one block; each sum is added in a fixed tree order


def sums_and_parts(totals: Sequence[Any], parts: Sequence[Any], out: Any | None = None
                   ) -> Any | None:
    """``[sum(totals[0]), ..., sum(totals[-1]), *parts[0], ..., *parts[-1]]`` as one float64
    device array, in one launch: a batch's costs summed in float64 and the evaluators' sums
    laid out after them, ready for the batch's one copy back (a sum a cost and a
    concatenation were a launch each). ``totals`` are arrays of one float dtype, ``parts``
    float64 arrays (any shapes); ``out``, if given, is that float64 array (a caller that reads
    it back before the next call keeps one: no allocation a batch). One block: each thread
    adds its elements in order, then the block adds the threads' sums in a fixed tree, so the
    result does not depend on the run. None (nothing done) where the dtypes are other than
    that or there are no totals."""
    if not totals or any(t.dtype != totals[0].dtype for t in totals) \
            or np.dtype(totals[0].dtype) not in _C_TYPE \
            or any(q.dtype != np.float64 for q in parts):
        return None
    import cupy

    threads = READ_BACK_THREADS
    n_totals, n_parts = len(totals), len(parts)

    def make(name: str) -> str:
        params = [f"const T* __restrict__ t{k}, long long n{k}" for k in range(n_totals)]
        params += [f"const double* __restrict__ p{k}, long long m{k}" for k in range(n_parts)]
        sums = "".join(f"""
  a = 0;
  for (long long i = t; i < n{k}; i += {threads}) a += (double)t{k}[i];
  s[t] = a;
{_block_tree_sum(threads, "s")}
  if (t == 0) out[{k}] = s[0];
  __syncthreads();""" for k in range(n_totals))
        copies = "".join(f"""
  for (long long i = t; i < m{k}; i += {threads}) out[at + i] = p{k}[i];
  at += m{k};""" for k in range(n_parts))
        return f"""extern "C" __global__ void {name}({", ".join(params)}, double* out) {{
  __shared__ double s[{threads}];
  const int t = threadIdx.x;
  double a;{sums}
  long long at = {n_totals};{copies}
}}
"""

    kernel = _raw(("sums_and_parts", n_totals, n_parts), totals[0].dtype, make)
    args: list = []
    for a in totals:
        args += [_contiguous(a), np.int64(a.size)]
    for a in parts:
        args += [_contiguous(a), np.int64(a.size)]
    size = n_totals + sum(a.size for a in parts)
    if out is None:
        out = cupy.empty(size, dtype=np.float64)
    elif out.shape != (size,) or out.dtype != np.float64 or not out.flags.c_contiguous:
        raise ValueError(f"sums_and_parts: out must be a contiguous float64 array of shape "
                         f"({size},), got {out.dtype} {out.shape}")
    kernel((1,), (threads,), (*args, out))
    return out


def class_counts(pred: Any, labels: Any, weights: Any, out: Any) -> None:
    """``out[c] = (TP, TN, FP, FN)`` of class ``c`` (``out`` is ``(classes, 4)`` float64):
    sums of the rows' float64 ``weights`` by predicted id ``pred[r]`` against true id
    ``labels[r]``. A thread a class adds the rows in order: no atomics, the same order as
    NumPy's ``bincount``, and no read-back (CuPy's ``bincount`` reads the ids' maximum
    first)."""
    kernel = _elementwise(("class_counts",), lambda: (
        "raw I pred, raw J label, raw float64 w, int64 n", "raw float64 stats",
        "double tp = 0, fp = 0, fn = 0, total = 0;"
        "for (ptrdiff_t r = 0; r < n; ++r) {"
        "  const double wr = w[r]; total += wr;"
        "  if (pred[r] == i) { if (label[r] == i) tp += wr; else fp += wr; }"
        "  else if (label[r] == i) fn += wr;"
        "}"
        "stats[4 * i] = tp; stats[4 * i + 1] = total - tp - fp - fn;"
        "stats[4 * i + 2] = fp; stats[4 * i + 3] = fn;"))
    kernel(_contiguous(pred), _contiguous(labels), _contiguous(weights), pred.shape[0], out,
           size=out.shape[0])


def momentum_step(value: Any, grad: Any, mom: Any | None, rate: float, momentum: float,
                  decay: float) -> None:
    """``m = momentum m - rate (g + decay w);  w += m`` (``w -= rate (g + decay w)`` without a
    momentum buffer), as :func:`sculler.math.optim.momentum_step`."""
    if mom is None:
        kernel = _elementwise(("sgd",), lambda: (
            "T g, T rate, T decay", "T w", "w -= rate * (g + decay * w);"))
        kernel(grad, _scalar(value, rate), _scalar(value, decay), value)
        return
    kernel = _elementwise(("momentum",), lambda: (
        "T g, T rate, T mu, T decay", "T w, T m",
        "m = mu * m - rate * (g + decay * w); w += m;"))
    kernel(grad, _scalar(value, rate), _scalar(value, momentum), _scalar(value, decay), value,
           mom)


def heavy_ball(value: Any, grad: Any, velocity: Any, lr: float, momentum: float) -> None:
    """``v = momentum v + g;  w -= lr v`` (Paddle 2.x momentum)."""
    kernel = _elementwise(("heavy_ball",), lambda: (
        "T g, T lr, T mu", "T w, T v", "v = mu * v + g; w -= lr * v;"))
    kernel(grad, _scalar(value, lr), _scalar(value, momentum), value, velocity)


def adam(value: Any, grad: Any, m: Any, v: Any, alpha: float, beta1: float, beta2: float,
         epsilon: float) -> None:
    """``m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2;  w -= alpha m / (sqrt(v) + eps)`` (the
    bias corrections are in ``alpha`` and ``epsilon``)."""
    kernel = _elementwise(("adam",), lambda: (
        "T g, T b1, T c1, T b2, T c2, T alpha, T eps", "T w, T m, T v",
        "m = b1 * m + c1 * g; v = b2 * v + c2 * (g * g); w -= alpha * (m / (sqrt(v) + eps));"))
    s = value.dtype.type
    kernel(grad, s(beta1), s(1.0 - beta1), s(beta2), s(1.0 - beta2), s(alpha), s(epsilon), value,
           m, v)


def _act(name: str, x: str) -> str:
    return _ACTIVATION[name].format(x=x)


def _grad(name: str, y: str) -> str:
    return _DERIVATIVE[name].format(y=y)


def lstm_forward_step(gates: Any, c: Any, state: Any, h: Any, peepholes: Any | None,
                      acts: tuple, row0: int, prev0: int, n: int, *,
                      recurrent: Any | None = None) -> None:
    """One LSTM step (:func:`sculler.math.rnn.lstm_step_forward`) in one kernel, on the
    whole time-major arrays, for layers wider than
    :func:`sculler.math.cuda_sequences.lstm_forward_sequences` takes:
    rows ``row0 .. row0+n`` of ``gates`` (4, R, H; pre-activations in, activated gates out),
    ``c``, ``state`` and ``h`` (R, H), the previous step's rows at ``prev0 ..``. The
    recurrent term ``h_prev W`` comes as ``recurrent`` (n, 4H, from a GEMM), None at the
    first step. All arrays C-contiguous; nothing is sliced per step."""
    names = tuple(a.name for a in acts)
    mode = "rec" if recurrent is not None else "first"
    has_peep = peepholes is not None
    act, gate, state_act = names

    def make() -> tuple[str, str, str]:
        ins = (["raw T rec"] if mode == "rec" else []) + [
            "int64 H", "int64 R", "int64 row0", "int64 prev0"] + (
            ["raw T peep"] if has_peep else [])
        body = ["ptrdiff_t r = i / H, j = i - r * H, s = R * H, o = (row0 + r) * H + j;",
                "T ga = g[o], gi = g[s + o], gf = g[2 * s + o], go = g[3 * s + o];"]
        if mode == "rec":
            body += ["ptrdiff_t q = r * 4 * H + j;",
                     "ga += rec[q]; gi += rec[q + H]; gf += rec[q + 2 * H];"
                     " go += rec[q + 3 * H];",
                     "T cp = c[(prev0 + r) * H + j];"]
            if has_peep:
                body.append("gi += cp * peep[j]; gf += cp * peep[H + j];")
        body += [f"T a = {_act(act, 'ga')}, ig = {_act(gate, 'gi')}, fg = {_act(gate, 'gf')};",
                 "T cc = a * ig" + (";" if mode == "first" else " + cp * fg;")]
        if has_peep:
            body.append("go += cc * peep[2 * H + j];")
        body += [f"T og = {_act(gate, 'go')};",
                 f"T st = {_act(state_act, 'cc')};",
                 "g[o] = a; g[s + o] = ig; g[2 * s + o] = fg; g[3 * s + o] = og;",
                 "c[o] = cc; state[o] = st; h[o] = og * st;"]
        return ", ".join(ins), "raw T g, raw T c, raw T state, raw T h", "\n".join(body)

    kernel = _elementwise(("lstm_fwd", *names, mode, has_peep), make)
    hs = h.shape[1]
    args = [recurrent] if mode == "rec" else []
    args += [hs, h.shape[0], row0, prev0]
    if has_peep:
        args.append(peepholes)
    kernel(*args, gates, c, state, h, size=n * hs)


def lstm_backward_step(gates: Any, c: Any, state: Any, dh: Any, dc: Any, dgates: Any,
                       peepholes: Any | None, drow: Any | None, acts: tuple, row0: int,
                       prev0: int, n: int, *, dh_rec: Any, n_rec: int = 0) -> None:
    """Backward of :func:`lstm_forward_step` (:func:`sculler.math.rnn.lstm_step_backward`) in
    one kernel on the whole arrays. First adds the later step's recurrent gradient
    ``dh_rec`` (from the caller's GEMM ``drow W^T``) to the first ``n_rec`` rows of this
    step's ``dh``. Writes ``dgates`` (4, R, H) and ``dc``, adds into the previous step's
    ``dc`` (rows ``prev0 ..``), and, with ``drow`` (n, 4H; None at the first step), this
    step's ``dgates`` rows in row layout for the next one."""
    names = tuple(a.name for a in acts)
    has_prev, has_peep = drow is not None, peepholes is not None
    act, gate, state_act = names

    def make() -> tuple[str, str, str]:
        ins = ["raw T g", "raw T state", "raw T c", "raw T dhrec", "int64 nrec", "int64 H",
               "int64 R", "int64 row0", "int64 prev0", *(["raw T peep"] if has_peep else [])]
        outs = ["raw T dh", "raw T dc", "raw T dg"] + (["raw T drow"] if has_prev else [])
        body = [
            "ptrdiff_t r = i / H, j = i - r * H, s = R * H, o = (row0 + r) * H + j;",
            "T a = g[o], ig = g[s + o], fg = g[2 * s + o], og = g[3 * s + o];",
            "T dht = dh[o];",
            "if (r < nrec) dht += dhrec[r * H + j];",
            "dh[o] = dht;",
            "T st = state[o];",
            f"T dgo = dht * st * {_grad(gate, 'og')};",
            f"T dcc = dc[o] + dht * og * {_grad(state_act, 'st')};",
        ]
        if has_peep:
            body.append("dcc += dgo * peep[2 * H + j];")
        body += ["dc[o] = dcc;",
                 f"T dga = dcc * ig * {_grad(act, 'a')};",
                 f"T dgi = dcc * a * {_grad(gate, 'ig')};"]
        if has_prev:
            body += ["ptrdiff_t p = (prev0 + r) * H + j;",
                     f"T dgf = dcc * c[p] * {_grad(gate, 'fg')};",
                     "dc[p] += dcc * fg" + (" + dgi * peep[j] + dgf * peep[H + j];"
                                            if has_peep else ";"),
                     "ptrdiff_t q = r * 4 * H + j;",
                     "drow[q] = dga; drow[q + H] = dgi; drow[q + 2 * H] = dgf;"
                     " drow[q + 3 * H] = dgo;"]
        else:
            body.append("T dgf = 0;")
        body.append("dg[o] = dga; dg[s + o] = dgi; dg[2 * s + o] = dgf; dg[3 * s + o] = dgo;")
        return ", ".join(ins), ", ".join(outs), "\n".join(body)

    kernel = _elementwise(("lstm_bwd", *names, has_prev, has_peep), make)
    hs = dh.shape[1]
    args = [gates, state, c, dh_rec, n_rec, hs, dh.shape[0], row0, prev0]
    if has_peep:
        args.append(peepholes)
    args += [dh, dc, dgates] + ([drow] if has_prev else [])
    kernel(*args, size=n * hs)


def _gate_weight_strides(w_gate: Any) -> tuple[int, int]:
    """(gate stride, row stride) of ``U_k[m, j]`` inside ``w_gate`` read in logical C order:
    an (H, 2H) ``[U_z | U_r]`` or its (2, H, H) blocks."""
    hs = w_gate.shape[-1] if w_gate.ndim == 3 else w_gate.shape[1] // 2
    return (hs * hs, hs) if w_gate.ndim == 3 else (hs, 2 * hs)


GRU_STEP_BLOCK_MAX_HIDDEN = 256  # a block a row, a thread a unit: one launch a step each way


def _gate_strides(gates: Any) -> tuple[int, int] | None:
    """(gate, row) strides in elements of a (3, n, H) gate view whose units are adjacent, or
    None when they are not."""
    item = gates.itemsize
    if gates.strides[2] != item:
        return None
    return gates.strides[0] // item, gates.strides[1] // item


def _gru_step_in_one(gates: Any, arrays: tuple, w_gate: Any, w_cand: Any) -> bool:
    """Whether a later GRU step can run as one RawKernel a way: at most
    ``GRU_STEP_BLOCK_MAX_HIDDEN`` units, adjacent units in the gates, C-contiguous (n, H)
    arrays and weights."""
    return (gates.shape[2] <= GRU_STEP_BLOCK_MAX_HIDDEN and _gate_strides(gates) is not None
            and all(a.flags.c_contiguous for a in (*arrays, w_gate, w_cand)))


def _gru_step_forward_in_one(gates: Any, h_prev: Any, w_gate: Any, w_cand: Any,
                             reset_h: Any, h: Any, acts: tuple,
                             source: tuple | None = None) -> None:
    """:func:`gru_step_forward` after the first step in one launch: a block a row keeps
    ``h_prev`` and then ``r h_prev`` in shared memory, so both recurrent products happen in
    one kernel (the sums in the order of the two-kernel version). With ``source`` ``(x,
    bias or None)`` (``x`` a (3, n, H) gate view with adjacent units, ``bias`` (3H,)
    contiguous) the kernel starts from ``x + bias`` instead of what ``gates`` holds."""
    act, gate = (a.name for a in acts)
    n, hs = h.shape
    gk, gr = _gate_strides(gates)
    wk, wm = _gate_weight_strides(w_gate)
    x, bias = source if source is not None else (None, None)
    xk, xr = _gate_strides(x) if x is not None else (0, 0)
    plus = (lambda k: f" + b[{k} * H + j]") if bias is not None else (lambda k: "")
    if x is None:
        start_zr, start_c = "T gz = g[q], gg = g[gk + q];", "T gc = g[2 * gk + q];"
    else:
        start_zr = f"T gz = x[xq]{plus(0)}, gg = x[xk + xq]{plus(1)};"
        start_c = f"T gc = x[2 * xk + xq]{plus(2)};"

    def make(name: str) -> str:
        return f"""
extern "C" __global__ void {name}(T* g, const T* hp, const T* __restrict__ wg,
                                  const T* __restrict__ wc, T* rh, T* h,
                                  const T* x, const T* b,
                                  long long H, long long gk, long long gr, long long wk,
                                  long long wm, long long xk, long long xr) {{
  __shared__ T h_prev[{GRU_STEP_BLOCK_MAX_HIDDEN}];
  __shared__ T rh_prev[{GRU_STEP_BLOCK_MAX_HIDDEN}];
  const long long r = blockIdx.x, j = threadIdx.x, o = r * H + j, q = r * gr + j;
  const long long xq = r * xr + j;
  const T v = hp[o];
  h_prev[j] = v;
  __syncthreads();
  {start_zr}
  #pragma unroll 16
  for (long long m = 0; m < H; ++m) {{
    const T u = h_prev[m];
    gz += u * wg[m * wm + j]; gg += u * wg[wk + m * wm + j];
  }}
  const T z = {_act(gate, "gz")}, rr = {_act(gate, "gg")};
  g[q] = z; g[gk + q] = rr;
  const T rhj = rr * v;
  rh[o] = rhj; rh_prev[j] = rhj;
  __syncthreads();
  {start_c}
  #pragma unroll 32
  for (long long m = 0; m < H; ++m) gc += rh_prev[m] * wc[m * H + j];
  const T cc = {_act(act, "gc")};
  g[2 * gk + q] = cc; h[o] = (cc - v) * z + v;
}}
"""

    if n:
        i64 = np.int64
        key = ("gru_step_fwd", act, gate, x is not None, bias is not None)
        _raw(key, h.dtype, make)(
            (n,), (hs,), (gates, h_prev, w_gate, w_cand, reset_h, h,
                          h if x is None else x, h if bias is None else bias, i64(hs), i64(gk),
                          i64(gr), i64(wk), i64(wm), i64(xk), i64(xr)))


def _gru_step_backward_in_one(gates: Any, h_prev: Any, w_gate: Any, w_cand: Any, dh: Any,
                              dgates: Any, dh_prev: Any, acts: tuple,
                              add_into: Any | None = None) -> None:
    """:func:`gru_step_backward` after the first step in one launch: a block a row shares the
    step's ``dg_c``, then ``dg_z`` and ``dg_r``, through shared memory for the products with
    the transposed weights, and adds into ``dh_prev`` in the order of the three-kernel
    version. ``add_into`` (a (3, n, H) gate view with adjacent units, or None) also gets
    ``dgates`` added (the step input's gradient)."""
    act, gate = (a.name for a in acts)
    n, hs = dh.shape
    gk, gr = _gate_strides(gates)
    dk, dr = _gate_strides(dgates)
    wk, wm = _gate_weight_strides(w_gate)
    adding = add_into is not None
    ak, ar = _gate_strides(add_into) if adding else (0, 0)
    add_zc = "dx[ap] += dgz; dx[2 * ak + ap] += dgc;" if adding else ""
    add_r = "dx[ak + ap] += dgr;" if adding else ""

    def make(name: str) -> str:
        return f"""
extern "C" __global__ void {name}(const T* g, const T* hp, const T* __restrict__ wg,
                                  const T* __restrict__ wc,
                                  const T* dh, T* dg, T* dhp, T* dx, long long H, long long gk,
                                  long long gr, long long dk, long long dr, long long wk,
                                  long long wm, long long ak, long long ar) {{
  __shared__ T d_cand[{GRU_STEP_BLOCK_MAX_HIDDEN}];
  __shared__ T d_zr[{2 * GRU_STEP_BLOCK_MAX_HIDDEN}];
  const long long r = blockIdx.x, j = threadIdx.x, o = r * H + j;
  const long long q = r * gr + j, p = r * dr + j, ap = r * ar + j;
  const T z = g[q], cc = g[2 * gk + q], d = dh[o], v = hp[o];
  const T dgc = d * z * {_grad(act, "cc")};
  const T dgz = (cc - v) * d * {_grad(gate, "z")};
  dg[2 * dk + p] = dgc; dg[p] = dgz;
  {add_zc}
  T acc_h = dhp[o];
  acc_h += d - d * z;
  d_cand[j] = dgc;
  __syncthreads();
  T t = 0;
  #pragma unroll 32
  for (long long k = 0; k < H; ++k) t += d_cand[k] * wc[j * H + k];
  const T rr = g[gk + q];
  const T dgr = t * v * {_grad(gate, "rr")};
  dg[dk + p] = dgr;
  {add_r}
  acc_h += t * rr;
  d_zr[j] = dgz; d_zr[H + j] = dgr;
  __syncthreads();
  T acc = 0;
  #pragma unroll 16
  for (long long k = 0; k < H; ++k)
    acc += d_zr[k] * wg[j * wm + k] + d_zr[H + k] * wg[wk + j * wm + k];
  dhp[o] = acc_h + acc;
}}
"""

    if n:
        i64 = np.int64
        _raw(("gru_step_bwd", act, gate, adding), dh.dtype, make)(
            (n,), (hs,), (gates, h_prev, w_gate, w_cand, dh, dgates, dh_prev,
                          add_into if adding else dh_prev, i64(hs), i64(gk), i64(gr), i64(dk),
                          i64(dr), i64(wk), i64(wm), i64(ak), i64(ar)))


def gru_step_forward(gates: Any, h_prev: Any | None, w_gate: Any, w_cand: Any, reset_h: Any,
                     h: Any, acts: tuple, source: tuple | None = None) -> None:
    """One GRU step (:func:`sculler.math.rnn.gru_step_forward`), the recurrent products
    computed in the kernels: one RawKernel (a block a row) where
    :func:`_gru_step_in_one` allows, else two ElementwiseKernels, ``[z|r]`` (and
    ``r h_prev``), then ``c~`` and ``h``; one kernel at the first step. ``gates``: the
    (3, n, H) gate view. ``source`` ``(x, bias or None)``: the gates' pre-activations are
    ``x + bias`` (``x`` a (3, n, H) gate view, ``bias`` (3H,)), added in the one RawKernel
    where it runs, else written into ``gates`` first."""
    in_one = h_prev is not None and _gru_step_in_one(gates, (h_prev, reset_h, h), w_gate,
                                                     w_cand)
    if source is not None and not (in_one and _gate_strides(source[0]) is not None
                                   and (source[1] is None or source[1].flags.c_contiguous)):
        x, bias = source
        if bias is None:
            gates[...] = x
        else:
            import cupy

            cupy.add(x, bias.reshape(3, 1, -1), out=gates)
        source = None
    names = tuple(a.name for a in acts)
    act, gate = names
    first = h_prev is None
    n, hs = h.shape
    wk, wm = _gate_weight_strides(w_gate)

    def make_zr() -> tuple[str, str, str]:
        body = ["ptrdiff_t r = i / H, j = i - r * H, s = n * H, o = r * H + j;",
                "T gz = g[o], gr = g[s + o];"]
        if not first:
            body += ["for (ptrdiff_t m = 0; m < H; ++m) {",
                     "  T v = hp[r * H + m];",
                     "  gz += v * wg[m * wm + j]; gr += v * wg[wk + m * wm + j];",
                     "}"]
        body += [f"T z = {_act(gate, 'gz')}, rr = {_act(gate, 'gr')};",
                 "g[o] = z; g[s + o] = rr;"]
        if first:
            body += [f"T cc = {_act(act, 'g[2 * s + o]')};", "g[2 * s + o] = cc; h[o] = z * cc;"]
        else:
            body.append("rh[o] = rr * hp[o];")
        ins = "int64 H, int64 n" + ("" if first else ", raw T hp, raw T wg, int64 wk, int64 wm")
        outs = "raw T g" + (", raw T h" if first else ", raw T rh")
        return ins, outs, "\n".join(body)

    if in_one:
        _gru_step_forward_in_one(gates, h_prev, w_gate, w_cand, reset_h, h, acts, source)
        return
    kernel = _elementwise(("gru_fwd_zr", *names, first), make_zr)
    if first:
        kernel(hs, n, gates, h, size=n * hs)
        return
    kernel(hs, n, h_prev, w_gate, wk, wm, gates, reset_h, size=n * hs)
    cand = _elementwise(("gru_fwd_c", act), lambda: (
        "int64 H, int64 n, raw T hp, raw T rh, raw T wc", "raw T g, raw T h",
        "ptrdiff_t r = i / H, j = i - r * H, s = n * H, o = r * H + j;\n"
        "T gc = g[2 * s + o];\n"
        "for (ptrdiff_t m = 0; m < H; ++m) gc += rh[r * H + m] * wc[m * H + j];\n"
        f"T cc = {_act(act, 'gc')};\n"
        "g[2 * s + o] = cc; T v = hp[o]; h[o] = (cc - v) * g[o] + v;"))
    cand(hs, n, h_prev, reset_h, w_cand, gates, h, size=n * hs)


def gru_step_backward(gates: Any, h_prev: Any | None, w_gate: Any, w_cand: Any, dh: Any,
                      dgates: Any, dh_prev: Any | None, acts: tuple,
                      add_into: Any | None = None) -> None:
    """Backward of :func:`gru_step_forward` (:func:`sculler.math.rnn.gru_step_backward`): one
    RawKernel where :func:`_gru_step_in_one` allows, else three kernels (one at the first
    step): ``dg_c``, ``dg_z`` and ``dh (1 - z)``; then ``dg_r`` and ``r (dg_c W_c^T)``; then
    ``[dg_z|dg_r] [U_z|U_r]^T``, each adding into ``dh_prev``. ``gates``/``dgates``:
    (3, n, H) gate views. ``add_into`` (a gate view like ``dgates``, or None) gets ``dgates``
    added: inside the one RawKernel where it runs, else after."""
    in_one = (h_prev is not None and _gate_strides(dgates) is not None
              and _gru_step_in_one(gates, (h_prev, dh, dh_prev), w_gate, w_cand))
    if in_one and (add_into is None or _gate_strides(add_into) is not None):
        _gru_step_backward_in_one(gates, h_prev, w_gate, w_cand, dh, dgates, dh_prev, acts,
                                  add_into)
        return
    _gru_step_backward_kernels(gates, h_prev, w_gate, w_cand, dh, dgates, dh_prev, acts)
    if add_into is not None:
        add_into += dgates


def _gru_step_backward_kernels(gates: Any, h_prev: Any | None, w_gate: Any, w_cand: Any,
                               dh: Any, dgates: Any, dh_prev: Any | None, acts: tuple) -> None:
    """:func:`gru_step_backward` as ElementwiseKernels: three, one at the first step."""
    names = tuple(a.name for a in acts)
    act, gate = names
    first = h_prev is None
    n, hs = dh.shape
    body = ["ptrdiff_t r = i / H, j = i - r * H, s = n * H, o = r * H + j;",
            "T z = g[o], cc = g[2 * s + o], d = dh[o];",
            f"dg[2 * s + o] = d * z * {_grad(act, 'cc')};"]
    if first:
        body += [f"dg[o] = d * cc * {_grad(gate, 'z')};", "dg[s + o] = 0;"]
    else:
        body += ["T v = hp[o];",
                 f"dg[o] = (cc - v) * d * {_grad(gate, 'z')};",
                 "dhp[o] += d - d * z;"]
    ins = "int64 H, int64 n, raw T g, raw T dh" + ("" if first else ", raw T hp")
    outs = "raw T dg" + ("" if first else ", raw T dhp")
    kernel = _elementwise(("gru_bwd_zc", *names, first), lambda: (ins, outs, "\n".join(body)))
    if first:
        kernel(hs, n, gates, dh, dgates, size=n * hs)
        return
    kernel(hs, n, gates, dh, h_prev, dgates, dh_prev, size=n * hs)
    reset = _elementwise(("gru_bwd_r", gate), lambda: (
        "int64 H, int64 n, raw T g, raw T hp, raw T wc", "raw T dg, raw T dhp",
        "ptrdiff_t r = i / H, j = i - r * H, s = n * H, o = r * H + j;\n"
        "T t = 0;\n"
        "for (ptrdiff_t k = 0; k < H; ++k) t += dg[2 * s + r * H + k] * wc[j * H + k];\n"
        f"T rr = g[s + o]; dg[s + o] = t * hp[o] * {_grad(gate, 'rr')}; dhp[o] += t * rr;"))
    reset(hs, n, gates, h_prev, w_cand, dgates, dh_prev, size=n * hs)
    wk, wm = _gate_weight_strides(w_gate)
    back = _elementwise(("gru_bwd_h",), lambda: (
        "int64 H, int64 n, raw T dg, raw T wg, int64 wk, int64 wm", "raw T dhp",
        "ptrdiff_t r = i / H, j = i - r * H, s = n * H, o = r * H + j;\n"
        "T acc = 0;\n"
        "for (ptrdiff_t k = 0; k < H; ++k)"
        " acc += dg[r * H + k] * wg[j * wm + k] + dg[s + r * H + k] * wg[wk + j * wm + k];\n"
        "dhp[o] += acc;"))
    back(hs, n, dgates, w_gate, wk, wm, dh_prev, size=n * hs)


# the parameters the unfold and fold kernels share, and their values
_CONV_GEOMETRY = ("int64 N, int64 C, int64 H, int64 W, int64 kh, int64 kw, int64 sy, int64 sx,"
                  " int64 py, int64 px, int64 dy, int64 dx, int64 oh, int64 ow")


def _conv_geometry(x_shape: tuple, kernel: tuple, stride: tuple, pad: tuple, dil: tuple,
                   out_hw: tuple) -> tuple:
    return (*x_shape, *kernel, *stride, *pad, *dil, *out_hw)


def unfold(x: Any, kernel: tuple, stride: tuple, pad: tuple, dil: tuple, out_hw: tuple,
           batch_last: bool, out: Any) -> None:
    """im2col of ``(N, C, H, W)`` images into the C-contiguous ``out`` (C*kh*kw, N*oh*ow), one
    thread an element, zeros for taps in the padding; columns ordered ``(oy, ox, n)`` with
    ``batch_last``, else ``(n, oy, ox)``. An ``out`` of one row more gets ones there (the
    bias row of :func:`sculler.math.conv.conv2d_unfold`). One launch where padding, a
    strided view and a transposing copy would be three, and the ones a fourth."""
    kernel_ = _elementwise(("unfold", batch_last), lambda: (
        "raw T img, " + _CONV_GEOMETRY, "T cols",
        "ptrdiff_t ncols = N * oh * ow, col = i % ncols, row = i / ncols;"
        "ptrdiff_t b = row % kw, t = row / kw, a = t % kh, c = t / kh, n, oy, ox;"
        + ("n = col % N; t = col / N; ox = t % ow; oy = t / ow;" if batch_last else
           "ox = col % ow; t = col / ow; oy = t % oh; n = t / oh;") +
        "ptrdiff_t y = oy * sy - py + a * dy, x = ox * sx - px + b * dx;"
        "cols = c >= C ? (T)1 : (y >= 0 && y < H && x >= 0 && x < W)"
        " ? img[((n * C + c) * H + y) * W + x] : (T)0;"))
    kernel_(_contiguous(x), *_conv_geometry(x.shape, kernel, stride, pad, dil, out_hw), out)


def col2im(cols: Any, x_shape: tuple, kernel: tuple, stride: tuple, pad: tuple, dil: tuple,
           out_hw: tuple, batch_last: bool, out: Any | None = None, beta: float = 0.0) -> Any:
    """Fold ``(C*kh*kw, columns)`` patches back into an ``(N, C, H, W)`` image, each pixel
    gathering the taps that land on it (one thread a pixel: no atomics, deterministic). The
    columns are ordered ``(oy, ox, n)`` with ``batch_last``, else ``(n, oy, ox)``. Into a new
    array, or ``out = fold + beta * out`` for a C-contiguous ``out`` (an input gradient added
    where it is kept: no temporary, no second launch)."""
    import cupy

    accumulate = out is not None and beta != 0.0
    kernel_ = _elementwise(("col2im", batch_last, accumulate), lambda: (
        "raw T cols, " + _CONV_GEOMETRY + (", T beta" if accumulate else ""), "T img",
        "ptrdiff_t x = i % W, t = i / W, y = t % H; t /= H;"
        "ptrdiff_t c = t % C, n = t / C, ncols = N * oh * ow; T acc = 0;"
        "for (ptrdiff_t a = 0; a < kh; ++a) {"
        "  ptrdiff_t yy = y + py - a * dy; if (yy < 0 || yy % sy) continue;"
        "  ptrdiff_t oy = yy / sy; if (oy >= oh) continue;"
        "  for (ptrdiff_t b = 0; b < kw; ++b) {"
        "    ptrdiff_t xx = x + px - b * dx; if (xx < 0 || xx % sx) continue;"
        "    ptrdiff_t ox = xx / sx; if (ox >= ow) continue;"
        + ("    ptrdiff_t col = (oy * ow + ox) * N + n;" if batch_last else
           "    ptrdiff_t col = (n * oh + oy) * ow + ox;") +
        "    acc += cols[((c * kh + a) * kw + b) * ncols + col];"
        "  }"
        "}"
        + ("img = acc + beta * img;" if accumulate else "img = acc;")))
    img = cupy.empty(x_shape, dtype=cols.dtype) if out is None else out
    args = [_contiguous(cols), *_conv_geometry(x_shape, kernel, stride, pad, dil, out_hw)]
    if accumulate:
        args.append(_scalar(img, beta))
    kernel_(*args, img)
    return img


def max_pool2d_forward(x: Any, kernel: tuple, stride: tuple, pad: tuple, y: Any,
                       argmax: Any) -> None:
    """Max pooling of a float ``x`` (N, C, H, W) into ``y`` and the winning taps ``argmax``
    (N, C, oh, ow), one thread a window, as :func:`sculler.math.pool.max_pool2d_forward`: the
    first strictly greatest tap wins; a NaN makes ``y`` NaN and keeps the winner before it;
    a window with no winner gets the lowest float and ``-1``."""
    kernel_ = _elementwise(("max_pool_fwd",), lambda: (
        "raw T x, int64 H, int64 W, int64 oh, int64 ow, int64 ky, int64 kx, int64 sy,"
        " int64 sx, int64 py, int64 px, T lowest, T neg_inf, T not_a_number", "T y, A arg",
        "ptrdiff_t ox = i % ow, t = i / ow, oy = t % oh, nc = t / oh;"
        "T best = neg_inf; int win = -1; bool seen_nan = false;"
        "for (ptrdiff_t a = 0; a < ky; ++a) {"
        "  ptrdiff_t yy = oy * sy - py + a; if (yy < 0 || yy >= H) continue;"
        "  for (ptrdiff_t b = 0; b < kx; ++b) {"
        "    ptrdiff_t xx = ox * sx - px + b; if (xx < 0 || xx >= W) continue;"
        "    T v = x[(nc * H + yy) * W + xx];"
        "    if (seen_nan) continue;"
        "    if (v != v) { seen_nan = true; continue; }"
        "    if (v > best) { best = v; win = a * kx + b; }"
        "  }"
        "}"
        "y = win < 0 ? lowest : (seen_nan ? not_a_number : best); arg = win;"))
    n, c, h, w = x.shape
    oh, ow = y.shape[2:]
    kernel_(_contiguous(x), h, w, oh, ow, kernel[0], kernel[1], stride[0], stride[1], pad[0],
            pad[1], np.finfo(x.dtype).min, x.dtype.type(float("-inf")),
            x.dtype.type(float("nan")), y, argmax)


def max_pool2d_backward(dy: Any, argmax: Any, x_shape: tuple, kernel: tuple, stride: tuple,
                        pad: tuple, out: Any, beta: float) -> None:
    """``out = dx + beta * out`` (beta 0 or 1; with 0 ``out`` is not read) for max pooling:
    each input pixel gathers ``dy`` of the windows whose winner it is (one thread a pixel: no
    atomics)."""
    kernel_ = _elementwise(("max_pool_bwd",), lambda: (
        "raw T dy, raw A arg, int64 H, int64 W, int64 oh, int64 ow, int64 ky, int64 kx,"
        " int64 sy, int64 sx, int64 py, int64 px, T beta", "T dx",
        "ptrdiff_t x = i % W, t = i / W, y = t % H, nc = t / H; T acc = 0;"
        "ptrdiff_t y0 = y + py - ky + 1, x0 = x + px - kx + 1;"
        "ptrdiff_t oy_lo = y0 <= 0 ? 0 : (y0 + sy - 1) / sy;"
        "ptrdiff_t ox_lo = x0 <= 0 ? 0 : (x0 + sx - 1) / sx;"
        "ptrdiff_t oy_hi = (y + py) / sy, ox_hi = (x + px) / sx;"
        "if (oy_hi > oh - 1) oy_hi = oh - 1;"
        "if (ox_hi > ow - 1) ox_hi = ow - 1;"
        "for (ptrdiff_t oy = oy_lo; oy <= oy_hi; ++oy) {"
        "  for (ptrdiff_t ox = ox_lo; ox <= ox_hi; ++ox) {"
        "    ptrdiff_t o = (nc * oh + oy) * ow + ox;"
        "    if (arg[o] == (y + py - oy * sy) * kx + (x + px - ox * sx)) acc += dy[o];"
        "  }"
        "}"
        "dx = beta == (T)0 ? acc : dx + acc;"))
    n, c, h, w = x_shape
    oh, ow = dy.shape[2:]
    kernel_(_contiguous(dy), _contiguous(argmax), h, w, oh, ow, kernel[0], kernel[1],
            stride[0], stride[1], pad[0], pad[1], dy.dtype.type(beta), out)
