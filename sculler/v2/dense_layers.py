"""v2 wrappers (``paddle.v2.layer``) for the mixed layer, its projections/operators and the
dense layers; re-exported by :mod:`sculler.layer`.

A projection is a description, not a layer: ``mixed(size=8, input=[full_matrix_projection(x),
identity_projection(y)])`` or, as in PaddlePaddle::

    with mixed(size=8) as m:
        m += full_matrix_projection(input=x)
        m += dotmul_operator(a=y, b=z)

Auto names follow PaddlePaddle (``__mixed_0__``, ``__scaling_layer_0__``, ...).
"""

from __future__ import annotations

from typing import Any

from sculler import activation as A
from sculler.attr import ParameterAttribute
from sculler.core.model_config import LayerConfig
from sculler.v2.layer_base import LayerOutput, as_inputs, auto_name, make_layer, no_support

__all__ = [
    "Projection", "full_matrix_projection", "trans_full_matrix_projection", "table_projection",
    "identity_projection", "dotmul_projection", "scaling_projection", "context_projection",
    "dotmul_operator", "conv_operator", "conv_projection", "mixed", "MixedLayerType",
    "scaling", "slope_intercept", "power", "interpolation", "sum_to_one_norm", "row_l2_norm",
    "tensor", "trans", "resize", "clip", "scale_shift", "prelu", "max_id", "sampling_id",
    "multiplex", "out_prod", "linear_comb", "convex_comb", "selective_fc", "l2_distance",
    "dot_prod", "repeat",
]


class Projection:
    """One term of a mixed layer: engine ``proj`` kind, its input layer(s), per-input attrs,
    parameter attribute and the output width it implies (0: the mixed layer's size)."""

    def __init__(self, kind: str, inputs: list[LayerOutput], attrs: dict | None = None,
                 param_attr: Any = None, size: int = 0):
        self.kind = kind
        self.inputs = as_inputs(inputs, kind + "_projection")
        self.attrs = dict(attrs or {})
        self.param_attr = param_attr
        self.size = int(size or 0)

    def input_attrs(self) -> list[dict]:
        if self.kind in ("dotmul_operator", "conv_operator"):
            return [{"proj": self.kind, **self.attrs}, {"proj": "operand"}]
        return [{"proj": self.kind, **self.attrs}]

    def __repr__(self) -> str:
        return f"Projection({self.kind!r}, {[i.name for i in self.inputs]})"


def full_matrix_projection(input: LayerOutput, size: int = 0,  # noqa: A002
                           param_attr: Any = None) -> Projection:
    """``x W`` with W of shape (input width, size)."""
    return Projection("full_matrix", [input], param_attr=param_attr, size=size)


def trans_full_matrix_projection(input: LayerOutput, size: int = 0,  # noqa: A002
                                 param_attr: Any = None) -> Projection:
    """``x W^T`` with W of shape (size, input width) (e.g. to share an fc's weight)."""
    return Projection("trans_full_matrix", [input], param_attr=param_attr, size=size)


def table_projection(input: LayerOutput, size: int = 0,  # noqa: A002
                     param_attr: Any = None) -> Projection:
    """Row ``id`` of a (dictionary x size) table for each integer id."""
    return Projection("table", [input], param_attr=param_attr, size=size)


def identity_projection(input: LayerOutput, offset: int | None = None,  # noqa: A002
                        size: int | None = None) -> Projection:
    """``x`` itself; with ``offset`` the window ``x[:, offset:offset+size]`` (size default
    ``input width - offset``), or ``x`` placed at ``offset`` of a wider output."""
    if offset is None:
        no_support("identity_projection", size=size)
        return Projection("identity", [input], size=input.size)
    if size is None:
        size = input.size - int(offset)
    if offset < 0 or size <= 0:
        raise ValueError(f"identity_projection: offset {offset} and size {size} must give a "
                         f"non-empty window of the input ({input.size} wide)")
    return Projection("identity", [input], {"offset": int(offset), "size": int(size)},
                      size=size)


