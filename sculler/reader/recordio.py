"""PaddlePaddle's RecordIO files (github.com/PaddlePaddle/recordio), which
``paddle.v2.reader.creator.recordio`` reads and ``paddle.v2.dataset.common.convert`` writes.

A file is a sequence of chunks. Each chunk is a header of five little-endian uint32 --
magic ``0x01020304``, the CRC-32 (IEEE) of the stored body, the compressor (0 none, 1 snappy,
2 gzip), the stored body's length, the number of records -- then the body: the records, each a
uint32 length and its bytes, compressed as a whole. Snappy bodies use snappy's framing format
(a stream identifier chunk, then data chunks carrying a masked CRC-32C of their uncompressed
bytes).

Reading checks every length and checksum (:class:`FileFormatError` naming the file and the
chunk) and decodes snappy in pure Python, so no snappy package is needed. Writing stores a
snappy body as uncompressed framing chunks, which every snappy reader accepts, or uses gzip
or no compression; files are written atomically.

PaddlePaddle stored each sample as a pickle. :func:`load_sample` unpickles only Python's
built-in data (tuples, lists, dicts, sets, strings, bytes, numbers, booleans, None): a pickle
that names any other class or function is refused, because unpickling it could run code.
"""

from __future__ import annotations

import builtins
import codecs
import gzip
import io
import os
import pickle
import struct
import zlib
from collections.abc import Iterable, Iterator
from typing import Any

from sculler.fileio import FileFormatError, atomic_write

__all__ = ["read_records", "write_records", "load_sample", "dump_sample", "COMPRESSORS"]

MAGIC = 0x01020304
HEADER = struct.Struct("<5I")
COMPRESSORS = {"none": 0, "snappy": 1, "gzip": 2}
_SNAPPY_ID = b"\xff\x06\x00\x00sNaPpY"
_SNAPPY_MAX_CHUNK = 65536  # the framing format's bound on a chunk's uncompressed bytes


def _crc32c_table() -> list[int]:
    table = []
    for n in range(256):
        crc = n
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
        table.append(crc)
    return table


_CRC32C = _crc32c_table()


def _masked_crc32c(data: bytes) -> int:
    """Snappy framing's checksum: CRC-32C (Castagnoli), rotated right by 15, plus a constant."""
    crc = 0xFFFFFFFF
    for b in data:
        crc = _CRC32C[(crc ^ b) & 0xFF] ^ (crc >> 8)
    crc ^= 0xFFFFFFFF
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def _snappy_block(data: bytes, where: str) -> bytes:
    """Decompress one raw snappy block: a varint length, then literals and back-copies."""
    pos = shift = length = 0
    while True:
        if pos >= len(data):
            raise FileFormatError(f"{where}: snappy block ends inside its length")
        b = data[pos]
        pos += 1
        length |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            break
    out = bytearray()
    while pos < len(data):
        tag = data[pos]
        pos += 1
        kind = tag & 3
        if kind == 0:  # literal
            n = tag >> 2
            if n >= 60:
                extra = n - 59
                n = int.from_bytes(data[pos:pos + extra], "little")
                pos += extra
            n += 1
            out += data[pos:pos + n]
            pos += n
            continue
        if kind == 1:
            n, offset = ((tag >> 2) & 7) + 4, ((tag >> 5) << 8) | data[pos]
            pos += 1
        elif kind == 2:
            n, offset = (tag >> 2) + 1, int.from_bytes(data[pos:pos + 2], "little")
            pos += 2
        else:
            n, offset = (tag >> 2) + 1, int.from_bytes(data[pos:pos + 4], "little")
            pos += 4
        if offset == 0 or offset > len(out):
            raise FileFormatError(f"{where}: snappy copy reaches {offset} bytes back, "
                                  f"{len(out)} written")
        start = len(out) - offset
        for i in range(n):  # byte by byte: a copy may overlap what it writes
            out.append(out[start + i])
    if len(out) != length:
        raise FileFormatError(f"{where}: snappy block holds {len(out)} bytes, its header says "
                              f"{length}")
    return bytes(out)


def _snappy_frames(data: bytes, where: str) -> bytes:
    """Decode snappy's framing format (stream identifier, data, padding and skippable chunks)."""
    out = bytearray()
    pos = 0
    while pos < len(data):
        if pos + 4 > len(data):
            raise FileFormatError(f"{where}: snappy stream ends inside a chunk header")
        kind, size = data[pos], int.from_bytes(data[pos + 1:pos + 4], "little")
        body = data[pos + 4:pos + 4 + size]
        if len(body) != size:
            raise FileFormatError(f"{where}: snappy chunk of {size} bytes is cut short")
        pos += 4 + size
        if kind == 0xFF:
            if body != _SNAPPY_ID[4:]:
                raise FileFormatError(f"{where}: bad snappy stream identifier {body!r}")
        elif kind in (0x00, 0x01):
            if size < 4:
                raise FileFormatError(f"{where}: snappy data chunk of {size} bytes has no "
                                      "checksum")
            raw = body[4:] if kind == 0x01 else _snappy_block(body[4:], where)
            if _masked_crc32c(raw) != int.from_bytes(body[:4], "little"):
                raise FileFormatError(f"{where}: snappy chunk checksum does not match")
            out += raw
        elif 0x02 <= kind <= 0x7F:
            raise FileFormatError(f"{where}: unknown unskippable snappy chunk type {kind:#x}")
        # 0x80..0xfe: padding and skippable chunks
    return bytes(out)


