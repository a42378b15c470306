"""The v1 front end (``trainer_config_helpers`` configs, ``config_parser``), and PaddlePaddle's
ModelConfig in protobuf form: :func:`model_config_text` prints a ModelConfig in PaddlePaddle's
text format, :func:`to_proto` / :func:`from_proto` convert to and from the ``paddle.ModelConfig``
message (see :mod:`sculler.proto.convert`)."""

from sculler.proto.convert import from_proto, model_config_text, to_proto

__all__ = ["from_proto", "model_config_text", "to_proto"]