def dotmul_projection(input: LayerOutput, param_attr: Any = None) -> Projection:  # noqa: A002
    """``x * w`` elementwise with a learned (1 x width) ``w``."""
    return Projection("dotmul", [input], param_attr=param_attr, size=input.size)


def scaling_projection(input: LayerOutput, param_attr: Any = None) -> Projection:  # noqa: A002
    """``w * x`` with one learned scalar ``w``."""
    return Projection("scaling", [input], param_attr=param_attr, size=input.size)


def context_projection(input: LayerOutput, context_len: int,  # noqa: A002
                       context_start: int | None = None, padding_attr: Any = False) -> Projection:
    """Steps ``t+s .. t+s+L-1`` of each sequence side by side (width ``L * input width``);
    ``context_start`` defaults to ``-(L-1)//2``; out-of-sequence steps are zero
    (``padding_attr=False``, the default), or learned rows: ``padding_attr`` None or True
    gives zero-initialised trainable padding (PaddlePaddle's bias-default rule), an
    ``attr.Param`` trainable padding with those settings."""
    if int(context_len) <= 0:
        raise ValueError(f"context_projection: context_len must be positive, got {context_len}")
    start = -(int(context_len) - 1) // 2 if context_start is None else int(context_start)
    attrs = {"context_len": int(context_len), "context_start": start}
    if padding_attr is not False:
        attrs["trainable_padding"] = True
    if padding_attr is None or padding_attr is True:
        param = ParameterAttribute(initial_std=0.0, initial_mean=0.0)
    elif padding_attr is False or isinstance(padding_attr, (ParameterAttribute, dict)):
        param = padding_attr or None
    else:
        raise TypeError(f"context_projection: padding_attr must be False, True, None or an "
                        f"attr.Param, got {padding_attr!r}")
    return Projection("context", [input], attrs, param_attr=param,
                      size=input.size * int(context_len))


def dotmul_operator(a: LayerOutput | None = None, b: LayerOutput | None = None,
                    scale: float = 1, **kwargs: Any) -> Projection:
    """``scale * a * b`` elementwise; ``a`` and ``b`` have one width."""
    if "x" in kwargs or "y" in kwargs:
        a, b = kwargs.pop("x", a), kwargs.pop("y", b)
    no_support("dotmul_operator", **kwargs)
    if a is None or b is None or a.size != b.size:
        raise ValueError("dotmul_operator: needs layers a and b of one width, got "
                         f"{getattr(a, 'size', None)} and {getattr(b, 'size', None)}")
    return Projection("dotmul_operator", [a, b], {"scale": float(scale)}, size=a.size)


def _conv_attrs(fn: str, filter_size: int, num_filters: int, num_channels: int | None,
                stride: int, padding: int, filter_size_y: int | None, stride_y: int | None,
                padding_y: int | None, trans: bool) -> dict:
    if trans:
        raise NotImplementedError(f"{fn}(trans=True) is not supported; use img_conv(trans=True)")
    attrs = {"filter_size": int(filter_size), "num_filters": int(num_filters),
             "stride": int(stride), "padding": int(padding)}
    for key, val in (("channels", num_channels), ("filter_size_y", filter_size_y),
                     ("stride_y", stride_y), ("padding_y", padding_y)):
        if val is not None:
            attrs[key] = int(val)
    return attrs


def conv_operator(img: LayerOutput, filter: LayerOutput, filter_size: int,  # noqa: A002
                  num_filters: int, num_channels: int | None = None, stride: int = 1,
                  padding: int = 0, filter_size_y: int | None = None, stride_y: int | None = None,
                  padding_y: int | None = None, trans: bool = False) -> Projection:
    """Convolve each sample's image with that sample's own filters, read from ``filter``
    (width ``num_filters * channels * fy * fx``); output ``num_filters * oh * ow`` wide."""
    attrs = _conv_attrs("conv_operator", filter_size, num_filters, num_channels, stride, padding,
                        filter_size_y, stride_y, padding_y, trans)
    return Projection("conv_operator", [img, filter], attrs)