def _split_records(body: bytes, count: int, where: str) -> list[bytes]:
    records, pos = [], 0
    for i in range(count):
        if pos + 4 > len(body):
            raise FileFormatError(f"{where}: record {i} of {count} is missing")
        (n,) = struct.unpack_from("<I", body, pos)
        if pos + 4 + n > len(body):
            raise FileFormatError(f"{where}: record {i} says {n} bytes, "
                                  f"{len(body) - pos - 4} remain")
        records.append(body[pos + 4:pos + 4 + n])
        pos += 4 + n
    if pos != len(body):
        raise FileFormatError(f"{where}: {len(body) - pos} bytes follow the last of {count} "
                              "records")
    return records


def read_records(path: str | os.PathLike) -> Iterator[bytes]:
    """The records of one RecordIO file, in order, chunk by chunk (each chunk checked)."""
    path = os.fspath(path)
    with open(path, "rb") as f:
        index = 0
        while True:
            head = f.read(HEADER.size)
            if not head:
                return
            where = f"recordio file {path!r}, chunk {index}"
            if len(head) < HEADER.size:
                raise FileFormatError(f"{where}: header cut short ({len(head)} of "
                                      f"{HEADER.size} bytes)")
            magic, checksum, compressor, size, count = HEADER.unpack(head)
            if magic != MAGIC:
                raise FileFormatError(f"{where}: magic {magic:#010x}, expected {MAGIC:#010x}; "
                                      "not a RecordIO file")
            stored = f.read(size)
            if len(stored) != size:
                raise FileFormatError(f"{where}: body cut short ({len(stored)} of {size} "
                                      "bytes)")
            if zlib.crc32(stored) != checksum:
                raise FileFormatError(f"{where}: CRC-32 of the body does not match its header")
            if compressor == 0:
                body = stored
            elif compressor == 1:
                body = _snappy_frames(stored, where)
            elif compressor == 2:
                try:
                    body = gzip.decompress(stored)
                except (OSError, EOFError, zlib.error) as e:
                    raise FileFormatError(f"{where}: damaged gzip body ({e})") from e
            else:
                raise FileFormatError(f"{where}: unknown compressor {compressor}; expected 0 "
                                      "(none), 1 (snappy) or 2 (gzip)")
            yield from _split_records(body, count, where)
            index += 1


def _snappy_encode(body: bytes) -> bytes:
    """``body`` in snappy's framing format, as uncompressed data chunks."""
    out = bytearray(_SNAPPY_ID)
    for start in range(0, len(body), _SNAPPY_MAX_CHUNK):
        piece = body[start:start + _SNAPPY_MAX_CHUNK]
        out += bytes([0x01]) + (len(piece) + 4).to_bytes(3, "little")
        out += _masked_crc32c(piece).to_bytes(4, "little") + piece
    return bytes(out)


def write_records(path: str | os.PathLike, records: Iterable[bytes],
                  compressor: str = "snappy", records_per_chunk: int = 1000) -> int:
    """Write ``records`` (bytes) as a RecordIO file, atomically; returns how many.

    ``compressor``: "snappy" (PaddlePaddle's default), "gzip" or "none"."""
    if compressor not in COMPRESSORS:
        raise ValueError(f"write_records: compressor must be one of {sorted(COMPRESSORS)}, "
                         f"got {compressor!r}")
    if isinstance(records_per_chunk, bool) or not isinstance(records_per_chunk, int) or (
            records_per_chunk < 1):
        raise ValueError(f"write_records: records_per_chunk must be a positive int, got "
                         f"{records_per_chunk!r}")
    items = list(records)
    for i, r in enumerate(items):
        if not isinstance(r, (bytes, bytearray)):
            raise TypeError(f"write_records: record {i} must be bytes, got "
                            f"{type(r).__name__} (use dump_sample for samples)")

    def write(stream: Any) -> None:
        for start in range(0, len(items), records_per_chunk):
            chunk = items[start:start + records_per_chunk]
            body = b"".join(struct.pack("<I", len(r)) + bytes(r) for r in chunk)
            if compressor == "snappy":
                body = _snappy_encode(body)
            elif compressor == "gzip":
                body = gzip.compress(body)
            stream.write(HEADER.pack(MAGIC, zlib.crc32(body), COMPRESSORS[compressor],
                                     len(body), len(chunk)))
            stream.write(body)

    atomic_write(os.fspath(path), write, "recordio.write_records")
    return len(items)


# what protocol 2 names to rebuild built-in data: bytes go through _codecs.encode(str, codec)
_DATA_GLOBALS = {("_codecs", "encode"): codecs.encode}
for _name in ("bytes", "bytearray", "set", "frozenset", "complex"):
    _DATA_GLOBALS[("builtins", _name)] = _DATA_GLOBALS[("__builtin__", _name)] = getattr(
        builtins, _name)


class _DataUnpickler(pickle.Unpickler):
    """Unpickles built-in data only: a class or function other than the constructors of
    built-in data types is refused."""

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in _DATA_GLOBALS:
            return _DATA_GLOBALS[(module, name)]
        raise FileFormatError(f"the record pickles {module}.{name}; only Python's built-in "
                              "data (tuples, lists, dicts, strings, bytes, numbers, None) is "
                              "unpickled, since naming a class or function could run code")


def load_sample(record: bytes) -> Any:
    """A sample from a record PaddlePaddle wrote (a pickle of built-in data; Python 2 strings
    come back as ``str`` decoded as latin-1)."""
    try:
        return _DataUnpickler(io.BytesIO(record), encoding="latin1").load()
    except FileFormatError:
        raise
    except Exception as e:  # noqa: BLE001 - any damage in the pickle stream
        raise FileFormatError(f"record is not a pickled sample ({type(e).__name__}: {e})") from e


def dump_sample(sample: Any) -> bytes:
    """The record of ``sample`` as PaddlePaddle wrote it (a pickle, protocol 2), checked to
    load back with :func:`load_sample`."""
    record = pickle.dumps(sample, protocol=2)
    load_sample(record)
    return record
