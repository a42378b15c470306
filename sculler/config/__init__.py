"""The v1 front end (``trainer_config_helpers`` configs, ``config_parser``), and PaddlePaddle's
ModelConfig in protobuf form: :func:`model_config_text` prints a ModelConfig in PaddlePaddle's
text format, :func:`to_proto` / :func:`from_proto` convert to and from the ``paddle.ModelConfig``
message. The three live in :mod:`sculler.proto.convert`, loaded on first use (``import sculler``
imports this package for the v1 surface and should not pay for them)."""

from typing import Any

__all__ = ["from_proto", "model_config_text", "to_proto"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from sculler.proto import convert

        return getattr(convert, name)
    raise AttributeError(f"module 'sculler.config' has no attribute {name!r}")