def conv_projection(input: LayerOutput, filter_size: int, num_filters: int,  # noqa: A002
                    num_channels: int | None = None, stride: int = 1, padding: int = 0,
                    filter_size_y: int | None = None, stride_y: int | None = None,
                    padding_y: int | None = None, groups: int = 1, param_attr: Any = None,
                    trans: bool = False) -> Projection:
    """``conv(x, W)`` with a learned ``(num_filters, channels/groups * fy * fx)`` filter."""
    attrs = _conv_attrs("conv_projection", filter_size, num_filters, num_channels, stride,
                        padding, filter_size_y, stride_y, padding_y, trans)
    attrs["groups"] = int(groups)
    return Projection("conv", [input], attrs, param_attr=param_attr)


class MixedLayerType(LayerOutput):
    """The mixed layer under construction: ``+=`` adds projections; leaving the ``with``
    block (or giving ``input=``) builds it, after which it is an ordinary layer."""

    def __init__(self, name: str | None, size: int, act: Any, bias_attr: Any,
                 layer_attr: Any):
        name = name or auto_name("mixed")
        super().__init__(LayerConfig(name=name, type="mixed", size=int(size or 0)), [])
        self._settings = (size, act, bias_attr, layer_attr)
        self._projections: list[Projection] = []
        self.finalized = False

    def __iadd__(self, other: Projection | list) -> MixedLayerType:
        if self.finalized:
            raise ValueError(f"mixed layer {self.name!r} is already built; add projections "
                             "before leaving the with block")
        for p in other if isinstance(other, (list, tuple)) else [other]:
            if not isinstance(p, Projection):
                raise TypeError(f"mixed layer {self.name!r}: += takes a projection or operator "
                                f"(e.g. full_matrix_projection(x)), got {type(p).__name__}")
            self._projections.append(p)
        return self

    def __enter__(self) -> MixedLayerType:
        return self

    def __exit__(self, exc_type, *exc) -> None:
        if exc_type is None:
            self.finalize()

    def finalize(self) -> None:
        if not self._projections:
            raise ValueError(f"mixed layer {self.name!r} has no projection")
        size, act, bias_attr, layer_attr = self._settings
        size = size or next((p.size for p in self._projections if p.size), 0)
        inputs, in_attrs, params = [], [], []
        for p in self._projections:
            inputs += p.inputs
            in_attrs += p.input_attrs()
            params += [p.param_attr] + [None] * (len(p.inputs) - 1)
        built = make_layer("mixed", inputs, name=self.name, size=size, act=act,
                           param_attr=params, bias_attr=bias_attr, layer_attr=layer_attr,
                           input_attrs=in_attrs)
        order = self.order
        self.__dict__.update(built.__dict__)
        self.order = order
        self.finalized = True


def mixed(size: int = 0, input: Any = None, name: str | None = None,  # noqa: A002
          act: Any = None, bias_attr: Any = False, layer_attr: Any = None) -> MixedLayerType:
    """``y = act(sum of projections + b)``; default act Linear, no bias. Give ``input`` (a
    projection or a list) or use the ``with mixed(...) as m: m += proj`` form."""
    m = MixedLayerType(name, size, act, bias_attr, layer_attr)
    if input is not None:
        m += input
        m.finalize()
    return m


def _simple(layer_type: str, prefix: str, inputs: list, name: Any, layer_attr: Any = None,
            **kw: Any) -> LayerOutput:
    return make_layer(layer_type, as_inputs(inputs, prefix), name=name, name_prefix=prefix,
                      layer_attr=layer_attr, bias_attr=kw.pop("bias_attr", False), **kw)


def scaling(input: LayerOutput, weight: LayerOutput, name: str | None = None,  # noqa: A002
            layer_attr: Any = None) -> LayerOutput:
    """``y_i = w_i * x_i`` with a per-sample scalar ``weight`` (width 1)."""
    return _simple("scaling", "scaling_layer", [weight, input], name, layer_attr)


def slope_intercept(input: LayerOutput, name: str | None = None, slope: float = 1.0,  # noqa: A002
                    intercept: float = 0.0, layer_attr: Any = None) -> LayerOutput:
    """``y = slope * x + intercept``."""
    return _simple("slope_intercept", "slope_intercept_layer", [input], name, layer_attr,
                   attrs={"slope": float(slope), "intercept": float(intercept)})


