"""The gated linear unit (PaddlePaddle's ``gated_unit_layer``, Dauphin et al. 2017): two fc
layers of one input, one of them a sigmoid gate, multiplied elementwise.

``y = act(x W + b) * sigmoid(x V + c)``, built as PaddlePaddle builds it: fc
``<name>_input_proj``, fc ``<name>_gate`` and a mixed layer ``<name>_gated_act`` holding their
``dotmul_operator``, so the parameter names are PaddlePaddle's.
"""

from __future__ import annotations

from typing import Any

from sculler import activation as A
from sculler.core.expression import LayerOutput, auto_name, one_input
from sculler.core.faces import layer_function
from sculler.layers.fc import fc
from sculler.layers.mixed import dotmul_operator, mixed


@layer_function(v1="gated_unit_layer", types=("fc", "mixed"))
def gated_unit(input: LayerOutput, size: int, act: Any = None,  # noqa: A002
               name: str | None = None, gate_attr: Any = None, gate_param_attr: Any = None,
               gate_bias_attr: Any = True, inproj_attr: Any = None,
               inproj_param_attr: Any = None, inproj_bias_attr: Any = True,
               layer_attr: Any = None) -> LayerOutput:
    """``act(x W + b) * sigmoid(x V + c)``; default act Tanh (fc's), both fc with a bias."""
    src = one_input(input, "gated_unit")
    name = name or auto_name("gated_unit_layer")
    projected = fc(input=src, size=size, act=act, name=f"{name}_input_proj",
                   layer_attr=inproj_attr, param_attr=inproj_param_attr,
                   bias_attr=inproj_bias_attr)
    gate = fc(input=src, size=size, act=A.Sigmoid(), name=f"{name}_gate",
              layer_attr=gate_attr, param_attr=gate_param_attr, bias_attr=gate_bias_attr)
    return mixed(input=dotmul_operator(a=projected, b=gate), name=f"{name}_gated_act",
                 layer_attr=layer_attr)
