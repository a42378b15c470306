"""PaddlePaddle's model description messages (``paddle.ModelConfig``, ``paddle.ParameterConfig``
and what they hold), for reading and writing the files PaddlePaddle writes.

The interface is written in ``ModelConfig.proto`` / ``ParameterConfig.proto`` beside this file
and compiled once into ``paddle_model.desc`` (a ``FileDescriptorSet``; rebuild it with
``python -m sculler.proto.regenerate``). :func:`messages` builds the message classes from it
on first use, in a descriptor pool of their own. Why descriptors rather than generated
``*_pb2.py`` modules: generated modules pin the protobuf runtime to the compiler's version
(they refuse older runtimes), and they register ``ModelConfig.proto`` in protobuf's global pool,
where it would clash with PaddlePaddle's own ``ModelConfig_pb2`` if both were imported. The
``protobuf`` package is imported only here, on first use, so ``import sculler`` stays fast.

    >>> from sculler.proto import messages
    >>> m = messages().ModelConfig(type="nn")
    >>> m.layers.add(name="x", type="data", size=3).size
    3
"""

from __future__ import annotations

import functools
import pathlib
from types import SimpleNamespace

__all__ = ["messages"]

DESCRIPTOR_SET = pathlib.Path(__file__).with_name("paddle_model.desc")


def _message_class(message_factory, desc):
    get = getattr(message_factory, "GetMessageClass", None)  # protobuf >= 4.21
    return get(desc) if get is not None else message_factory.MessageFactory().GetPrototype(desc)


@functools.cache
def messages() -> SimpleNamespace:
    """The message classes by name (``messages().ModelConfig``, ``.LayerConfig``, ...)."""
    try:
        from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
    except ImportError as e:
        raise ImportError("reading and writing PaddlePaddle model files needs the protobuf "
                          "package: pip install protobuf") from e
    files = descriptor_pb2.FileDescriptorSet.FromString(DESCRIPTOR_SET.read_bytes())
    pool = descriptor_pool.DescriptorPool()
    classes = {}
    for fdp in files.file:
        pool.Add(fdp)
    for fdp in files.file:
        for msg in fdp.message_type:
            desc = pool.FindMessageTypeByName(f"{fdp.package}.{msg.name}")
            classes[msg.name] = _message_class(message_factory, desc)
    return SimpleNamespace(**classes)
