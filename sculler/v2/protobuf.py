"""A minimal protobuf codec for PaddlePaddle's ``ParameterConfig`` (the ``.protobuf`` tar
entries), so Sculler reads and writes Paddle v2 parameter tars without the protobuf package.

Fields used (paddle/proto/ParameterConfig.proto): ``name = 1`` (string), ``size = 2``
(uint64), ``learning_rate = 3``, ``momentum = 4``, ``initial_mean = 5``, ``initial_std = 6``,
``decay_rate = 7``, ``decay_rate_l1 = 8`` (doubles), ``dims = 9`` (repeated uint64, packed or
not), ``is_static = 18`` (bool). Unknown fields are skipped by wire type; field number 0,
an unknown wire type or a value past the end of the message is an error.
"""

from __future__ import annotations

import struct
from typing import Any

DOUBLES = {3: "learning_rate", 4: "momentum", 5: "initial_mean", 6: "initial_std",
           7: "decay_rate", 8: "decay_rate_l1"}


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _read_varint(buf: bytes, pos: int) -> tuple[int, int]:
    shift = result = 0
    while True:
        if pos >= len(buf):
            raise ValueError("truncated protobuf varint")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7
        if shift >= 70:
            raise ValueError("protobuf varint longer than 10 bytes")


def encode_parameter_config(name: str, size: int, dims: list[int],
                            extra: dict[str, Any] | None = None) -> bytes:
    """Serialize ``name``, ``size``, ``dims`` (and optional doubles / ``is_static``)."""
    raw = name.encode()
    out = bytearray(b"\x0a" + _varint(len(raw)) + raw)
    out += b"\x10" + _varint(int(size))
    extra = extra or {}
    for num, key in DOUBLES.items():
        if extra.get(key) is not None:
            out += _varint(num << 3 | 1) + struct.pack("<d", float(extra[key]))
    for d in dims:
        out += b"\x48" + _varint(int(d))
    if extra.get("is_static"):
        out += _varint(18 << 3) + b"\x01"
    return bytes(out)


def decode_parameter_config(buf: bytes) -> dict[str, Any]:
    """Parse a ParameterConfig message into ``{"name", "size", "dims", ...}``.

    Strict where damage would otherwise pass: field number 0 does not exist in protobuf (a
    zeroed stretch of bytes decodes as field 0, so skipping it would silently drop the dims),
    and a value running past the end of the message is truncation.

    Raises:
        ValueError: the bytes are not a well-formed message; says which field and where.
    """
    pos, out = 0, {"dims": []}
    while pos < len(buf):
        start = pos
        key, pos = _read_varint(buf, pos)
        num, wire = key >> 3, key & 7
        if num == 0:
            raise ValueError(f"invalid protobuf field number 0 at byte {start} (damaged "
                             "or zeroed bytes)")
        if wire == 0:
            val, pos = _read_varint(buf, pos)
            if num == 2:
                out["size"] = val
            elif num == 9:
                out["dims"].append(val)
            elif num == 18:
                out["is_static"] = bool(val)
            continue
        width = {1: 8, 5: 4}.get(wire)
        if width is None and wire == 2:
            width, pos = _read_varint(buf, pos)
        if width is None:
            raise ValueError(f"unsupported protobuf wire type {wire} (field {num})")
        if pos + width > len(buf):
            raise ValueError(f"truncated protobuf field {num}: {width} bytes needed at byte "
                             f"{pos}, {len(buf) - pos} left")
        data, pos = buf[pos:pos + width], pos + width
        if wire == 1 and num in DOUBLES:
            (out[DOUBLES[num]],) = struct.unpack("<d", data)
        elif wire == 2 and num == 1:
            out["name"] = data.decode()
        elif wire == 2 and num == 9:
            p = 0
            while p < len(data):
                v, p = _read_varint(data, p)
                out["dims"].append(v)
    if "name" not in out:
        raise ValueError("ParameterConfig message has no name")
    return out
