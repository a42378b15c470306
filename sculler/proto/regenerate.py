"""Rebuild ``paddle_model.desc`` (the compiled descriptors of the ``.proto`` files beside it).

A development tool, run after editing a ``.proto``: ``python -m sculler.proto.regenerate``.
It needs ``grpcio-tools`` (``pip install grpcio-tools``), which bundles the protobuf compiler;
Sculler itself needs only the ``protobuf`` runtime.
"""

from __future__ import annotations

import pathlib
import sys

HERE = pathlib.Path(__file__).parent
PROTOS = ("ParameterConfig.proto", "ModelConfig.proto")
DESCRIPTOR_SET = HERE / "paddle_model.desc"


def compile_descriptor_set(out: pathlib.Path) -> None:
    """Compile the ``.proto`` files into a ``FileDescriptorSet`` at ``out``."""
    try:
        from grpc_tools import protoc
    except ImportError as e:
        raise ImportError("regenerating the descriptors needs grpcio-tools: "
                          "pip install grpcio-tools") from e
    rc = protoc.main(["protoc", f"-I{HERE}", f"--descriptor_set_out={out}", *PROTOS])
    if rc != 0:
        raise RuntimeError(f"protoc failed (exit status {rc}) compiling {PROTOS}")


def main() -> None:
    tmp = DESCRIPTOR_SET.with_suffix(".desc.tmp")
    compile_descriptor_set(tmp)
    tmp.replace(DESCRIPTOR_SET)
    print(f"wrote {DESCRIPTOR_SET}", file=sys.stderr)


if __name__ == "__main__":
    main()
