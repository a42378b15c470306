"""Durable writes and checked reads shared by every file Sculler writes or reads.

``atomic_write(path, write)`` is the one way a file is written: ``write(stream)`` fills a
temporary file in the target's directory, which is flushed and fsync'ed, renamed over the
target, and the directory is fsync'ed; on any failure the temporary file is removed. A
process killed mid-write leaves the old file (or none) under the final name, and its
temporary file is removed by the next successful write of the same target.

``read_tar(f, what)`` reads a whole tar and checks its structure (every header, every
entry's length, nothing but zeros after the last entry), so a truncated, padded or foreign
file is a :class:`FileFormatError` naming the file instead of a partial read.

A write that fails for a storage reason (disk full, read-only directory, no permission, I/O
error) is a :class:`FileWriteError` (an OSError with the system's errno) saying what was
writing which file (:func:`raise_write_error`), instead of a bare ``[Errno 28] No space left
on device`` that names nothing.
"""

from __future__ import annotations

import contextlib
import errno
import io
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, BinaryIO, NoReturn

if TYPE_CHECKING:
    import tarfile

__all__ = ["FileFormatError", "FileWriteError", "atomic_write", "binary", "check_input_path",
           "describe", "fsync_dir", "is_path", "open_safetensors", "raise_write_error",
           "read_tar"]

_BLOCK = 512
SAVE_FORMAT = "sculler.save/1"
CHECKPOINT_FORMAT = "sculler.checkpoint/1"
_TMP_SUFFIX = ".tmp"


def _current_umask() -> int:
    """The process umask, read without changing it where Linux tells it (/proc)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except OSError:
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


_FILE_MODE = 0o666 & ~_current_umask()


class FileFormatError(ValueError):
    """A file that is not what its reader expects (truncated, padded, foreign, damaged)."""


class FileWriteError(OSError):
    """Writing a file failed (disk full, read-only directory, no permission). The message
    names what was being written and the file; ``errno`` is the system's."""


# what a full, read-only or forbidden destination raises; other OSErrors (say a network
# error inside a download's write callback) are not about the file and pass unchanged
_STORAGE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES,
                             errno.EPERM, errno.EIO, errno.EFBIG})


def raise_write_error(what: str, name: str, cause: OSError) -> NoReturn:
    """Raise ``cause`` (being handled) again as a :class:`FileWriteError` saying ``what``
    could not write the file ``name`` (as messages show it), when it is a storage error
    (disk full, read-only, no permission, I/O error); any other one unchanged."""
    if isinstance(cause, FileWriteError) or cause.errno not in _STORAGE_ERRNOS:
        raise cause
    reason = cause.strerror or str(cause)
    raise FileWriteError(cause.errno, f"{what}: cannot write {name}: {reason}") from cause


def is_path(f: Any) -> bool:
    """Whether ``f`` names a file (str, bytes or os.PathLike) rather than being a stream."""
    return isinstance(f, (str, bytes)) or hasattr(f, "__fspath__")


def binary(f: Any) -> Any:
    """The binary stream behind ``f`` (a text-mode file's ``.buffer``)."""
    return f.buffer if isinstance(f, io.TextIOBase) and hasattr(f, "buffer") else f


def describe(f: Any) -> str:
    """How messages name ``f``: its path, a stream's ``name``, or the stream's type."""
    if is_path(f):
        return repr(os.fsdecode(f))
    name = getattr(f, "name", None)
    return repr(name) if isinstance(name, str) else f"<{type(f).__name__} stream>"


def check_input_path(path: Any, what: str) -> str:
    """``path`` as a str after checking it is an existing regular file (``what`` names the
    reader in the message)."""
    p = os.fsdecode(os.fspath(path))
    if os.path.isdir(p):
        raise IsADirectoryError(f"{what}: {p!r} is a directory; pass the path of a file")
    if not os.path.exists(p):
        raise FileNotFoundError(f"{what}: no file at {p!r}")
    return p


def _temp_prefix(path: str) -> str:
    return f".{os.path.basename(path)}.sculler-"


def _remove_stale_temps(path: str) -> None:
    """Remove temporary files of ``path`` left by writers that were killed (pid gone)."""
    directory, prefix = os.path.dirname(path), _temp_prefix(path)
    for name in os.listdir(directory):
        if not (name.startswith(prefix) and name.endswith(_TMP_SUFFIX)):
            continue
        pid = name[len(prefix):].split("-", 1)[0]
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(os.path.join(directory, name))
        except PermissionError:  # another user's live process
            continue