def power(input: LayerOutput, weight: LayerOutput, name: str | None = None,  # noqa: A002
          layer_attr: Any = None) -> LayerOutput:
    """``y_i = x_i ^ w_i`` elementwise with a per-sample exponent ``weight`` (width 1)."""
    return _simple("power", "power_layer", [weight, input], name, layer_attr)


def interpolation(input: list, weight: LayerOutput, name: str | None = None,  # noqa: A002
                  layer_attr: Any = None) -> LayerOutput:
    """``y_i = w_i * a_i + (1 - w_i) * b_i`` for ``input = [a, b]``."""
    pair = as_inputs(input, "interpolation")
    if len(pair) != 2:
        raise ValueError(f"interpolation: input must be two layers [a, b], got {len(pair)}")
    return _simple("interpolation", "interpolation_layer", [weight, *pair], name, layer_attr)


def sum_to_one_norm(input: LayerOutput, name: str | None = None,  # noqa: A002
                    layer_attr: Any = None) -> LayerOutput:
    """``y = x / sum(x)`` per row."""
    return _simple("sum_to_one_norm", "sum_to_one_norm_layer", [input], name, layer_attr)


def row_l2_norm(input: LayerOutput, name: str | None = None,  # noqa: A002
                layer_attr: Any = None) -> LayerOutput:
    """``y = x / |x|`` per row."""
    return _simple("row_l2_norm", "row_l2_norm_layer", [input], name, layer_attr)


def tensor(a: LayerOutput, b: LayerOutput, size: int, act: Any = None,
           name: str | None = None, param_attr: Any = None, bias_attr: Any = None,
           layer_attr: Any = None) -> LayerOutput:
    """Bilinear ``y_k = act(a W_k b^T + bias_k)``, k < size; with bias by default."""
    return make_layer("tensor", as_inputs([a, b], "tensor"), name=name,
                      name_prefix="tensor_layer", size=size, act=act,
                      param_attr=[param_attr, None], bias_attr=bias_attr, layer_attr=layer_attr)


def trans(input: LayerOutput, name: str | None = None,  # noqa: A002
          layer_attr: Any = None) -> LayerOutput:
    """The transposed batch: (batch x D) becomes (D x batch)."""
    return _simple("trans", "trans_layer", [input], name, layer_attr)


def resize(input: LayerOutput, size: int, name: str | None = None) -> LayerOutput:  # noqa: A002
    """Re-read the batch row-major as rows of width ``size``."""
    return _simple("resize", "resize", [input], name, size=size)


def clip(input: LayerOutput, min: float, max: float,  # noqa: A002
         name: str | None = None) -> LayerOutput:
    """``y = min(max(x, min), max)``."""
    return _simple("clip", "clip", [input], name,
                   attrs={"min": float(min), "max": float(max)})


def scale_shift(input: LayerOutput, name: str | None = None,  # noqa: A002
                param_attr: Any = None, bias_attr: Any = None) -> LayerOutput:
    """``y = w * x + b`` with learned scalars ``w`` and (by default) ``b``."""
    return make_layer("scale_shift", as_inputs(input, "scale_shift"), name=name,
                      name_prefix="scale_shift", param_attr=param_attr,
                      bias_attr=bias_attr)


def prelu(input: LayerOutput, name: str | None = None, partial_sum: int = 1,  # noqa: A002
          channel_shared: bool | None = None, num_channels: int | None = None,
          param_attr: Any = None, layer_attr: Any = None) -> LayerOutput:
    """Parametric ReLU ``y = x (x > 0), a x (x <= 0)`` with one slope per ``partial_sum``
    units; ``channel_shared`` True: one slope, False: one per channel (``num_channels``)."""
    if channel_shared is not None:
        if channel_shared:
            partial_sum = input.size
        else:
            if not num_channels or input.size % int(num_channels):
                raise ValueError(f"prelu: channel_shared=False needs num_channels dividing the "
                                 f"input width {input.size}, got {num_channels!r}")
            partial_sum = input.size // int(num_channels)
    return make_layer("prelu", as_inputs(input, "prelu"), name=name, name_prefix="prelu_layer",
                      param_attr=param_attr, bias_attr=False, layer_attr=layer_attr,
                      attrs={"partial_sum": int(partial_sum)})


