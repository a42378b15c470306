"""An append-only journal of JSON records: each one checksummed and fsynced before it counts.

One record is one line ``<crc32 of the JSON, 8 hex digits> <JSON>\\n``. :meth:`Journal.append`
writes a list of records with one ``write`` and one ``fsync``, so when it returns they survive a
crash of the process or the machine. A crash during the write leaves a torn last line; the
caller never got its answer, so :func:`read_journal` drops that line (and :class:`Journal`
cuts it off before appending). A damaged line followed by good ones is not a torn write but a
damaged file, and is an error naming the file and the line.
"""

from __future__ import annotations

import contextlib
import json
import os
import zlib
from typing import Any

from sculler.fileio import FileFormatError, fsync_dir, raise_write_error


def _line(record: dict[str, Any]) -> bytes:
    body = json.dumps(record, sort_keys=True, separators=(",", ":")).encode("utf-8")
    return b"%08x %s\n" % (zlib.crc32(body), body)


def _parse(line: bytes) -> dict[str, Any] | None:
    """The record of one complete line, or None when its checksum or JSON is wrong."""
    crc, _, body = line.rstrip(b"\n").partition(b" ")
    try:
        if len(crc) != 8 or int(crc, 16) != zlib.crc32(body):
            return None
        record = json.loads(body)
    except ValueError:
        return None
    return record if isinstance(record, dict) else None


def read_journal(path: str) -> tuple[list[dict[str, Any]], int]:
    """``(records, good_bytes)``: the records of the journal at ``path`` and the length of
    the part that holds them (a torn last line is left out of both).

    Raises:
        FileFormatError: a damaged line before the last one.
    """
    with open(path, "rb") as fh:
        data = fh.read()
    records: list[dict[str, Any]] = []
    good = 0
    lines = data.split(b"\n")[:-1]  # what follows the last newline is torn: left out
    for number, line in enumerate(lines, start=1):
        record = _parse(line)
        if record is None:
            if any(_parse(rest) is not None for rest in lines[number:]):
                raise FileFormatError(f"journal {path!r}: line {number} is damaged (bad "
                                      "checksum or JSON) and records follow it; the file "
                                      "was altered")
            break  # the tail of a write cut short by a crash
        records.append(record)
        good += len(line) + 1
    return records, good


class Journal:
    """Appends to the journal at ``path``: a new one holding ``header`` as its first record
    (``header`` given), or an existing one whose torn tail, if any, is cut off."""

    def __init__(self, path: str, header: dict[str, Any] | None = None) -> None:
        self.path = path
        if header is not None:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o666)
        else:
            _, good = read_journal(path)
            fd = os.open(path, os.O_WRONLY)
            os.ftruncate(fd, good)
        self.fd = fd
        self.size = os.lseek(fd, 0, os.SEEK_END)
        if header is not None:
            self.append([header])
            fsync_dir(os.path.dirname(os.path.abspath(path)))

    def append(self, records: list[dict[str, Any]]) -> None:
        """Write ``records`` and fsync. A failed write (disk full) is cut off again and
        raises FileWriteError naming the file; the records then do not count."""
        if not records:
            return
        payload = b"".join(_line(r) for r in records)
        try:
            written = 0
            while written < len(payload):
                written += os.write(self.fd, payload[written:])
            os.fsync(self.fd)
        except OSError as e:
            with contextlib.suppress(OSError):
                os.ftruncate(self.fd, self.size)
                os.lseek(self.fd, self.size, os.SEEK_SET)
            raise_write_error("master journal", repr(self.path), e)
        self.size += len(payload)

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