def fsync_dir(directory: str) -> None:
    """Make a rename or a new file in ``directory`` durable (fsync the directory)."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(f: Any, write: Callable[[BinaryIO], None], what: str = "write",
                 make_dirs: bool = False) -> None:
    """Call ``write(stream)`` on ``f``: on a stream directly; for a path, into a temp file
    in the same directory that is fsync'ed and renamed over the path (then the directory
    is fsync'ed). The temp file never survives a failure.

    Raises:
        IsADirectoryError: ``f`` names a directory. FileNotFoundError: its directory is
        missing (unless ``make_dirs``). FileWriteError: any other OSError (disk full,
        read-only directory), naming ``what`` and the file.
    """
    if not is_path(f):
        try:
            write(binary(f))
        except OSError as e:
            raise_write_error(what, describe(f), e)
        return
    path = os.path.abspath(os.fsdecode(os.fspath(f)))
    if os.path.isdir(path):
        raise IsADirectoryError(f"{what}: {path!r} is a directory; pass a file path inside it")
    directory = os.path.dirname(path)
    if not make_dirs and not os.path.isdir(directory):
        raise FileNotFoundError(f"{what}: directory {directory!r} of {path!r} does not exist")
    try:
        os.makedirs(directory, exist_ok=True)
        _write_replace(path, directory, write)
    except OSError as e:
        raise_write_error(what, repr(path), e)


def _write_replace(path: str, directory: str, write: Callable[[BinaryIO], None]) -> None:
    """The path case of :func:`atomic_write`."""
    import tempfile  # imported where used: import sculler stays light

    fd, tmp = tempfile.mkstemp(dir=directory, prefix=f"{_temp_prefix(path)}{os.getpid()}-",
                               suffix=_TMP_SUFFIX)
    try:
        with os.fdopen(fd, "wb") as fh:
            write(fh)
            fh.flush()
            os.fchmod(fh.fileno(), _FILE_MODE)
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    fsync_dir(directory)
    _remove_stale_temps(path)


def _read_all(f: Any, what: str) -> tuple[bytes, str]:
    if is_path(f):
        path = check_input_path(f, what)
        with open(path, "rb") as fh:
            return fh.read(), repr(path)
    data = binary(f).read()
    if not isinstance(data, bytes):
        raise TypeError(f"{what}: {describe(f)} must be opened in binary mode ('rb')")
    return data, describe(f)


def read_tar(f: Any, what: str) -> tuple[dict[str, bytes], str]:
    """Every entry of the tar ``f`` (path or binary stream) as ``name -> bytes``, in order,
    and the file's name for messages. The tar's structure is checked: each header, each
    entry lying whole within the file, regular files only, no repeated name, and after the
    last entry nothing but zeros (the end-of-archive marker) or nothing at all.

    A missing end-of-archive marker is accepted: PaddlePaddle's ``Parameters.to_tar`` never
    closes its ``TarFile``, so every tar it wrote ends right after its last entry. Damage is
    still found where it shows: ``tarfile`` stops silently at a truncated or damaged header
    after the first entry, so any non-zero byte after the last entry it read is such a
    header, and an entry whose data runs past the end of the file is truncated.

    Raises:
        FileFormatError: not a tar, truncated, or with data after its end; names the file
        (and the entry where there is one).
    """
    import tarfile

    data, name = _read_all(f, what)
    if not data:
        raise FileFormatError(f"{what}: {name} is empty")
    members: list[tarfile.TarInfo] = []
    unreadable = None
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as tar:
            while (m := tar.next()) is not None:
                members.append(m)
    except tarfile.TarError as e:
        unreadable = e
    entries: dict[str, bytes] = {}
    end = 0
    for m in members:
        stop = m.offset_data + m.size
        if stop > len(data):
            raise FileFormatError(f"{what}: {name} is truncated: entry {m.name!r} needs "
                                  f"{m.size} bytes, {max(len(data) - m.offset_data, 0)} are "
                                  "present")
        if not m.isreg():
            raise FileFormatError(f"{what}: {name} entry {m.name!r} is not a regular file")
        if m.name in entries:
            raise FileFormatError(f"{what}: {name} holds entry {m.name!r} twice")
        entries[m.name] = data[m.offset_data:stop]
        end = m.offset_data + -(-m.size // _BLOCK) * _BLOCK
    last = f"after entry {members[-1].name!r}" if members else "at its start"
    if unreadable is not None:
        raise FileFormatError(f"{what}: {name} is not a tar file, or is truncated or damaged "
                              f"{last} ({unreadable})") from unreadable
    tail = data[end:]
    zeros = len(tail) - len(tail.lstrip(b"\0"))
    if zeros < min(len(tail), _BLOCK):
        raise FileFormatError(f"{what}: {name} has a truncated or damaged entry header "
                              f"{last} (byte {end})")
    if zeros != len(tail):
        raise FileFormatError(f"{what}: {name} has {len(tail) - zeros} bytes of non-tar "
                              f"data after its end-of-archive marker (byte {end + zeros})")
    return entries, name


def open_safetensors(path: str, what: str) -> tuple[dict, Any]:
    """The Sculler record (``{}`` for a foreign safetensors file) and the open file of the
    safetensors file ``path``; a file that is not one is a FileFormatError naming it."""
    try:
        from safetensors import safe_open

        f = safe_open(path, framework="numpy")
        raw = (f.metadata() or {}).get("sculler")
        import json
        doc = json.loads(raw) if raw is not None else {}
    except Exception as e:  # safetensors raises its own SafetensorError on a bad header
        if isinstance(e, OSError):  # permissions, I/O: not a format problem
            raise
        raise FileFormatError(f"{what}: {path!r} is not a safetensors file written by "
                              f"Sculler; it is damaged or of another format "
                              f"({type(e).__name__}: {e})") from e
    if not isinstance(doc, dict):
        raise FileFormatError(f"{what}: {path!r} has a damaged Sculler record")
    return doc, f