def max_id(input: LayerOutput, name: str | None = None,  # noqa: A002
           layer_attr: Any = None) -> LayerOutput:
    """Id of the largest entry of each row (``ids``; ``value`` holds the maximum)."""
    return _simple("maxid", "maxid_layer", [input], name, layer_attr)


def sampling_id(input: LayerOutput, name: str | None = None,  # noqa: A002
                layer_attr: Any = None) -> LayerOutput:
    """One id per row drawn from the row's probabilities."""
    return _simple("sampling_id", "sampling_id_layer", [input], name, layer_attr)


def multiplex(input: list, name: str | None = None,  # noqa: A002
              layer_attr: Any = None) -> LayerOutput:
    """``input = [index, x_0, x_1, ...]``: row i is row i of ``x_{index_i}``."""
    return _simple("multiplex", "multiplex_layer", list(input), name, layer_attr)


def out_prod(input1: LayerOutput, input2: LayerOutput, name: str | None = None,
             layer_attr: Any = None) -> LayerOutput:
    """Row-wise outer product, flattened: width ``M * N``."""
    return _simple("out_prod", "out_prod_layer", [input1, input2], name, layer_attr)


def linear_comb(weights: LayerOutput, vectors: LayerOutput, size: int | None = None,
                name: str | None = None, layer_attr: Any = None) -> LayerOutput:
    """``y_i = w_i V_i`` with ``V_i`` the row read as (width of weights) x size."""
    return _simple("convex_comb", "linear_comb_layer", [weights, vectors], name, layer_attr,
                   size=size or 0)


convex_comb = linear_comb


def selective_fc(input: Any, size: int, select: LayerOutput | None = None,  # noqa: A002
                 act: Any = None, name: str | None = None, pass_generation: bool = False,
                 has_selected_colums: bool = True, mul_ratio: float = 0.02,
                 param_attr: Any = None, bias_attr: Any = None,
                 layer_attr: Any = None) -> LayerOutput:
    """An fc (weights stored size x D) computing only the columns ``select`` marks; without
    ``select`` every column. ``mul_ratio`` is a speed hint and is not needed here."""
    no_support("selective_fc", pass_generation=pass_generation)
    inputs = as_inputs(input, "selective_fc")
    has_select = select is not None and has_selected_colums
    pattrs = param_attr if isinstance(param_attr, (list, tuple)) else [param_attr] * len(inputs)
    if has_select:
        inputs, pattrs = inputs + [select], list(pattrs) + [None]
    return make_layer("selective_fc", inputs, name=name, name_prefix="selective_fc_layer",
                      size=size, act=act, default_act=A.Tanh, param_attr=list(pattrs),
                      bias_attr=bias_attr, layer_attr=layer_attr,
                      attrs={"has_select": bool(has_select)})


def l2_distance(x: LayerOutput, y: LayerOutput, name: str | None = None,
                layer_attr: Any = None) -> LayerOutput:
    """``|x_i - y_i|`` per row (width 1)."""
    return _simple("l2_distance", "l2_distance_layer", [x, y], name, layer_attr)


def dot_prod(input1: LayerOutput, input2: LayerOutput, name: str | None = None,
             layer_attr: Any = None) -> LayerOutput:
    """``<a_i, b_i>`` per row (width 1)."""
    return _simple("dot_prod", "dot_prod_layer", [input1, input2], name, layer_attr)


def repeat(input: LayerOutput, num_repeats: int, as_row_vector: bool = True,  # noqa: A002
           act: Any = None, name: str | None = None, layer_attr: Any = None) -> LayerOutput:
    """``[x, x, ..., x]`` (as_row_vector) or ``[x_1, x_1, ..., x_D, x_D]``,
    ``num_repeats`` copies."""
    return _simple("featmap_expand", "repeat_layer", [input], name, layer_attr, act=act,
                   attrs={"num_filters": int(num_repeats), "as_row_vector": bool(as_row_vector)})
