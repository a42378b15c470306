"""A small builder of ONNX graphs: named constants, nodes with fresh output names, and the
2-D <-> NCHW reshapes the image layers need (Sculler keeps every layer output as
``(batch, width)``, images row-major NCHW)."""

from __future__ import annotations

from typing import Any

import numpy as np


def onnx_module() -> Any:
    try:
        import onnx
    except ImportError as exc:
        raise ImportError("sculler.onnx needs the onnx package; install it with "
                          "`pip install sculler[onnx]`") from exc
    return onnx


class GraphBuilder:
    """Nodes and initializers of one ONNX graph; every value gets a unique name."""

    def __init__(self) -> None:
        self.onnx = onnx_module()
        self.nodes: list = []
        self.initializers: list = []
        self._used: set[str] = set()

    def fresh(self, hint: str) -> str:
        """A name not used yet, starting with ``hint``."""
        name, k = hint, 0
        while name in self._used:
            k += 1
            name = f"{hint}_{k}"
        self._used.add(name)
        return name

    def reserve(self, name: str) -> str:
        """Claim an exact name (graph inputs/outputs); ValueError when taken."""
        if name in self._used:
            raise ValueError(f"ONNX value name {name!r} is used twice")
        self._used.add(name)
        return name

    def const(self, hint: str, value: Any, dtype: Any = np.float32) -> str:
        """An initializer holding ``value``; returns its name."""
        name = self.fresh(hint)
        array = np.ascontiguousarray(np.asarray(value, dtype=dtype))
        self.initializers.append(self.onnx.numpy_helper.from_array(array, name))
        return name

    def op(self, op_type: str, inputs: list[str], hint: str, output: str | None = None,
           **attrs: Any) -> str:
        """Add node ``op_type(inputs)``; returns the output name (``output`` if given)."""
        out = output if output is not None else self.fresh(hint)
        self.nodes.append(self.onnx.helper.make_node(op_type, inputs, [out],
                                                     name=self.fresh(f"{hint}/{op_type}"),
                                                     **attrs))
        return out

    def to_image(self, x: str, chw: tuple[int, int, int], hint: str) -> str:
        """``(N, C*H*W)`` -> ``(N, C, H, W)``."""
        return self.op("Reshape", [x, self.const(f"{hint}/shape", [-1, *chw], np.int64)], hint)

    def to_flat(self, x: str, width: int, hint: str) -> str:
        """``(N, ...)`` -> ``(N, width)``."""
        return self.op("Reshape", [x, self.const(f"{hint}/shape", [-1, width], np.int64)], hint)
