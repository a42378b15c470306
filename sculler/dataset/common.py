"""Download cache shared by the data sets (``paddle.v2.dataset.common``).

Files live in ``DATA_HOME/<module_name>/<file name>`` where ``DATA_HOME`` is
``~/.cache/sculler/dataset`` unless the environment variable ``SCULLER_DATA_HOME`` says
otherwise. A cached file is trusted only if its md5 matches the one the data set module
pins; downloads go to a temporary file that is renamed into place once complete, so an
interrupted download never leaves a truncated file under the final name.
"""

from __future__ import annotations

import hashlib
import os
import random
import sys
import urllib.request
from collections.abc import Callable, Iterator

from sculler.fileio import atomic_write

__all__ = ["DATA_HOME", "DownloadError", "md5file", "download", "convert"]

RETRY_LIMIT = 3
SHOW_PROGRESS: bool | None = None  # download bars: None = when stderr is a terminal


def _default_data_home() -> str:
    env = os.environ.get("SCULLER_DATA_HOME")
    if env:
        return os.path.expanduser(env)
    return os.path.expanduser(os.path.join("~", ".cache", "sculler", "dataset"))


DATA_HOME = _default_data_home()


class DownloadError(RuntimeError):
    """A file could not be fetched with the expected md5 after several tries."""


def md5file(path: str | os.PathLike) -> str:
    """Hex md5 digest of a file, read in 1 MiB chunks."""
    h = hashlib.md5()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


class _Md5Mismatch(Exception):
    def __init__(self, got: str):
        self.got = got


def _fetch(url: str, filename: str, md5sum: str) -> None:
    """Download ``url`` into ``filename`` atomically (:func:`sculler.fileio.atomic_write`),
    only when its md5 is ``md5sum``. A tqdm bar (bytes, total from Content-Length) shows on
    a terminal, or always when ``SHOW_PROGRESS`` is True."""
    from tqdm import tqdm

    def write(out) -> None:
        h = hashlib.md5()
        with urllib.request.urlopen(url, timeout=60) as resp:
            length = resp.headers.get("Content-Length")
            show = SHOW_PROGRESS if SHOW_PROGRESS is not None else sys.stderr.isatty()
            with tqdm(total=int(length) if length else None, unit="B", unit_scale=True,
                      unit_divisor=1024, desc=url.rstrip("/").split("/")[-1], leave=False,
                      disable=not show) as bar:
                for chunk in iter(lambda: resp.read(1 << 20), b""):
                    out.write(chunk)
                    h.update(chunk)
                    bar.update(len(chunk))
        if h.hexdigest() != md5sum:
            raise _Md5Mismatch(h.hexdigest())

    atomic_write(filename, write, f"download {url}")


def download(url: str, module_name: str, md5sum: str, save_name: str | None = None) -> str:
    """Path of the cached copy of ``url``, downloading it when missing or corrupt.

    Args:
        url: where the file lives.
        module_name: the data set's sub-directory of ``DATA_HOME``.
        md5sum: expected hex md5 of the file.
        save_name: file name in the cache (default: the last part of ``url``).

    Raises:
        DownloadError: after ``RETRY_LIMIT`` attempts that failed or gave another md5;
            the message names the URL, the expected and the last received md5.
    """
    dirname = os.path.join(DATA_HOME, module_name)
    os.makedirs(dirname, exist_ok=True)
    filename = os.path.join(dirname, save_name or url.rstrip("/").split("/")[-1])
    if os.path.exists(filename) and md5file(filename) == md5sum:
        return filename
    got, last_error = None, None
    for _ in range(RETRY_LIMIT):
        try:
            _fetch(url, filename, md5sum)
            return filename
        except OSError as exc:
            last_error = exc
        except _Md5Mismatch as exc:
            got = exc.got
    detail = f"last error: {last_error}" if got is None else f"got md5 {got}"
    raise DownloadError(
        f"could not download {url} with md5 {md5sum} after {RETRY_LIMIT} tries ({detail}); "
        f"check the network, or place the file at {filename} by hand"
    )


Sample = tuple  # (features, int label)


def labelled_reader(load_arrays: Callable[[str], tuple], split: str) -> Callable[[], Iterator]:
    """Reader creator over ``load_arrays(split) -> (X, y)``: yields ``(X[i], int(y[i]))``,
    loading the arrays when the reader is first iterated."""

    def reader() -> Iterator[Sample]:
        x, y = load_arrays(split)
        for i in range(len(y)):
            yield x[i], int(y[i])

    return reader


def convert(output_path: str | os.PathLike, reader: Callable[[], Iterator], line_count: int,
            name_prefix: str) -> list[str]:
    """Write the samples of ``reader`` as PaddlePaddle RecordIO files
    ``<output_path>/<name_prefix>-00000``, ``-00001``, ... of ``line_count`` samples each,
    shuffled within each file (``random.shuffle``), for ``reader.creator.recordio``; returns
    their paths. Samples must be built-in data (lists, tuples, numbers, strings); each file is
    written atomically. PaddlePaddle's put ``line_count + 1`` samples in the first file and
    could leave an empty last one."""
    from sculler.reader import recordio

    if isinstance(line_count, bool) or not isinstance(line_count, int) or line_count < 1:
        raise ValueError(f"convert: line_count must be an int >= 1, got {line_count!r}")
    if not os.path.isdir(output_path):
        raise FileNotFoundError(f"convert: output directory {os.fspath(output_path)!r} "
                                "does not exist")
    paths: list[str] = []

    def write(samples: list) -> None:
        random.shuffle(samples)
        path = os.path.join(os.fspath(output_path), f"{name_prefix}-{len(paths):05d}")
        recordio.write_records(path, [recordio.dump_sample(s) for s in samples])
        paths.append(path)

    samples: list = []
    for sample in reader():
        samples.append(sample)
        if len(samples) == line_count:
            write(samples)
            samples = []
    if samples:
        write(samples)
    return paths
